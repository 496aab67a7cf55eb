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
share="$tmp/share" mnt="$tmp/mnt"
daemon_pid="" busy_pid=""
tmp_drop=("$share")   # a 5 GiB sparse file and 32 MiB blobs; the logs are what matter
cleanup_cmds+=('[[ -z "$busy_pid" ]] || kill -KILL "$busy_pid" 2>/dev/null'
               '[[ -z "$daemon_pid" ]] || kill -KILL "$daemon_pid" 2>/dev/null'
               'umount -l "$mnt" 2>/dev/null')

# pass NAME and fail NAME REASON are rows of a table, printed at the end.
results_table
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
printf 'hello from the host\n' >"$share/host/hello.txt"
"$fsops" --expect hostpat >"$share/host/pattern.bin"
prepare_cap_files "$share"

# mount_daemon LOG: ferryfsd serving $share on $mnt (not a socket, as common.sh's start_daemon);
# 0 once mounted, 1 if the daemon died, 77 if the kernel refuses FUSE mounts here.
mount_daemon() {
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
mount_daemon "$tmp/daemon.log" || src=$?
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
        awk '{ name = $2; $1 = ""; $2 = ""; sub(/^  /, ""); printf "fsops:%s\t%s\n", name, $0 }' >>"$results" || true
    # A check that never reported (hang, crash) is a failure, not a missing row.
    while read -r c; do
        grep -q "^fsops:$c"$'\t' "$results" || printf 'fsops:%s\tFAIL not run\n' "$c" >>"$results"
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
    if stop_daemon "$daemon_pid" sigterm_exit 20; then
        if mounted; then fail sigterm_exit "exited but $mnt is still mounted"; else pass sigterm_exit; fi
    fi
    daemon_pid=""
    kill -KILL "$busy_pid" 2>/dev/null || true
    wait "$busy_pid" 2>/dev/null || true
    busy_pid=""
fi

# ---------- what the mount left in the backing directory ----------
if [[ -d "$share/fsops/keep" ]]; then
    run_host_checks "$share" "$results"
else
    fail host_checks "no $share/fsops/keep"
fi

# ---------- an unmount from outside ends the daemon ----------
src=0
mount_daemon "$tmp/daemon2.log" || src=$?
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
    # The kernel's end of the mount is its frontend: after the umount it ends with status 0.
    expect_daemon_exit "$daemon_pid" external_umount 20 && pass external_umount
    daemon_pid=""
fi

results_report 34
