#!/usr/bin/env bash
# make check: perms-test.sh on the current stack (QEMU 10, Linux 6.12 guest): the permissions matrix against a 6.12 guest's tmpfs, FUSE_CREATE_SUPP_GROUP in the set-group-ID cells; perms-test.sh itself runs on stable.
# Env: FERRYFS_PERMS_REFERENCE=1 keeps the virtiofsd reference columns. Exit: as perms-test.sh (77 when the current stack cannot be had here).
# The reference columns (QEMU's C virtiofsd, the Rust virtiofsd) nearly double the boot (17 min in all
# on a loaded 2-CPU machine); they only report, so make check leaves them to perms-test.sh and to
# FERRYFS_PERMS_REFERENCE=1 here.
if [[ "${FERRYFS_PERMS_REFERENCE:-0}" != 1 ]]; then
    export VIRTIOFSD=/nonexistent VIRTIOFSD_RS_ROOT=/nonexistent
fi
exec "$(dirname "${BASH_SOURCE[0]}")/../e2e/stack-lib.sh" run current "$(dirname "${BASH_SOURCE[0]}")/perms-test.sh" "$@"
