#!/usr/bin/env bash
# make check: perms-test.sh on the current stack with ferryfsd started as an ordinary user the test makes, guest ids 1.. mapped to its /etc/subuid and /etc/subgid ranges (FERRYFS_DAEMON_USER=ranges, README.md "Without root"); the plain matrix of three scenarios (group-rw: owner, primary and supplementary group, other; sticky; setid-file), no reference columns, the cells perms-known-differences-unprivileged explains.
# Exit: as perms-test.sh (77 when not root, no useradd/setpriv/newuidmap, no subordinate ranges, or the current stack cannot be had here).
FERRYFS_DAEMON_USER=ranges FERRYFS_PERMS_PARTS="${FERRYFS_PERMS_PARTS:-plain}" \
    FERRYFS_PERMS_ONLY="${FERRYFS_PERMS_ONLY-group-rw,sticky,setid-file}" \
    exec "$(dirname "${BASH_SOURCE[0]}")/../e2e/stack-lib.sh" run current "$(dirname "${BASH_SOURCE[0]}")/perms-test.sh" "$@"
