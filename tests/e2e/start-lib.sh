# Sourced by the *-start-test.sh tests: a share, one short guest boot (the demo command) against a started daemon, and the host-side checks.
# The caller sets `name` (message prefix) and sources this after `set -euo pipefail`.

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
ferryfsd="${FERRYFSD:-$repo/build/ferryfsd}"
source "$here/stack-lib.sh"
guest_stack="$(stack_name)"
guest_dir="$(stack_guest_dir)"
guest_timeout="${FERRYFS_E2E_TIMEOUT:-240}"
# Debian's interpreter, not whatever python3 is first on PATH.
python=/usr/bin/python3
fails=0

say() { echo "$name: $*"; }
pass() { say "PASS $*"; }
fail() { say "FAIL $*"; fails=$((fails + 1)); }

# Exits 77 when the guest cannot run here; creates $tmp (removed at exit unless something failed).
start_prepare() {
    if ! stack_prepare; then
        say "SKIP: the $guest_stack stack (FERRYFS_STACK) is not available here (see above)"
        exit 77
    fi
    [[ -x "$ferryfsd" ]] || { say "FAIL: $ferryfsd not built"; exit 1; }
    if ! "$here/build-guest.sh" "$guest_dir" >/dev/null; then
        say "SKIP: could not build the guest image"
        exit 77
    fi
    tmp="$(mktemp -d "/tmp/ferryfs-$name.XXXXXX")"
    share="$tmp/share"
    mkdir -p "$share"
    printf 'Hello, guest! This file lives on the host.\n' >"$share/welcome.txt"
    trap start_cleanup EXIT
}

cleanup_pids=()
start_cleanup() {
    local p
    for p in "${cleanup_pids[@]}"; do
        kill -KILL "$p" 2>/dev/null || true
    done
    if ((fails)); then
        say "logs kept in $tmp"
    else
        rm -rf "$tmp"
    fi
}

# Waits up to 10 s for a socket file (or for PID to die).
wait_socket() { # PATH [PID]
    local i
    for ((i = 0; i < 100; i++)); do
        [[ -S "$1" ]] && return 0
        [[ -z "${2:-}" ]] || kill -0 "$2" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# Boots the guest with the demo command against SOCK, then checks that the
# guest's writes reached the host share and that the daemon exited by itself.
boot_and_check() { # SOCK DAEMON_PID LABEL
    local sock=$1 pid=$2 label=$3 rc=0 i
    say "[$label] booting the guest (demo command)"
    "$here/run-guest.sh" --guest "$guest_dir" --sock "$sock" --cmd demo --quiet \
        --log "$tmp/$label-console.log" --timeout "$guest_timeout" --watch-pid "$pid" || rc=$?
    if ((rc == 0)); then pass "[$label] guest mounted the share and ran the demo"
    else fail "[$label] run-guest exit $rc (see $tmp/$label-console.log)"; fi
    if grep -aq 'Hello, guest! This file lives on the host.' "$tmp/$label-console.log"; then
        pass "[$label] guest read the host's file"
    else
        fail "[$label] guest did not print the host's welcome.txt"
    fi
    if grep -q '^Hello from the guest!$' "$share/guest-hello.txt" 2>/dev/null &&
        [[ "$(cat "$share/from-guest/renamed.txt" 2>/dev/null)" == "$(seq 1 5 | sed 's/^/line /')" ]]; then
        pass "[$label] the guest's files are on the host"
    else
        fail "[$label] guest-hello.txt or from-guest/renamed.txt missing or wrong on the host"
    fi
    rm -rf "$share/guest-hello.txt" "$share/from-guest"
    for ((i = 0; i < 100; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        fail "[$label] daemon still running 10 s after the guest powered off"
        kill -TERM "$pid" 2>/dev/null || true
    else
        pass "[$label] daemon exited after the frontend went away"
    fi
}

start_finish() {
    if ((fails)); then
        say "$fails check(s) failed"
        exit 1
    fi
    say "all checks passed"
    exit 0
}
