#!/usr/bin/env bash
# make check: perms-test.sh on the current stack (QEMU 10, Linux 6.12 guest): the permissions matrix against a 6.12 guest's tmpfs, FUSE_CREATE_SUPP_GROUP in the set-group-ID cells; perms-test.sh itself runs on stable.
# Env: FERRYFS_PERMS_REFERENCE=1 keeps QEMU 7.2's C virtiofsd column too. Exit: as perms-test.sh (77 when the current stack cannot be had here).
# On this stack the Rust virtiofsd is the reference users would pick; QEMU's C virtiofsd left QEMU in
# 8.0 and perms-test.sh already runs it against the 6.1 guest, so make check leaves it out here.
if [[ "${FERRYFS_PERMS_REFERENCE:-0}" != 1 ]]; then
    export VIRTIOFSD=/nonexistent
fi
exec "$(dirname "${BASH_SOURCE[0]}")/../e2e/stack-lib.sh" run current "$(dirname "${BASH_SOURCE[0]}")/perms-test.sh" "$@"
