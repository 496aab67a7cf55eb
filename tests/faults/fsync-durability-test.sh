#!/usr/bin/env bash
# Fault test (make check): a guest's fsync, fdatasync, syncfs and directory fsync each reach the host as a sync system call of ferryfsd, seen by strace, after the guest's write and before the guest's sync returns; what they made durable is on the host after kill -9 of ferryfsd and QEMU.
#
# Why strace: the host's page cache survives the kill -9, so the content check alone passes for a
# daemon whose FSYNC does nothing. strace sees the daemon's own system calls, whatever ferryfsd
# says about them: the sync must be there, on the guest's file (matched by device and inode
# through /proc/PID/root, however the daemon's mount namespace names it), entered after the guest
# said it had written and finished before the guest said its sync returned, with no write to that
# file entered after it. A host power cut is not simulated (see docs/security.md).
#
# Rounds (guest script durable.sh, busybox): with --writeback the data sits in the guest's page
# cache behind an open fd until the sync sends it:
#   fsync      sync FILE      (fsync(2): FUSE_FSYNC)            host fsync on FILE
#   fdatasync  sync -d FILE   (fdatasync(2): FUSE_FSYNC, datasync) host fdatasync or fsync on FILE
#   syncfs     sync -f FILE   (syncfs(2): FUSE_SYNCFS)          host syncfs on the share's file system, or sync
#   fsyncdir   sync DIR       (fsync(2) of a directory: FUSE_FSYNCDIR) host fsync on DIR
# Each round: the guest writes and prints "DURABLE OP written", waits for the host's go-OP file,
# syncs and prints "DURABLE OP synced RC". Between the two lines the host marks the strace log.
# Env: FERRYFS_SHARE_ROOT=DIR puts the share in a fresh subdirectory of DIR (e.g. a GlusterFS mount);
#      FERRYFS_SHARE_VIEW=DIR2, DIR seen through the volume's other mount: the files are read there,
#      so "on the host" means on the volume, not in mount A's client (share_from_env,
#      tests/lib/guest.sh; tests/dfs/gluster-faults-test.sh).
# Exit: 0 pass, 1 fail, 77 no guest stack or no strace.
set -euo pipefail
# guest-lib.sh picks the stack (current, else stable) and makes $tmp, $share, $view and $sock.
name=fsync-durability
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/guest-lib.sh"
need_cmd strace

rounds=(fsync fdatasync syncfs fsyncdir)
# Several times the largest WRITE (max_write, 1 MiB), so several WRITEs come before each sync.
size=4194304
cat >"$share/durable.sh" <<EOF
#!/bin/sh
# Guest half of fsync-durability-test.sh: each round writes, waits for the host's go, syncs.
wait_go() { while [ ! -e /mnt/go-\$1 ]; do sleep 0.2; done; }
for op in ${rounds[*]}; do
    f=/mnt/durable-\$op
    case \$op in
        fsyncdir)
            mkdir \$f && echo "entry of \$op" >\$f/entry || { echo "DURABLE \$op write-failed"; exit 1; } ;;
        *)
            # The fd stays open: no close (FLUSH) sends the data; the sync does, unless the
            # guest's own writeback got there first (then the host saw the writes earlier).
            exec 3>\$f
            yes "durable \$op" | head -c $size >&3 || { echo "DURABLE \$op write-failed"; exit 1; } ;;
    esac
    echo "DURABLE \$op written"
    wait_go \$op
    case \$op in
        fsync|fsyncdir) sync \$f ;;
        fdatasync) sync -d \$f ;;
        syncfs) sync -f \$f ;;
    esac
    echo "DURABLE \$op synced \$?"
    exec 3>&-
done
echo "DURABLE done"
sleep 600
EOF
chmod 755 "$share/durable.sh"

start_daemon --log-level=info --writeback
# Every process of the daemon (the sandbox's relay and what it forked) with all their threads;
# -f follows the helper threads started later.
procs=() p="$daemon_pid"
while [[ -n "$p" ]]; do
    procs+=("$p")
    p=$(cat "/proc/$p/task/$p/children" 2>/dev/null | awk '{ print $1 }')
done
strace_args=()
for p in "${procs[@]}"; do strace_args+=(-p "$p"); done
strace -f -y -s 0 -e signal=none \
    -e trace=fsync,fdatasync,syncfs,sync,sync_file_range,pwrite64,pwritev,pwritev2 \
    -o "$tmp/strace.log" "${strace_args[@]}" 2>"$tmp/strace.err" &
strace_pid=$!
cleanup_pids+=("$strace_pid")
for p in "${procs[@]}"; do
    for ((i = 0; i < 100; i++)); do
        grep -q "Process $p attached" "$tmp/strace.err" 2>/dev/null && break
        kill -0 "$strace_pid" 2>/dev/null || die "strace did not attach: $(cat "$tmp/strace.err")"
        sleep 0.1
    done
    grep -q "Process $p attached" "$tmp/strace.err" || die "strace did not attach to $p: $(cat "$tmp/strace.err")"
done
say "strace attached to ferryfsd's processes ${procs[*]}"

# dev:ino of PATH as process TID sees it (its root, its mount namespace), or nothing.
ino_in() { stat -L -c %d:%i "/proc/$1/root$2" 2>/dev/null || true; }

# check_round OP FROM: the strace log from byte FROM (the guest's go) to now (its "synced" line)
# holds a finished sync of OP's kind on OP's file, and no write to that file entered after it.
check_round() {
    local op=$1 from=$2 want target share_id line tid call path id n=0 sync_at=-1 sync_tid="" done_at=-1
    case $op in
        fsync|fsyncdir) want='^fsync$' ;;
        fdatasync) want='^(fdatasync|fsync)$' ;;
        syncfs) want='^(syncfs|sync)$' ;;
    esac
    target=$(stat -c %d:%i "$share/durable-$op")
    share_id=$(stat -c %d "$share")
    tail -c "+$((from + 1))" "$tmp/strace.log" >"$tmp/strace-$op.log"
    # Lines "TID call(FD</path>, ...) = R", "TID call(FD</path>... <unfinished ...>" and
    # "TID <... call resumed>...) = R"; a line cut at FROM has no TID first and is skipped.
    local with_fd='^([0-9]+) +([a-z0-9_]+)[(][0-9]+[<]([^>]*)[>]' resumed='^([0-9]+) +[<][.][.][.] [a-z0-9_]+ resumed[>].*= 0$'
    while IFS= read -r line; do
        n=$((n + 1))
        if [[ $line =~ $resumed ]]; then
            # The sync's return, when it did not return on its own line.
            ((sync_at < 0 || done_at >= 0)) || [[ ${BASH_REMATCH[1]} != "$sync_tid" ]] || done_at=$n
            continue
        fi
        if [[ $op == syncfs && $line =~ ^([0-9]+)\ +sync[(][)] ]] && ((sync_at < 0)); then
            # sync() names no fd: it syncs every file system, the share's too.
            sync_at=$n sync_tid=${BASH_REMATCH[1]}
            [[ $line != *"= 0" ]] || done_at=$n
            continue
        fi
        [[ $line =~ $with_fd ]] || continue
        tid=${BASH_REMATCH[1]} call=${BASH_REMATCH[2]} path=${BASH_REMATCH[3]}
        id=$(ino_in "$tid" "$path")
        case $call in
            pwrite64|pwritev|pwritev2)
                if [[ $id == "$target" ]] && ((sync_at >= 0)); then
                    die "$op: a write to the file entered after its sync (line $n, sync at line $sync_at of $tmp/strace-$op.log): $line"
                fi ;;
            *)
                ((sync_at < 0)) && [[ $call =~ $want ]] || continue
                # syncfs of any fd on the share's file system syncs the guest's file.
                if [[ $id == "$target" ]] || [[ $call == syncfs && ${id%%:*} == "$share_id" ]]; then
                    sync_at=$n sync_tid=$tid
                    [[ $line != *"= 0" ]] || done_at=$n
                fi ;;
        esac
    done <"$tmp/strace-$op.log"
    if ((sync_at < 0)); then
        say "FAIL $op: ferryfsd made no ${want//[\^\$()]/} system call on the guest's file between the guest's write and its sync's return: it answered without syncing the host file (strace: $tmp/strace-$op.log)"
    elif ((done_at < 0)); then
        say "FAIL $op: ferryfsd's sync (line $sync_at of $tmp/strace-$op.log) had not returned 0 when the guest's sync returned"
    else
        say "  ok   $op: $(sed -n "${sync_at}p" "$tmp/strace-$op.log" | tr -s ' ')"
        return 0
    fi
    failed+=("$op")
}

# Every round is judged, then the test stops if one failed.
failed=()
start_guest w /mnt/durable.sh "" --timeout 900
for op in "${rounds[@]}"; do
    wait_console w "^DURABLE $op (written|write-failed)" 600
    ! tr -d '\r' <"$tmp/console-w.log" | grep -aq "^DURABLE $op write-failed" || die "$op: the guest's write failed"
    mark=$(stat -c %s "$tmp/strace.log")
    touch "$share/go-$op"
    wait_console w "^DURABLE $op synced" 600
    rc=$(tr -d '\r' <"$tmp/console-w.log" | sed -n "s/^DURABLE $op synced \([0-9]*\).*/\1/p" | head -1)
    [[ $rc == 0 ]] || die "$op: the guest's sync failed (exit $rc)"
    check_round "$op" "$mark"
done
wait_console w '^DURABLE done' 600
((${#failed[@]} == 0)) || die "no sync of the host file for: ${failed[*]}"

# Deliberately kill -9 (not stop_daemon): the point is what survives a daemon that gets no say.
# All of the daemon's processes at once: a relay killed alone would pass SIGTERM on to the rest.
kill -KILL "${procs[@]}" "$(cat "$tmp/qemu-w.pid")"
{ wait "$daemon_pid"; } 2>/dev/null || true
for op in "${rounds[@]}"; do
    if [[ $op == fsyncdir ]]; then
        [[ "$(cat "$view/durable-$op/entry" 2>/dev/null)" == "entry of $op" ]] ||
            die "$op: $view/durable-$op/entry missing or wrong after the kill"
        continue
    fi
    { yes "durable $op" || true; } | head -c "$size" >"$tmp/expect"
    cmp -s "$view/durable-$op" "$tmp/expect" ||
        die "$op: host file differs after the kill: $(stat -c %s "$view/durable-$op" 2>&1) bytes"
done
say "PASS: fsync, fdatasync, syncfs and directory fsync each reached the host file as ferryfsd's sync call before the guest's returned; the synced data is on the host after kill -9 of both"
