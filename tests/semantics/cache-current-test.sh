#!/usr/bin/env bash
# make check: cache-test.sh on the current stack (QEMU 10, Linux 6.12 guest): the guest's page and attribute cache under each cache mode, and --allow-mmap, which a 6.12 guest agrees to (6.1 cannot); cache-test.sh itself runs on stable.
# Exit: as cache-test.sh (77 when the current stack cannot be had here).
exec "$(dirname "${BASH_SOURCE[0]}")/../e2e/stack-lib.sh" run current "$(dirname "${BASH_SOURCE[0]}")/cache-test.sh" "$@"
