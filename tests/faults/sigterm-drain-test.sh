#!/usr/bin/env bash
# Fault test (make check): SIGTERM while four guest writers each write 64 KiB records to their own
# file and print "ACK K I" once record I's write returned. ferryfsd must exit 0; every acknowledged
# record must be on the host; no record may be torn (each 64 KiB block is the full pattern or
# absent/zero); and the WRITEs the daemon counts at exit are exactly the whole records on the host,
# so a request it had popped when the signal came was carried out, not dropped halfway.
# Env: FERRYFS_SHARE_ROOT=DIR puts the share in a fresh subdirectory of DIR (e.g. a GlusterFS mount);
#      FERRYFS_SHARE_VIEW=DIR2, DIR seen another way (the volume's other mount): the host reads the
#      records there (tests/dfs/gluster-faults-test.sh; share_from_env, tests/lib/guest.sh).
set -euo pipefail
# guest-lib.sh picks the stack (current, else stable) and makes $tmp, $share, $view and $sock.
name=sigterm-drain
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/guest-lib.sh"

writers=4
writer="yes ferryfs | head -c 65536 >/tmp/rec; w() { i=0; while dd if=/tmp/rec of=/mnt/data\$1 bs=65536 seek=\$i count=1 conv=notrunc 2>/dev/null; do echo ACK \$1 \$i; i=\$((i+1)); done; }; echo WRITING; for k in $(seq -s ' ' 0 $((writers - 1))); do w \$k & done; wait; echo WRITERS-STOPPED"
start_daemon --log-level=info
start_guest w run "$writer" --timeout 900
wait_console w 'ACK [0-9] 20$' 600
kill -TERM "$daemon_pid"
wait_gone "$daemon_pid" 60 || die "ferryfsd still running 60 s after SIGTERM"
rc=0
wait "$daemon_pid" || rc=$?
((rc == 0)) || die "ferryfsd exited with $rc on SIGTERM: $(tail -3 "$tmp/daemon.log")"
sleep 1
kill -KILL "$(cat "$tmp/qemu-w.pid")" 2>/dev/null || true

{ yes ferryfs || true; } | head -c 65536 >"$tmp/rec"
whole=0 report=""
for ((k = 0; k < writers; k++)); do
    # The last acknowledged record of writer k (console lines of parallel writers may interleave).
    acked=$(tr -d '\r' <"$tmp/console-w.log" | grep -aoE "ACK $k [0-9]+" | cut -d' ' -f3 | sort -n | tail -1)
    [[ -n "$acked" ]] || die "writer $k: no ACK on the console"
    f="$view/data$k"
    size=$(stat -c %s "$f")
    blocks=$(((size + 65535) / 65536))
    ((blocks >= acked + 1)) || die "writer $k: host file has $blocks records, guest saw $((acked + 1)) acknowledged"
    for ((b = 0; b < blocks; b++)); do
        dd if="$f" of="$tmp/blk" bs=65536 skip=$b count=1 2>/dev/null
        if cmp -s "$tmp/blk" "$tmp/rec"; then
            whole=$((whole + 1))
        else
            ((b > acked)) || die "writer $k: acknowledged record $b is not intact on the host"
            [[ -z "$(tr -d '\0' <"$tmp/blk")" ]] || die "writer $k: record $b is torn"
        fi
    done
    report+=" $k:$((acked + 1))/$blocks"
done
# The exit statistics: "  WRITE   count errors ...".
writes=$(awk '$4 == "WRITE" { print $5 }' "$tmp/daemon.log" | tail -1)
werrs=$(awk '$4 == "WRITE" { print $6 }' "$tmp/daemon.log" | tail -1)
[[ -n "$writes" ]] || die "no WRITE line in the exit statistics: $(tail -5 "$tmp/daemon.log")"
((werrs == 0)) || die "$werrs WRITEs failed"
((writes == whole)) || die "the daemon performed $writes WRITEs, the host holds $whole whole records"
say "PASS: SIGTERM mid-write: exit 0; acknowledged/host records per writer:$report; $writes WRITEs performed = $whole whole records, none torn"
