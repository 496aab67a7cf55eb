#!/usr/bin/env bash
# Runs every test through meson (unit tests plain and under ASan+UBSan, then each shell test suite) and ends with "N passed, N failed, N skipped".
set -uo pipefail
cd "$(dirname "$0")/.."

# Suites (tests/meson.build): unit, then one per directory of shell tests.
# Every run writes its own JSON log (--logbase), which tests/lib/summary.py
# counts; a failed test's FAIL lines are repeated at the end, and so is a
# skip that tests/expected-skips does not expect on this machine (a failure).
#
# FERRYFS_CHECK_LONG=1 (make check-long) runs the tests of suite "long" too,
# and the tests that read it add their long parts: reference columns, the
# full reboot loop, longer fuzzing (tests/README.md lists them). make check
# leaves them out to stay short enough to run on every change.
summary_args=(--started "$(date +%s)")
long=${FERRYFS_CHECK_LONG:-0}
[[ $long == 1 ]] && export FERRYFS_CHECK_LONG=1 || unset FERRYFS_CHECK_LONG

# run_meson BUILD LOGBASE [meson test options...]
run_meson() {
	local build=$1 log=$2
	shift 2
	rm -f "$build/meson-logs/$log.json"
	meson test -C "$build" --logbase "$log" "$@"
	summary_args+=("$build=$build/meson-logs/$log.json")
}

asan_ok=1
if [ ! -f build-asan/build.ninja ]; then
	meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false \
		>/dev/null || asan_ok=0
fi
if [ $asan_ok = 1 ] && ninja -C build-asan >/dev/null; then
	:
else
	summary_args+=(--fail "ASan+UBSan build"); asan_ok=0
fi

echo "=== unit tests (build)"
run_meson build unit --suite unit --print-errorlogs
if [ $asan_ok = 1 ]; then
	echo "=== unit tests (build-asan)"
	# halt_on_error: a sanitizer report must fail the test, not scroll by.
	ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=1 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		run_meson build-asan unit --suite unit --print-errorlogs
fi

# One at a time (is_parallel: false), each script's output as it runs.
# FERRYFS_CHECK_SUITES="load install" runs only those shell suites.
suites=(--no-suite unit)
if [ -n "${FERRYFS_CHECK_SUITES:-}" ]; then
	suites=()
	for s in $FERRYFS_CHECK_SUITES; do suites+=(--suite "$s"); done
fi
[[ $long == 1 ]] || suites+=(--no-suite long)
echo "=== shell tests$([[ $long == 1 ]] && echo ", the long ones included (FERRYFS_CHECK_LONG=1)")"
run_meson build scripts "${suites[@]}" --verbose

exec python3 tests/lib/summary.py --registered build "${summary_args[@]}"
