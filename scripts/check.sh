#!/usr/bin/env bash
# Runs every test (unit tests plain and under ASan+UBSan, then the e2e tests) and ends with "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."

# Each script's output is kept so that the summary can repeat why a test failed: CI keeps only
# the tail of a run, and a flaky failure seen once is worth its reason.
script_logs=$(mktemp -d)
trap 'rm -rf "$script_logs"' EXIT

passed=0 failed=0 skipped=0
failures=()
failure_logs=()  # per failure, the name of its kept log under $script_logs

# meson prints "Ok: N", "Fail: N", "Skipped: N" ... in its summary.
count_meson() {
	local build=$1 log=$2 n
	for kind in Ok Expected\ Fail; do
		n=$(awk -v k="$kind:" 'index($0, k) == 1 { print $NF }' "$log" | tail -n1)
		passed=$((passed + ${n:-0}))
	done
	for kind in Fail Unexpected\ Pass Timeout; do
		n=$(awk -v k="$kind:" 'index($0, k) == 1 { print $NF }' "$log" | tail -n1)
		if [ "${n:-0}" -gt 0 ]; then
			failed=$((failed + n))
			failures+=("$build: $n unit test(s) ($kind)")
			failure_logs+=("unit-$build")
		fi
	done
	n=$(awk 'index($0, "Skipped:") == 1 { print $NF }' "$log" | tail -n1)
	skipped=$((skipped + ${n:-0}))
}

run_unit() {
	local build=$1 log="$script_logs/unit-$1"
	echo "=== unit tests ($build)"
	meson test -C "$build" --print-errorlogs 2>&1 | tee "$log"
	count_meson "$build" "$log"
}

run_script() {
	local name=$1; shift
	echo "=== $name"
	"$@" 2>&1 | tee "$script_logs/$name"
	local rc=${PIPESTATUS[0]}
	case $rc in
	0) passed=$((passed + 1)); echo "--- $name: PASS" ;;
	77) skipped=$((skipped + 1)); echo "--- $name: SKIP" ;;
	*) failed=$((failed + 1)); failures+=("$name (exit $rc)"); failure_logs+=("$name"); echo "--- $name: FAIL" ;;
	esac
}

# The lines of a failed script that say what failed, at most 25 of them.
failure_reasons() {
	local log="$script_logs/$1"
	[ -f "$log" ] || return 0
	grep -a -E 'FAIL|ERROR|error:|Assertion|timed out|Timeout' "$log" | grep -v -- '--- .*: FAIL' |
		tail -n 25 | sed 's/^/    /'
}

asan_ok=1
if [ ! -f build-asan/build.ninja ]; then
	meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false \
		>/dev/null || asan_ok=0
fi
if [ $asan_ok = 1 ] && ninja -C build-asan >/dev/null; then
	:
else
	failed=$((failed + 1)); failures+=("ASan+UBSan build"); failure_logs+=(""); asan_ok=0
fi

run_unit build
if [ $asan_ok = 1 ]; then
	# halt_on_error: a sanitizer report must fail the test, not scroll by.
	ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=1 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 run_unit build-asan
fi

for t in tests/e2e/*-test.sh tests/fusemode/*-test.sh tests/load/*-test.sh tests/security/*-test.sh tests/semantics/*-test.sh tests/faults/*-test.sh tests/install/*-test.sh; do
	[ -x "$t" ] || continue
	run_script "$(basename "$t" .sh)" "$t"
done

echo
for i in "${!failures[@]}"; do
	echo "FAILED: ${failures[$i]}"
	[ -n "${failure_logs[$i]:-}" ] && failure_reasons "${failure_logs[$i]}"
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
