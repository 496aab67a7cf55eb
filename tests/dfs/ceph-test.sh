#!/usr/bin/env bash
# make check (suite dfs): CephFS under the share: a one-node Ceph cluster brought up once (tests/lib/ceph.sh), mounted twice with ceph-fuse, and on it the parts the GlusterFS tests run (basics, fsops with ESTALE, semantics, two hosts), each a gluster-PART-test.sh with FERRYFS_DFS=ceph, and the servers stopped under a writing guest (ceph-server-stop.sh).
#
# Usage: ceph-test.sh                Env: FERRYFSD, FERRYFS_E2E_KEEP=1, FERRYFS_E2E_TIMEOUT
#        FERRYFS_CEPH_PARTS="basics fsops semantics twohosts server-stop"  the parts, in that order
#                                  (PART: gluster-PART-test.sh, or ceph-PART.sh); with
#                                  FERRYFS_CHECK_LONG=1 (make check-long) also "faults", the five
#                                  fault tests of gluster-faults-test.sh (minutes, and they find on
#                                  CephFS what they find on GlusterFS)
#        FERRYFS_CEPH_MOUNT_ARGS="--client_acl_type=posix_acl"  ceph-fuse arguments of mounts A and
#                                  B (POSIX ACLs on, as the gluster tests mount with -o acl; the
#                                  semantics part checks a third mount without it)
#        and each part's own (gluster-PART-test.sh), e.g. FERRYFS_CHECK_LONG=1 for the Rust
#        virtiofsd's columns, FERRYFS_GLUSTER_ESTALE_SECS
# Parts: each runs as its own process on the cluster started here (FERRYFS_CEPH_HOLDER,
#        FERRYFS_CEPH_DIR: tests/lib/dfs.sh) and is judged by its exit status; its output is
#        repeated, indented. The known differences: ceph-known-differences (fsops) and
#        ceph-semantics-known-differences, every entry checked against the host's own call on
#        mount A (host-probe.py), as for gluster.
# Exit:  0 every part passed; 1 one failed, or the cluster did not come up; 77 not root, /dev/fuse
#        or a Ceph package missing (scripts/deps.sh installs them), or a part skipped (its SKIP line
#        repeated; none failed).
# Time:  about 2 min (the cluster 10-14 s, the parts 1-35 s each, the teardown ~8 s), and the part
#        faults with make check-long (docs/distributed.md, "CephFS").
set -euo pipefail
source "$(dirname "$0")/../lib/guest.sh"
source "$lib_dir/ceph.sh"
ceph_need
need_built "$ferryfsd"
default_parts="basics fsops semantics twohosts server-stop"
[[ ${FERRYFS_CHECK_LONG:-} != 1 ]] || default_parts+=" faults"
read -r -a parts <<<"${FERRYFS_CEPH_PARTS:-$default_parts}"
[[ -n ${FERRYFS_CEPH_PARTS:-} || ${FERRYFS_CHECK_LONG:-} == 1 ]] ||
    say "part faults (the five fault tests on CephFS) left out: make check-long runs it"
make_tmp
read -r -a mount_args <<<"${FERRYFS_CEPH_MOUNT_ARGS---client_acl_type=posix_acl}"
ceph_start "${mount_args[@]}"
ceph_export
export FERRYFSD="$ferryfsd"
# Its daemons listen on the namespace's loopback only (which is all the namespace has).
listening="$(ceph_ns ss -ltnH | awk '{ print $4 }' | sort -u | tr '\n' ' ')"
say "listening in the cluster's namespace: $listening"
if [[ -n $listening ]] && ! tr ' ' '\n' <<<"$listening" | grep -v '^$' | grep -qv '^127\.0\.0\.1:'; then
    pass "the cluster listens on 127.0.0.1 of its own network namespace only"
else
    fail "the cluster listens elsewhere than on 127.0.0.1: $listening"
fi

skipped=()
for part in "${parts[@]}"; do
    script="$here/gluster-$part-test.sh"
    [[ -x $script ]] || script="$here/ceph-$part.sh"
    [[ -x $script ]] || die "no part $part (gluster-$part-test.sh or ceph-$part.sh in $here)"
    t0=$SECONDS rc=0
    "$script" >"$tmp/$part.out" 2>&1 </dev/null || rc=$?
    say "part $part: exit $rc in $((SECONDS - t0)) s"
    sed 's/^/    /' "$tmp/$part.out"
    case $rc in
        0) pass "part $part" ;;
        77) skipped+=("$part: $(grep -m1 'SKIP' "$tmp/$part.out" || echo 'exit 77')") ;;
        *) fail "part $part: exit $rc" ;;
    esac
    # A part must leave the cluster up for the next: its mounts still answer.
    stat -c %i "$ceph_a" "$ceph_b" >/dev/null 2>&1 || die "after part $part the ceph-fuse mounts do not answer"
done
if ((${#skipped[@]} && ! fails)); then
    for s in "${skipped[@]}"; do say "SKIP: part $s"; done
    exit 77
fi
finish
