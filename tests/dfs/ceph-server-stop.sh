#!/usr/bin/env bash
# A part of ceph-test.sh (not a test of its own): the CephFS servers stop for some seconds (SIGSTOP) and come back under a guest that writes, fsyncs and reads back through ferryfsd; it must wait or see errors, never wrong data, and lose nothing it was told was synced.
#
# Usage: run by ceph-test.sh (FERRYFS_CEPH_PARTS=server-stop); Env: FERRYFSD, FERRYFS_E2E_KEEP=1,
#        FERRYFS_CEPH_STOP_SECS=8  how long each server stays stopped
#        FERRYFS_CEPH_STOP="osd mds"  which servers stop, one after the other
# Checks: the guest wrote on after each stop (the daemon kept serving); no read gave other bytes
#        (WRONG); every record the guest saw synced reads right through mount B, its line in the
#        log there too; the guest ran to its end and ferryfsd exited 0. An error the guest saw
#        (ERR) is said, not judged: an error is allowed, wrong data is not. What the writes did
#        while a server was stopped (waited: no record synced; or went on) is said.
# Exit:  0 pass; 1 fail; 77 not root, a Ceph package missing, or no guest image.
set -euo pipefail
source "$(dirname "$0")/../lib/guest.sh"
source "$lib_dir/dfs.sh"
[[ $dfs_kind == ceph ]] || { echo "ceph-server-stop.sh: FERRYFS_DFS=ceph (ceph-test.sh runs it)" >&2; exit 1; }
dfs_need
need_built "$ferryfsd"
dfs_guest_prepare
make_tmp
dfs_start
secs=${FERRYFS_CEPH_STOP_SECS:-8}
read -r -a servers <<<"${FERRYFS_CEPH_STOP:-osd mds}"
say "stack $guest_stack, guest $guest_dir"
d="$dfs_a/server-stop"
mkdir -p "$d"
cp "$here/guest-server-stop.sh" "$d/"
sock="$tmp/stop.sock"
"$ferryfsd" --socket-path="$sock" --shared-dir="$d" >"$tmp/daemon.log" 2>&1 &
pid=$!
cleanup_pids+=("$pid")
wait_socket "$sock" "$pid" || die "ferryfsd did not listen: $(tail -3 "$tmp/daemon.log")"
"$run_guest" --guest "$guest_dir" --sock "$sock" --cmd run --args "sh /mnt/guest-server-stop.sh" --quiet \
    --mem 512M --log "$tmp/console.log" --timeout "$guest_timeout" --watch-pid "$pid" \
    >"$tmp/run-guest.out" 2>&1 &
guest=$!
guest_pids+=("$guest")

# synced: the highest record the guest has said it synced (0 before the first).
synced() { tr -d '\r' 2>/dev/null <"$tmp/console.log" | sed -n 's/^SYNCED \([0-9]*\)$/\1/p' | tail -1 | grep . || echo 0; }
# wait_synced N SECS: the guest has synced record N within SECS.
wait_synced() {
    local i
    for ((i = 0; i < $2 * 10; i++)); do
        (($(synced) >= $1)) && return 0
        kill -0 "$guest" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}
wait_synced 3 "$guest_timeout" || die "the guest never synced 3 records: $(tr -d '\r' <"$tmp/console.log" | tail -5)"
for s in "${servers[@]}"; do
    v="ceph_${s}_pid"
    p=${!v:-}
    [[ -n $p ]] && kill -0 "$p" 2>/dev/null || die "no $s process to stop (FERRYFS_CEPH_PIDS: ${FERRYFS_CEPH_PIDS:-unset})"
    before=$(synced)
    kill -STOP "$p"
    cleanup_cmds+=("kill -CONT $p 2>/dev/null")
    sleep "$secs"
    during=$(synced)
    kill -CONT "$p"
    say "the $s (pid $p) stopped for $secs s: the guest synced records $before to $during meanwhile ($((during - before)) new)"
    if wait_synced $((during + 3)) 120; then
        pass "after the $s came back the guest synced 3 more records (up to $(synced))"
    else
        fail "after the $s came back the guest synced no 3 more records in 120 s: $(tr -d '\r' <"$tmp/console.log" | tail -3)"
    fi
done
touch "$d/end"
wait "$guest" || fail "the guest run failed (run-guest exit $?): $(tr -d '\r' <"$tmp/console.log" | tail -3)"
console="$(tr -d '\r' <"$tmp/console.log")"
grep -q '^SERVERSTOP done' <<<"$console" && pass "the guest ran to its end ($(grep -m1 '^SERVERSTOP done' <<<"$console"))" ||
    fail "the guest did not reach its end: $(tail -3 <<<"$console")"
errs=$(grep -c '^ERR' <<<"$console" || true)
((errs == 0)) || say "the guest saw $errs errors (allowed): $(grep -m3 '^ERR' <<<"$console" | tr '\n' ' ')"
if grep -q '^WRONG' <<<"$console"; then
    fail "the guest read other bytes: $(grep -m3 '^WRONG' <<<"$console" | tr '\n' ' ')"
else
    pass "no read gave other bytes than written"
fi
# Every record the guest saw synced, read through mount B (the other "host"), and its log line.
lost="" n=0
for r in $(sed -n 's/^SYNCED \([0-9]*\)$/\1/p' <<<"$console"); do
    n=$((n + 1))
    [[ "$(cat "$dfs_b/server-stop/rec.$r" 2>/dev/null)" == "$(for ((i = 0; i < 256; i++)); do echo "record $r line $i"; done)" ]] ||
        lost+=" rec.$r"
    grep -qx "synced $r" "$dfs_b/server-stop/log" 2>/dev/null || lost+=" log:$r"
done
if ((n > 0)) && [[ -z $lost ]]; then
    pass "all $n records the guest saw synced read right through mount B"
else
    fail "of $n records the guest saw synced, through mount B wrong or missing:${lost:- none synced}"
fi
expect_daemon_exit "$pid" "ferryfsd" || true
finish
