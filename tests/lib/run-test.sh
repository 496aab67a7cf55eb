#!/usr/bin/env bash
# How meson runs each shell test: once, and once more only when it failed after QEMU 10.0's known TCG abort (iotlb_to_section).
#
# Usage: run-test.sh TEST_SCRIPT [ARGS...]
# Exit: the test's own (0 pass, 1 fail, 77 skip), from its second run when there was one.
#
# QEMU 10.0's TCG has aborted at boot on its own assertion
# ("iotlb_to_section: Assertion `section_index < d->map.sections_nb'
# failed"), twice in CI runs, before the guest's kernel ran: the test then
# fails for a reason that says nothing about ferryfsd. run-guest.sh, and
# wait_console while a test waits on a guest's console, append any QEMU
# assertion to $FERRYFS_QEMU_ABORTS. A test that failed with that one
# assertion there, and no other, gets one more run, and says so with a line
# "FERRYFS-RERUN: NAME ..." that meson keeps in its log for tests/lib/summary.py
# to count. Any other assertion is news, not a known bug: it stays the
# verdict, as do a failure without one, a skip, and a second failure.
set -uo pipefail

test_script=${1:?usage: run-test.sh TEST_SCRIPT [ARGS...]}
shift
name="$(basename "$test_script" .sh)"
aborts="$(mktemp "${TMPDIR:-/tmp}/ferryfs-qemu-aborts.XXXXXX")" || exit 1
trap 'rm -f "$aborts"' EXIT
export FERRYFS_QEMU_ABORTS="$aborts"
# The known abort, by its message: the file and line before it change between builds.
known_abort="iotlb_to_section: Assertion [\`']section_index < d->map\\.sections_nb' failed"

rc=0
"$test_script" "$@" || rc=$?
if ((rc == 1)) && [[ -s "$aborts" ]]; then
    if grep -vE "$known_abort" "$aborts" | grep -q .; then
        echo "run-test: $name failed after QEMU aborted on an assertion that is not the known iotlb_to_section one; no second run:"
        sed 's/^/run-test:   /' "$aborts"
    else
        echo "run-test: $name failed after QEMU 10.0's known TCG abort, a QEMU bug:"
        sed 's/^/run-test:   /' "$aborts"
        echo "FERRYFS-RERUN: $name after QEMU's known abort ($(head -1 "$aborts"))"
        echo "run-test: running $name once more; its second run is the verdict"
        : >"$aborts"
        rc=0
        "$test_script" "$@" || rc=$?
        echo "run-test: $name's second run exited $rc"
    fi
fi
exit "$rc"
