#!/usr/bin/env bash
# make check (suite dfs): a GlusterFS volume in the test's own namespaces, mounted twice (two "hosts"): what one mount writes the other reads, inode numbers, file handles measured, and ferryfsd's --inode-file-handles on it (FERRYFS_DFS=ceph: the same on CephFS, as a part of ceph-test.sh).
#
# Usage: gluster-basics-test.sh      Env: FERRYFSD, FERRYFS_E2E_KEEP=1 (keep $tmp), FERRYFS_DFS (tests/lib/dfs.sh)
# Exit:  0 pass; 1 fail; 77 not root, or glusterfs-server/glusterfs-client missing (scripts/deps.sh)
# Time:  ~10 s (volume start ~5 s); no guest.
set -euo pipefail
source "$(dirname "$0")/../lib/common.sh"
source "$lib_dir/dfs.sh"
need_built "$ferryfsd"
make_tmp
dfs_start
a=$dfs_a b=$dfs_b

# ---- two mounts, one volume ----
printf 'written through mount A\n' | dfs_ns tee "$a/from-a" >/dev/null
check "a file written through A reads the same through B" \
    test "$(dfs_ns cat "$b/from-a")" == "written through mount A"
printf 'appended through B\n' | dfs_ns tee -a "$b/from-a" >/dev/null
check "B's append is seen through A" test "$(dfs_ns tail -1 "$a/from-a")" == "appended through B"
read -r ino_a dev_a < <(dfs_ns stat -c '%i %d' "$a/from-a")
read -r ino_b dev_b < <(dfs_ns stat -c '%i %d' "$b/from-a")
say "inode of from-a: $ino_a on A (dev $dev_a), $ino_b on B (dev $dev_b)"
check "the same inode number on both mounts" test "$ino_a" == "$ino_b"
check "two mounts are two devices (st_dev differs)" test "$dev_a" != "$dev_b"
# GlusterFS makes st_ino from the 128-bit gfid: 64 bits wide, not a brick inode; CephFS numbers
# its files from 2^40 up.
check "inode numbers use 64 bits (above 2^32)" \
    python3 -c 'import sys; sys.exit(0 if int(sys.argv[1]) >= 1 << 32 else 1)' "$ino_a"
check "the mount is FUSE ($dfs_fstype in mountinfo)" \
    dfs_ns awk -v m="$a" -v t="$dfs_fstype" '$5 == m { for (i = 7; $i != "-"; i++); if ($(i + 1) == t) f = 1 } END { exit !f }' /proc/self/mountinfo

# ---- file handles on the FUSE mount (measured; ferryfsd's choice rests on it) ----
handles="$here/handles.py"
dfs_ns mkdir "$a/dir"
printf 'x' | dfs_ns tee "$a/dir/h" >/dev/null
h=$(dfs_ns python3 "$handles" get "$a/dir/h")
say "name_to_handle_at on A: $h"
check "name_to_handle_at gives a handle on the $dfs_name mount" test "${h%% *}" == ok
read -r _ htype hhex <<<"$h"
r=$(dfs_ns python3 "$handles" open "$a" "$htype" "$hhex")
say "open_by_handle_at on A, inode cached: $r"
check "open_by_handle_at reopens it while A's kernel caches the inode" \
    test "$r" == "ok $(dfs_ns stat -c %i "$a/dir/h")"
# The same handle through B, whose kernel never met this node id: a FUSE handle is a
# node id of one mount's cache. gluster does not negotiate FUSE_EXPORT_SUPPORT, so it
# resolves only while cached (measured by hand: on A itself after
# `echo 2 >/proc/sys/vm/drop_caches`, ESTALE too). ceph-fuse's node id is the CephFS
# inode number, the same on every mount, and it resolves one it has not cached: the
# handle reopens the file through B (docs/distributed.md).
r=$(dfs_ns python3 "$handles" open "$b" "$htype" "$hhex")
say "open_by_handle_at of A's handle on B (not cached there): $r"
if [[ $dfs_kind == ceph ]]; then
    check "ceph-fuse: A's handle reopens the file through B" test "$r" == "ok $(dfs_ns stat -c %i "$b/dir/h")"
else
    check "an uncached FUSE handle does not reopen (ESTALE)" test "$r" == "err ESTALE"
fi

# ---- ferryfsd's --inode-file-handles on the mount (no guest needed) ----
sock="$tmp/fh.sock"
"${dfs_enter[@]}" "$ferryfsd" --socket-path="$sock" --shared-dir="$a" --inode-file-handles=prefer >"$tmp/prefer.log" 2>&1 &
pid=$!
cleanup_pids+=("$pid")
if wait_socket "$sock" "$pid"; then pass "prefer: ferryfsd starts on the $dfs_name mount"; else fail "prefer: ferryfsd did not start: $(tail -3 "$tmp/prefer.log")"; fi
# Stopped once it says it waits for QEMU (its sandbox is up by then).
for ((i = 0; i < 100; i++)); do
    grep -q 'waiting for a vhost-user frontend' "$tmp/prefer.log" && break
    sleep 0.1
done
# README.md: exit status 0 on SIGTERM (nsenter execs ferryfsd: the status is the daemon's).
stop_daemon "$pid" "prefer: ferryfsd" && pass "prefer: ferryfsd exits 0 on SIGTERM"
check "prefer: one warning naming the mount and $dfs_fstype" \
    test "$(grep -c "prefer: no usable file handles on $a ($dfs_fstype, mount [0-9]*): a FUSE mount" "$tmp/prefer.log")" == 1
rc=0
dfs_ns timeout 10 "$ferryfsd" --socket-path="$tmp/fh2.sock" --shared-dir="$a" --inode-file-handles=mandatory >"$tmp/mandatory.log" 2>&1 || rc=$?
say "mandatory: exit $rc: $(grep -m1 'file handles' "$tmp/mandatory.log" || true)"
check "mandatory: ferryfsd refuses to start (exit 1)" test "$rc" == 1
check "mandatory: the message names the mount" grep -q "mandatory: no usable file handles on $a ($dfs_fstype" "$tmp/mandatory.log"
finish
