#!/usr/bin/env bash
# make check: migration-test.sh with every ferryfsd started as an ordinary user the test makes (FERRYFS_DAEMON_USER=auto, README.md "Without root"), find-paths mode: a cancelled move, a move during I/O with held fds, and file handles refused without root (cases d, ab, n).
# Exit: as migration-test.sh (77 when not root, no useradd/setpriv, or the current stack cannot be had here).
FERRYFS_DAEMON_USER=auto MIGRATION_CASES="${MIGRATION_CASES:-d ab n}" exec "$(dirname "${BASH_SOURCE[0]}")/migration-test.sh" "$@"
