#!/usr/bin/env bash
# make check: a short ferryfs-load run of every workload against build/ferryfsd; checks counts, never timings.
# Each run is a fixed number of answered requests (ferryfs-load --ops), however long the machine
# takes for them, and every daemon must end with status 0 once its frontend leaves.
# Exit 0 pass, 1 fail, 77 skip. Usage: load-smoke-test.sh [BUILD_DIR]   (default: build/ of this checkout)
set -uo pipefail
source "$(dirname "$0")/../lib/common.sh"
load_test_setup "$@"
pid=
cleanup_cmds+=('[[ -z $pid ]] || kill "$pid" 2>/dev/null')
# Answers per request slot: enough that, by pigeonhole, some slot finishes a whole chain of the
# longest workload, a listing of the 1000-entry directory (OPENDIR, 41 READDIRPLUS of one page
# with 25 entries "fNNN" each, the empty last one, RELEASEDIR: 44 requests), so every workload
# counts at least one cycle.
per_slot=64 depth=8

# WORKLOAD[:QUEUES]: the multi-queue runs start several request queue threads
# in the daemon, sharing its inode and handle tables. randread-cold reads a file
# kept out of the host's page cache (ferryfs-load --cold), which sends READs
# to the daemon's offload threads, under its seccomp filter. A -packed run
# drives packed virtqueues (ferryfs-load --packed); randread-cold-packed
# takes the deferred path, whose replies re-walk a copy of the chain.
# read-1m reads 1 MiB blocks, which the queue thread shares with the read
# helper thread (src/backend/read_split.c), under the seccomp filter too.
# A -batch run makes requests available once per round (--publish-batch)
# instead of each as it is queued, as Linux's driver does (the default).
for run in read randread write randwrite getattr lookup create-unlink readdirplus mixed \
    write-fsync mixed:4 create-unlink:2 randread-cold mixed-packed:2 randread-cold-packed read-1m \
    write-batch mixed-packed-batch:2; do
    wl=${run%%:*} queues=1 extra=() dextra=() packed=false bs=4096 fsize=4m batch=false
    if [[ $wl == *-batch ]]; then
        wl=${wl%-batch} batch=true extra=(--publish-batch)
    fi
    [[ $wl == read-1m ]] && wl=read bs=1048576 fsize=16m
    [[ $run == *:* ]] && queues=${run#*:}
    if [[ $wl == *-packed ]]; then
        wl=${wl%-packed} packed=true extra+=(--packed)
    fi
    share=$tmp/share-$run sock=$tmp/$run.sock
    if [[ $wl == randread-cold ]]; then
        wl=randread extra+=(--cold "$share") dextra=(--log-level=debug)
    fi
    mkdir -p "$share"
    "$ferryfsd" --socket-path="$sock" --shared-dir="$share" --cache never -o readdirplus \
        "${dextra[@]}" >"$tmp/$run.daemon.log" 2>&1 &
    pid=$!
    wait_socket "$sock" "$pid"
    ops=$((per_slot * depth * queues))
    echo "$run: ferryfs-load --workload $wl --queues $queues --ops $ops against $ferryfsd (pid $pid)"
    # A small directory and file keep setup short; the checks are about counts. No warmup: every
    # answer of the run is counted, so entries and cycles relate exactly.
    timeout 600 "$load" --socket "$sock" --workload "$wl" --ops "$ops" --warmup 0 \
        --queue-depth "$depth" --queues "$queues" --block-size "$bs" --file-size "$fsize" --dir-entries 1000 \
        --daemon-pid "$pid" --json "${extra[@]}" >"$tmp/$run.out" 2>"$tmp/$run.err"
    rc=$?
    json=$(tail -n 1 "$tmp/$run.out")
    check "exit status 0 (got $rc)" test "$rc" -eq 0
    if jq -e . >/dev/null 2>&1 <<<"$json"; then
        errors=$(jq -r .errors <<<"$json") got=$(jq -r .ops <<<"$json")
        check "errors == 0 (got $errors)" test "$errors" = 0
        check "answers == $ops (got $got)" test "$got" = "$ops"
        quirk=$(jq -r .quirk_destroy_empty <<<"$json")
        check "DESTROY answered with a reply header (empty replies: $quirk)" test "$quirk" = 0
        nq=$(jq -r .queues <<<"$json")
        check "request queues used == $queues (got $nq)" test "$nq" = "$queues"
        pk=$(jq -r .packed <<<"$json")
        check "packed rings == $packed (got $pk)" test "$pk" = "$packed"
        pb=$(jq -r .publish_batch <<<"$json")
        check "publish_batch == $batch (got $pb)" test "$pb" = "$batch"
        # Latency runs from a request's publication to its reply: one answered
        # within the round that published it must not come out negative (an
        # unsigned wrap), which ferryfs-load counts, so no bound on time is needed.
        p50=$(jq -r .lat_p50_us <<<"$json") back=$(jq -r .lat_backwards <<<"$json")
        check "latency p50 > 0, no answer before its request (got $p50 us, $back)" \
            awk -v a="$p50" -v b="$back" 'BEGIN { exit !(a > 0 && b == 0) }'
        bytes=$(jq -r .bytes <<<"$json") cyc=$(jq -r .cycles <<<"$json") ent=$(jq -r .entries <<<"$json")
        case $wl in
        read|randread|write|randwrite)
            check "bytes == answers x $bs (got $bytes)" test "$bytes" -eq $((ops * bs)) ;;
        mixed)
            check "bytes > 0 (got $bytes)" test "$bytes" -gt 0 ;;
        create-unlink)
            check "create-release-unlink cycles > 0, 3 answers each (got $cyc)" \
                test "$cyc" -gt 0 -a $((3 * cyc)) -le "$ops" ;;
        write-fsync)
            check "write+fsync cycles > 0, 2 answers each (got $cyc)" test "$cyc" -gt 0 -a $((2 * cyc)) -le "$ops"
            check "a block written per cycle at least ($bytes bytes)" test "$bytes" -ge $((cyc * bs)) ;;
        readdirplus)
            # Each whole listing: the 1000 files, . and ..
            check "whole listings > 0, 1002 entries each at least ($cyc listings, $ent entries)" \
                test "$cyc" -gt 0 -a "$ent" -ge $((cyc * 1002)) ;;
        esac
    else
        check "last line is a JSON object" false
    fi
    if [[ $run == randread-cold* ]]; then
        fstype=$(stat -f -c %T "$share")
        case $fstype in
        ext2/ext3|ext4|xfs|btrfs)   # take RWF_NOWAIT: cached data can be told from data on disk
            check "READs of data not cached went to offload threads ($fstype)" \
                grep -q "reads that wait for it run on offload threads" "$tmp/$run.daemon.log" ;;
        *) echo "  note $share is on $fstype, which cannot tell cached data apart; no offload check" ;;
        esac
    fi
    if [[ $run == read-1m ]]; then
        check "the read helper thread ran and stopped" \
            grep -q "large reads split, the helper read" "$tmp/$run.daemon.log"
    fi
    left=$(find "$share" -mindepth 1 | wc -l)
    check "shared dir empty after the run (got $left entries)" test "$left" -eq 0
    # README.md: ferryfsd exits 0 once its frontend is gone.
    expect_daemon_exit "$pid" "$run: ferryfsd" && echo "  ok   ferryfsd exited 0 after ferryfs-load left"
    pid=
    if ((fails)); then
        sed 's/^/  stderr: /' "$tmp/$run.err" | head -20
        sed 's/^/  daemon: /' "$tmp/$run.daemon.log" | tail -20
    fi
done

# --host: every workload --help names as the host's own loop of system calls
# (the bound bench/compare's `host` column stands for), by one thread and at
# a depth of four (--host-threads). Counts that follow from the workload's
# definition, and a work directory left empty.
json_true() { jq -e "$1" >/dev/null <<<"$2"; } # json_true FILTER JSON
host_wls=$("$load" --help | sed -n '/^  --workload W/,/^  --block-size/p' | sed '$d' | sed 's/.*--workload W//')
check "--help names workloads for --host (got: $(echo $host_wls))" test -n "${host_wls// /}"
for threads in 1 4; do
for wl in $host_wls; do
    t=$threads
    share=$tmp/host-$wl-t$t
    mkdir -p "$share"
    # As many calls as a daemon run at depth $depth answers.
    ops=$((per_slot * depth))
    echo "host $wl: ferryfs-load --host $share --workload $wl --ops $ops --host-threads $t"
    timeout 600 "$load" --host "$share" --workload "$wl" --ops "$ops" --warmup 0 \
        --file-size 4m --dir-entries 1000 --host-threads "$t" --json >"$tmp/host-$wl.out" 2>"$tmp/host-$wl.err"
    rc=$?
    json=$(tail -n 1 "$tmp/host-$wl.out")
    check "host $wl t$t: exit status 0 (got $rc)" test "$rc" -eq 0
    read -r got bytes cyc ent errors < <(jq -r '"\(.ops) \(.bytes) \(.cycles) \(.entries) \(.errors)"' <<<"$json" 2>/dev/null)
    check "host $wl t$t: errors == 0 (got ${errors:-none})" test "${errors:-x}" = 0
    check "host $wl t$t: calls >= $ops (got ${got:-none}; a step of several calls is whole)" test "${got:-0}" -ge "$ops"
    case $wl in
    read|randread|write|randwrite)
        check "host $wl t$t: bytes == calls x 4096 ($bytes, $got)" test "$bytes" -eq $((got * 4096)) ;;
    create-unlink)
        check "host $wl t$t: calls == 3 x cycles ($got, $cyc)" test "$got" -eq $((cyc * 3)) ;;
    write-fsync)
        # Each thread's window may open on a cycle's fsync (its write uncounted)
        # and close after a write (its fsync not yet done): one op fewer or more.
        check "host $wl t$t: a cycle is a write and an fsync ($got calls, $cyc cycles)" \
            test $((got - 2 * cyc)) -ge $((-t)) -a $((got - 2 * cyc)) -le "$t" ;;
    readdirplus)
        # A full listing holds the 1000 files, . and ..; each thread's window
        # may cut its first and its last listing.
        check "host $wl t$t: whole listings ($ent entries, $cyc cycles)" \
            test "$cyc" -gt 0 -a "$ent" -ge $(((cyc - t) * 1002)) -a "$ent" -le $(((cyc + t) * 1002)) ;;
    esac
    # The fill of the blocks it writes, a driver's work in a daemon's run, is
    # reported apart (bench/targets.py takes it off the floor); none elsewhere.
    read -r fill self < <(jq -r '"\(.fill_us_per_op) \(.load_cpu_us_per_op)"' <<<"$json" 2>/dev/null)
    case $wl in
    write|randwrite|write-fsync|mixed)
        check "host $wl t$t: its fill is part of its CPU per op (fill ${fill:-none} of ${self:-none} us)" \
            json_true '.fill_us_per_op > 0 and .fill_us_per_op < .load_cpu_us_per_op' "$json" ;;
    *)
        check "host $wl t$t: no fill reported (got ${fill:-none})" json_true '.fill_us_per_op == -1' "$json" ;;
    esac
    left=$(find "$share" -mindepth 1 | wc -l)
    check "host $wl t$t: directory empty after the run (got $left entries)" test "$left" -eq 0
    [[ $t == 1 ]] || check "host $wl t$t: the run says its depth" json_true ".host_threads == $t" "$json"
    ((fails)) && sed 's/^/  stderr: /' "$tmp/host-$wl.err" | head -5
done
done

# The Rust virtiofsd (1.13) as a second backend: ferryfs-load must count its
# empty reply to DESTROY as a known quirk, not fail the run on it.
rs=$here/../e2e/virtiofsd-rs
if "$rs" --version >/dev/null 2>&1; then
    share=$tmp/share-rs sock=$tmp/rs.sock
    mkdir -p "$share"
    "$rs" --socket-path="$sock" --shared-dir="$share" --cache=never >"$tmp/rs.daemon.log" 2>&1 &
    pid=$!
    wait_socket "$sock" "$pid"
    echo "virtiofsd-rs: ferryfs-load --workload getattr against the Rust virtiofsd (pid $pid)"
    timeout 600 "$load" --socket "$sock" --workload getattr --ops $((per_slot * depth)) --warmup 0 \
        --queue-depth "$depth" --json >"$tmp/rs.out" 2>"$tmp/rs.err"
    rc=$?
    json=$(tail -n 1 "$tmp/rs.out")
    check "virtiofsd-rs: exit status 0 (got $rc)" test "$rc" -eq 0
    errors=$(jq -r .errors <<<"$json" 2>/dev/null) quirk=$(jq -r .quirk_destroy_empty <<<"$json" 2>/dev/null)
    check "virtiofsd-rs: errors == 0 (got $errors)" test "$errors" = 0
    check "virtiofsd-rs: its empty DESTROY reply counted as a quirk (got $quirk)" test "$quirk" = 1
    check "virtiofsd-rs: the quirk is reported" grep -q "DESTROY answered with an empty reply" "$tmp/rs.out"
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=
else
    echo "  note the Rust virtiofsd is not cached (scripts/stack.sh fetch): no virtiofsd-rs run"
fi

finish
