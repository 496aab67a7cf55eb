# Sourced by the guest tests of one daemon at a time (tests/faults, tests/security/sandbox-test.sh): guest image, $tmp with $share and $sock, and a fail that ends the test.
# Each test sets $name before sourcing; exits 77 when the stack or the guest image is unavailable.
# The helpers (start_daemon, start_guest, wait_console, wait_gone, fd_count, status_kb) are tests/lib/.
source "$(dirname "${BASH_SOURCE[0]}")/../lib/guest.sh"

# These tests stop at their first failure.
fail() { die "$@"; }

guest_prepare
make_tmp
share="$tmp/share"
sock="$tmp/vfs.sock"
mkdir -p "$share"
tmp_drop=("$share")
daemon_pid=""
cleanup_cmds+=('[[ -z "$daemon_pid" ]] || kill -KILL "$daemon_pid" 2>/dev/null')
