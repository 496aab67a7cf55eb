#!/usr/bin/env bash
# make check test: fsops on the current stack (QEMU 10 + Linux 6.12 guest) with ferryfsd; make check-long adds QEMU 7.2's C virtiofsd and the Rust virtiofsd 1.13 side by side.
#
# Usage: fsops-current-test.sh [PATH_TO_FERRYFSD]
# Env:   as fsops-test.sh; FERRYFS_E2E_DAEMONS defaults to "ferryfsd", and to
#        "ferryfsd virtiofsd virtiofsd-rs" with FERRYFS_CHECK_LONG=1 (make check-long).
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
# The reference columns cost a guest boot each and decide nothing: make check-long runs them.
if [[ ${FERRYFS_CHECK_LONG:-} == 1 ]]; then
    export FERRYFS_E2E_DAEMONS="${FERRYFS_E2E_DAEMONS:-ferryfsd virtiofsd virtiofsd-rs}"
fi
exec "$here/fsops-test.sh" "$@"
