#!/usr/bin/env bash
# make check's xfstests: the generic tests of tests/xfstests/check-subset on ferryfsd (current stack), each passing or a known difference.
#
# The subset covers what the quick group covers (data integrity, xattrs and ACLs, rename, links,
# truncate, fallocate, mmap, O_DIRECT, locks, permissions) in tests short enough to finish in a
# few minutes on two CPUs under TCG. `make xfstests` runs the whole quick group on all three
# daemons (tests/xfstests/run.sh, README.md there).
# Fails when a test of the subset has another outcome than pass or its known-differences entry,
# when a daemon ends with a status other than 0 as its guest goes away, or when a test has no
# result. Env: FERRYFS_XFSTESTS_JOBS (default: the host's CPUs), FERRYFS_XFSTESTS_SUBSET (another
# list file), FERRYFS_E2E_KEEP=1 keeps the logs.
set -euo pipefail
name=xfstests
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
need_root "loop mounts, and the daemons switch credentials"
need_built "$ferryfsd"
make_tmp

subset="${FERRYFS_XFSTESTS_SUBSET:-$here/check-subset}"
rc=0
"$here/run.sh" --daemons ferryfsd --jobs "${FERRYFS_XFSTESTS_JOBS:-$(nproc)}" --out "$tmp/out" \
    --test-timeout 300 --no-table @"$subset" || rc=$?
((rc != 77)) || skip "xfstests or the current stack cannot be had here (run.sh exit 77)"
((rc == 0)) || fail "run.sh exited $rc: a lane could not run or a daemon did not end with status 0"
sed 's/#.*//' "$subset" | tr -s ' \t' '\n' | grep . >"$tmp/tests"
if python3 "$here/table.py" --out "$tmp/out" --known "$here/known-differences" --tests "$tmp/tests" --strict ferryfsd; then
    pass "every test of the subset passed or is a known difference"
else
    fail "ferryfsd's xfstests column is not as known (above)"
fi
finish
