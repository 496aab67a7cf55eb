# Sourced by the *-start-test.sh tests and daemonize-test.sh: a share with welcome.txt, the guest image, one demo boot (boot_demo_and_check) against a daemon each test starts its own way.
# The caller sets `name` and sources this after `set -euo pipefail`; the helpers are tests/lib/ (pass/fail count, finish says the result).
source "$(dirname "${BASH_SOURCE[0]}")/../lib/guest.sh"
here="$repo/tests/e2e"
# Debian's interpreter, not whatever python3 is first on PATH.
python=/usr/bin/python3

# Exits 77 when the guest cannot run here; creates $tmp (removed at exit unless something failed).
start_prepare() {
    guest_prepare
    make_tmp
    share="$tmp/share"
    mkdir -p "$share"
    printf 'Hello, guest! This file lives on the host.\n' >"$share/welcome.txt"
}

