#!/usr/bin/env bash
# How meson runs each shell test: once, and once more only when it failed after QEMU aborted on an assertion of its own.
#
# Usage: run-test.sh TEST_SCRIPT [ARGS...]
# Exit: the test's own (0 pass, 1 fail, 77 skip), from its second run when there was one.
#
# QEMU 10.0's TCG has aborted at boot on its own assertion (iotlb_to_section),
# twice in CI runs, before the guest's kernel ran: the test then fails for a
# reason that says nothing about ferryfsd. run-guest.sh, and wait_console
# while a test waits on a guest's console, append such an abort to
# $FERRYFS_QEMU_ABORTS; a test that failed with one there gets one more run,
# and says so. A failure without one, a skip, and a second failure are
# the test's verdict as they stand.
set -uo pipefail

test_script=${1:?usage: run-test.sh TEST_SCRIPT [ARGS...]}
shift
name="$(basename "$test_script" .sh)"
aborts="$(mktemp "${TMPDIR:-/tmp}/ferryfs-qemu-aborts.XXXXXX")" || exit 1
trap 'rm -f "$aborts"' EXIT
export FERRYFS_QEMU_ABORTS="$aborts"

rc=0
"$test_script" "$@" || rc=$?
if ((rc == 1)) && [[ -s "$aborts" ]]; then
    echo "run-test: $name failed after QEMU aborted on its own assertion, a QEMU bug:"
    sed 's/^/run-test:   /' "$aborts"
    echo "run-test: running $name once more; its second run is the verdict"
    : >"$aborts"
    rc=0
    "$test_script" "$@" || rc=$?
    echo "run-test: $name's second run exited $rc"
fi
exit "$rc"
