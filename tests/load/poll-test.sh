#!/usr/bin/env bash
# make check: queue threads busy-poll only while the driver keeps them busy: an idle daemon sleeps, --poll-max-us=0 never spins.
# Exit 0 pass, 1 fail, 77 skip. Usage: poll-test.sh [BUILD_DIR]   (default: build/ of this checkout)
# Checks CPU use and counters, never speed: a queue thread that kept spinning after
# the load stopped would use a whole CPU while idle, which shows on any host. It waits for
# events, not for time: the stats are read once ferryfs-load says it idles; every ferryfsd
# must exit 0 once ferryfs-load has left.
set -uo pipefail
source "$(dirname "$0")/../lib/common.sh"
load_test_setup "$@"

jq_ok() { jq -e "$@" >/dev/null; }


# --idle keeps the rings set up with nothing in flight after the load, and
# the stats are read then, while the frontend is still connected.
run_load() { # run_load QUEUES
    : >"$tmp/load.err"  # emptied before the start: the last run's idle line must not count
    timeout 600 "$load" --socket "$sock" --workload getattr --ops 4096 --warmup 0 \
        --idle 2 --queue-depth 16 --queues "$1" --daemon-pid "$pid" --json \
        >"$tmp/load.out" 2>"$tmp/load.err" &
    local lp=$! rc
    while kill -0 "$lp" 2>/dev/null && ! grep -q '^ferryfs-load: idle' "$tmp/load.err"; do sleep 0.1; done
    "$ferryfsd" --stats="$stats" --json >"$tmp/stats.json" 2>"$tmp/stats.err"
    wait "$lp"; rc=$?
    check "ferryfs-load exit status 0 (got $rc)" test "$rc" -eq 0
    check "no wrong replies" test "$(tail -n 1 "$tmp/load.out" | jq -r .errors)" = 0
}

echo "default polling, 2 request queues: served, then the idle daemon sleeps"
start_stats_daemon default
run_load 2
check "stats report each request queue's waits" jq_ok \
    '[.queues[] | select(.index >= 1) | (.poll_hits | type) == "number" and .sleeps >= 1 and
      (.shared_cpu_waits | type) == "number"] |
     length == 2 and all' \
    "$tmp/stats.json"
# The daemon counts every signal of a call fd; the driver counts the wake-ups it
# saw in the measured interval (an eventfd folds signals it has not read yet).
dcalls=$(jq '[.queues[] | select(.index >= 1) | .calls] | add' "$tmp/stats.json")
lcalls=$(tail -n 1 "$tmp/load.out" | jq -r '.calls')
check "stats count calls: ${dcalls} on the request queues, at least the driver's ${lcalls}" \
    bash -c '[[ $1 =~ ^[0-9]+$ && $2 =~ ^[0-9]+$ ]] && (($1 >= 1 && $1 >= $2))' _ "$dcalls" "$lcalls"
idle=$(tail -n 1 "$tmp/load.out" | jq -r '.idle_daemon_cpu_pct | floor')
check "idle daemon uses < 10% of a CPU (got ${idle}%)" test "$idle" -ge 0 -a "$idle" -lt 10
expect_daemon_exit "$pid" "ferryfsd ($sock)" && echo "  ok   ferryfsd exited 0 after ferryfs-load left"
pid=

echo "--poll-max-us=0: queue threads never spin"
start_stats_daemon nopoll --poll-max-us=0
run_load 1
check "no wait ended by polling" jq_ok \
    '[.queues[] | select(.index >= 1) | .poll_hits == 0 and .sleeps >= 1] | length == 1 and all' \
    "$tmp/stats.json"
expect_daemon_exit "$pid" "ferryfsd ($sock)" && echo "  ok   ferryfsd exited 0 after ferryfs-load left"
pid=

echo "bad values are refused before anything starts"
for bad in -1 abc 1000001 ""; do
    out=$("$ferryfsd" --socket-path="$tmp/bad.sock" --shared-dir="$tmp" --poll-max-us="$bad" 2>&1)
    rc=$?
    check "--poll-max-us='$bad' exits 1 with a message (rc $rc)" \
        bash -c '[[ $1 -ne 0 && $2 == *poll-max-us* ]]' _ "$rc" "$out"
    check "--poll-max-us='$bad' created no socket" test ! -e "$tmp/bad.sock"
done

finish
