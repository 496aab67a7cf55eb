#!/usr/bin/env bash
# make check test: ferryfsd --mount serves the share through the host's /dev/fuse; fsops runs on the host mount, then the backing dir is verified.
#
# Usage: fusemode-test.sh [PATH_TO_FERRYFSD]     (or env FERRYFSD; default build/ferryfsd)
# Env:   FERRYFS_E2E_KEEP=1 keep the tmp dir
# Exit:  0 all checks pass; 1 a check failed; 77 skipped (not root, no /dev/fuse, mounting not allowed).
set -euo pipefail

source "$(dirname "$0")/../lib/common.sh"
ferryfsd="${1:-$ferryfsd}"

need_root "mount(2), setuid checks"
[[ -c /dev/fuse ]] || skip "no /dev/fuse"
need_cmd gcc jq
need_built "$ferryfsd"

make_tmp
# The non-root checks walk to the mount point as uid 1000.
chmod 755 "$tmp"
share="$tmp/share" mnt="$tmp/mnt" res="$tmp/results"
daemon_pid="" busy_pid="" failed=0
tmp_drop=("$share")   # a 5 GiB sparse file and 32 MiB blobs; the logs are what matter
cleanup_cmds+=('[[ -z "$busy_pid" ]] || kill -KILL "$busy_pid" 2>/dev/null'
               '[[ -z "$daemon_pid" ]] || kill -KILL "$daemon_pid" 2>/dev/null'
               'umount -l "$mnt" 2>/dev/null')

# This test's own pass/fail: rows of a results table, printed at the end.
pass() { printf '%s\tPASS\n' "$1" >>"$res"; }
fail() { printf '%s\tFAIL %s\n' "$1" "$2" >>"$res"; failed=1; }
# mountinfo: field 5 is the mount point; the type follows the " - " separator (optional fields vary).
mounted() {
    awk -v m="$mnt" '{ split($0, p, " - "); split(p[2], t, " ") }
        $5 == m && t[1] == "fuse.ferryfs" { f = 1 } END { exit !f }' /proc/self/mountinfo
}

# The helper the guest runs, built for the host from the same source.
fsops="$tmp/fsops"
gcc -static -O2 -Wall -o "$fsops" "$repo/tests/e2e/guest-fsops.c"
source "$repo/tests/e2e/host-checks.sh"

mkdir -p "$share/host" "$mnt"
: >"$res"
printf 'hello from the host\n' >"$share/host/hello.txt"
"$fsops" --expect hostpat >"$share/host/pattern.bin"
prepare_cap_files "$share"

# Starts ferryfsd on $mnt; 0 once mounted, 1 if the daemon died, 77 if the kernel refuses FUSE mounts here.
start_daemon() { # LOG
    "$ferryfsd" --mount="$mnt" --shared-dir="$share" --xattr --stats-socket="$tmp/stats" >"$1" 2>&1 &
    daemon_pid=$!
    local i
    for ((i = 0; i < 100; i++)); do
        mounted && return 0
        kill -0 "$daemon_pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$daemon_pid" 2>/dev/null || true
    wait "$daemon_pid" 2>/dev/null || true
    daemon_pid=""
    grep -q 'cannot mount.*Operation not permitted\|cannot open /dev/fuse' "$1" && return 77
    return 1
}
# Waits up to 20 s for the daemon to exit; its status goes to $daemon_rc (-1: still running, killed).
wait_daemon_exit() {
    local i
    daemon_rc=-1
    for ((i = 0; i < 200; i++)); do
        kill -0 "$daemon_pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$daemon_pid" 2>/dev/null; then
        kill -KILL "$daemon_pid" 2>/dev/null || true
        wait "$daemon_pid" 2>/dev/null || true
    else
        daemon_rc=0
        wait "$daemon_pid" 2>/dev/null || daemon_rc=$?
    fi
    daemon_pid=""
}

# ---------- the command line refuses what cannot work ----------
mkdir -p "$share/inner"
out="$("$ferryfsd" --mount="$share/inner" --shared-dir="$share" 2>&1)" && rc=0 || rc=$?
rmdir "$share/inner"
if ((rc != 0)) && grep -q 'inside the shared directory' <<<"$out"; then
    pass refuse_mount_inside_share
else
    fail refuse_mount_inside_share "exit $rc: $(head -1 <<<"$out")"
fi
out="$("$ferryfsd" --mount="$mnt" --shared-dir="$share" --socket-path="$tmp/s" 2>&1)" && rc=0 || rc=$?
if ((rc != 0)) && grep -q -- '--mount excludes --socket-path' <<<"$out"; then
    pass refuse_mount_with_socket
else
    fail refuse_mount_with_socket "exit $rc: $(head -1 <<<"$out")"
fi

# ---------- fsops on the host mount ----------
src=0
start_daemon "$tmp/daemon.log" || src=$?
if ((src == 77)); then
    say "SKIP: the kernel refuses FUSE mounts here:"
    sed 's/^/    /' "$tmp/daemon.log"
    exit 77
fi
if ((src != 0)); then
    fail daemon_mount "not mounted after 10 s (see $tmp/daemon.log)"
else
    pass daemon_mount
    opts="$(awk -v m="$mnt" '$5 == m { print $6 "," $NF }' /proc/self/mountinfo)"   # per-mount, super options
    if grep -q allow_other <<<"$opts" && grep -q default_permissions <<<"$opts" &&
        grep -q nosuid <<<"$opts"; then
        pass mount_options
    else
        fail mount_options "got $opts"
    fi
    # Serving runs under the seccomp filter (mode 2), installed just after the mount.
    sc=""
    for ((i = 0; i < 50; i++)); do
        sc="$(awk '$1 == "Seccomp:" { print $2 }' "/proc/$daemon_pid/status" 2>/dev/null)"
        [[ "$sc" == 2 ]] && break
        sleep 0.1
    done
    if [[ "$sc" == 2 ]]; then pass seccomp_filter; else fail seccomp_filter "Seccomp: '$sc'"; fi

    say "running fsops on $mnt"
    t0=$SECONDS
    frc=0
    timeout --kill-after=10 900 "$fsops" "$mnt" >"$tmp/fsops.out" 2>"$tmp/fsops.times" || frc=$?
    say "fsops finished in $((SECONDS - t0))s (exit $frc)"
    grep -ao 'CHECK [A-Za-z0-9_]* \(PASS\|FAIL.*\)' "$tmp/fsops.out" |
        awk '{ name = $2; $1 = ""; $2 = ""; sub(/^  /, ""); printf "fsops:%s\t%s\n", name, $0 }' >>"$res" || true
    # A check that never reported (hang, crash) is a failure, not a missing row.
    while read -r c; do
        grep -q "^fsops:$c"$'\t' "$res" || printf 'fsops:%s\tFAIL not run\n' "$c" >>"$res"
    done < <("$fsops" --list)

    # The statistics see the host mount's transport and what fsops did through it.
    if "$ferryfsd" --stats="$tmp/stats" --json >"$tmp/stats.json" 2>&1 &&
        jq -e '.transport == "devfuse" and .devfuse.requests > 0 and
            .devfuse.requests == ([.devfuse.in_flight[][1]] | add) and
            ([.ops[] | select(.op == "WRITE" or .op == "LOOKUP") | .count] | length) == 2' \
            "$tmp/stats.json" >/dev/null; then
        pass stats_devfuse
    else
        fail stats_devfuse "$(head -c 120 "$tmp/stats.json")"
    fi

    # SIGTERM unmounts and exits 0 even while a process still sits in the mount.
    (cd "$mnt" && exec sleep 60) &
    busy_pid=$!
    sleep 0.5
    kill -TERM "$daemon_pid"
    wait_daemon_exit
    if ((daemon_rc != 0)); then
        fail sigterm_exit "$( ((daemon_rc < 0)) && echo "still running 20 s after SIGTERM" || echo "exit $daemon_rc")"
    elif mounted; then
        fail sigterm_exit "exited but $mnt is still mounted"
    else
        pass sigterm_exit
    fi
    kill -KILL "$busy_pid" 2>/dev/null || true
    wait "$busy_pid" 2>/dev/null || true
    busy_pid=""
fi

# ---------- what the mount left in the backing directory ----------
if [[ -d "$share/fsops/keep" ]]; then
    run_host_checks "$share" "$res"
else
    fail host_checks "no $share/fsops/keep"
fi

# ---------- an unmount from outside ends the daemon ----------
src=0
start_daemon "$tmp/daemon2.log" || src=$?
if ((src != 0)); then
    fail external_umount "second mount failed (see $tmp/daemon2.log)"
else
    # Through the mount again: what fsops wrote is there after a remount.
    if cmp -s <("$fsops" --expect big) "$mnt/fsops/keep/big.bin"; then
        pass remount_reads_back
    else
        fail remount_reads_back "big.bin differs through the new mount"
    fi
    umount "$mnt"
    wait_daemon_exit
    if ((daemon_rc == 0)); then
        pass external_umount
    else
        fail external_umount "$( ((daemon_rc < 0)) && echo "still running 20 s after umount" || echo "exit $daemon_rc")"
    fi
fi

echo
awk -F'\t' '{ printf "%-34s %s\n", $1, $2 }' "$res"
echo
p="$(grep -c $'\tPASS' "$res" || true)"
f="$(grep -c $'\tFAIL' "$res" || true)"
((f == 0)) || failed=1
echo "fusemode: $p passed, $f failed"
exit "$failed"
