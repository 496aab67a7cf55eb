#!/usr/bin/env bash
# make check test: libvirt-real-test.sh with libvirt 11.3 and QEMU 10 of the current stack (bookworm-backports, unpacked) in system mode as root, less <lock> (11.3 refuses it for ferryfsd).
FERRYFS_LIBVIRT=current exec "$(dirname "$0")/libvirt-real-test.sh" "$@"
