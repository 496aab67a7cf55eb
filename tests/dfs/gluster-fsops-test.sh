#!/usr/bin/env bash
# make check (suite dfs): the fsops guest battery with the share on a GlusterFS mount (ferryfsd with fsops' options; make check-long adds the Rust virtiofsd as reference), each difference from a local share explained in gluster-known-differences; then a file replaced through the other mount while the guest holds it (ESTALE). FERRYFS_DFS=ceph: the same on CephFS with ceph-known-differences, as a part of ceph-test.sh.
#
# Usage: gluster-fsops-test.sh        Env: FERRYFSD, FERRYFS_E2E_KEEP=1, FERRYFS_E2E_TIMEOUT
#        FERRYFS_GLUSTER_DAEMONS="ferryfsd"  fsops columns; "ferryfsd virtiofsd-rs" (virtiofsd-rs:
#                                  the reference) with FERRYFS_CHECK_LONG=1 (make check-long);
#                                  "none" runs only the ESTALE part
#        FERRYFS_GLUSTER_MOUNT_OPTS  mount.glusterfs options for both mounts (tests/lib/gluster.sh)
#        FERRYFSD_ARGS             extra ferryfsd arguments for the ESTALE run (e.g. -d)
#        FERRYFS_GLUSTER_ESTALE_SECS=15  how long the guest may take to see a replaced file by name
#                                  (with md-cache off 5 tries, ~0.5 s, in every run: docs/distributed.md)
#        FERRYFS_GLUSTER_ESTALE_MDCACHE=1  the ESTALE part on mounts A and B with gluster's md-cache
#                                  (then the name may show the old file for any time, see below)
# Exit:  0 ferryfsd's column holds no failure that gluster-known-differences does not list, every
#        listed one still fails, ferryfsd never crashed, and the ESTALE checks pass; 1 otherwise;
#        77 not root, glusterfs packages missing, or no guest image.
# Stack: current (QEMU 10, Linux 6.12) when scripts/stack.sh can have it, else stable. The stack
#        and the guest image are made ready outside the namespace (which has no network).
# Time:  ~5 s gluster, one guest boot per column (~20-40 s each under TCG), one for ESTALE.
set -euo pipefail
source "$(dirname "$0")/../lib/guest.sh"
source "$lib_dir/dfs.sh"
dfs_need
need_built "$ferryfsd"
dfs_guest_prepare
known="$here/$dfs_kind-known-differences"
# The reference column costs a guest boot and decides nothing: make check-long runs it.
default_columns=ferryfsd
[[ ${FERRYFS_CHECK_LONG:-} != 1 ]] || default_columns="ferryfsd virtiofsd-rs"
read -r -a columns <<<"${FERRYFS_GLUSTER_DAEMONS:-$default_columns}"
make_tmp
dfs_start
a=$dfs_a b=$dfs_b
say "stack $guest_stack, guest $guest_dir"

# ---- fsops, the shares on mount A ----
fsops_part() {
mkdir -p "$tmp/results"
dfs_ns mkdir -p "$a/fsops"
t0=$SECONDS
dfs_ns env FERRYFS_E2E_SHARE_DIR="$a/fsops" FERRYFS_E2E_RESULTS_DIR="$tmp/results" \
    FERRYFS_E2E_DAEMONS="${columns[*]}" "$repo/tests/e2e/fsops-test.sh" "$ferryfsd" \
    >"$tmp/fsops.out" 2>&1 || true
say "fsops on $dfs_name: $((SECONDS - t0)) s"
# fsops-test keeps its tmp dir whenever ferryfsd's column has a failure, which on gluster it
# has by design: its logs go with ours (kept on failure, removed with $tmp otherwise).
kept="$(sed -n 's/^fsops-test: \(logs \)\{0,1\}kept \(in \)\{0,1\}//p' "$tmp/fsops.out" | tail -1)"
[[ "$kept" == /tmp/ferryfs-e2e.* && -d "$kept" ]] && mv "$kept" "$tmp/fsops-test"
sed -n '/^check /,/^$/p' "$tmp/fsops.out"
res="$tmp/results/ferryfsd"
[[ -s "$res" ]] || die "fsops did not run ferryfsd: $(tail -5 "$tmp/fsops.out")"
grep -q $'^guest_finished\tPASS' "$res" || fail "the fsops guest did not finish: $(grep $'^guest_finished' "$res")"
grep -q $'^daemon_exit\tPASS' "$res" || fail "ferryfsd did not exit cleanly: $(grep $'^daemon_exit' "$res")"

# Each listed check: the host's own call on mount A answers what the guest got (dfs_own, the
# oracle for "the file system's own"), unless its probe is "-".
dfs_results=$res
nfail=0 nknown=0
while IFS=$'\t' read -r check result; do
    [[ "$result" == FAIL* ]] || continue
    nfail=$((nfail + 1))
    if probe="$(dfs_listed "$check")"; then
        nknown=$((nknown + 1))
        [[ "$probe" == - ]] || dfs_own "$check" "$probe"
    else
        fail "$check differs on $dfs_name and is not in $(basename "$known"): $result"
    fi
done <"$res"
# A listed check that now passes: the list is out of date (or gluster changed).
while IFS=$'\t' read -r glob _; do
    [[ -z "$glob" || "$glob" == \#* ]] && continue
    grep -q "^$glob"$'\t'"FAIL" "$res" ||
        fail "$glob is listed in $(basename "$known") but did not fail: $(grep "^$glob"$'\t' "$res" || echo absent)"
done <"$known"
say "ferryfsd on $dfs_name: $nfail failing checks, $nknown of them listed as $dfs_name's own"
}
[[ "${columns[*]}" == none ]] || fsops_part

# ---- ESTALE: a file the guest holds is replaced through the other mount ----
# On two mounts made after md-cache is turned off (performance.stat-prefetch off; mounts made
# later get the new client graph, which the mount log shows). With md-cache, mount A answers a
# lookup of the name from its cache of the old file for 1 s after each reply about that file, and
# a stat of the file the guest still holds open goes to the brick by its open fd, which still
# reaches the removed file, so the cache is refreshed with the old file: while the guest keeps
# asking, the old file may stay for any time (measured 2 tries to over 15 s; docs/distributed.md).
# FERRYFS_GLUSTER_ESTALE_MDCACHE=1 keeps md-cache on (to measure that by hand).
# CephFS: the two mounts as they are (its clients' caches follow the MDS's capabilities).
if [[ $dfs_kind == gluster && "${FERRYFS_GLUSTER_ESTALE_MDCACHE:-0}" != 1 ]]; then
    dfs_ns gluster --mode=script volume set "$gluster_vol" performance.stat-prefetch off \
        >"$tmp/volume-set.out" 2>&1 || die "volume set performance.stat-prefetch off: $(cat "$tmp/volume-set.out")"
    a="$tmp/gluster/held-a" b="$tmp/gluster/held-b"
    dfs_mount "$a" "${FERRYFS_GLUSTER_MOUNT_OPTS:-}"
    dfs_mount "$b" "${FERRYFS_GLUSTER_MOUNT_OPTS:-}"
    if ! grep -q 'Final graph' "$tmp/gluster/log/mount-held-a.log" ||
        grep -q 'type performance/md-cache' "$tmp/gluster/log/mount-held-a.log"; then
        die "mount A for the ESTALE part: no client graph without md-cache in its log"
    fi
fi
dfs_ns mkdir -p "$a/held"
printf 'old\n' | dfs_ns tee "$a/held/f" "$a/held/g" >/dev/null
dfs_ns cp "$here/guest-estale.sh" "$a/held/estale.sh"
sock="$tmp/estale.sock"
read -r -a extra <<<"${FERRYFSD_ARGS:-}"
"${dfs_enter[@]}" "$ferryfsd" --socket-path="$sock" --shared-dir="$a/held" "${extra[@]}" >"$tmp/estale-daemon.log" 2>&1 &
pid=$!
cleanup_pids+=("$pid")
wait_socket "$sock" "$pid" || die "ferryfsd did not listen: $(tail -3 "$tmp/estale-daemon.log")"
"${dfs_enter[@]}" "$run_guest" --guest "$guest_dir" --sock "$sock" --cmd run --args "sh /mnt/estale.sh ${FERRYFS_GLUSTER_ESTALE_SECS:-15}" --quiet \
    --mem 512M --log "$tmp/console-estale.log" --timeout "$guest_timeout" --watch-pid "$pid" \
    >"$tmp/run-guest-estale.out" 2>&1 &
guest=$!
guest_pids+=("$guest")
# The guest says when it holds f (open) and g (looked up); then both are replaced through B.
for ((i = 0; i < guest_timeout * 10; i++)); do
    dfs_ns test -e "$b/held/holding" && break
    kill -0 "$guest" 2>/dev/null || break
    sleep 0.1
done
dfs_ns test -e "$b/held/holding" || die "the guest never held the files: $(tr -d '\r' <"$tmp/console-estale.log" | tail -5)"
dfs_ns bash -c 'cd "$1" && rm f g && printf "new\n" >f && printf "new\n" >g && touch go' _ "$b/held"
say "f and g removed and recreated through mount B"
wait "$guest" || fail "the ESTALE guest failed (run-guest exit $?)"
console="$(tr -d '\r' <"$tmp/console-estale.log")"
grep -a '^ESTALE' <<<"$console" | sed 's/^/    /'
for c in f-by-name g-by-name f-open-fd never-wrong; do
    if grep -aq "^ESTALE $c PASS" <<<"$console"; then pass "estale: $c"
    else fail "estale: $c: $(grep -a "^ESTALE $c" <<<"$console" || echo 'no result')"; fi
done
wait_gone "$pid" 10 || fail "ferryfsd still running after the ESTALE guest"
wait "$pid" 2>/dev/null; drc=$?
((drc < 128)) || fail "ferryfsd died by signal $((drc - 128)) in the ESTALE run"
finish
