# Sourced by the guest tests: the FERRYFS_STACK guest image built (or SKIP), guests booted in the background or to the end of a command, their consoles waited on.
# Builds on common.sh (paths, skip, temp dir, daemon) and tests/e2e/stack-lib.sh (which QEMU and guest). Nothing runs at source time.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$repo/tests/e2e/stack-lib.sh"
source "$lib_dir/procs.sh"
run_guest="$repo/tests/e2e/run-guest.sh"
guest_timeout="${FERRYFS_E2E_TIMEOUT:-240}"
guest_pids=()

# guest_prepare: skips (77) unless the selected stack and its guest image can
# be had here, fails unless ferryfsd is built; sets guest_stack and guest_dir.
guest_prepare() {
    guest_stack="$(stack_name)"
    guest_dir="$(stack_guest_dir)"
    stack_prepare || skip "the $guest_stack stack (FERRYFS_STACK) is not available here (see above)"
    need_built "$ferryfsd"
    "$repo/tests/e2e/build-guest.sh" "$guest_dir" >/dev/null || skip "could not build the guest image"
    # Whatever the test boots in the background goes with it.
    cleanup_cmds+=('guest_kill_all')
}
guest_kill_all() {
    local p
    for p in "${guest_pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    for p in "$tmp"/qemu*.pid; do
        [[ -f "$p" ]] && kill -KILL "$(cat "$p")" 2>/dev/null || true
    done
}

# share_from_env NAME: the fault tests' FERRYFS_SHARE_ROOT / FERRYFS_SHARE_VIEW knob. Sets $view,
# where the test's host-side checks read what the guest wrote: $share when the knob is unset.
# FERRYFS_SHARE_ROOT=DIR moves $share to a fresh DIR/NAME.XXXXXX (e.g. on a GlusterFS mount; removed
# at exit unless FERRYFS_E2E_KEEP=1); the socket, pid files and binaries stay in $tmp, since a
# vhost-user socket on a FUSE mount may refuse connects. FERRYFS_SHARE_VIEW=DIR2 is DIR seen
# another way (the volume's other mount): $view is the same subdirectory under DIR2.
share_from_env() {
    view="$share"
    [[ -n "${FERRYFS_SHARE_ROOT:-}" ]] || return 0
    share="$(mktemp -d "$FERRYFS_SHARE_ROOT/$1.XXXXXX")" || die "no share in FERRYFS_SHARE_ROOT=$FERRYFS_SHARE_ROOT"
    cleanup_cmds+=('[[ ${FERRYFS_E2E_KEEP:-0} == 1 ]] || rm -rf "$share"')
    view="$share"
    [[ -z "${FERRYFS_SHARE_VIEW:-}" ]] || view="$FERRYFS_SHARE_VIEW/$(basename "$share")"
    [[ -d "$view" ]] || die "$view (FERRYFS_SHARE_VIEW) does not show the share $share"
    say "share $share${FERRYFS_SHARE_VIEW:+, read back through $view}"
}

# start_guest TAG CMD ARGS [run-guest options...]: boots a guest against $sock
# in the background; its QEMU pid lands in $tmp/qemu-TAG.pid, its console in
# $tmp/console-TAG.log, its run-guest.sh pid in guest_pids.
start_guest() {
    local tag=$1 cmd=$2 args=$3 a sep=(--)
    shift 3
    # QEMU arguments of the caller's own (after its "--") come before the pid file's.
    for a in "$@"; do [[ $a == -- ]] && sep=(); done
    "$run_guest" --guest "$guest_dir" --sock "$sock" --cmd "$cmd" --args "$args" --quiet \
        --mem 512M --log "$tmp/console-$tag.log" "$@" "${sep[@]}" -pidfile "$tmp/qemu-$tag.pid" \
        >"$tmp/run-guest-$tag.out" 2>&1 &
    guest_pids+=($!)
}

# guest_result TAG WORD: waits for the guest start_guest booted first (console TAG) to end and
# takes its result from the console. Sets guest_rc (run-guest.sh's exit status), guest_log (the
# console without CRs) and guest_line (its lines that start with WORD); fails the test when
# there is none.
guest_result() {
    guest_rc=0
    wait "${guest_pids[0]}" || guest_rc=$?
    guest_log="$(tr -d '\r' <"$tmp/console-$1.log")"
    guest_line=$(grep -a "^$2" <<<"$guest_log" || true)
    [[ -n "$guest_line" ]] || die "guest printed no $2 line (run-guest $guest_rc): $(tail -5 <<<"$guest_log")"
}

# line_field NAME LINE: the number LINE gives as NAME=N (at its start or after a blank).
line_field() { sed -E "s/(^|.* )$1=([0-9]+).*/\2/" <<<"$2"; }

# wait_console TAG REGEX SECS: waits for a console line; fails the test on timeout, or at
# once when QEMU aborted on its own assertion (recorded in $FERRYFS_QEMU_ABORTS, so
# tests/lib/run-test.sh runs the test again, as run-guest.sh would once QEMU is gone).
wait_console() {
    local f="$tmp/console-$1.log" t=0 abort
    while ((t < $3 * 10)); do
        [[ -f "$f" ]] && tr -d '\r' <"$f" | grep -aqE "$2" && return 0
        if ((t % 10 == 9)) && abort="$(stack_qemu_abort "$f")"; then
            [[ -z "${FERRYFS_QEMU_ABORTS:-}" ]] || echo "$abort" >>"$FERRYFS_QEMU_ABORTS"
            die "guest $1: QEMU aborted on its own assertion (a QEMU bug, not the daemon's): $abort"
        fi
        sleep 0.1
        t=$((t + 1))
    done
    die "guest $1: no '$2' on the console within $3 s: $(tr -d '\r' <"$f" 2>/dev/null | tail -5)"
}



# boot_demo_and_check SOCK DAEMON_PID LABEL: boots the guest with the demo
# command against SOCK (a daemon serving $share, which holds welcome.txt),
# then checks that the guest read the host's file, that its writes reached
# the host, and that the daemon exited by itself with status 0 (pass/fail,
# not fatal). A daemon that is not the test shell's child (--daemonize's)
# has no status to read: only its end is checked, and the line says so.
boot_demo_and_check() {
    local sock=$1 pid=$2 label=$3 rc=0
    say "[$label] booting the guest (demo command)"
    "$run_guest" --guest "$guest_dir" --sock "$sock" --cmd demo --quiet \
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
    local drc=0
    if ! wait_gone "$pid" 10; then
        fail "[$label] daemon still running 10 s after the guest powered off"
        kill -TERM "$pid" 2>/dev/null || true
        return
    fi
    wait "$pid" 2>/dev/null || drc=$?
    if ((drc == 127)); then
        pass "[$label] daemon exited after the frontend went away (not this shell's child: no status to read)"
    elif ((drc == 0)); then
        pass "[$label] daemon exited with status 0 after the frontend went away"
    else
        fail "[$label] daemon exited with status $drc after the frontend went away, not 0 (README.md)"
    fi
}

# start_and_boot_demo LABEL LOG SOCK COMMAND...: starts COMMAND (a daemon, or
# what starts one) in the background with its output in LOG, and once SOCK is
# a socket, boot_demo_and_check against it; fails (not fatal) if it never is.
start_and_boot_demo() {
    local label=$1 log=$2 sock=$3 pid
    shift 3
    "$@" >"$log" 2>&1 &
    pid=$!
    cleanup_pids+=("$pid")
    if wait_socket "$sock" "$pid"; then
        boot_demo_and_check "$sock" "$pid" "$label"
    else
        fail "$1 did not listen on $sock: $(cat "$log")"
    fi
}
