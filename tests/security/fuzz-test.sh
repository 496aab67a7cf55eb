#!/usr/bin/env bash
# make check: runs each libFuzzer target for 40 s under ASan+UBSan; a crash fails and its input is kept.
set -uo pipefail
cd "$(dirname "$0")/../.."
if ! command -v clang >/dev/null; then
	echo "fuzz-test: clang missing (scripts/deps.sh installs it)"
	exit 1
fi
exec fuzz/run.sh "${FUZZ_CHECK_SECONDS:-40}"
