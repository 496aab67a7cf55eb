#!/usr/bin/env bash
# Fault test (make check): the frontend dies (kill -9 QEMU) while the guest writes. Without options
# ferryfsd must exit with status 0 and leave no listener; with --keep-listening it must stay, give
# the old guest's fds back, and serve a second QEMU that mounts and works.
# Env: FERRYFS_SHARE_ROOT=DIR puts the share in a fresh subdirectory of DIR (e.g. a GlusterFS mount);
#      FERRYFS_SHARE_VIEW=DIR2, DIR seen through the volume's other mount: the host looks for the
#      guests' files there (share_from_env, tests/lib/guest.sh; tests/dfs/gluster-faults-test.sh).
set -euo pipefail
# guest-lib.sh picks the stack (current, else stable) and makes $tmp, $share, $view and $sock.
name=disconnect
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/guest-lib.sh"

writer="echo WRITING; while :; do dd if=/dev/zero of=/mnt/big bs=64k count=64 2>/dev/null; done"

# kill_writer TAG: waits until the guest writes to the share, then kills its QEMU with SIGKILL.
kill_writer() {
    wait_console "$1" 'WRITING' 300
    local t=0
    while [[ ! -s "$view/big" ]] && ((t < 600)); do sleep 0.1; t=$((t + 1)); done
    [[ -s "$view/big" ]] || die "guest $1 never wrote to the share"
    sleep 1
    kill -KILL "$(cat "$tmp/qemu-$1.pid")"
}

# --- 1: default: the daemon exits 0 when the frontend is gone.
start_daemon --log-level=info
start_guest w1 run "$writer" --timeout 600
kill_writer w1
wait_gone "$daemon_pid" 30 || die "ferryfsd still running 30 s after QEMU was killed"
rc=0
wait "$daemon_pid" || rc=$?
((rc == 0)) || die "ferryfsd exited with $rc after the frontend died: $(tail -3 "$tmp/daemon.log")"
listeners=$(ss -xlH 2>/dev/null | grep -cF "$sock" || true)
((listeners == 0)) || die "something still listens on $sock"
say "default: QEMU killed mid-write, ferryfsd exited 0, no listener left"

# --- 2: --keep-listening: a second QEMU connects, mounts and works.
rm -f "$share/big"
: >"$tmp/daemon.log"
start_daemon --log-level=info --keep-listening
# The sandbox's serving child holds the connection's fds, not the relay that started it.
fds_idle=$(fd_count "$(serving_pid "$daemon_pid")")
start_guest w2 run "$writer" --timeout 600
kill_writer w2
t=0
until grep -q 'waiting for the next one' "$tmp/daemon.log" || ((t > 300)); do sleep 0.1; t=$((t + 1)); done
kill -0 "$daemon_pid" 2>/dev/null || die "ferryfsd --keep-listening exited: $(tail -3 "$tmp/daemon.log")"
grep -q 'waiting for the next one' "$tmp/daemon.log" || die "ferryfsd did not go back to listening"
fds_between=$(fd_count "$(serving_pid "$daemon_pid")")
((fds_between <= fds_idle)) || die "fds: $fds_idle before the first frontend, $fds_between after it died"
echo "from the host" >"$share/marker"
start_guest second run "cat /mnt/marker && echo second >/mnt/second && ls /mnt" --timeout 600 --watch-pid "$daemon_pid"
rc=0
wait "${guest_pids[-1]}" || rc=$?
((rc == 0)) || die "second guest: run-guest exit $rc: $(tr -d '\r' <"$tmp/console-second.log" | tail -5)"
tr -d '\r' <"$tmp/console-second.log" | grep -aq '^from the host' || die "second guest did not read the marker"
[[ "$(cat "$view/second")" == second ]] || die "second guest's file is not on the host"
grep -q 'waiting for the next one' "$tmp/daemon.log" || die "no second wait logged"
kill -TERM "$daemon_pid"
wait_gone "$daemon_pid" 30 || die "ferryfsd ignored SIGTERM while listening"
rc=0
wait "$daemon_pid" || rc=$?
((rc == 0)) || die "ferryfsd --keep-listening exited with $rc on SIGTERM"
say "PASS: default exits 0; --keep-listening served a second QEMU (fds $fds_idle idle, $fds_between after the killed one) and exits 0 on SIGTERM"
