#!/usr/bin/env bash
# make check (suite dfs): ferryfsd's locks, xattrs and ACLs (tests/semantics/locks-test.sh, xattr-test.sh) with the share on a GlusterFS mount, each difference from a local share explained in gluster-semantics-known-differences (the fault tests: gluster-faults-test.sh). FERRYFS_DFS=ceph: the same on CephFS with ceph-semantics-known-differences, as a part of ceph-test.sh (its mounts made with POSIX ACLs on).
#
# Usage: gluster-semantics-test.sh    Env: FERRYFSD, FERRYFS_E2E_KEEP=1
#        FERRYFS_GLUSTER_MOUNT_OPTS=acl  mount.glusterfs options for both mounts (default acl: without
#                                  it the gluster client refuses POSIX ACLs, see below)
#        FERRYFS_GLUSTER_PARTS="locks xattr"  which parts run (a listed difference of a part
#                                  left out is not judged)
# Parts: locks and xattr run inside the test's gluster namespace with FERRYFS_SHARE_ROOT on mount A
#        (ferryfsd only, no reference column); their checks are collected as PART:CHECK PASS|FAIL.
#        A failing check must match a glob of gluster-semantics-known-differences, whose PROBE column
#        names the host-probe.py operation that gets the same error from the host's own call on
#        mount A (the oracle for "the file system's own error"); a listed check that passes fails the
#        test, as does any guest or daemon exit other than 0 (never a crash). Each part's share is
#        made and removed on the volume, seen through mount B (on_volume_start/on_volume_check,
#        tests/lib/dfs.sh). Last, a third mount without -o acl: the host's own ACL call there
#        fails (why the test mounts with acl), and (with the xattr part) xattr-test with its share
#        there gets the host's own error for an access and a default ACL (part noacl).
# Exit:  0 pass; 1 fail; 77 not root, glusterfs packages or acl tools missing, or no guest image.
# Time:  46 and 123 s in two runs (load; three guest boots, the part noacl one of them); the fault
#        part that ran sigterm-drain here is gluster-faults-test.sh now.
set -euo pipefail
source "$(dirname "$0")/../lib/guest.sh"
source "$lib_dir/dfs.sh"
dfs_need
need_cmd getfacl setfattr
need_built "$ferryfsd"
dfs_guest_prepare
export FERRYFSD="$ferryfsd" FERRYFS_GLUSTER_MOUNT_OPTS="${FERRYFS_GLUSTER_MOUNT_OPTS-acl}"
known="$here/$dfs_kind-semantics-known-differences"
read -r -a parts <<<"${FERRYFS_GLUSTER_PARTS:-locks xattr}"
make_tmp
: >"$tmp/results"
dfs_results="$tmp/results"
say "stack $guest_stack, guest $guest_dir"
dfs_start
a=$dfs_a b=$dfs_b

# results PART OUT: PART:CHECK<TAB>PASS|FAIL reason for each check ferryfsd's run printed in OUT
# (guest CHECK lines, a check the test wanted and did not see, the host's HOST lines and
# host-locker's probe and wait, the guest's and daemons' exit statuses: PART:guest_rc,
# PART:daemon_rc, PART:run).
results() {
    sed -nE -e "s/^  ferryfsd: CHECK ([^ ]+) (PASS|FAIL) ?(.*)/$1:\\1\\t\\2 \\3/p" \
        -e "s/^  ferryfsd: ([a-z]+_rc)=0\$/$1:\\1\\tPASS /p" \
        -e "s/^  ferryfsd: ([a-z]+_rc)=(.*)/$1:\\1\\tFAIL exit \\2/p" \
        -e "s/^HOST ([^ ]+) (PASS|FAIL) ?(.*)/$1:host:\\1\\t\\2 \\3/p" \
        -e "s/^[a-z-]+: FAIL: guest run exited (.*)/$1:guest_rc\\tFAIL exit \\1/p" \
        -e "s/^  ferryfsd: wait failed: (.*)/$1:host:wait\\tFAIL \\1/p" \
        -e "s/^[a-z-]+: FAIL: ferryfsd: missing 'CHECK ([^ ]+) PASS'/$1:\\1\\tFAIL missing/p" \
        -e "s/^[a-z-]+: FAIL: ([^ :]+): missing\$/$1:\\1\\tFAIL missing/p" \
        -e "s/^[a-z-]+: FAIL: (daemon [0-9]+ exited|daemon [0-9]+ still running)(.*)/$1:run\\tFAIL \\1\\2/p" "$2"
    # host-locker's probe of the guest's locks: one line of NAME=1 (as on a local file system) or 0.
    grep -a '^  ferryfsd: setlk-blocked=' "$2" | tr ' ' '\n' |
        sed -nE -e "s/^([a-z-]+)=1\$/$1:host:\\1\\tPASS /p" -e "s/^([a-z-]+)=0\$/$1:host:\\1\\tFAIL 0/p" || true
}

# semantics PART SCRIPT MIN: runs SCRIPT in the namespace with the share on mount A; adds its
# results; it must print at least MIN checks, and a non-zero exit must show in a failing one.
semantics() {
    local rc=0 n t0=$SECONDS
    on_volume_start "$1"
    dfs_ns env FERRYFS_SHARE_ROOT="$a/$1" "$repo/tests/semantics/$2" >"$tmp/$1.out" 2>&1 || rc=$?
    say "$1 on $dfs_name: exit $rc in $((SECONDS - t0)) s"
    ((rc != 77)) || die "$2 skipped: $(tail -3 "$tmp/$1.out")"
    results "$1" "$tmp/$1.out" | tee -a "$tmp/results" | sed 's/^/    /'
    n=$(grep -c "^$1:" "$tmp/results" || true)
    ((n >= $3)) || fail "$1: $n checks printed, want at least $3: $(tail -5 "$tmp/$1.out")"
    if ((rc != 0)) && ! grep -q "^$1:[^"$'\t'"]*"$'\t'"FAIL" "$tmp/results"; then
        fail "$1: $2 exited $rc without a failing check: $(tail -5 "$tmp/$1.out")"
    fi
    on_volume_check "$1" "$2"
}

ran() { [[ " ${parts[*]} " == *" $1 "* ]]; }
# failed GLOB: some check matching GLOB failed.
failed() {
    local c r
    while IFS=$'\t' read -r c r; do
        # shellcheck disable=SC2053
        [[ "$c" == $1 && "$r" == FAIL* ]] && return 0
    done <"$tmp/results"
    return 1
}
ran locks && semantics locks locks-test.sh 12
ran xattr && semantics xattr xattr-test.sh 25

# ---- the list: every failing check listed and explained, every listed one still failing ----
nfail=0 nknown=0
while IFS=$'\t' read -r check result; do
    [[ "$result" == FAIL* ]] || continue
    nfail=$((nfail + 1))
    if [[ "$check" == *:run || "$check" == *:daemon_rc ]]; then
        fail "$check: $result (ferryfsd must exit 0: a crash or a hang is never the file system's own)"
    elif [[ "$check" == *:guest_rc ]]; then
        # The guest program exits 1 when one of its checks failed (judged on their own lines);
        # anything else (no mount, no end, a timeout) is not an answer of the file system's.
        [[ "$result" == "FAIL exit 1" ]] && awk -F'\t' -v c="$check" -v p="${check%%:*}:" \
            'index($1, p) == 1 && $1 != c && $2 ~ /^FAIL/ { f = 1 } END { exit !f }' "$tmp/results" ||
            fail "$check: $result (the guest did not finish its checks)"
    elif probe="$(dfs_listed "$check")"; then
        nknown=$((nknown + 1))
        [[ "$probe" == - ]] || dfs_own "$check" "$probe"
    else
        fail "$check differs on $dfs_name and is not in $(basename "$known"): $result"
    fi
done <"$tmp/results"
while IFS=$'\t' read -r glob _; do
    [[ -z "$glob" || "$glob" == \#* ]] && continue
    ran "${glob%%:*}" || continue
    failed "$glob" ||
        fail "$glob is listed in $(basename "$known") but did not fail: $(grep "^${glob%%\**}" "$tmp/results" | head -1 || echo absent)"
done <"$known"
say "ferryfsd on $dfs_name: $nfail failing checks, $nknown of them listed as $dfs_name's own"

# ---- why -o acl: without it the host's own ACL call on the gluster mount fails, and the guest's
# gets the same error from ferryfsd (xattr-test with its share on that mount; the part noacl) ----
noacl="$tmp/noacl"
dfs_mount "$noacl" ""
dfs_ns mkdir -p "$noacl/probe-noacl"
answer="$(dfs_ns python3 "$here/host-probe.py" acl-set "$noacl/probe-noacl")"
if [[ "$answer" != ok ]]; then
    pass "a mount without -o acl refuses an access ACL: $answer (docs/distributed.md)"
else
    fail "a mount without -o acl took an access ACL: docs/distributed.md says it does not"
fi
if ran xattr; then
    t0=$SECONDS rc=0
    dfs_ns mkdir -p "$noacl/noacl"
    dfs_ns env FERRYFS_SHARE_ROOT="$noacl/noacl" "$repo/tests/semantics/xattr-test.sh" >"$tmp/noacl.out" 2>&1 || rc=$?
    say "xattr on the mount without -o acl: exit $rc in $((SECONDS - t0)) s"
    ((rc != 77)) || die "xattr-test.sh skipped: $(tail -3 "$tmp/noacl.out")"
    results noacl "$tmp/noacl.out" >>"$tmp/results"
    grep -E '^noacl:(acl-set|acl-default-set|daemon_rc|run)'$'\t' "$tmp/results" | sed 's/^/    /' || true
    dfs_own noacl:acl-set acl-set "$noacl"
    dfs_own noacl:acl-default-set acl-default-set "$noacl"
    # xattr-test says when a daemon exited non-zero or kept running (PART:run, as above).
    if failed 'noacl:run' || failed 'noacl:daemon_rc'; then
        fail "noacl: ferryfsd did not exit 0: $(grep -E '^noacl:(daemon_rc|run)' "$tmp/results" | tr '\n' ' ')"
    else
        pass "noacl: ferryfsd exited 0"
    fi
fi
finish
