# Shared setup for guest tests of one daemon at a time (sourced by tests/faults and tests/security): guest image, ferryfsd, QEMU guests, cleanup, /proc probes.
# Each test sets $name before sourcing; exits 77 when QEMU or the guest image is unavailable.
guest_lib_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$guest_lib_dir/../.." && pwd)"
ferryfsd="${FERRYFSD:-$repo/build/ferryfsd}"
source "$guest_lib_dir/stack-lib.sh"
guest_stack="$(stack_name)"
guest_dir="$(stack_guest_dir)"
run_guest="$repo/tests/e2e/run-guest.sh"

say() { echo "$name: $*"; }
fail() { say "FAIL: $*"; exit 1; }

if ! stack_prepare; then
    say "SKIP: the $guest_stack stack (FERRYFS_STACK) is not available here (see above)"
    exit 77
fi
[[ -x "$ferryfsd" ]] || fail "no daemon at $ferryfsd (run make)"
if ! "$repo/tests/e2e/build-guest.sh" "$guest_dir" >/dev/null; then
    say "SKIP: could not build the guest image"
    exit 77
fi

tmp="$(mktemp -d "/tmp/ferryfs-$name.XXXXXX")"
share="$tmp/share"
sock="$tmp/vfs.sock"
mkdir -p "$share"
daemon_pid=""
guest_pids=()
failed_run=1
guest_lib_cleanup() {
    local p
    for p in "${guest_pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    for p in "$tmp"/qemu*.pid; do
        [[ -f "$p" ]] && kill -KILL "$(cat "$p")" 2>/dev/null || true
    done
    [[ -z "$daemon_pid" ]] || kill -KILL "$daemon_pid" 2>/dev/null || true
    if ((failed_run)) || [[ "${FERRYFS_E2E_KEEP:-0}" == 1 ]]; then
        rm -rf "$share"
        say "logs kept in $tmp"
    else
        rm -rf "$tmp"
    fi
}
trap guest_lib_cleanup EXIT

# start_daemon [ferryfsd args...]: ferryfsd on $sock sharing $share, log in $tmp/daemon.log.
start_daemon() {
    rm -f "$sock"  # a socket left by an earlier daemon would look like this one listening
    "$ferryfsd" --socket-path="$sock" --shared-dir="$share" "$@" >>"$tmp/daemon.log" 2>&1 &
    daemon_pid=$!
    local i
    for i in $(seq 100); do
        [[ -S "$sock" ]] && return 0
        kill -0 "$daemon_pid" 2>/dev/null || fail "ferryfsd exited at start: $(tail -3 "$tmp/daemon.log")"
        sleep 0.1
    done
    fail "ferryfsd did not create $sock"
}

# start_guest TAG CMD ARGS [run-guest options...]: boots a guest in the background; its QEMU pid
# lands in $tmp/qemu-TAG.pid, its console in $tmp/console-TAG.log.
start_guest() {
    local tag=$1 cmd=$2 args=$3
    shift 3
    "$run_guest" --guest "$guest_dir" --sock "$sock" --cmd "$cmd" --args "$args" --quiet \
        --mem 512M --log "$tmp/console-$tag.log" "$@" -- -pidfile "$tmp/qemu-$tag.pid" \
        >"$tmp/run-guest-$tag.out" 2>&1 &
    guest_pids+=($!)
}

# wait_console TAG REGEX SECS: waits for a console line; fails the test on timeout.
wait_console() {
    local f="$tmp/console-$1.log" t=0
    while ((t < $3 * 10)); do
        [[ -f "$f" ]] && tr -d '\r' <"$f" | grep -aqE "$2" && return 0
        sleep 0.1
        t=$((t + 1))
    done
    fail "guest $1: no '$2' on the console within $3 s: $(tr -d '\r' <"$f" 2>/dev/null | tail -5)"
}

# wait_gone PID SECS: true once the process has ended.
wait_gone() {
    local t=0
    while kill -0 "$1" 2>/dev/null && ((t < $2 * 10)); do sleep 0.1; t=$((t + 1)); done
    ! kill -0 "$1" 2>/dev/null
}

fd_count() { ls "/proc/$1/fd" | wc -l; }
# status_kb PID FIELD: a /proc/PID/status size in kB (VmRSS, RssAnon, RssShmem).
status_kb() { awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"; }
