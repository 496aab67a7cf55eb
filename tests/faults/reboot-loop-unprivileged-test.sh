#!/usr/bin/env bash
# Fault test (make check): reboot-loop-test.sh on the current stack with ferryfsd started as an ordinary user the test makes (FERRYFS_DAEMON_USER=auto, README.md "Without root"); 5 reboots, not 20 (fds and RSS of boot 5 against boot 2), to keep it near a minute.
# Exit: as reboot-loop-test.sh (77 when not root, no useradd/setpriv, or the current stack cannot be had here).
FERRYFS_DAEMON_USER=auto FERRYFS_REBOOTS=${FERRYFS_REBOOTS:-5} exec "$(dirname "${BASH_SOURCE[0]}")/../e2e/stack-lib.sh" run current "$(dirname "${BASH_SOURCE[0]}")/reboot-loop-test.sh" "$@"
