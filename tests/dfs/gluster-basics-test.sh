#!/usr/bin/env bash
# make check (suite dfs): a GlusterFS volume in the test's own namespaces, mounted twice (two "hosts"): what one mount writes the other reads, inode numbers, file handles measured, and ferryfsd's --inode-file-handles on it.
#
# Usage: gluster-basics-test.sh      Env: FERRYFSD, FERRYFS_E2E_KEEP=1 (keep $tmp)
# Exit:  0 pass; 1 fail; 77 not root, or glusterfs-server/glusterfs-client missing (scripts/deps.sh)
# Time:  ~10 s (volume start ~5 s); no guest.
set -euo pipefail
source "$(dirname "$0")/../lib/common.sh"
source "$lib_dir/gluster.sh"
need_built "$ferryfsd"
make_tmp
gluster_start
a=$gluster_a b=$gluster_b

# ---- two mounts, one volume ----
printf 'written through mount A\n' | gl_ns tee "$a/from-a" >/dev/null
check "a file written through A reads the same through B" \
    test "$(gl_ns cat "$b/from-a")" == "written through mount A"
printf 'appended through B\n' | gl_ns tee -a "$b/from-a" >/dev/null
check "B's append is seen through A" test "$(gl_ns tail -1 "$a/from-a")" == "appended through B"
read -r ino_a dev_a < <(gl_ns stat -c '%i %d' "$a/from-a")
read -r ino_b dev_b < <(gl_ns stat -c '%i %d' "$b/from-a")
say "inode of from-a: $ino_a on A (dev $dev_a), $ino_b on B (dev $dev_b)"
check "the same inode number on both mounts" test "$ino_a" == "$ino_b"
check "two mounts are two devices (st_dev differs)" test "$dev_a" != "$dev_b"
# GlusterFS makes st_ino from the 128-bit gfid: 64 bits wide, not a brick inode.
check "inode numbers use 64 bits (above 2^32)" \
    python3 -c 'import sys; sys.exit(0 if int(sys.argv[1]) >= 1 << 32 else 1)' "$ino_a"
check "the mount is FUSE (fuse.glusterfs in mountinfo)" \
    gl_ns awk -v m="$a" '$5 == m { for (i = 7; $i != "-"; i++); if ($(i + 1) == "fuse.glusterfs") f = 1 } END { exit !f }' /proc/self/mountinfo

# ---- file handles on the FUSE mount (measured; ferryfsd's choice rests on it) ----
handles="$here/handles.py"
gl_ns mkdir "$a/dir"
printf 'x' | gl_ns tee "$a/dir/h" >/dev/null
h=$(gl_ns python3 "$handles" get "$a/dir/h")
say "name_to_handle_at on A: $h"
check "name_to_handle_at gives a handle on the gluster mount" test "${h%% *}" == ok
read -r _ htype hhex <<<"$h"
r=$(gl_ns python3 "$handles" open "$a" "$htype" "$hhex")
say "open_by_handle_at on A, inode cached: $r"
check "open_by_handle_at reopens it while A's kernel caches the inode" \
    test "$r" == "ok $(gl_ns stat -c %i "$a/dir/h")"
# The same handle through B, whose kernel never met this node id: a FUSE handle is a
# node id of one mount's cache (gluster does not negotiate FUSE_EXPORT_SUPPORT), so
# it resolves only while cached. Measured by hand: on A itself after
# `echo 2 >/proc/sys/vm/drop_caches`, ESTALE too (docs/distributed.md).
r=$(gl_ns python3 "$handles" open "$b" "$htype" "$hhex")
say "open_by_handle_at of A's handle on B (not cached there): $r"
check "an uncached FUSE handle does not reopen (ESTALE)" test "$r" == "err ESTALE"

# ---- ferryfsd's --inode-file-handles on the gluster mount (no guest needed) ----
sock="$tmp/fh.sock"
"${gl_enter[@]}" "$ferryfsd" --socket-path="$sock" --shared-dir="$a" --inode-file-handles=prefer >"$tmp/prefer.log" 2>&1 &
pid=$!
cleanup_pids+=("$pid")
if wait_socket "$sock" "$pid"; then pass "prefer: ferryfsd starts on the gluster mount"; else fail "prefer: ferryfsd did not start: $(tail -3 "$tmp/prefer.log")"; fi
# Stopped once it says it waits for QEMU (its sandbox is up by then).
for ((i = 0; i < 100; i++)); do
    grep -q 'waiting for a vhost-user frontend' "$tmp/prefer.log" && break
    sleep 0.1
done
# README.md: exit status 0 on SIGTERM (nsenter execs ferryfsd: the status is the daemon's).
stop_daemon "$pid" "prefer: ferryfsd" && pass "prefer: ferryfsd exits 0 on SIGTERM"
check "prefer: one warning naming the mount and fuse.glusterfs" \
    test "$(grep -c "prefer: no usable file handles on $a (fuse.glusterfs, mount [0-9]*): a FUSE mount" "$tmp/prefer.log")" == 1
rc=0
gl_ns timeout 10 "$ferryfsd" --socket-path="$tmp/fh2.sock" --shared-dir="$a" --inode-file-handles=mandatory >"$tmp/mandatory.log" 2>&1 || rc=$?
say "mandatory: exit $rc: $(grep -m1 'file handles' "$tmp/mandatory.log" || true)"
check "mandatory: ferryfsd refuses to start (exit 1)" test "$rc" == 1
check "mandatory: the message names the mount" grep -q "mandatory: no usable file handles on $a (fuse.glusterfs" "$tmp/mandatory.log"
finish
