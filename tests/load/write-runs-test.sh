#!/usr/bin/env bash
# make check: adjacent WRITEs waiting on a split ring reach the file in runs (one system call each), and read back whole; a packed ring or a depth of 1 writes them one at a time.
# Exit 0 pass, 1 fail, 77 skip. Usage: write-runs-test.sh [BUILD_DIR]   (default: build/ of this checkout)
# Checks counters and data, never speed, and waits for events, not for time: each run is a
# number of answers (--ops) and the stats are read once ferryfs-load says it idles; every
# ferryfsd must exit 0 once ferryfs-load has left. ferryfs-load fills its data file with
# sequential WRITEs 16 deep before every I/O workload, and its READs check each
# block's pattern, which names the block's offset: a run that put bytes in the
# wrong place or lost some fails the randread below.
set -uo pipefail
source "$(dirname "$0")/../lib/common.sh"
load_test_setup "$@"

# daemon_done: the run's frontend has left; its ferryfsd must exit 0 (README.md).
daemon_done() {
    expect_daemon_exit "$pid" "ferryfsd ($sock)" && echo "  ok   ferryfsd exited 0 after ferryfs-load left"
    pid=
}

# run_load WHAT LOAD_ARGS...: one ferryfs-load run of a fixed number of answers; the daemon's
# stats are read once the load says it idles with its rings still set up (--idle).
run_load() {
    local what=$1 lp rc; shift
    : >"$tmp/load.err"  # emptied before the start: the last run's idle line must not count
    timeout 600 "$load" --socket "$sock" --ops 4096 --warmup 0 --idle 2 --queues 1 \
        --daemon-pid "$pid" --json "$@" >"$tmp/load.out" 2>"$tmp/load.err" &
    lp=$!
    while kill -0 "$lp" 2>/dev/null && ! grep -q '^ferryfs-load: idle' "$tmp/load.err"; do sleep 0.1; done
    "$ferryfsd" --stats="$stats" --json >"$tmp/stats.json" 2>"$tmp/stats.err"
    wait "$lp"; rc=$?
    check "$what: ferryfs-load exit status 0 (got $rc)" test "$rc" -eq 0
    check "$what: no wrong replies or data" \
        test "$(tail -n 1 "$tmp/load.out" | jq -r .errors)" = 0
    [[ $rc == 0 ]] || tail -3 "$tmp/load.err"
}

stat_of() { jq -r "$1" "$tmp/stats.json"; }
writes() { stat_of '[.ops[] | select(.op == "WRITE") | .count] | add // 0'; }

echo "split ring, 16 deep: sequential WRITEs go in runs"
start_stats_daemon split
run_load "write" --workload write --queue-depth 16
runs=$(stat_of .write_runs) members=$(stat_of .run_writes) total=$(writes)
echo "  $runs runs wrote $members of $total WRITEs"
check "some runs (got $runs)" test "$runs" -gt 0
check "each run at least 2 WRITEs, at most 16 ($members in $runs)" \
    test "$members" -ge $((2 * runs)) -a "$members" -le $((16 * runs))
check "no more WRITEs in runs than WRITEs ($members of $total)" test "$members" -le "$total"
daemon_done

echo "split ring: the fill's runs read back block by block"
start_stats_daemon readback
run_load "randread after the fill" --workload randread --queue-depth 16 --file-size 8m
check "the fill went in runs (got $(stat_of .write_runs))" test "$(stat_of .write_runs)" -gt 0
daemon_done

echo "packed ring: one request at a time"
start_stats_daemon packed
run_load "packed write" --workload write --queue-depth 16 --packed
check "no runs on a packed ring (got $(stat_of .write_runs))" test "$(stat_of .write_runs)" -eq 0
check "its WRITEs served (got $(writes))" test "$(writes)" -gt 0
daemon_done

echo "depth 1: nothing waits behind a WRITE"
start_stats_daemon depth1
run_load "write at depth 1" --workload write --queue-depth 1
check "no runs at depth 1 (got $(stat_of .write_runs))" test "$(stat_of .write_runs)" -eq 0
check "its WRITEs served (got $(writes))" test "$(writes)" -gt 0
daemon_done

finish
