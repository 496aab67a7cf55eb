#!/usr/bin/env bash
# make check: xattr-test.sh on the current stack (QEMU 10, Linux 6.12 guest): xattrs, ACLs and labels from a 6.12 guest, which sends FUSE_SETXATTR_ACL_KILL_SGID and the 7.38 create extensions; xattr-test.sh itself runs on stable.
# Exit: as xattr-test.sh (77 when the current stack cannot be had here).
exec "$(dirname "${BASH_SOURCE[0]}")/../e2e/stack-lib.sh" run current "$(dirname "${BASH_SOURCE[0]}")/xattr-test.sh" "$@"
