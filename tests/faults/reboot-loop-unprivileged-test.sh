#!/usr/bin/env bash
# Fault test (make check): reboot-loop-test.sh on the current stack with ferryfsd started as an ordinary user the test makes (FERRYFS_DAEMON_USER=auto, README.md "Without root"); 3 reboots (make check-long: 5), fds and RSS of the last boot against boot 2.
# Exit: as reboot-loop-test.sh (77 when not root, no useradd/setpriv, or the current stack cannot be had here).
# Fewer boots than the root run: what this run adds is the device reset served by an unprivileged
# ferryfsd, which each reboot shows; the leak bounds are the root run's to tell.
set -euo pipefail
boots=3
[[ ${FERRYFS_CHECK_LONG:-} != 1 ]] || boots=5
FERRYFS_DAEMON_USER=auto FERRYFS_REBOOTS=${FERRYFS_REBOOTS:-$boots} exec "$(dirname "${BASH_SOURCE[0]}")/../e2e/stack-lib.sh" run current "$(dirname "${BASH_SOURCE[0]}")/reboot-loop-test.sh" "$@"
