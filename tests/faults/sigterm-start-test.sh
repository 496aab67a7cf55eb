#!/usr/bin/env bash
# Fault test (make check): SIGTERM at any moment of ferryfsd's start (before, during and after the sandbox's fork, before and inside accept) makes it exit; it never keeps waiting for a frontend.
# A stop signal that came while the sandbox parent forked, or before the child reached accept(),
# used to be lost: the child, pid 1 of its pid namespace, ignores signals it has no handler for,
# and nothing looked at the flag the parent's handler had set. Each start gets SIGTERM after a
# different delay and must be gone within 10 s, with exit status 0 (stopped) or 143 (killed
# before it set up its handlers).
# Exit 0 pass, 1 fail, 77 skip. Usage: sigterm-start-test.sh [BUILD_DIR]   (default: build/ of this checkout)
set -uo pipefail
source "$(dirname "$0")/../lib/common.sh"

build=${1:-$build}
daemon=$build/ferryfsd
[[ -x $daemon ]] || skip "$daemon not built"
need_root "the namespace sandbox"

tmp=$(mktemp -d /tmp/ferryfs-sigterm-start.XXXXXX)
pids=()
# Only in this shell: a SIGTERM that reaches a background job before it has
# exec'd ferryfsd finds bash's copy of this trap still set, and the child ran
# it, removing $tmp under the remaining starts (see also the wait for exec).
cleanup() {
    [[ $BASHPID == "$$" ]] || return 0
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
    pkill -KILL -f "$tmp/" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$tmp/share"

fail=0 n=0 hung=0 bad=0
for round in 1 2 3; do
    for delay in 0 0.001 0.002 0.004 0.008 0.015 0.03 0.06 0.12 0.25; do
        n=$((n + 1))
        sock=$tmp/s$n.sock
        "$daemon" --socket-path="$sock" --shared-dir="$tmp/share" >"$tmp/d$n.log" 2>&1 &
        pid=$!
        pids+=("$pid")
        # The delay counts from the exec: before it the job is still bash,
        # whose handler (set because of the EXIT trap) only notes a SIGTERM,
        # which the exec then drops: a lost signal that is not ferryfsd's.
        # -ef is a stat in bash itself: no fork, so delay 0 still lands
        # in ferryfsd's first instructions.
        for ((i = 0; i < 100000; i++)); do
            [[ /proc/$pid/exe -ef $daemon ]] && break
        done
        [[ $delay == 0 ]] || sleep "$delay"
        kill -TERM "$pid" 2>/dev/null
        gone=0
        for _ in $(seq 200); do
            kill -0 "$pid" 2>/dev/null || { gone=1; break; }
            sleep 0.05
        done
        if ((gone == 0)); then
            echo "  FAIL start $n (SIGTERM after ${delay}s): still running 10 s later; its log:"
            sed 's/^/    /' "$tmp/d$n.log" | tail -5
            hung=$((hung + 1)) fail=1
            kill -KILL "$pid" 2>/dev/null
            pkill -KILL -f "$sock" 2>/dev/null
            wait "$pid" 2>/dev/null
            continue
        fi
        wait "$pid"
        rc=$?
        if ((rc != 0 && rc != 143)); then
            echo "  FAIL start $n (SIGTERM after ${delay}s): exit status $rc; its log:"
            sed 's/^/    /' "$tmp/d$n.log" | tail -5
            bad=$((bad + 1)) fail=1
        fi
    done
done
echo "$n starts, each stopped with SIGTERM after 0-250 ms: $hung kept running, $bad exited wrongly"
if ((fail)); then echo "FAIL"; exit 1; fi
echo "PASS"
exit 0
