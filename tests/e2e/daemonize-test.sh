#!/usr/bin/env bash
# make check: ferryfsd --daemonize returns only once it listens, and its locked pid file stops a second daemon on the same socket.
#
# Checks: the parent exits 0 with the socket listening and <socket>.pid naming
# the daemonized child; the daemon's stdio is detached (capturing its output
# does not hang); a second ferryfsd on the same socket fails with a message
# naming the first and leaves the first's socket alone; the guest, booted at
# once, runs the demo; a daemon's leftovers do not stop the next start, and
# with --sandbox=none it removes them at exit.
# Exit: 0 pass, 1 fail, 77 skipped (no QEMU or guest image).
set -euo pipefail
# It tests ferryfsd, not the guest's kernel: it runs on the current stack (QEMU 10, Linux 6.12),
# or on stable where that stack cannot be had or FERRYFS_STACK says so (tests/e2e/stack-lib.sh).
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/stack-lib.sh" && stack_default_current "$0" "$@"
name=daemonize
source "$(dirname "${BASH_SOURCE[0]}")/start-lib.sh"
start_prepare

sock="$tmp/vhost.sock" pidfile="$tmp/vhost.sock.pid"
rc=0
# A daemon that kept our stdout would make this substitution wait forever.
out="$(timeout 30 bash -c 'echo "parent $$"; exec "$@" 2>&1' _ \
    "$ferryfsd" --socket-path="$sock" --shared-dir="$share" --daemonize --syslog)" || rc=$?
parent="$(sed -n 's/^parent //p' <<<"$out")"
pid="$(cat "$pidfile" 2>/dev/null || true)"
if ((rc == 0)) && [[ -S "$sock" && -n "$pid" && "$pid" != "$parent" ]] &&
    kill -0 "$pid" 2>/dev/null; then
    cleanup_pids+=("$pid")
    pass "--daemonize returned 0 with the socket listening and the child's pid $pid in $pidfile"
else
    fail "--daemonize: exit $rc, socket $([[ -S "$sock" ]] && echo present || echo missing), pid file '$pid' (parent $parent); output: $out"
    finish
fi

# Up to 10 s for PID to write the pid file (while it lives).
wait_pidfile() { # PID
    local i
    for ((i = 0; i < 100; i++)); do
        [[ "$(cat "$pidfile" 2>/dev/null)" == "$1" ]] && return 0
        kill -0 "$1" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

inode="$(stat -c %i "$sock")"
rc=0
out="$("$ferryfsd" --socket-path="$sock" --shared-dir="$share" 2>&1)" || rc=$?
if ((rc == 1)) && grep -q "another ferryfsd (pid $pid) is serving $sock" <<<"$out"; then
    pass "second daemon refused: $(sed 's/^\[[^]]*\] //' <<<"$out")"
else
    fail "second daemon on the same socket: exit $rc, '$out'"
fi
if [[ -S "$sock" && "$(stat -c %i "$sock")" == "$inode" && "$(cat "$pidfile")" == "$pid" ]] &&
    kill -0 "$pid" 2>/dev/null; then
    pass "the first daemon's socket, pid file and process are untouched"
else
    fail "the second daemon disturbed the first (socket, pid file or process)"
fi

boot_demo_and_check "$sock" "$pid" daemonize
# With --sandbox=none the daemon still sees the socket's path and removes
# both files; a sandboxed one (the default) leaves them to the next start,
# which the restarts below go through.
"$ferryfsd" --socket-path="$sock" --shared-dir="$share" --sandbox=none >"$tmp/nosandbox.out" 2>&1 &
npid=$!
cleanup_pids+=("$npid")
# The sandboxed daemon's socket file is still there: wait for the pid.
if wait_pidfile "$npid"; then
    # SIGTERM is handled from the "waiting" line on.
    for ((i = 0; i < 100; i++)); do
        grep -q 'waiting for a vhost-user frontend' "$tmp/nosandbox.out" && break
        sleep 0.1
    done
    stop_daemon "$npid" "--sandbox=none daemon" && pass "--sandbox=none: exit status 0 on SIGTERM"
    if [[ ! -e "$sock" && ! -e "$pidfile" ]]; then
        pass "--sandbox=none: socket and pid file removed at exit"
    else
        fail "--sandbox=none: left behind at exit: $(ls "$tmp" | grep vhost | tr '\n' ' ')"
    fi
else
    fail "--sandbox=none daemon did not start over the previous one's files: $(cat "$tmp/nosandbox.out")"
fi

# A SIGKILLed daemon leaves both files; the unlocked pid file and the dead
# socket must not stop the next start.
"$ferryfsd" --socket-path="$sock" --shared-dir="$share" >"$tmp/killed.out" 2>&1 &
kpid=$!
cleanup_pids+=("$kpid")
wait_socket "$sock" "$kpid" || true
# Deliberately SIGKILL, not stop_daemon: what a killed daemon leaves behind is the point.
kill -KILL "$kpid"
wait "$kpid" 2>/dev/null || true
# Under the namespace sandbox the serving child outlives the killed parent
# until its PR_SET_PDEATHSIG SIGTERM has run its exit path, and it holds the
# pid file's lock until then: wait for that, as a service manager that
# kills only the main pid would have to.
for _ in $(seq 100); do
    flock -n "$sock.pid" true 2>/dev/null && break
    sleep 0.1
done
"$ferryfsd" --socket-path="$sock" --shared-dir="$share" >"$tmp/restart.out" 2>&1 &
rpid=$!
cleanup_pids+=("$rpid")
if wait_pidfile "$rpid" && [[ -S "$sock" ]]; then
    pass "started over a SIGKILLed daemon's socket and pid file"
else
    fail "could not start over a SIGKILLed daemon's leftovers: $(cat "$tmp/restart.out")"
fi
stop_daemon "$rpid" "restarted daemon" && pass "the restarted daemon exits 0 on SIGTERM"
finish
