#!/usr/bin/env python3
# make check's summary: counts meson's JSON test logs, fails unexpected skips, lists durations and reruns, ends "N passed, N failed, N skipped".
"""Usage: summary.py [--fail TEXT]... [--registered BUILD] [--expected-skips FILE]
                  [--started EPOCH] LABEL=LOG.json...

Each LOG.json is what `meson test --logbase NAME` wrote (one JSON object
per test); LABEL prefixes its test names. --fail counts one more failure
that happened outside meson (a build that broke). --registered BUILD fails
every executable tests/*/*-test.sh that BUILD's meson does not know as a
test, so a new script cannot be left out of make check unnoticed. A log
that is missing counts as a failure too. Exit 0 when nothing failed.

A skip (exit 77) counts as skipped only when --expected-skips FILE (default
tests/expected-skips) expects it on this machine: a row whose TEST glob
matches the test's SUITE/NAME, whose CONDITION holds here, and whose REASON
is found in the line, for every line of the test's output that says SKIP.
Any other skip counts as failed, its SKIP lines repeated as its reason: a
test that did not run has not shown the daemon right.

Then: each test's duration, longest first, and the wall time (from
--started, the epoch make check began, else from the logs' start times);
the FAILED tests with their reasons; one line counting the tests that
tests/lib/run-test.sh ran again after QEMU's known abort (its FERRYFS-RERUN
lines), naming them; and last "N passed, N failed, N skipped", the line CI
reads, with nothing after it.

The failure lines are repeated at the end because CI keeps only the tail
of a run, and a flaky failure seen once is worth its reason."""
import fnmatch
import glob
import json
import os
import re
import stat
import subprocess
import sys
import time

PASSED = {"OK", "EXPECTEDFAIL"}
SKIPPED = {"SKIP"}
REASON = re.compile(r"FAIL|ERROR|error:|Assertion|timed out|Timeout")
SKIP_LINE = re.compile(r"SKIP")
RERUN = "FERRYFS-RERUN: "
MAX_REASONS = 25
# Tests shorter than this are summed in one line of the duration table.
SHORT_S = 1.0
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def output(test):
    return (test.get("stdout") or "") + "\n" + (test.get("stderr") or "")


def reasons(test):
    out = output(test)
    lines = [l for l in out.splitlines() if REASON.search(l)]
    if not lines:  # nothing says FAIL: the end of its output is the best clue
        lines = [l for l in out.splitlines() if l.strip()][-5:]
    if test.get("result") == "TIMEOUT":
        lines.append(f"timed out after {test.get('timeout')} s")
    return lines[-MAX_REASONS:]


def suite_name(test):
    """SUITE/NAME of a meson test named "PROJECT:SUITE / NAME", or
    "PROJECT:SUITE+long / NAME" for one of make check-long's."""
    m = re.match(r"^(?:[^:/ ]+:)?(\S+) / (.+)$", test.get("name") or "")
    return f"{m.group(1).split('+')[0]}/{m.group(2)}" if m else (test.get("name") or "?")


def unregistered(build):
    """Executable test scripts that build's meson has no test for."""
    tests = json.loads(subprocess.run(["meson", "introspect", "--tests", build], check=True,
                                      capture_output=True, text=True).stdout)
    # A shell test's command is tests/lib/run-test.sh with the script as its argument.
    known = {os.path.realpath(c) for t in tests for c in t.get("cmd") or []}
    return [os.path.relpath(p, REPO) for p in sorted(glob.glob(f"{REPO}/tests/*/*-test.sh"))
            if os.access(p, os.X_OK) and os.path.realpath(p) not in known]


# ---- expected skips ----

def sysctl_zero(path):
    try:
        with open(path) as fh:
            return fh.read().strip() == "0"
    except OSError:
        return False


def no_dev_fuse():
    try:
        return not stat.S_ISCHR(os.stat("/dev/fuse").st_mode)
    except OSError:
        return True


def no_current_stack():
    r = subprocess.run([f"{REPO}/scripts/stack.sh", "status"], capture_output=True)
    return r.returncode != 0


def ferryfs_installed():
    r = subprocess.run(["dpkg-query", "-W", "ferryfs"], capture_output=True)
    return r.returncode == 0 or os.path.exists("/usr/bin/ferryfsd")


# What each condition of tests/expected-skips means on the machine make check ran on.
CONDITIONS = {
    "not-root": lambda: os.geteuid() != 0,
    "no-dev-fuse": no_dev_fuse,
    "no-userns": lambda: (sysctl_zero("/proc/sys/kernel/unprivileged_userns_clone")
                          or sysctl_zero("/proc/sys/user/max_user_namespaces")),
    "no-current-stack": no_current_stack,
    "ferryfs-installed": ferryfs_installed,
}


class ExpectedSkips:
    def __init__(self, path):
        self.rows = []    # (test glob, condition, reason regex, source line)
        self.errors = []  # the file's own faults: each fails make check
        self.held = {}    # condition -> whether it holds here, asked once
        try:
            with open(path) as fh:
                lines = fh.read().splitlines()
        except OSError as e:
            self.errors.append(f"cannot read the expected skips {path}: {e}")
            return
        for n, line in enumerate(lines, 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            f = line.split(None, 2)
            where = f"{os.path.relpath(path, REPO)}:{n}"
            if len(f) < 3:
                self.errors.append(f"{where}: want TEST CONDITION REASON: {line}")
            elif f[1] not in CONDITIONS:
                self.errors.append(f"{where}: unknown condition {f[1]} (known: {', '.join(CONDITIONS)})")
            else:
                try:
                    self.rows.append((f[0], f[1], re.compile(f[2]), where))
                except re.error as e:
                    self.errors.append(f"{where}: REASON is no regular expression ({e}): {f[2]}")

    def holds(self, cond):
        if cond not in self.held:
            try:
                self.held[cond] = bool(CONDITIONS[cond]())
            except OSError:
                self.held[cond] = False
        return self.held[cond]

    def unexpected(self, test):
        """The SKIP lines of a skipped test that no row expects here (all of
        them when it printed none: a skip must say why)."""
        name = suite_name(test)
        lines = [l.strip() for l in output(test).splitlines() if SKIP_LINE.search(l)]
        if not lines:
            tail = [l for l in output(test).splitlines() if l.strip()][-3:]
            return ["(exit 77 with no SKIP line saying why; its last lines follow)"] + tail
        rows = [r for r in self.rows if fnmatch.fnmatchcase(name, r[0])]
        return [l for l in lines
                if not any(r[2].search(l) and self.holds(r[1]) for r in rows)]


# ---- the report ----

def minutes(s):
    s = int(round(s))
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def print_durations(timed, wall):
    """Every test's duration, longest first; the short ones summed in a line;
    wall is (seconds, what they span) or None."""
    if not timed:
        return
    timed.sort(key=lambda t: -t[0])
    total = sum(d for d, _, _ in timed)
    print()
    print(f"Durations ({len(timed)} tests, {minutes(total)} in tests):")
    short = [d for d, _, _ in timed if d < SHORT_S]
    for d, title, result in timed:
        if d >= SHORT_S:
            print(f"  {minutes(d):>8}  {title}  {result}")
    if short:
        print(f"  {minutes(sum(short)):>8}  {len(short)} more tests under {SHORT_S:g} s each")
    if wall:
        print(f"Wall time: {minutes(wall[0])} ({wall[1]})")


def main(argv):
    passed = failed = skipped = 0
    failures = []  # (title, reason lines)
    logs = []
    expected_path = os.path.join(REPO, "tests", "expected-skips")
    started = None
    i = 0
    while i < len(argv):
        if argv[i] == "--fail":
            failures.append((argv[i + 1], []))
            i += 2
        elif argv[i] == "--registered":
            try:
                for path in unregistered(argv[i + 1]):
                    failures.append((f"{path} is not a meson test: add it to tests/meson.build", []))
            except (OSError, ValueError, subprocess.CalledProcessError) as e:
                failures.append((f"cannot list the tests of {argv[i + 1]}: {e}", []))
            i += 2
        elif argv[i] == "--expected-skips":
            expected_path = argv[i + 1]
            i += 2
        elif argv[i] == "--started":
            started = float(argv[i + 1])
            i += 2
        else:
            logs.append(argv[i])
            i += 1
    expected = ExpectedSkips(expected_path)
    failures += [(e, []) for e in expected.errors]
    failed += len(failures)

    timed = []    # (duration, title, result)
    reruns = []   # titles of the tests run twice
    first_start = last_end = None
    for arg in logs:
        label, _, path = arg.partition("=")
        try:
            with open(path) as fh:
                tests = [json.loads(line) for line in fh if line.strip()]
        except (OSError, ValueError) as e:
            failed += 1
            failures.append((f"{label}: no readable test log {path} ({e})", []))
            continue
        for t in tests:
            result = t.get("result")
            title = f"{label}: {t.get('name')}"
            duration = float(t.get("duration") or 0)
            start = t.get("starttime")
            if start is not None:
                first_start = start if first_start is None else min(first_start, start)
                last_end = max(last_end or 0, start + duration)
            if any(l.startswith(RERUN) for l in output(t).splitlines()):
                reruns.append(title)
            if result in PASSED:
                passed += 1
            elif result in SKIPPED:
                why = expected.unexpected(t)
                if why:
                    failed += 1
                    result = "SKIP, not expected here"
                    failures.append((f"{title} (skipped, and tests/expected-skips does not "
                                     f"expect it on this machine)", why[-MAX_REASONS:]))
                else:
                    skipped += 1
            else:
                failed += 1
                failures.append((f"{title} ({result}, exit {t.get('returncode')})", reasons(t)))
            timed.append((duration, title, result))

    wall = None
    if started is not None:
        wall = (time.time() - started, "make check, builds included")
    elif first_start is not None:
        wall = (last_end - first_start, "from the first test's start to the last one's end")
    print_durations(timed, wall)
    print()
    for title, lines in failures:
        print(f"FAILED: {title}")
        for line in lines:
            print(f"    {line}")
    # Counted even when 0, so a log shows at a glance that nothing was run twice.
    print(f"{len(reruns)} run again after QEMU 10.0's known TCG abort (tests/lib/run-test.sh)"
          + (f": {', '.join(reruns)}" if reruns else ""))
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
