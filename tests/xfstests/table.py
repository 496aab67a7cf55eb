#!/usr/bin/env python3
# The xfstests table: each test's outcome per daemon side by side, judged against the known-differences file.
"""Usage: table.py --out DIR --known FILE [--tests LIST] [--strict] DAEMON...

Reads DIR/DAEMON/results.tsv (TEST STATUS SECONDS NOTE a line; the last line of a test counts),
prints a Markdown table (also written to DIR/table.md) and the counts per daemon, then judges
ferryfsd's column when it is among the DAEMONs:
  - a test ferryfsd does not pass (fail, timeout, crash or notrun) must be in FILE with that
    outcome and a reason;
  - the reason must be checked: the Rust virtiofsd (virtiofsd-rs) has the same outcome in this
    run, or the reason starts "host:" or "protocol:" and says what in the host or protocol makes it;
  - a test that fails on ferryfsd and passes on the Rust virtiofsd is a ferryfsd bug, never an entry;
  - an entry whose test ferryfsd now passes is stale.
FILE's lines: TEST OUTCOME REASON... ('#' starts a comment). --tests LIST (one test a line) limits
the table to those tests. Exit 0 when the judgement holds (or ferryfsd is not judged), 1 otherwise.
--strict also fails on tests of LIST with no result (a run not finished)."""
import argparse
import os
import sys

NOT_PASS = {"fail", "timeout", "crash", "notrun"}


def read_results(path):
    res = {}
    try:
        with open(path) as fh:
            for line in fh:
                parts = line.rstrip("\n").split("\t")
                if len(parts) >= 2 and parts[0]:
                    res[parts[0]] = (parts[1], parts[2] if len(parts) > 2 else "",
                                     parts[3] if len(parts) > 3 else "")
    except FileNotFoundError:
        pass
    return res


def read_known(path):
    known = {}
    with open(path) as fh:
        for n, line in enumerate(fh, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split(None, 2)
            if len(parts) < 3 or parts[1] not in NOT_PASS:
                raise ValueError(f"{path}:{n}: want TEST OUTCOME REASON, OUTCOME one of {sorted(NOT_PASS)}")
            known[parts[0]] = (parts[1], parts[2])
    return known


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--known", required=True)
    ap.add_argument("--tests")
    ap.add_argument("--strict", action="store_true")
    ap.add_argument("daemons", nargs="+")
    a = ap.parse_args()

    results = {d: read_results(os.path.join(a.out, d, "results.tsv")) for d in a.daemons}
    if a.tests:
        with open(a.tests) as fh:
            tests = [l.strip() for l in fh if l.strip()]
    else:
        tests = sorted(set().union(*(r.keys() for r in results.values())))
    known = read_known(a.known)

    rows = ["| test | " + " | ".join(a.daemons) + " | why (ferryfsd) |",
            "|---" * (len(a.daemons) + 2) + "|"]
    counts = {d: {} for d in a.daemons}
    for t in tests:
        cells = []
        for d in a.daemons:
            st = results[d].get(t, ("-", "", ""))[0]
            counts[d][st] = counts[d].get(st, 0) + 1
            cells.append(st)
        why = ""
        if "ferryfsd" in results and t in known:
            why = known[t][1]
        elif "ferryfsd" in results:
            why = results["ferryfsd"].get(t, ("", "", ""))[2]
        rows.append(f"| {t} | " + " | ".join(cells) + f" | {why.replace('|', '/')} |")

    summary = []
    for d in a.daemons:
        c = counts[d]
        summary.append(f"{d}: " + ", ".join(f"{c.get(k, 0)} {k}" for k in
                                            ("pass", "fail", "notrun", "timeout", "crash", "-")
                                            if c.get(k, 0) or k in ("pass", "fail", "notrun")))
    text = "\n".join(rows) + "\n\n" + "\n".join(summary) + "\n"

    problems = []
    if "ferryfsd" in results:
        ours = results["ferryfsd"]
        rs = results.get("virtiofsd-rs", {})
        for t in tests:
            st = ours.get(t, ("-",))[0]
            ref = rs.get(t, ("-",))[0]
            if st == "-":
                if a.strict:
                    problems.append(f"{t}: no ferryfsd result")
                continue
            if st in ("fail", "timeout", "crash") and ref == "pass":
                problems.append(f"{t}: {st} on ferryfsd, pass on virtiofsd-rs: a ferryfsd bug")
                continue
            if st in NOT_PASS:
                if t not in known:
                    problems.append(f"{t}: {st} on ferryfsd and not in {os.path.basename(a.known)}")
                elif known[t][0] != st:
                    problems.append(f"{t}: {st} on ferryfsd, but {os.path.basename(a.known)} says {known[t][0]}")
                elif ref != st and ref != "-" and not known[t][1].startswith(("host:", "protocol:")):
                    problems.append(f"{t}: the entry's reason is not checked: virtiofsd-rs gave {ref}, "
                                    "and the reason does not say host: or protocol:")
            elif st == "pass" and t in known:
                problems.append(f"{t}: passes on ferryfsd now: its {os.path.basename(a.known)} entry is stale")
        if problems:
            text += "\nferryfsd's column is not as known:\n" + "".join(f"  {p}\n" for p in problems)
        else:
            text += "\nferryfsd's column: every test passes or is a known difference with a checked reason\n"

    sys.stdout.write(text)
    with open(os.path.join(a.out, "table.md"), "w") as fh:
        fh.write(text)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
