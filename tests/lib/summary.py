#!/usr/bin/env python3
# make check's summary: counts meson's JSON test logs, repeats why each failed test failed, ends "N passed, N failed, N skipped".
"""Usage: summary.py [--fail TEXT]... [--registered BUILD] LABEL=LOG.json...

Each LOG.json is what `meson test --logbase NAME` wrote (one JSON object
per test); LABEL prefixes its test names. --fail counts one more failure
that happened outside meson (a build that broke). --registered BUILD fails
every executable tests/*/*-test.sh that BUILD's meson does not know as a
test, so a new script cannot be left out of make check unnoticed. A log
that is missing counts as a failure too. Exit 0 when nothing failed.

The failure lines are repeated at the end because CI keeps only the tail
of a run, and a flaky failure seen once is worth its reason."""
import glob
import json
import os
import re
import subprocess
import sys

PASSED = {"OK", "EXPECTEDFAIL"}
SKIPPED = {"SKIP"}
REASON = re.compile(r"FAIL|ERROR|error:|Assertion|timed out|Timeout")
MAX_REASONS = 25


def reasons(test):
    out = (test.get("stdout") or "") + "\n" + (test.get("stderr") or "")
    lines = [l for l in out.splitlines() if REASON.search(l)]
    if not lines:  # nothing says FAIL: the end of its output is the best clue
        lines = [l for l in out.splitlines() if l.strip()][-5:]
    if test.get("result") == "TIMEOUT":
        lines.append(f"timed out after {test.get('timeout')} s")
    return lines[-MAX_REASONS:]


def unregistered(build):
    """Executable test scripts that build's meson has no test for."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    tests = json.loads(subprocess.run(["meson", "introspect", "--tests", build], check=True,
                                      capture_output=True, text=True).stdout)
    # A shell test's command is tests/lib/run-test.sh with the script as its argument.
    known = {os.path.realpath(c) for t in tests for c in t.get("cmd") or []}
    return [os.path.relpath(p, repo) for p in sorted(glob.glob(f"{repo}/tests/*/*-test.sh"))
            if os.access(p, os.X_OK) and os.path.realpath(p) not in known]


def main(argv):
    passed = failed = skipped = 0
    failures = []  # (title, reason lines)
    logs = []
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
        else:
            logs.append(argv[i])
            i += 1
    failed += len(failures)

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
            if result in PASSED:
                passed += 1
            elif result in SKIPPED:
                skipped += 1
            else:
                failed += 1
                failures.append((f"{label}: {t.get('name')} ({result}, exit {t.get('returncode')})",
                                 reasons(t)))

    print()
    for title, lines in failures:
        print(f"FAILED: {title}")
        for line in lines:
            print(f"    {line}")
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
