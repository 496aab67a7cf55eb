#!/usr/bin/env bash
# make check: access-test.sh on the current stack (QEMU 10, Linux 6.12 guest): submounts, O_DIRECT/O_NOATIME, --readonly, id translation and suid/sgid clearing as a 6.12 guest asks for them; access-test.sh itself runs on stable.
# Exit: as access-test.sh (77 when the current stack cannot be had here).
exec "$(dirname "${BASH_SOURCE[0]}")/../e2e/stack-lib.sh" run current "$(dirname "${BASH_SOURCE[0]}")/access-test.sh" "$@"
