#!/usr/bin/env bash
# make check: runs each libFuzzer target for 10 s under ASan+UBSan (make check-long: 40 s); a crash fails and its input is kept.
# FUZZ_CHECK_SECONDS sets the time by hand. The corpus each run grows stays in build-fuzz/corpus,
# so the short runs of make check still go on from where the last run stopped; make check-long
# (FERRYFS_CHECK_LONG=1) and make fuzz give the targets the time to go deeper.
set -uo pipefail
cd "$(dirname "$0")/../.."
if ! command -v clang >/dev/null; then
	echo "fuzz-test: clang missing (scripts/deps.sh installs it)"
	exit 1
fi
seconds=10
[[ ${FERRYFS_CHECK_LONG:-} != 1 ]] || seconds=40
exec fuzz/run.sh "${FUZZ_CHECK_SECONDS:-$seconds}"
