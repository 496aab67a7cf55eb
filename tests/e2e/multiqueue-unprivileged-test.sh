#!/usr/bin/env bash
# make check: multiqueue-test.sh with every ferryfsd (1, 2 and 4 request queues, and the guest's main share) started as an ordinary user the test makes (FERRYFS_DAEMON_USER=auto, README.md "Without root"); one boot, no Rust virtiofsd columns.
# Exit: as multiqueue-test.sh (77 when not root, no useradd/setpriv, or the current stack cannot be had here).
FERRYFS_DAEMON_USER=auto exec "$(dirname "${BASH_SOURCE[0]}")/multiqueue-test.sh" "$@"
