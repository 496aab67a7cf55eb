#!/usr/bin/env bash
# make check test: ferryfsd --stats-socket (in its default sandbox and seccomp filter) while a QEMU guest writes and reads; --stats table and JSON mid-run, the table logged at exit.
#
# Usage: stats-test.sh [PATH_TO_FERRYFSD]     (or env FERRYFSD; default build/ferryfsd)
# Env:   FERRYFS_E2E_TIMEOUT=300 guest timeout (s); FERRYFS_E2E_KEEP=1 keep the tmp dir;
#        FERRYFS_STACK=stable|current (stack-lib.sh); FERRYFS_GUEST_DIR guest images (default
#        stack_guest_dir: ${FERRYFS_CACHE:-/var/cache/ferryfs}/guest for stable);
#        FERRYFS_DAEMON_USER=auto: ferryfsd as a user the test makes (tests/lib/unpriv.sh)
# Exit:  0 all checks pass; 1 a check failed; 77 skipped (no QEMU or guest image).
set -euo pipefail
# It tests ferryfsd, not the guest's kernel: it runs on the current stack (QEMU 10, Linux 6.12),
# or on stable where that stack cannot be had or FERRYFS_STACK says so (tests/e2e/stack-lib.sh).
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/stack-lib.sh" && stack_default_current "$0" "$@"

source "$(dirname "$0")/../lib/guest.sh"
ferryfsd="${1:-$ferryfsd}"
guest_timeout="${FERRYFS_E2E_TIMEOUT:-300}"
stack="$(stack_name)"
guest_dir="$(stack_guest_dir)"
# The guest writes this many 64 KiB blocks; with cache=never each write(2) is one FUSE WRITE.
blocks=32

stack_prepare || skip "the $stack stack (FERRYFS_STACK) is not available here (see above)"
need_cmd jq
need_built "$ferryfsd"
"$here/build-guest.sh" "$guest_dir" || skip "could not build the guest image"

make_tmp
share="$tmp/share" sock="$tmp/vhost.sock" stats="$tmp/vhost.stats"
daemon_pid="" guest_pid=""
cleanup_cmds+=('[[ -z "$guest_pid" ]] || kill -TERM "$guest_pid" 2>/dev/null'
               '[[ -z "$daemon_pid" ]] || kill -KILL "$daemon_pid" 2>/dev/null')
# pass NAME and fail NAME REASON are rows of a table, printed at the end.
results_table
mkdir -p "$share"

# The guest runs this from the share: known I/O, then it waits until the host has looked.
cat >"$share/stats-io.sh" <<EOF
dd if=/dev/zero of=/mnt/blocks bs=65536 count=$blocks 2>/dev/null
cat /mnt/blocks >/dev/null
echo FERRYFS-STATS-READY
while [ ! -e /mnt/stats-done ]; do sleep 0.2; done
EOF
# Under FERRYFS_DAEMON_USER, start_daemon makes the user, who owns the share and the dir of both
# sockets; it ends the test if ferryfsd does not listen or does not run as that user.
start_daemon --cache=never --stats-socket="$stats" --log-level=info
! unpriv_active || pass daemon_as_user
wait_socket "$stats" "$daemon_pid" && pass stats_socket_created || fail stats_socket_created "no $stats after 10 s"

# Before any frontend: the report is there and empty.
if out="$("$ferryfsd" --stats="$stats" --json 2>&1)" && jq -e '.requests == 0' <<<"$out" >/dev/null; then
    pass stats_before_guest
else
    fail stats_before_guest "$(head -c 100 <<<"$out")"
fi

"$here/run-guest.sh" --guest "$guest_dir" --sock "$sock" --cmd /mnt/stats-io.sh \
    --log "$tmp/console.log" --quiet --timeout "$guest_timeout" --watch-pid "$daemon_pid" &
guest_pid=$!
ready=0
for ((i = 0; i < guest_timeout * 5; i++)); do
    [[ -f "$tmp/console.log" ]] && tr -d '\r' <"$tmp/console.log" | grep -q '^FERRYFS-STATS-READY' &&
        { ready=1; break; }
    kill -0 "$guest_pid" 2>/dev/null || break
    sleep 0.2
done

if ((ready)); then
    pass guest_io_done
    # Mid-run: the daemon is serving the guest while we ask.
    "$ferryfsd" --stats="$stats" >"$tmp/table.txt" 2>&1 && trc=0 || trc=$?
    "$ferryfsd" --stats="$stats" --json >"$tmp/stats.json" 2>&1 && jrc=0 || jrc=$?
    if ((trc == 0)) && grep -q '^op  *count  *errors' "$tmp/table.txt" &&
        grep -q '^WRITE ' "$tmp/table.txt" && grep -q '^queue 1:' "$tmp/table.txt"; then
        pass table_mid_run
    else
        fail table_mid_run "exit $trc: $(head -1 "$tmp/table.txt")"
    fi
    if ((jrc == 0)) && jq -e . "$tmp/stats.json" >/dev/null 2>&1; then
        pass json_parses
    else
        fail json_parses "exit $jrc: $(head -c 100 "$tmp/stats.json")"
    fi
    count() { jq -r --arg op "$1" '[.ops[] | select(.op == $op) | .count] | add // 0' "$tmp/stats.json"; }
    lookups="$(count LOOKUP)" reads="$(count READ)" writes="$(count WRITE)"
    ((lookups > 0)) && pass lookup_counted || fail lookup_counted "LOOKUP $lookups"
    ((reads > 0)) && pass read_counted || fail read_counted "READ $reads"
    # dd wrote $blocks blocks with cache=never: at least one WRITE per block.
    ((writes >= blocks)) && pass writes_match_blocks || fail writes_match_blocks "WRITE $writes < $blocks"
    # Every WRITE has a latency; the histogram holds them all.
    if jq -e '.ops[] | select(.op == "WRITE") | ([.latency_us.buckets[][1]] | add) == .count' \
        "$tmp/stats.json" >/dev/null; then
        pass latency_histogram_complete
    else
        fail latency_histogram_complete "WRITE bucket counts do not add up to its count"
    fi
    # The guest's one request queue (index 1) served; every pass is in the batch histogram.
    if jq -e '.transport == "vhost-user" and .queue_count >= 2 and
        ([.queues[] | select(.index == 1)] | length) == 1 and
        (.queues[] | select(.index == 1) | .requests > 0 and .batches > 0 and
         .batches <= .requests and ([.batch_size[][1]] | add) == .batches and
         ([.depth[][1]] | add) == .batches)' "$tmp/stats.json" >/dev/null; then
        pass queue_depths
    else
        fail queue_depths "$(jq -c .queues "$tmp/stats.json" 2>&1 | head -c 120)"
    fi
else
    fail guest_io_done "no FERRYFS-STATS-READY on the console (see $tmp/console.log)"
fi

touch "$share/stats-done"
grc=0
wait "$guest_pid" || grc=$?
guest_pid=""
((grc == 0)) && pass guest_finished || fail guest_finished "run-guest exit $grc"

# The frontend went away: the daemon exits with status 0 (README.md), logging the table.
expect_daemon_exit "$daemon_pid" daemon_exit && pass daemon_exit
daemon_pid=""
exit_writes="$(awk 'NF >= 6 && $(NF-5) == "WRITE" { print $(NF-4) }' "$tmp/daemon.log" | tail -1)"
if grep -q 'statistics:' "$tmp/daemon.log" && [[ -n "$exit_writes" ]] && ((exit_writes >= blocks)); then
    pass exit_table_logged
else
    fail exit_table_logged "no table with WRITE >= $blocks in daemon.log"
fi
# The daemon ran in its default sandbox and seccomp filter: its own view of
# the stats path is inside the share, so, like the vhost-user socket, the
# socket stays behind, dead, and the next start replaces it.
if [[ -e "$stats" ]] && "$ferryfsd" --stats="$stats" >/dev/null 2>&1; then
    fail stats_socket_dead "$stats still answers after the daemon exited"
else
    pass stats_socket_dead
fi
"${unpriv_prefix[@]}" "$ferryfsd" --socket-path="$tmp/again.sock" --shared-dir="$share" --stats-socket="$stats" \
    >"$tmp/again.log" 2>&1 &
again=$!
for _ in $(seq 100); do
    "$ferryfsd" --stats="$stats" >/dev/null 2>&1 && break
    sleep 0.1
done
if "$ferryfsd" --stats="$stats" >/dev/null 2>&1; then
    pass stats_socket_replaced_at_next_start
else
    fail stats_socket_replaced_at_next_start "a second daemon does not answer on $stats: $(tail -2 "$tmp/again.log")"
fi
stop_daemon "$again" daemon_again_sigterm && pass daemon_again_sigterm

results_report 30
