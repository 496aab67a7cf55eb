#!/usr/bin/env bash
# make check: starts ferryfsd by systemd socket activation, with the command lines of contrib/systemd/ferryfsd@.{socket,service}, and boots the guest.
#
# systemd-socket-activate (Debian's systemd package; no running systemd
# needed) listens on the unit's ListenStream= and, on the first connection,
# execs the unit's ExecStart= with LISTEN_FDS=1, LISTEN_PID and fd 3, as
# systemd does. /usr/local/bin/ferryfsd becomes the built daemon, /run/ferryfsd
# and /srv/ferryfs move under the test's directory; everything else in the units is used as written.
# Exit: 0 pass, 1 fail, 77 skipped (no QEMU, guest image or systemd-socket-activate).
set -euo pipefail
# It tests ferryfsd, not the guest's kernel: it runs on the current stack (QEMU 10, Linux 6.12),
# or on stable where that stack cannot be had or FERRYFS_STACK says so (tests/e2e/stack-lib.sh).
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/stack-lib.sh" && stack_default_current "$0" "$@"
name=systemd-start
source "$(dirname "${BASH_SOURCE[0]}")/start-lib.sh"
command -v systemd-socket-activate >/dev/null ||
    skip "systemd-socket-activate not installed (Debian package systemd)"
start_prepare

instance=ferryfs
units="$repo/contrib/systemd"
mkdir -p "$tmp/srv/ferryfs" "$tmp/run/ferryfsd"
ln -s ../../share "$tmp/srv/ferryfs/$instance"
unit_line() { # FILE KEY
    sed -n "s/^$2=//p" "$1" | sed -e "s/%i/$instance/g" -e "s|/usr/local/bin/ferryfsd|$ferryfsd|" \
        -e "s|/run/ferryfsd/|$tmp/run/ferryfsd/|g" -e "s|/srv/ferryfs/|$tmp/srv/ferryfs/|g"
}
sock="$(unit_line "$units/ferryfsd@.socket" ListenStream)"
read -r -a cmd <<<"$(unit_line "$units/ferryfsd@.service" ExecStart)"
say "socket $sock; command ${cmd[*]}"

start_and_boot_demo systemd "$tmp/daemon.out" "$sock" systemd-socket-activate -l "$sock" "${cmd[@]}"
if grep -q 'waiting for a vhost-user frontend on the socket-activated fd 3' "$tmp/daemon.out"; then
    pass "ferryfsd took the socket-activated fd 3"
else
    fail "no 'socket-activated fd 3' line in the daemon's output"
fi
# The socket belongs to the manager, which keeps listening for the next VMM.
if [[ -S "$sock" ]]; then
    pass "the manager's socket file was left in place"
else
    fail "ferryfsd removed the socket file it did not create"
fi
finish
