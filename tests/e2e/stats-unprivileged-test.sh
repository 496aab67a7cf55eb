#!/usr/bin/env bash
# make check: stats-test.sh on the current stack with ferryfsd (and its --stats-socket) started as an ordinary user the test makes (FERRYFS_DAEMON_USER=auto, README.md "Without root"); root asks it for --stats; one boot.
# Exit: as stats-test.sh (77 when not root, no useradd/setpriv, or the current stack cannot be had here).
FERRYFS_DAEMON_USER=auto exec "$(dirname "${BASH_SOURCE[0]}")/stack-lib.sh" run current "$(dirname "${BASH_SOURCE[0]}")/stats-test.sh" "$@"
