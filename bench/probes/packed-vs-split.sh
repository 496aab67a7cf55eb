#!/usr/bin/env bash
# Probe: does ferryfsd serve packed virtqueues faster or slower than split ones? ferryfs-load against it on each, alternating rounds, medians and ratios.
# Usage: bench/probes/packed-vs-split.sh [ROUNDS] [WORKLOAD...]   (default 5 rounds; getattr randread)
# Env:   BUILD=build  SECONDS_PER_RUN=3  QD=16  BS=4096
# Each round runs every workload once on split rings, then once on packed rings, each against a
# fresh daemon, so the two see the same machine; the ratio packed/split is of the medians.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-5}
shift || true
workloads=("$@")
((${#workloads[@]})) || workloads=(getattr randread)
build=${BUILD:-build} secs=${SECONDS_PER_RUN:-3} qd=${QD:-16} bs=${BS:-4096}
tmp=$(mktemp -d /tmp/ferryfs-packed-bench.XXXXXX)
pid=
trap '[[ -z $pid ]] || kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT

run() { # WORKLOAD KIND: one JSON line on stdout
    local wl=$1 kind=$2 extra=()
    [[ $kind == packed ]] && extra=(--packed)
    rm -rf "$tmp/share" "$tmp/sock"
    mkdir -p "$tmp/share"
    "$build/ferryfsd" --socket-path="$tmp/sock" --shared-dir="$tmp/share" --cache never \
        >"$tmp/daemon.log" 2>&1 &
    pid=$!
    # A loaded machine can take seconds to start it.
    for _ in $(seq 300); do [[ -S $tmp/sock ]] && break; sleep 0.1; done
    timeout 120 "$build/ferryfs-load" --socket "$tmp/sock" --workload "$wl" --seconds "$secs" \
        --warmup 1 --queue-depth "$qd" --block-size "$bs" --file-size 64m --daemon-pid "$pid" \
        --json "${extra[@]}" | tail -n 1 || true
    # It exits when the frontend leaves; one that never connected waits on.
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    pid=
}

for ((r = 1; r <= rounds; r++)); do
    for wl in "${workloads[@]}"; do
        for kind in split packed; do
            echo "$wl $kind $(run "$wl" "$kind")" >>"$tmp/results"
        done
    done
    echo "round $r of $rounds done" >&2
done
python3 - "$tmp/results" <<'PY'
import json, statistics, sys
rows = {}
failed = 0
for line in open(sys.argv[1]):
    wl, kind, js = (line.rstrip("\n").split(" ", 2) + [""])[:3]
    if not js.strip():
        failed += 1     # the run did not produce its JSON line (see its exit above)
        continue
    d = json.loads(js)
    if d["errors"] or d["aborted"]:
        sys.exit(f"{wl} {kind}: errors in a run: {js}")
    for m in ("ops_per_sec", "lat_p50_us", "lat_p99_us", "daemon_cpu_us_per_op"):
        rows.setdefault((wl, m), {}).setdefault(kind, []).append(d[m])
if failed:
    print(f"{failed} run(s) gave no result and are left out")
print(f"{'workload':10} {'metric':22} {'split':>10} {'packed':>10} {'packed/split':>12}")
for (wl, m), k in rows.items():
    s, p = statistics.median(k["split"]), statistics.median(k["packed"])
    print(f"{wl:10} {m:22} {s:10.2f} {p:10.2f} {p / s if s else 0:12.3f}")
PY
