# Sourced by the shell tests: paths, SKIP (exit 77), PASS/FAIL lines or a results table, a temp dir kept on failure, starting and ending a daemon.
# Every line a test says starts "NAME: ", NAME being $name when set before sourcing, else the script's name. Nothing runs at source time but the paths.

lib_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$lib_dir/../.." && pwd)"
here="$(cd "$(dirname "$0")" && pwd)"  # the test's own directory
# make check (tests/meson.build) sets both to its own build; by hand, build/ of this checkout.
build="${MESON_BUILD_ROOT:-$repo/build}"
ferryfsd="${FERRYFSD:-$build/ferryfsd}"
fails=0
# Not $name itself: tests use that for locals too, and say would pick those up.
test_name="${name:-$(basename "$0" .sh)}"

say() { echo "$test_name: $*"; }
skip() { say "SKIP: $*"; exit 77; }
die() { say "FAIL: $*"; fails=$((fails + 1)); exit 1; }
# pass WHAT... and fail WHAT...: a line each; after results_table, a row each (below).
pass() {
    if [[ -n $results ]]; then printf '%s\tPASS\n' "$1" >>"$results"; else say "PASS $*"; fi
}
fail() {
    fails=$((fails + 1))
    if [[ -n $results ]]; then printf '%s\tFAIL %s\n' "$1" "${*:2}" >>"$results"; else say "FAIL $*"; fi
}
# pass_if NAME OK REASON: pass NAME when OK is 1, else fail NAME REASON.
pass_if() { if [[ $2 == 1 ]]; then pass "$1"; else fail "$1" "$3"; fi; }
# check WHAT CMD...: runs CMD and says "  ok   WHAT" or "  FAIL WHAT".
check() {
    local what=$1
    shift
    if "$@"; then echo "  ok   $what"; else echo "  FAIL $what"; fails=$((fails + 1)); fi
}
# finish: exits 1 when a check failed, else 0, saying which.
finish() {
    if ((fails)); then
        say "$fails check(s) failed"
        exit 1
    fi
    say "all checks passed"
    exit 0
}

# A test with many named checks keeps them as a table: results_table (after make_tmp) turns
# pass NAME and fail NAME REASON into rows "NAME<TAB>PASS" and "NAME<TAB>FAIL REASON" of
# $results, which results_report prints at the end; other helpers (host-checks.sh) may add rows.
results=""
results_table() {
    results="$tmp/results"
    : >"$results"
}
# results_report WIDTH: the table (names padded to WIDTH), "N passed, N failed"; exits 1 when
# a row failed, else 0.
results_report() {
    local passed failed
    echo
    awk -F'\t' -v w="$1" '{ printf "%-" w "s %s\n", $1, $2 }' "$results"
    passed="$(grep -c $'\tPASS' "$results" || true)"
    failed="$(grep -c $'\tFAIL' "$results" || true)"
    say "$passed passed, $failed failed"
    ((failed == 0)) || exit 1
    exit 0
}

need_root() { [[ $(id -u) == 0 ]] || skip "needs root ($*)"; }
need_cmd() { # CMD...: skips when one is not installed
    local c
    for c; do command -v "$c" >/dev/null || skip "$c missing (scripts/deps.sh installs it)"; done
}
need_built() { # FILE...: fails when one is not built
    local f
    for f; do [[ -x "$f" ]] || die "$f not built (run make)"; done
}
need_exec() { # FILE...: skips when one is not built
    local f
    for f; do [[ -x "$f" ]] || skip "$f not built"; done
}

# make_tmp: $tmp, a new /tmp/ferryfs-NAME.XXXXXX. At exit the pids in
# cleanup_pids are killed, the commands in cleanup_cmds run in order, and
# $tmp is removed; with FERRYFS_E2E_KEEP=1 it all stays, and when the test
# failed (exit status or fails) all but the paths in tmp_drop stays (big
# data; the logs are what matter).
cleanup_pids=()
cleanup_cmds=()
tmp_drop=()
make_tmp() {
    tmp="$(mktemp -d "/tmp/ferryfs-$test_name.XXXXXX")"
    trap tmp_cleanup EXIT
}
tmp_cleanup() {
    local rc=$? p c
    for p in "${cleanup_pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    for c in "${cleanup_cmds[@]}"; do eval "$c" || true; done
    if [[ "${FERRYFS_E2E_KEEP:-0}" == 1 ]]; then
        say "kept $tmp"
    elif ((rc != 0 || fails)); then
        for p in "${tmp_drop[@]}"; do rm -rf "$p"; done
        say "logs kept in $tmp"
    else
        rm -rf "$tmp"
    fi
}

# wait_socket PATH [PID] [SECS]: true once PATH is a socket; false after SECS
# (default 10) or as soon as PID (if given) has ended.
wait_socket() {
    local i
    for ((i = 0; i < ${3:-10} * 10; i++)); do
        [[ -S "$1" ]] && return 0
        [[ -z "${2:-}" ]] || kill -0 "$2" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# wait_gone PID SECS: true once the process has ended.
wait_gone() {
    local t=0
    while kill -0 "$1" 2>/dev/null && ((t < $2 * 10)); do sleep 0.1; t=$((t + 1)); done
    ! kill -0 "$1" 2>/dev/null
}

# start_daemon [ferryfsd args...]: ferryfsd on $sock sharing $share, its
# output appended to $tmp/daemon.log; sets daemon_pid. The test fails (exit
# 1) if the daemon ends or does not listen within 10 s. Under
# FERRYFS_DAEMON_USER=auto the first call makes the user (unpriv.sh, removed
# at exit), who then owns $share and the socket's directory and runs ferryfsd.
start_daemon() {
    rm -f "$sock"  # a socket left by an earlier daemon would look like this one listening
    if [[ -n "${FERRYFS_DAEMON_USER:-}" ]] && ! unpriv_active; then
        unpriv_setup
        cleanup_cmds+=('unpriv_cleanup')
    fi
    unpriv_own "$share" "$(dirname "$sock")"
    "${unpriv_prefix[@]}" "$ferryfsd" --socket-path="$sock" --shared-dir="$share" "$@" >>"$tmp/daemon.log" 2>&1 &
    daemon_pid=$!
    if wait_socket "$sock" "$daemon_pid"; then
        unpriv_runs_as_user "$daemon_pid" || die "ferryfsd does not run as $unpriv_user"
        return 0
    fi
    kill -0 "$daemon_pid" 2>/dev/null || die "ferryfsd exited at start: $(tail -3 "$tmp/daemon.log")"
    die "ferryfsd did not create $sock"
}

# A ferryfsd's end is part of what a test checks: README.md documents exit status 0 on SIGTERM
# and when its frontend goes away. Both helpers below wait for the end (a hang is a failure too),
# read the status with `wait`, so PID must be a child of the test's shell, and unless it is 0
# call the test's fail with two arguments, which daemon and why (fail MESSAGE... joins them, a
# table's fail NAME REASON takes them apart); they return 0 when it was, else 1 with the reason
# in daemon_exit_why. A test that kills -9 on purpose says so instead.
#
# stop_daemon PID [WHAT] [SECS]: SIGTERM, then the exit status within SECS (default 60).
stop_daemon() {
    kill -TERM "$1" 2>/dev/null || true
    daemon_exit_status "$1" "${2:-ferryfsd}" "${3:-60}" "after SIGTERM"
}
# expect_daemon_exit PID [WHAT] [SECS]: its frontend is gone, so it ends by itself within SECS
# (default 30; then SIGTERM, and a failure) with status 0.
expect_daemon_exit() {
    daemon_exit_status "$1" "${2:-ferryfsd}" "${3:-30}" "after its frontend went away"
}
daemon_exit_why=""
# daemon_alive PID: running; a zombie not yet reaped by the shell has ended (kill -0 reaches it).
daemon_alive() {
    local st
    st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) || return 1
    [[ -n $st && ${st%% *} != Z ]]
}
daemon_exit_status() { # PID WHAT SECS WHEN
    local pid=$1 what=$2 secs=$3 when=$4 t rc=0
    daemon_exit_why=""
    for ((t = 0; t < secs * 10; t++)); do
        daemon_alive "$pid" || break
        sleep 0.1
    done
    if daemon_alive "$pid"; then
        kill -TERM "$pid" 2>/dev/null || true
        for ((t = 0; t < 100; t++)); do daemon_alive "$pid" || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        daemon_exit_why="still running $secs s $when; killed"
    else
        wait "$pid" 2>/dev/null || rc=$?
        if ((rc == 127)); then
            daemon_exit_why="no exit status to read (not a child of the test's shell)"
        elif ((rc != 0)); then
            daemon_exit_why="exited with status $rc $when, not 0$( ((rc > 128)) && echo " (signal $((rc - 128)))")"
        fi
    fi
    [[ -n $daemon_exit_why ]] || return 0
    fail "$what (pid $pid)" "$daemon_exit_why"
    return 1
}

# load_test_setup [BUILD_DIR]: how a ferryfs-load test starts: build (BUILD_DIR, default as
# above), ferryfsd (FERRYFSD or the build's) and load (the build's ferryfs-load); skips
# without jq or either program; makes $tmp.
load_test_setup() {
    build=${1:-$build}
    ferryfsd=${FERRYFSD:-$build/ferryfsd} load=$build/ferryfs-load
    need_cmd jq
    need_exec "$ferryfsd" "$load"
    make_tmp
}

# start_stats_daemon NAME [ferryfsd args...]: a ferryfsd of its own for a
# load test (ferryfs-load is its frontend): socket $tmp/NAME.sock, stats
# socket $tmp/NAME.stats, share $tmp/share-NAME, --cache never, no sandbox
# or seccomp, output in $tmp/NAME.log. Sets sock, stats, share and pid, and
# waits up to 5 s for both sockets. The test's exit kills the last one.
start_stats_daemon() {
    local name=$1; shift
    [[ -v pid ]] || cleanup_cmds+=('[[ -z $pid ]] || kill "$pid" 2>/dev/null; wait 2>/dev/null')
    sock=$tmp/$name.sock stats=$tmp/$name.stats share=$tmp/share-$name
    mkdir -p "$share"
    "$ferryfsd" --socket-path="$sock" --shared-dir="$share" --cache never \
        --stats-socket="$stats" --sandbox=none --seccomp=none "$@" >"$tmp/$name.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do [[ -S $sock && -S $stats ]] && break; sleep 0.05; done
}

# FERRYFS_DAEMON_USER=auto: ferryfsd as a throwaway ordinary user.
source "$lib_dir/unpriv.sh"
