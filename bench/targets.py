# bench/targets.py: judges a bench/compare run's medians against a targets file; one markdown row per target.
"""Usage: python3 bench/targets.py OUT TARGETS [BASE] [--profile DIR]   (OUT: a bench/compare --out directory)
       python3 bench/targets.py --workloads TARGETS   (the workload specs TARGETS names, in order)
       python3 bench/targets.py --matrix OUT BASE [MULTI_RATIO MULTI_AGAINST]
                                (OUT: a bench/guest-matrix --out directory)

A targets file has one target per line, blank lines and # comments aside:
    WORKLOAD  METRIC  TEST  AGAINST
WORKLOAD is a bench/compare workload spec (read:bs=1M), METRIC one of ops/s, MiB/s, p50, p99, cpu
(daemon CPU per op), cpu+load (daemon and load generator CPU per op), TEST >=X or <=X on the ratio
BASE / AGAINST, and AGAINST either "anchor" (the better by ops/s of the virtiofsd-* daemons that
ran that workload: what a user could pick instead) or "host" (bench/compare's host column: the
host's own calls, the bound). The table shows every daemon's median beside the ratio, so a
target's verdict can be checked by hand; a target whose figures are missing (a daemon left out,
every round failed) is "not run", never "met"; beside it, the ratio paired within each round and
the load generator's busy share.

--profile DIR (a bench/daemon-profile --out directory): a throughput target that is not met is
"bounded" when no daemon doing BASE's work could meet it on one thread: the budget per request
(1 / (X x AGAINST's ops/s)) is at most the floor, the host's own loop of the same system calls (the
run's host column, else the profile's) plus BASE's calls per request in the run (its .out files) x
the profile's CPU per call, plus what the ring costs any backend per request (the profile's
bench/ring-cost run: for a 4 KiB READ what its ring adds to a pread, else the ring alone); or when the budget is at most the driver's own CPU per request in BASE's
rounds (ferryfs-load is one thread: no daemon answers faster than it asks). The host loops of write,
randwrite, write-fsync and mixed fill each block they write, the driver's work in a daemon's run:
their floor takes off the fill ferryfs-load reports (fill_us_per_op in the host column's .out
files), and they have none where it was not reported. A p50 or cpu target (<= X the anchor's) that
is not met is "bounded" when X x the anchor's figure is at most what any daemon pays to answer a
driver that sleeps for its replies: for cpu the host column's CPU per op plus BASE's calls per
request x what a call costs its writer (the profile's per call for that workload, else
build/wake-cost's), for p50 the host column's p50 plus, where half the requests or more were
answered with a call, the driver's wake-up after it (build/wake-cost's p50, which
bench/daemon-profile appends); both plus the ring. The figures stand beside the verdict, so it
can be checked by hand.

--matrix: the guest matrix's target, per cache mode and cell: BASE's median IOPS is not below any
other daemon's of the same cache mode (9p's "auto" is whatever --9p-auto ran; other ferryfsd
configs, e.g. ferryfsd beside ferryfsd+q2, are shown but are not rivals), and in the two-job
cells (-multi, 4 jobs) at least MULTI_RATIO times MULTI_AGAINST's (e.g. 1.3 virtiofsd-rs); written to
matrix-targets.md. If the run had the "host" daemon (fio on the host's share), its figure and BASE's
fraction of it stand beside each cache mode's rows as the bound; it is never a rival."""
import csv
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from medians import Medians  # noqa: E402
from runs import HOST_COLUMNS, row_figures  # noqa: E402

METRICS = {"ops/s": "ops_per_sec", "MiB/s": "mib_per_sec", "p50": "lat_p50_us",
           "p99": "lat_p99_us", "cpu": "daemon_cpu_us_per_op", "cpu+load": "both_cpu_us_per_op"}


def read_targets(path):
    targets = []
    for n, line in enumerate(open(path), 1):
        line = line.split("#", 1)[0].split()
        if not line:
            continue
        if len(line) != 4 or line[1] not in METRICS or line[2][:2] not in (">=", "<=") \
                or line[3] not in ("anchor", "host"):
            sys.exit(f"bench/targets.py: {path}:{n}: want WORKLOAD METRIC >=X|<=X anchor|host")
        try:
            limit = float(line[2][2:])
        except ValueError:
            sys.exit(f"bench/targets.py: {path}:{n}: {line[2]} is not >= or <= a number")
        targets.append((line[0], line[1], line[2][:2], limit, line[3]))
    if not targets:
        sys.exit(f"bench/targets.py: {path} names no target")
    return targets


def fmt(x, metric):
    if x is None:
        return "-"
    if metric in ("ops/s", "MiB/s"):
        return f"{x / 1000:.1f}k" if x >= 10000 else f"{x:.0f}"
    return f"{x:.1f} us" if metric in ("p50", "p99") else f"{x:.2f} us"


RING = "(ring-cost)"  # read_profile's key for bench/ring-cost's figures, never a workload name
WAKE = "(wake-cost)"  # and for build/wake-cost's figures on a call that wakes a sleeping reader

# The probes' lines bench/daemon-profile appends to summary.txt: (key, figure, pattern).
PROBE_LINES = (
    # bench/ring-cost: what a backend pays per request for the ring alone, and per 4 KiB READ over
    # the host's pread loop (its pread into the slots' buffers included).
    (RING, "read", r"the ring with the pread: +([\d.]+) us per READ over the host loop"),
    (RING, "alone", r"the ring alone: +([\d.]+) us per request"),
    # build/wake-cost: what a call that wakes a reader asleep on the other CPU costs its writer, and
    # how long after the write that reader runs (p50).
    (WAKE, "writer", r"one call, its writer's time: waking a reader asleep on the other CPU +([\d.]+) us"),
    (WAKE, "latency", r"one call, its wake-up: .* runs +([\d.]+) us \(p50\)"),
)


def probe_figure(line):
    """(key, figure, value) when line is one of PROBE_LINES, else None."""
    for key, figure, pattern in PROBE_LINES:
        m = re.match(pattern, line)
        if m:
            return key, figure, float(m.group(1))
    return None


def read_profile(path):
    """{workload: {"host": us/op, "per_call": us}} from a bench/daemon-profile summary.txt."""
    prof, cur = {}, None
    try:
        lines = open(os.path.join(path, "summary.txt")).readlines()
    except OSError as e:
        sys.exit(f"bench/targets.py: --profile {path}: {e.strerror}: summary.txt (a bench/daemon-profile --out directory)")
    for line in lines:
        probe = probe_figure(line)
        if probe:
            key, figure, value = probe
            prof.setdefault(key, {})[figure] = value
            continue
        m = re.match(r"== (\S+): .*daemon CPU [\d.]+ us/op, .*the host's own loop: ([\d.]+) us/op", line)
        if m:
            cur = prof[m.group(1)] = {"host": float(m.group(2)), "per_call": None}
            continue
        m = re.search(r"the call: .*\(([\d.]+) us per call\)", line)
        if m and cur is not None:
            cur["per_call"] = float(m.group(1))
    if not set(prof) - {RING, WAKE}:
        sys.exit(f"bench/targets.py: {path}/summary.txt has no bench/daemon-profile workload")
    return prof


def ring_term(prof, workload):
    """(us, label): the ring's share of a floor per request, from the profile's bench/ring-cost run:
    for a 4 KiB READ what the ring adds to a pread (the probe's own request), else the ring alone
    (no system call, no data: the least any request pays); (0, None) without a ring-cost run."""
    ring = prof.get(RING, {})
    name, _, opts = workload.partition(":")
    bs = dict(o.split("=", 1) for o in opts.split(",") if "=" in o).get("bs", "4K")
    if name in ("read", "randread") and bs in ("4K", "4k", "4096") and "read" in ring:
        return ring["read"], "ring+pread"
    if "alone" in ring:
        return ring["alone"], "ring"
    return 0.0, None


def out_median(out, workload, daemon, figure):
    """The median over the run's rounds of figure(JSON) from daemon's ferryfs-load JSON lines
    (r<round>-<tag>-<daemon>.out), or None when no round has it."""
    tag = re.sub(r"[:=,]", "_", workload)
    per = Medians()
    for path in glob.glob(os.path.join(out, f"r*-{tag}-{daemon}.out")):
        try:
            x = figure(json.loads(open(path).read().strip().splitlines()[-1]))
        except (OSError, IndexError, ValueError, KeyError, ZeroDivisionError):
            continue
        if x is not None:
            per.add("x", x)
    return per.median("x")


def calls_per_request(out, workload, daemon):
    """The median over the run's rounds of daemon's calls per request."""
    return out_median(out, workload, daemon, lambda j: j["calls"] / j["ops"])


def host_fill(out, workload, host):
    """The host loop's CPU per op spent filling blocks (ferryfs-load's fill_us_per_op), or None
    where the run's ferryfs-load did not report it."""
    return out_median(out, workload, host,
                      lambda j: j["fill_us_per_op"] if j.get("fill_us_per_op", -1) >= 0 else None)


def host_fills(workload):
    """Whether ferryfs-load's host loop for workload fills the blocks it writes (load/host_steps.c):
    its CPU per op then holds work that in a daemon's run is the driver's, and is no floor."""
    name = workload.split(":", 1)[0]
    return name in ("write", "randwrite", "write-fsync", "mixed")


def floor_note(prof, out, wl, base, host, host_cpu, driver_cpu, limit, theirs_ops):
    """(bounded, text): whether the target's budget per request is below BASE's floor (the host's
    loop plus BASE's calls) or below the driver's own CPU per request (ferryfs-load, one thread)."""
    if not theirs_ops:
        return False, "-"
    budget = 1e6 / (limit * theirs_ops)
    parts, worst = [], 0.0
    p = prof.get(wl)
    calls = calls_per_request(out, wl, base) if p else None
    fill = host_fill(out, wl, host) if p and host and host_cpu is not None and host_fills(wl) else None
    if p and host_fills(wl) and fill is None:
        parts.append("no floor: the host loop fills each block it writes, the driver's work in a daemon's run")
    elif p and calls is not None and p["per_call"] is not None:
        loop = host_cpu if host_cpu is not None else p["host"]
        ring, ring_label = ring_term(prof, wl)
        floor = loop - (fill or 0) + calls * p["per_call"] + ring
        worst = max(worst, floor / budget)
        minus = f" - {fill:.2f} fill" if fill is not None else ""
        plus = f" + {ring:.2f} {ring_label}" if ring_label else ""
        parts.append(f"{loop:.2f}{minus} + {calls:.3f} x {p['per_call']:.1f}{plus} = {floor:.2f} us"
                     f" / {budget:.2f} us = {floor / budget:.2f}")
    if driver_cpu is not None:
        worst = max(worst, driver_cpu / budget)
        parts.append(f"driver {driver_cpu:.2f} us / {budget:.2f} us = {driver_cpu / budget:.2f}")
    return worst >= 1, "; ".join(parts) or "-"


def wait_floor_note(prof, out, wl, metric, base, host_fig, limit, theirs):
    """(bounded, text) for a p50 or cpu target (<= X the anchor's): whether X x the anchor's figure
    is below what any daemon answering BASE's driver pays per request. A driver asleep for its
    reply (BASE's calls per request; at queue depth 1 every request) is woken by a call: CPU, the
    host's own loop (host_fig, the host column's CPU per op) plus the calls x what one costs its
    writer (the profile's per call for wl, else build/wake-cost's); p50, the host loop's p50
    (host_fig) plus, when at least half the requests were answered with a call, build/wake-cost's
    p50 from the call's write to the driver running. Both add the ring (ring_term)."""
    calls = calls_per_request(out, wl, base)
    if not theirs or host_fig is None or calls is None:
        return False, "-"
    budget = limit * theirs
    wake = prof.get(WAKE, {})
    ring, ring_label = ring_term(prof, wl)
    plus = f" + {ring:.2f} {ring_label}" if ring_label else ""
    if metric == "cpu":
        per_call = (prof.get(wl) or {}).get("per_call") or wake.get("writer")
        if per_call is None:
            return False, "-"
        floor = host_fig + calls * per_call + ring
        text = f"{host_fig:.2f} + {calls:.3f} x {per_call:.1f}{plus} = {floor:.2f} us"
    else:
        if "latency" not in wake:
            return False, "-"
        woken = wake["latency"] if calls >= 0.5 else 0.0
        floor = host_fig + woken + ring
        text = f"{host_fig:.2f} + {woken:.2f} wake-up{plus} = {floor:.2f} us"
    return floor >= budget, f"{text} / {budget:.2f} us = {floor / budget:.2f}"


def matrix(out, base, multi_ratio, multi_against):
    med, names = Medians(), {}
    for r in csv.DictReader(open(os.path.join(out, "cells.csv"))):
        if r["daemon"] == "host":  # the bound, beside every cache mode's table, never a rival
            if r["status"] == "ok":
                med.add(("host", "host", r["workload"]), r["iops"])
            continue
        cache = "none" if r["cache"] == "none" else "auto"
        names.setdefault(cache, [])
        if r["daemon"] not in names[cache]:
            names[cache].append(r["daemon"])
        if r["status"] == "ok":
            med.add((cache, r["daemon"], r["workload"]), r["iops"])
    lines, met, total = [], 0, 0
    has_host = any(k[0] == "host" for k in med.samples)
    for cache, daemons in names.items():
        others = [d for d in daemons if d != base]
        rivals = [d for d in others if not d.startswith("ferryfsd")]
        cells = sorted({k[2] for k in med.samples if k[0] == cache},
                       key=lambda c: (c.replace("-multi", ""), c.endswith("-multi")))
        shown = others + (["host"] if has_host else [])
        lines += [f"cache {cache}: IOPS, medians of the boots; {base} / the best other; "
                  + (f"-multi cells (4 jobs) also / {multi_against} >= {multi_ratio:g}" if multi_against else "")
                  + ("; host: the same fio on the host's share, no guest (the bound)" if has_host else ""), "",
                  "| cell | " + " | ".join([base] + shown) + " | / best other |"
                  + (" / host |" if has_host else "") + " verdict |",
                  "|---" * (len(shown) + 4 + has_host) + "|"]
        for c in cells:
            mine = med.median((cache, base, c))
            figs = {d: med.median((cache, d, c)) for d in others}
            if has_host:
                figs["host"] = med.median(("host", "host", c))
            best = med.best(rivals, lambda d: (cache, d, c))
            ratio = mine / figs[best] if mine is not None and best and figs[best] else None
            ok = ratio is not None and ratio >= 1
            note = f"{'-' if ratio is None else f'{ratio:.2f}'} ({best or '-'})"
            if c.endswith("-multi") and multi_against:
                theirs = figs.get(multi_against)
                r2 = mine / theirs if mine is not None and theirs else None
                ok = ok and r2 is not None and r2 >= multi_ratio
                note += f", / {multi_against} {'-' if r2 is None else f'{r2:.2f}'}"
            total += 1
            met += ok
            verdict = "not run" if ratio is None else ("met" if ok else "not met")
            cells_txt = " | ".join(fmt(x, "ops/s") for x in [mine] + [figs[d] for d in shown])
            if has_host:
                h = figs["host"]
                note += " | " + ("-" if mine is None or not h else f"{mine / h:.2f}")
            lines.append(f"| {c} | {cells_txt} | {note} | {verdict} |")
        lines.append("")
    lines.append(f"{met} of {total} cells met")
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(out, "matrix-targets.md"), "w") as fh:
        fh.write(text + "\n")


def main():
    if len(sys.argv) in (4, 6) and sys.argv[1] == "--matrix":
        matrix(sys.argv[2], sys.argv[3], float(sys.argv[4]) if len(sys.argv) == 6 else 0,
               sys.argv[5] if len(sys.argv) == 6 else None)
        return
    if len(sys.argv) == 3 and sys.argv[1] == "--workloads":
        seen = []
        for t in read_targets(sys.argv[2]):
            if t[0] not in seen:
                seen.append(t[0])
        print(" ".join(seen))
        return
    args, prof = sys.argv[1:], None
    if "--profile" in args:
        i = args.index("--profile")
        if i + 1 >= len(args):
            sys.exit(__doc__)
        prof = read_profile(args[i + 1])
        del args[i:i + 2]
    if len(args) not in (2, 3):
        sys.exit(__doc__)
    out, targets = args[0], read_targets(args[1])
    base = args[2] if len(args) == 3 else "ferryfsd"
    # by_round[(workload, daemon, figure)][round]: for the paired ratio.
    med, daemons, by_round = Medians(), [], {}
    for r in csv.DictReader(open(os.path.join(out, "runs.csv"))):
        if r["daemon"] not in daemons:
            daemons.append(r["daemon"])
        if r["status"] != "ok":
            continue
        for key, x in row_figures(r, list(METRICS.values())).items():
            med.add((r["workload"], r["daemon"], key), x)
            by_round.setdefault((r["workload"], r["daemon"], key), {})[r["round"]] = x
    anchors = [d for d in daemons if d.startswith("virtiofsd")]
    host = next((d for d in daemons if d in HOST_COLUMNS), None)
    shown = [base] + anchors + ([host] if host else [])
    lines = ["| target | " + " | ".join(shown) + f" | {base} / it | verdict | paired | load busy |"
             + (" floor / budget per request |" if prof else ""),
             "|---" * (len(shown) + 5 + bool(prof)) + "|"]
    met = bounded = 0
    for wl, metric, op, limit, against in targets:
        key = METRICS[metric]
        if against == "anchor":
            other = med.best(anchors, lambda d: (wl, d, "ops_per_sec"))
        else:
            other = host
        mine = med.median((wl, base, key))
        theirs = med.median((wl, other, key)) if other else None
        ratio = mine / theirs if mine is not None and theirs else None
        if ratio is None:
            verdict = "not run"
        elif (ratio >= limit) if op == ">=" else (ratio <= limit):
            verdict, met = "met", met + 1
        else:
            verdict = "not met"
        is_bounded, floor_txt = False, "-"
        if prof and metric in ("ops/s", "MiB/s") and op == ">=" and ratio is not None:
            theirs_ops = med.median((wl, other, "ops_per_sec"))
            host_cpu = med.median((wl, host, "daemon_cpu_us_per_op")) if host else None
            driver_cpu = med.median((wl, base, "load_cpu_us_per_op"))
            is_bounded, floor_txt = floor_note(prof, out, wl, base, host, host_cpu, driver_cpu, limit,
                                               theirs_ops)
        elif prof and metric in ("p50", "cpu") and op == "<=" and ratio is not None and host:
            is_bounded, floor_txt = wait_floor_note(prof, out, wl, metric, base,
                                                    med.median((wl, host, key)), limit, theirs)
        if verdict == "not met" and is_bounded:
            verdict, bounded = "bounded", bounded + 1
        cells = [fmt(med.median((wl, d, key)), metric) for d in shown]
        name = f"{wl} {metric} {op} {limit:g}x {against if against == 'host' else 'the better anchor'}"
        # The same ratio taken within each round (the two ran seconds apart), then its median:
        # a machine that drifts between rounds moves both figures of a pair alike.
        mine_by_round = by_round.get((wl, base, key), {})
        theirs_by_round = by_round.get((wl, other, key), {})
        pairs = Medians()
        for rnd, x in mine_by_round.items():
            if theirs_by_round.get(rnd):
                pairs.add("paired", x / theirs_by_round[rnd])
        paired = pairs.median("paired")
        busy = med.median((wl, base, "load_busy"))
        lines.append(f"| {name} | " + " | ".join(cells) +
                     f" | {'-' if ratio is None else f'{ratio:.2f}'} ({other or '-'}) | {verdict} |"
                     f" {'-' if paired is None else f'{paired:.2f}'} | {'-' if busy is None else f'{busy:.2f}'} |"
                     + (f" {floor_txt} |" if prof else ""))
    lines.append("")
    lines.append(f"{met} of {len(targets)} targets met ({base} against the better virtiofsd per "
                 "workload, or the host's own calls; medians of the run's rounds)"
                 + (f", {bounded} bounded" if prof else ""))
    if prof:
        lines.append("floor / budget: the host's own loop (this run's host column, else the profile's) plus "
                     f"{base}'s calls per request x the profile's CPU per call (less the blocks' fill where "
                     "that loop writes; no floor where the run did not report the fill), plus what the ring "
                     "costs any backend per request where the profile ran bench/ring-cost (ring+pread for a "
                     "4 KiB READ, the ring alone otherwise), against 1 / (the target's "
                     "ratio x the figure it is against); driver: ferryfs-load's own CPU per request in "
                     f"{base}'s rounds against the same budget; at 1 or more, no one-thread daemon that "
                     "makes those calls, or no daemon behind that driver, meets the target (bounded); "
                     "for p50 and cpu: the host loop's p50 or CPU per op, plus what a call costs its "
                     "writer (cpu; x the calls per request) or the driver's wake-up after it (p50, where "
                     "half the requests or more had a call; build/wake-cost in the profile), plus the "
                     "ring, against the target's ratio x the anchor's figure")
    lines.append("paired: the median of the ratio taken within each round, which a machine that drifts "
                 "between rounds moves less; the verdict stays on the ratio of medians")
    lines.append(f"load busy: the share of one CPU ferryfs-load itself used in {base}'s runs; near 1, "
                 "the driver set the pace and no daemon could have gone faster on its CPU")
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(out, "targets.md"), "w") as fh:
        fh.write(text + "\n")


if __name__ == "__main__":
    main()
