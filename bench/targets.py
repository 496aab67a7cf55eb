# bench/targets.py: judges a bench/compare run against a targets file, round by round; one markdown row per target.
"""Usage: python3 bench/targets.py OUT TARGETS [BASE] [--profile DIR]   (OUT: a bench/compare --out directory)
       python3 bench/targets.py --workloads TARGETS   (the workload specs TARGETS names, in order)
       python3 bench/targets.py --matrix OUT BASE [MULTI_RATIO MULTI_AGAINST]
                                (OUT: a bench/guest-matrix --out directory)

A targets file has one target per line, blank lines and # comments aside:
    WORKLOAD  METRIC  TEST  AGAINST
WORKLOAD is a bench/compare workload spec (read:bs=1M), METRIC one of ops/s, MiB/s, p50, p99, cpu
(daemon CPU per op), cpu+load (daemon and load generator CPU per op), TEST >=X or <=X on the ratio
BASE / AGAINST, and AGAINST either "anchor" (the better by median ops/s of the virtiofsd-* daemons
that ran that workload: what a user could pick instead) or "host" (bench/compare's host column: the
host's own calls, the bound).

A target is judged on BASE / AGAINST taken within each round (the two ran seconds apart, so a
machine that drifts between rounds moves both alike), over every round of the run:
  met      the geometric mean of the rounds' ratios less a margin is at least X (for <=X: plus the
           margin, at most X). The margin is the rounds' whole spread (the largest ratio over the
           least) or, when wider, a one-sided 95% Student-t bound on that mean: a lucky round widens
           the spread by as much as it lifts the mean, so it cannot make "met". One round alone
           (no spread to measure), or a round where BASE failed and AGAINST ran, is never "met".
  bounded  (with --profile) not met, and in every round a floor measured without BASE is at least
           the target's budget: no daemon could meet it here (below).
  not met  otherwise; "not run" when no round has both figures.
The table shows every daemon's median (check by hand), the paired ratios' mean and range, and the
bound the verdict is judged on.

--profile DIR (a bench/daemon-profile --out directory) adds a floor / budget column. Nothing BASE's
own run measured enters a floor (its CPU, its calls per request, its driver's CPU in its rounds): a
slower BASE makes those larger, and would call its own shortfall a bound. A floor is the sum of
  the host loop: the host column's figure in that round (ferryfs-load --host, the workload's system
      calls on one thread; else, for throughput, the profile's host loop), less, for write,
      randwrite, write-fsync and mixed, the fill of the blocks it writes, which in a daemon's run
      is the driver's work (fill_us_per_op in the host column's .out; no floor where the run did
      not report it, nor from the profile, which never does);
  the ring: the profile's ring-cost probe, what the ring adds to a pread for a 4 KiB READ, else the
      ring alone (no system call, no data: the least any request pays);
  at queue depth 1, a call per request where the driver forces it on any daemon: the host column's
      ferryfs-load had one queue and no --poll (and BASE has no +qN), and the host loop's p50 plus
      the ring is longer than a kick costs the driver when nobody waits (the wake-cost probe), so any
      reply comes after the driver has looked and gone to sleep: the call's cost to its writer
      (cpu) or the driver's wake-up after it (p50), both the wake-cost probe's.
Throughput (ops/s, MiB/s, >=X): the budget per request is 1 / (X x AGAINST's ops/s in the round);
bounded when the floor (host loop, less the fill, plus the ring: a one-thread daemon's CPU per
request) or the driver's fill alone (ferryfs-load is one thread: no daemon answers faster than it
asks) is at least the budget in every round. p50 and cpu (<=X): the budget is X x AGAINST's figure
in the round; the floor the host loop's p50 or CPU per op, plus the ring and the forced call.
A floor that some daemon of the run paid less than in that round (CPU per request, p50, or for the
driver's fill its CPU per request) is no floor there: the probes behind it did not hold as the
machine ran. This can only take "bounded" away, so BASE's figures are witnesses too.

--matrix: the guest matrix's target, per cache mode and cell: BASE's median IOPS is not below any
other daemon's of the same cache mode (9p's "auto" is whatever --9p-auto ran; other ferryfsd
configs, e.g. ferryfsd beside ferryfsd+q2, are shown but are not rivals), and in the two-job
cells (-multi, 4 jobs) at least MULTI_RATIO times MULTI_AGAINST's (e.g. 1.3 virtiofsd-rs); written to
matrix-targets.md. If the run had the "host" daemon (fio on the host's share), its figure and BASE's
fraction of it stand beside each cache mode's rows as the bound; it is never a rival."""
import csv
import json
import math
import os
import re
import statistics
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


RING = "(ring-cost)"  # read_profile's key for the ring-cost probe's figures, never a workload name
WAKE = "(wake-cost)"  # and for the wake-cost probe's figures on a call that wakes a sleeping reader

# The probes' lines bench/daemon-profile appends to summary.txt: (key, figure, pattern).
PROBE_LINES = (
    # bench/probes/ring-cost: what a backend pays per request for the ring alone, and per 4 KiB READ over
    # the host's pread loop (its pread into the slots' buffers included).
    (RING, "read", r"the ring with the pread: +([\d.]+) us per READ over the host loop"),
    (RING, "alone", r"the ring alone: +([\d.]+) us per request"),
    # bench/probes/wake-cost: what a call that wakes a reader asleep on the other CPU costs its writer, what
    # it costs when nobody waits (a kick to a backend that spins), and how long after the write that
    # reader runs (p50).
    (WAKE, "writer", r"one call, its writer's time: waking a reader asleep on the other CPU +([\d.]+) us"),
    (WAKE, "idle", r"one call, its writer's time: .*nobody waiting +([\d.]+) us"),
    (WAKE, "latency", r"one call, its wake-up: .* runs +([\d.]+) us \(p50\)"),
)


def probe_figures(line):
    """[(key, figure, value)] of the PROBE_LINES that line matches (one line may hold two)."""
    found = []
    for key, figure, pattern in PROBE_LINES:
        m = re.match(pattern, line)
        if m:
            found.append((key, figure, float(m.group(1))))
    return found


def read_profile(path):
    """{workload: {"host": us/op}, RING: {...}, WAKE: {...}} from a bench/daemon-profile summary.txt:
    of each workload only the host's own loop (ferryfs-load --host), never ferryfsd's figures."""
    prof = {}
    try:
        lines = open(os.path.join(path, "summary.txt")).readlines()
    except OSError as e:
        sys.exit(f"bench/targets.py: --profile {path}: {e.strerror}: summary.txt (a bench/daemon-profile --out directory)")
    for line in lines:
        probes = probe_figures(line)
        for key, figure, value in probes:
            prof.setdefault(key, {})[figure] = value
        if probes:
            continue
        m = re.match(r"== (\S+): .*the host's own loop: ([\d.]+) us/op", line)
        if m:
            prof[m.group(1)] = {"host": float(m.group(2))}
    if not set(prof) - {RING, WAKE}:
        sys.exit(f"bench/targets.py: {path}/summary.txt has no bench/daemon-profile workload")
    return prof


def ring_term(prof, workload):
    """(us, label): the ring's share of a floor per request, from the profile's ring-cost probe run:
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


# One-sided 95% quantiles of Student's t by degrees of freedom; a df between two keys takes the
# smaller key's, the wider bound.
T95 = ((1, 6.314), (2, 2.920), (3, 2.353), (4, 2.132), (5, 2.015), (6, 1.943), (7, 1.895),
       (8, 1.860), (9, 1.833), (10, 1.812), (12, 1.782), (15, 1.753), (20, 1.725), (30, 1.697),
       (60, 1.671), (120, 1.658))


def t95(df):
    return [t for d, t in T95 if d <= df][-1]


def paired(mine, theirs):
    """(ratios, failed): BASE / AGAINST in each round where AGAINST has a figure, in round order,
    and how many of those rounds BASE has none for (its run failed: such a round counts against it,
    never drops out)."""
    ratios, failed = [], 0
    for rnd in sorted(theirs, key=lambda r: (len(r), r)):
        if theirs[rnd] <= 0:
            continue
        if mine.get(rnd, 0) > 0:
            ratios.append(mine[rnd] / theirs[rnd])
        else:
            failed += 1
    return ratios, failed


def judge(ratios, op):
    """(mean, bound): the geometric mean of the rounds' ratios, and that mean less (>=) or plus (<=)
    the margin, the larger in log terms of the ratios' whole range and a one-sided 95% t bound on
    the mean. The range holds every round, so a round far from the others widens the margin by at
    least as much as it moves the mean; the t bound is the wider with few rounds, whose range can be
    narrow by chance. bound is None for a single ratio, whose spread is unknown."""
    logs = [math.log(r) for r in ratios]
    mean = sum(logs) / len(logs)
    if len(logs) < 2:
        return math.exp(mean), None
    margin = max(max(logs) - min(logs), t95(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs)))
    return math.exp(mean), math.exp(mean - margin if op == ">=" else mean + margin)


def host_json(out, workload, host, rnd):
    """The host column's ferryfs-load JSON line in round rnd (r<round>-<tag>-<host>.out), or None."""
    tag = re.sub(r"[:=,]", "_", workload)
    try:
        return json.loads(open(os.path.join(out, f"r{rnd}-{tag}-{host}.out")).read().strip().splitlines()[-1])
    except (OSError, IndexError, ValueError):
        return None


def json_fill(j):
    """The host loop's CPU per op spent filling blocks (ferryfs-load's fill_us_per_op), or None
    where the run's ferryfs-load did not report it."""
    x = (j or {}).get("fill_us_per_op", -1)
    return float(x) if isinstance(x, (int, float)) and x >= 0 else None


def host_fills(workload):
    """Whether ferryfs-load's host loop for workload fills the blocks it writes (load/host_steps.c):
    its CPU per op then holds work that in a daemon's run is the driver's, and is no floor."""
    name = workload.split(":", 1)[0]
    return name in ("write", "randwrite", "write-fsync", "mixed")


def forced_call(j, base, wake, host_p50, ring):
    """(forced, why not): whether every request is answered with a call whatever the daemon. At
    queue depth 1 on one queue, without --poll, ferryfs-load kicks, looks at the used ring once
    more, and sleeps until a call; no daemon answers sooner than the host loop's own latency plus
    the ring, so when that is longer than the kick costs the driver with nobody waiting (a daemon
    that sleeps instead must first be woken, later still), the driver is asleep when the reply comes.
    The driver's settings are the host column's, bench/compare's same options for every daemon."""
    if not j or "poll" not in j or "queue_depth" not in j:
        return False, "the host column's ferryfs-load settings are unknown"
    if j["queue_depth"] != 1:
        return False, None
    if j["poll"] is not False:
        return False, "the driver polls"
    if j.get("queues", 1) != 1 or "+q" in base:
        return False, "the driver has several queues"
    if "idle" not in wake or "writer" not in wake or "latency" not in wake:
        return False, "no wake-cost probe figures in the profile"
    if host_p50 is None or host_p50 + ring <= wake["idle"]:
        return False, "the host loop's p50 and the ring are no longer than a kick"
    return True, None


def beaten_by(ctx, wl, key, rnd, floor):
    """"DAEMON's X us" when a daemon of the run (not the host column) paid less than floor in round
    rnd, else None. Every daemon pays at least a true floor; one that paid less shows that the
    probes behind it do not hold on this machine as it ran (a loaded machine stretches
    the wake-cost probe's timings, say). BASE is a witness too: a witness can only take "bounded" away."""
    paid = [(fig[rnd], d) for (w, d, k), fig in ctx["by_round"].items()
            if w == wl and k == key and d not in HOST_COLUMNS and rnd in fig and fig[rnd] >= 0]
    least = min(paid, default=None)
    return f"{least[1]}'s {least[0]:.2f} us" if least and least[0] < floor else None


def floor_note(ctx, wl, metric, limit, against):
    """(bounded, text): whether in every round the floor, built from figures measured without BASE
    (the usage's rule), is at least the target's budget; text shows the round where it is least
    (or one that has none), so the verdict can be checked by hand."""
    out, base, host, prof, fig = ctx["out"], ctx["base"], ctx["host"], ctx["prof"], ctx["by_round"]
    throughput = metric in ("ops/s", "MiB/s")
    theirs = fig.get((wl, against, "ops_per_sec" if throughput else METRICS[metric]), {})
    ring, ring_label = ring_term(prof, wl)
    fills = host_fills(wl)
    rounds = []  # (the larger of floor / budget and the driver's fill / budget, or None; text)
    for rnd in sorted(theirs, key=lambda r: (len(r), r)):
        if theirs[rnd] <= 0:
            continue
        budget = 1e6 / (limit * theirs[rnd]) if throughput else limit * theirs[rnd]
        j = host_json(out, wl, host, rnd) if host else None
        # The host loop's latency holds the fill of each block it writes: no p50 from it.
        host_p50 = None if fills or not host else fig.get((wl, host, "lat_p50_us"), {}).get(rnd)
        loop = host_p50 if metric == "p50" else \
            fig.get((wl, host, "daemon_cpu_us_per_op"), {}).get(rnd) if host else None
        fill = json_fill(j) if fills and loop is not None else None
        if fills and fill is None:
            loop = None  # a writing loop's CPU is no floor without its fill taken off
        if loop is None and throughput and not fills and wl in prof:
            loop = prof[wl]["host"]
        terms, notes = None, []
        if loop is None:
            notes.append("no floor: the host loop's latency holds the fill of each block it writes"
                         if fills and metric == "p50" else
                         "no floor: the host loop fills each block it writes, the driver's work in a "
                         "daemon's run" if fills else "no floor: no host loop")
        else:
            terms = [(loop, "")] + ([(-fill, "fill")] if fills else []) + \
                ([(ring, ring_label)] if ring_label else [])
            if not throughput:
                forced, why = forced_call(j, base, prof.get(WAKE, {}), host_p50, ring)
                if forced:
                    wake = prof[WAKE]
                    terms.append((wake["writer"], "call") if metric == "cpu" else (wake["latency"], "wake-up"))
                elif why:
                    notes.append(f"no call counted: {why}")
        worst, parts = None, []
        if terms:
            floor = sum(x for x, _ in terms)
            sums = f"{terms[0][0]:.2f}" + "".join(f" {'-' if x < 0 else '+'} {abs(x):.2f} {label}"
                                                  for x, label in terms[1:])
            sums += f" = {floor:.2f}" if len(terms) > 1 else ""
            beaten = beaten_by(ctx, wl, "lat_p50_us" if metric == "p50" else "daemon_cpu_us_per_op", rnd, floor)
            if beaten:
                parts.append(f"{sums} us, above {beaten}: no floor")
            else:
                parts.append(f"{sums} us / {budget:.2f} us = {floor / budget:.2f}")
                worst = floor / budget
        parts += notes
        if throughput and fill is not None:
            beaten = beaten_by(ctx, wl, "load_cpu_us_per_op", rnd, fill)
            if beaten:
                parts.append(f"the driver's fill {fill:.2f} us, above the driver's {beaten}: no floor")
            else:
                parts.append(f"the driver's fill {fill:.2f} us / {budget:.2f} us = {fill / budget:.2f}")
                worst = max(worst or 0.0, fill / budget)
        rounds.append((worst, f"r{rnd}: " + "; ".join(parts)))
    if not rounds:
        return False, "-"
    # A round without a floor shows first; else the round whose floor is least against its budget.
    worst, text = min(rounds, key=lambda w: -1 if w[0] is None else w[0])
    if worst is None:
        return False, f"{text} (one of {len(rounds)} rounds)"
    return worst >= 1, f"{text} (the least of {len(rounds)} rounds)"


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
    # by_round[(workload, daemon, figure)][round]: every verdict is taken round by round.
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
    ctx = {"out": out, "base": base, "host": host, "prof": prof, "by_round": by_round}
    shown = [base] + anchors + ([host] if host else [])
    lines = ["| target | " + " | ".join(shown) + " | against | paired | rounds' range | bound | verdict | load busy |"
             + (" floor / budget per request |" if prof else ""),
             "|---" * (len(shown) + 7 + bool(prof)) + "|"]
    met = bounded = 0
    for wl, metric, op, limit, against in targets:
        key = METRICS[metric]
        other = med.best(anchors, lambda d: (wl, d, "ops_per_sec")) if against == "anchor" else host
        ratios, failed = paired(by_round.get((wl, base, key), {}), by_round.get((wl, other, key), {})) \
            if other else ([], 0)
        mean = bound = None
        if ratios:
            mean, bound = judge(ratios, op)
        if not ratios:
            verdict = "not run"
        elif bound is not None and not failed and ((bound >= limit) if op == ">=" else (bound <= limit)):
            verdict, met = "met", met + 1
        else:
            verdict = "not met"
        floor_txt = "-"
        if prof and ratios and ((metric in ("ops/s", "MiB/s") and op == ">=")
                                or (metric in ("p50", "cpu") and op == "<=" and host)):
            is_bounded, floor_txt = floor_note(ctx, wl, metric, limit, other)
            if verdict == "not met" and is_bounded:
                verdict, bounded = "bounded", bounded + 1
        cells = [fmt(med.median((wl, d, key)), metric) for d in shown]
        name = f"{wl} {metric} {op} {limit:g}x {against if against == 'host' else 'the better anchor'}"
        spread = "-" if not ratios else f"{min(ratios):.2f}-{max(ratios):.2f} of {len(ratios) + failed}" + \
            (f", {base} failed {failed}" if failed else "")
        busy = med.median((wl, base, "load_busy"))
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {other or '-'} |"
                     f" {'-' if mean is None else f'{mean:.2f}'} | {spread} |"
                     f" {'-' if bound is None else f'{bound:.2f}'} | {verdict} |"
                     f" {'-' if busy is None else f'{busy:.2f}'} |" + (f" {floor_txt} |" if prof else ""))
    lines.append("")
    lines.append(f"{met} of {len(targets)} targets met ({base} against the better virtiofsd per "
                 "workload, or the host's own calls; paired within each round, over every round)"
                 + (f", {bounded} bounded" if prof else ""))
    lines.append(f"paired: the geometric mean of {base} / it taken within each round; rounds' range: the "
                 f"least and largest of those ratios, of how many rounds; bound: the mean less (>=) or plus "
                 "(<=) a margin, the larger of that range (largest / least) and a one-sided 95% t bound "
                 "on the mean; met when the bound is on the target's side, in a run of two rounds or "
                 f"more where {base} failed none")
    if prof:
        lines.append("floor / budget, in the round where it is least: the host column's loop of the same "
                     "system calls (its CPU per op, or p50; else the profile's loop), less the blocks' fill "
                     "where that loop writes (no floor where the run did not report it), plus what the ring "
                     "costs any backend per request where the profile ran the ring-cost probe (ring+pread for a "
                     "4 KiB READ, the ring alone otherwise), plus at queue depth 1 a call forced on any "
                     "daemon (its writer's cost for cpu, the driver's wake-up for p50; the wake-cost probe); "
                     "against 1 / (the target's ratio x its reference's ops/s) for throughput, or the "
                     "target's ratio x the reference's figure; the driver's fill (ferryfs-load's own work "
                     "per WRITE) against the same budget; at 1 or more in every round: bounded. Nothing "
                     f"{base}'s own rounds measured enters a floor; a floor some daemon of the run paid "
                     "less than in that round is none")
    lines.append(f"load busy: the share of one CPU ferryfs-load itself used in {base}'s runs; near 1, "
                 "the driver set the pace")
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(out, "targets.md"), "w") as fh:
        fh.write(text + "\n")


if __name__ == "__main__":
    main()
