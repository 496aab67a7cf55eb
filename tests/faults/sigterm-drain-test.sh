#!/usr/bin/env bash
# Fault test (make check): SIGTERM while the guest writes 64 KiB records, each acknowledged on the
# console once its write returned. ferryfsd must exit 0, every acknowledged record must be on the
# host, and no record may be torn (each 64 KiB block is the full pattern or absent/zero).
set -euo pipefail
name=sigterm-drain
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/guest-lib.sh"

writer="yes ferryfs | head -c 65536 >/tmp/rec; echo WRITING; i=0; while :; do dd if=/tmp/rec of=/mnt/data bs=65536 seek=\$i count=1 conv=notrunc 2>/dev/null || break; echo ACK \$i; i=\$((i+1)); done; echo WRITER-STOPPED"
start_daemon --log-level=info
start_guest w run "$writer" --timeout 900
wait_console w 'ACK 20$' 600
kill -TERM "$daemon_pid"
wait_gone "$daemon_pid" 60 || fail "ferryfsd still running 60 s after SIGTERM"
rc=0
wait "$daemon_pid" || rc=$?
((rc == 0)) || fail "ferryfsd exited with $rc on SIGTERM: $(tail -3 "$tmp/daemon.log")"
sleep 1
kill -KILL "$(cat "$tmp/qemu-w.pid")" 2>/dev/null || true

acked=$(tr -d '\r' <"$tmp/console-w.log" | grep -aoE '^ACK [0-9]+' | tail -1 | cut -d' ' -f2)
[[ -n "$acked" ]] || fail "no ACK on the console"
{ yes ferryfs || true; } | head -c 65536 >"$tmp/rec"
size=$(stat -c %s "$share/data")
blocks=$(((size + 65535) / 65536))
((blocks >= acked + 1)) || fail "host file has $blocks records, guest saw $((acked + 1)) acknowledged"
for ((b = 0; b < blocks; b++)); do
    dd if="$share/data" of="$tmp/blk" bs=65536 skip=$b count=1 2>/dev/null
    if ! cmp -s "$tmp/blk" "$tmp/rec"; then
        ((b > acked)) || fail "acknowledged record $b is not intact on the host"
        [[ -z "$(tr -d '\0' <"$tmp/blk")" ]] || fail "record $b is torn"
    fi
done
say "PASS: SIGTERM after ACK $acked: exit 0, $blocks records on the host, all acknowledged ones intact, none torn"
failed_run=0
