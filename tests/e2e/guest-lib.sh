# Sourced by the guest tests of one daemon at a time (tests/faults, tests/security/sandbox-test.sh): the stack, guest image, $tmp with $share (or FERRYFS_SHARE_ROOT's) and $sock.
# Each test sets $name before sourcing; exits 77 when the stack or the guest image is unavailable.
# These tests stop at their first failure: they call die, not fail.
# The helpers (start_daemon, start_guest, wait_console, wait_gone, fd_count, status_kb) are tests/lib/.

# They test ferryfsd, not the guest's kernel: they run on the current stack (QEMU 10, Linux 6.12),
# or on stable where that stack cannot be had or FERRYFS_STACK says so (stack-lib.sh). Sourced
# with no arguments, "$@" is still the test's own, as its re-run with the other stack needs.
source "$(dirname "${BASH_SOURCE[0]}")/stack-lib.sh" && stack_default_current "$0" "$@"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/guest.sh"

guest_prepare
make_tmp
share="$tmp/share"
sock="$tmp/vfs.sock"
mkdir -p "$share"
tmp_drop=("$share")
daemon_pid=""
cleanup_cmds+=('[[ -z "$daemon_pid" ]] || kill -KILL "$daemon_pid" 2>/dev/null')
# $view: where the host-side checks read $share (FERRYFS_SHARE_ROOT / FERRYFS_SHARE_VIEW).
share_from_env "$name"
