#!/usr/bin/env bash
# make check test: migration-test.sh with the Rust virtiofsd 1.13 as the daemon, the reference column (its gaps print as GAP, not as passes).
MIGRATION_DAEMON=virtiofsd-rs exec "$(dirname "$0")/migration-test.sh" "$@"
