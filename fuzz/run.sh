#!/usr/bin/env bash
# Builds the libFuzzer targets (build-fuzz: clang, ASan+UBSan) and runs each for a set time, one per CPU at once; a crash fails.
# Usage: fuzz/run.sh [SECONDS] [TARGET...]   (targets: virtq virtq_packed fuse vhost_user migration_stream; default all)
set -uo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-${FUZZ_SECONDS:-300}}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(virtq virtq_packed fuse vhost_user migration_stream)
build=${FUZZ_BUILD:-build-fuzz}
build_abs=$build
[[ $build_abs == /* ]] || build_abs=$PWD/$build

if [ ! -f "$build/build.ninja" ]; then
	CC=clang meson setup "$build" -Dfuzzing=true -Db_sanitize=address,undefined \
		-Db_lundef=false -Dc_args=-fsanitize=fuzzer-no-link >"$build.setup.log" 2>&1 || {
		cat "$build.setup.log"; echo "fuzz: meson setup failed"; exit 1; }
	rm -f "$build.setup.log"
fi
# Only the targets: the rest of the tree is built and tested by make check.
bins=()
for t in "${targets[@]}"; do bins+=("fuzz/fuzz_$t"); done
ninja -C "$build" "${bins[@]}" >/dev/null || {
	ninja -C "$build" "${bins[@]}"; echo "fuzz: build failed"; exit 1; }

# halt_on_error: any sanitizer report is a crash libFuzzer keeps the input of.
export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

# One target per CPU at a time (FUZZ_JOBS, default the CPUs this may use):
# each still gets its SECONDS of a whole CPU, and make check waits half as
# long on two.
jobs=${FUZZ_JOBS:-$(nproc)}
((jobs >= 1)) || jobs=1

# fuzz_target T: runs target T; its exit status lands in $build/fuzz-T.rc.
fuzz_target() {
	local t=$1 bin=$build/fuzz/fuzz_$t rc
	# Absolute: the FUSE target's backend changes the working directory
	# (into /proc/self/fd), and libFuzzer re-reads the corpus directories
	# by the paths it was given.
	local work=$build_abs/corpus/$t      # what this machine found; the seeds stay clean
	local crashes=$build_abs/crashes/$t
	mkdir -p "$work" "$crashes"
	# The FUSE target's scratch directories, one per target as they run
	# side by side; a crash leaves them behind.
	export TMPDIR=$build_abs/fuzz-tmp-$t
	rm -rf "$TMPDIR"; mkdir -p "$TMPDIR"
	# -timeout: a request that blocks (a FIFO opened on the host) is a
	# finding too.
	"$bin" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 \
		-print_final_stats=1 \
		-artifact_prefix="$crashes/" "$work" "$PWD/fuzz/corpus/$t" >"$build/fuzz-$t.log" 2>&1
	rc=$?
	[ $rc -ne 0 ] || rm -rf "$TMPDIR"
	echo $rc >"$build/fuzz-$t.rc"
}

failed=0
running=0
for t in "${targets[@]}"; do
	rm -f "$build/fuzz-$t.rc"
	[ -x "$build/fuzz/fuzz_$t" ] || continue
	echo "=== fuzz $t: ${seconds}s"
	fuzz_target "$t" &
	running=$((running + 1))
	if ((running >= jobs)); then
		wait -n
		running=$((running - 1))
	fi
done
wait
for t in "${targets[@]}"; do
	bin=$build/fuzz/fuzz_$t
	log=$build/fuzz-$t.log
	[ -x "$bin" ] || { echo "fuzz: no target $t"; failed=1; continue; }
	rc=$(cat "$build/fuzz-$t.rc" 2>/dev/null || echo "no exit status")
	echo "--- fuzz $t: $(grep -E 'DONE|stat::number_of_executed_units' "$log" | tr -s ' \t\n' ' ')"
	if [ "$rc" != 0 ]; then
		failed=1
		tail -n 60 "$log"
		echo "fuzz $t: FAILED (exit $rc); log $log"
		for f in $(sed -n 's/.*Test unit written to \([^ ]*\).*/\1/p' "$log" | sort -u); do
			echo "fuzz $t: crashing input kept at $f (reproduce: $bin $f)"
		done
	fi
	rm -f "$build/fuzz-$t.rc"
done
exit $failed
