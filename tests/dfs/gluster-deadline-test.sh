#!/usr/bin/env bash
# make check (suite dfs): --request-timeout with a GlusterFS brick that stops answering: tests/semantics/deadline-current-test.sh with its hung storage a directory of the volume, hung by SIGSTOP of the brick process (glusterfsd) under the running guest, then SIGCONT.
#
# Usage: gluster-deadline-test.sh    Env: FERRYFSD, FERRYFS_E2E_KEEP=1
# The volume (tests/lib/gluster.sh, through tests/lib/dfs.sh) gets network.ping-timeout 600 and a fresh mount that has it:
# with the default 42 s the client would declare the brick gone during the guest's part and fail
# the calls itself (ENOTCONN), and the hang would end before the test is done with it. Every check
# of the deadline test holds on the volume as on the host FUSE mount.
# Exit:  0 pass; 1 fail; 77 not root, glusterfs packages missing, or no current stack.
set -euo pipefail
source "$(dirname "$0")/../lib/guest.sh"
source "$lib_dir/dfs.sh"
dfs_need
dfs_guest_prepare
export FERRYFSD="$ferryfsd"
make_tmp
gluster_start
t0=$SECONDS

gl_ns gluster --mode=script volume set "$gluster_vol" network.ping-timeout 600 >"$tmp/set.out" 2>&1 ||
    die "volume set network.ping-timeout: $(cat "$tmp/set.out")"
gluster_c="$tmp/gluster/c"
gluster_mount "$gluster_c"
gl_ns mkdir "$gluster_c/deadline"
ns="$(readlink "/proc/$gluster_holder/ns/net")"
brick=""
for p in /proc/[0-9]*; do
    [[ $(cat "$p/comm" 2>/dev/null) == glusterfsd && $(readlink "$p/ns/net" 2>/dev/null) == "$ns" ]] &&
        brick=${p#/proc/}
done
[[ -n $brick ]] || die "no brick process (glusterfsd) in the volume's namespace"

rc=0
gl_ns env FERRYFS_DEADLINE_HUNG_DIR="$gluster_c/deadline" FERRYFS_DEADLINE_HUNG_PID="$brick" \
    "$repo/tests/semantics/deadline-current-test.sh" >"$tmp/deadline.out" 2>&1 || rc=$?
# The brick answers again whatever the test did.
kill -CONT "$brick" 2>/dev/null || true
grep -a "HOST\|FAIL\|PASS$" "$tmp/deadline.out" | grep -v '^  guest: .* PASS$' | sed 's/^/    /' || true
# Only the current stack's absence may skip it (tests/expected-skips).
((rc != 77)) || skip "$(grep -a SKIP "$tmp/deadline.out" | tail -1)"
if ((rc == 0)) && grep -aq "^deadline-current-test: PASS" "$tmp/deadline.out"; then
    pass "a stopped GlusterFS brick under a running guest ($((SECONDS - t0)) s)"
else
    fail "the deadline test on the volume exited $rc: $(tail -5 "$tmp/deadline.out")"
fi
# What the guest wrote before the stop and after the resume, read through the other mount.
if [[ $(gl_ns cat "$gluster_b/deadline/data-root" 2>&1) == kept-root &&
      $(gl_ns cat "$gluster_b/deadline/after-user" 2>&1) == after-user ]]; then
    pass "the guest's files are on the volume, read through mount B"
else
    fail "mount B reads data-root '$(gl_ns cat "$gluster_b/deadline/data-root" 2>&1)'"
fi
finish
