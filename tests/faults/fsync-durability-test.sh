#!/usr/bin/env bash
# Fault test (make check): with --writeback (writes sit in the guest's page cache until flushed),
# the guest writes 4 MiB, fsyncs, prints "fsync done"; the host then kills -9 ferryfsd and QEMU at
# once and must find all 4 MiB in the file: fsync was only answered after the data reached the host.
# (A host power cut is not simulated: ferryfsd's FSYNC is a host fsync(2), see docs/security.md.)
# Env: FERRYFS_SHARE_ROOT=DIR puts the share in a fresh subdirectory of DIR (e.g. a GlusterFS mount);
#      FERRYFS_SHARE_VIEW=DIR2, DIR seen through the volume's other mount: the 4 MiB are read there,
#      so "on the host" means on the volume, not in mount A's client (share_from_env,
#      tests/lib/guest.sh; tests/dfs/gluster-faults-test.sh).
set -euo pipefail
# It tests ferryfsd, not the guest's kernel: it runs on the current stack (QEMU 10, Linux 6.12),
# or on stable where that stack cannot be had or FERRYFS_STACK says so (tests/e2e/stack-lib.sh).
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/stack-lib.sh" && stack_default_current "$0" "$@"
name=fsync-durability
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/guest-lib.sh"
share_from_env "$name"

writer="yes durable | head -c 4194304 >/tmp/d && dd if=/tmp/d of=/mnt/synced bs=1M conv=fsync 2>/dev/null && echo 'fsync done' && sleep 600"
start_daemon --log-level=info --writeback
start_guest w run "$writer" --timeout 900
wait_console w '^fsync done' 600
kill -KILL "$daemon_pid" "$(cat "$tmp/qemu-w.pid")"
{ yes durable || true; } | head -c 4194304 >"$tmp/expect"
cmp -s "$view/synced" "$tmp/expect" ||
    fail "host file differs after fsync: $(stat -c %s "$view/synced" 2>&1) bytes"
say "PASS: 4 MiB acknowledged by fsync (writeback cache) are on the host after kill -9 of both"
