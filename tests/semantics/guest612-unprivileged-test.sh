#!/usr/bin/env bash
# make check: guest612-current-test.sh with ferryfsd started as an ordinary user the test makes, guest ids 1.. mapped to its /etc/subuid and /etc/subgid ranges (FERRYFS_DAEMON_USER=ranges, README.md "Without root"): INIT, FUSE_CREATE_SUPP_GROUP and --allow-mmap without root.
# Exit: as guest612-current-test.sh (77 when not root, no useradd/setpriv/newuidmap, no subordinate ranges, or the current stack cannot be had here).
FERRYFS_DAEMON_USER=ranges exec "$(dirname "${BASH_SOURCE[0]}")/guest612-current-test.sh" "$@"
