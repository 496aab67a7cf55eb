#!/usr/bin/env bash
# make check: locks-test.sh on the current stack (QEMU 10, Linux 6.12 guest): POSIX and flock locks between a 6.12 guest and the host; locks-test.sh itself runs on stable.
# Exit: as locks-test.sh (77 when the current stack cannot be had here).
exec "$(dirname "${BASH_SOURCE[0]}")/../e2e/stack-lib.sh" run current "$(dirname "${BASH_SOURCE[0]}")/locks-test.sh" "$@"
