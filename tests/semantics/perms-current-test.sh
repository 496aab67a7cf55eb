#!/usr/bin/env bash
# make check: perms-test.sh on the current stack (QEMU 10, Linux 6.12 guest): the permissions matrix against a 6.12 guest's tmpfs, FUSE_CREATE_SUPP_GROUP in the set-group-ID cells; perms-test.sh itself runs on stable.
# Exit: as perms-test.sh (77 when the current stack cannot be had here).
exec "$(dirname "${BASH_SOURCE[0]}")/../e2e/stack-lib.sh" run current "$(dirname "${BASH_SOURCE[0]}")/perms-test.sh" "$@"
