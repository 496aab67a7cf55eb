#!/usr/bin/env bash
# make check test: fsops on the current stack (QEMU 10 + Linux 6.12 guest) with ferryfsd, QEMU 7.2's C virtiofsd and the Rust virtiofsd 1.13 side by side.
#
# Usage: fsops-current-test.sh [PATH_TO_FERRYFSD]
# Env:   as fsops-test.sh; FERRYFS_E2E_DAEMONS defaults to "ferryfsd virtiofsd virtiofsd-rs".
# Exit:  0 ferryfsd's column passes; 1 it does not; 77 the current stack cannot be fetched here
#        (the message names what is missing). The virtiofsd columns are informational.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/stack-lib.sh"

if ! stack_prepare current; then
    echo "fsops-current-test: SKIP: the current stack (QEMU 10, Linux 6.12, Rust virtiofsd) could not be fetched (see above)"
    exit 77
fi
# Before FERRYFS_STACK changes: a FERRYFS_GUEST_DIR set for the stable stack is not this one's.
FERRYFS_GUEST_DIR="$(stack_guest_dir current)"
export FERRYFS_GUEST_DIR FERRYFS_STACK=current
export FERRYFS_E2E_DAEMONS="${FERRYFS_E2E_DAEMONS:-ferryfsd virtiofsd virtiofsd-rs}"
exec "$here/fsops-test.sh" "$@"
