#!/usr/bin/env bash
# Fault test (make check): disconnect-test.sh on the current stack with ferryfsd started as an ordinary user the test makes (FERRYFS_DAEMON_USER=auto, README.md "Without root"); two boots (the killed QEMU and the one --keep-listening serves next).
# Exit: as disconnect-test.sh (77 when not root, no useradd/setpriv, or the current stack cannot be had here).
FERRYFS_DAEMON_USER=auto exec "$(dirname "${BASH_SOURCE[0]}")/../e2e/stack-lib.sh" run current "$(dirname "${BASH_SOURCE[0]}")/disconnect-test.sh" "$@"
