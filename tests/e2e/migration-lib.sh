# Sourced by migration-test.sh: one migration daemon (ferryfsd or the Rust virtiofsd) and one QEMU 10 per VM generation, HMP over unix sockets, migrations polled to their end.
# Needs from the caller: $tmp, $share, $guest_dir, $mig_daemon, $ferryfsd, $repo, say/fail (common.sh).
# mig_exec (default empty): a command prefix for every daemon and QEMU, e.g. the gluster test's
# nsenter into its namespaces ("${gl_enter[@]}": it execs, so $! stays the process itself).
# FERRYFS_DAEMON_USER=auto (tests/lib/unpriv.sh, set up by the caller with unpriv_setup): every
# ferryfsd runs as that user (after mig_exec, so both combine), who gets its share first and must
# own $tmp (the sockets); d_start fails when a daemon's uids are not the user's. The Rust virtiofsd
# stays root (it needs CAP_DAC_READ_SEARCH for handles).
# A VM is a number N: daemon socket $tmp/dN.sock (pid dpid[N]), monitor $tmp/qN.mon, console
# $tmp/console-N.log, QEMU pid qpid[N]. Every wait is bounded.

# Debian's python3 when there: a version manager's shim on PATH can add 100 ms to every call.
py=python3
[[ -x /usr/bin/python3 ]] && py=/usr/bin/python3
helper=("$py" "$repo/tests/e2e/migration-helper.py")
source "$repo/tests/lib/vring.sh"
declare -A dpid qpid d_stopped
mig_exec=()
mig_mem=256M

# d_start N MODE ONERR [EXTRA...]: the daemon of VM N on $share ($d_share if set; cache=never, its default
# sandbox), migrating in MODE (find-paths|file-handles) and reacting to load errors with ONERR
# (abort|guest-error). False if it does not listen within 10 s.
d_start() {
    local n=$1 mode=$2 onerr=$3 sock="$tmp/d$1.sock" dir=${d_share:-$share}
    shift 3
    rm -f "$sock"
    if [[ $mig_daemon == virtiofsd-rs ]]; then
        # Opening file handles needs CAP_DAC_READ_SEARCH, which the Rust virtiofsd drops by
        # default; a destination needs it whatever its own mode when the source sends handles.
        "${mig_exec[@]}" "$repo/tests/e2e/virtiofsd-rs" --socket-path="$sock" --shared-dir="$dir" --cache=never \
            --migration-mode="$mode" --migration-on-error="$onerr" --modcaps=+dac_read_search "$@" \
            >>"$tmp/d$n.log" 2>&1 &
    else
        unpriv_own "$dir"
        "${mig_exec[@]}" "${unpriv_prefix[@]}" "$ferryfsd" --socket-path="$sock" --shared-dir="$dir" --cache=never \
            --migration-mode="$mode" --migration-on-error="$onerr" "$@" >>"$tmp/d$n.log" 2>&1 &
    fi
    dpid[$n]=$! d_stopped[$n]=""
    wait_socket "$sock" "${dpid[$n]}" 10 || return 1
    [[ $mig_daemon == virtiofsd-rs ]] || unpriv_runs_as_user "${dpid[$n]}" ||
        { echo "ferryfsd $n does not run as $unpriv_user" >>"$tmp/d$n.log"; return 1; }
}

# q_start N [INCOMING]: QEMU 10 for VM N against daemon N, the guest running guest-migrate on
# /mnt/mig; with INCOMING (a -incoming URI) it waits for a migration instead of booting.
q_start() {
    local n=$1 inc=() stack_qemu_cmd=()
    [[ -n ${2:-} ]] && inc=(-incoming "$2")
    stack_qemu_argv current || return 1
    # Both ends of a migration need the same machine, memory backend and device options.
    "${mig_exec[@]}" "${stack_qemu_cmd[@]}" -accel tcg -m "$mig_mem" -smp 1 -display none -no-reboot \
        -kernel "$guest_dir/vmlinuz" -initrd "$guest_dir/initrd.img" \
        -append "console=ttyS0 quiet loglevel=3 panic=-1 ferryfs.cmd=run ferryfs.args=migrate,/mnt/mig ferryfs.tag=ferryfs" \
        -chardev "socket,id=char0,path=$tmp/d$n.sock" \
        -device vhost-user-fs-pci,chardev=char0,tag=ferryfs \
        -object "memory-backend-memfd,id=mem,size=$mig_mem,share=on" -numa node,memdev=mem \
        -serial "file:$tmp/console-$n.log" -monitor "unix:$tmp/q$n.mon,server=on,wait=off" \
        "${inc[@]}" </dev/null >>"$tmp/q$n.log" 2>&1 &
    qpid[$n]=$!
    local i
    for ((i = 0; i < 100; i++)); do
        [[ -S $tmp/q$n.mon ]] && return 0
        kill -0 "${qpid[$n]}" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# vm_start N MODE ONERR [INCOMING [DAEMON EXTRA...]]: daemon and QEMU of VM N.
vm_start() {
    local n=$1 mode=$2 onerr=$3 inc=${4:-}
    shift 3
    (($#)) && shift
    d_start "$n" "$mode" "$onerr" "$@" || { say "daemon $n did not start: $(tail -3 "$tmp/d$n.log")"; return 1; }
    q_start "$n" "$inc" || { say "QEMU $n did not start: $(tail -3 "$tmp/q$n.log")"; return 1; }
    if [[ -n $inc ]]; then
        # The return path lets the source hear that the destination failed to load, and resume.
        hmp "$n" migrate_set_capability return-path on >/dev/null
    fi
}

# vm_stop N: QEMU N and its daemon gone (the daemon ends when its front-end leaves). A ferryfsd
# must end by itself with status 0 (README.md; expect_daemon_exit fails the test otherwise),
# whether its VM was migrated away, refused a state or never moved; the reference's status is
# not judged.
vm_stop() {
    local n=$1
    [[ -n ${qpid[$n]:-} ]] && { kill -TERM "${qpid[$n]}" 2>/dev/null; wait_gone "${qpid[$n]}" 10 || kill -KILL "${qpid[$n]}" 2>/dev/null; }
    if [[ -n ${dpid[$n]:-} && $mig_daemon != virtiofsd-rs && -z ${d_stopped[$n]:-} ]]; then
        expect_daemon_exit "${dpid[$n]}" "ferryfsd of VM $n" 30 || true
    elif [[ -n ${dpid[$n]:-} ]]; then
        wait_gone "${dpid[$n]}" 5 || kill -TERM "${dpid[$n]}" 2>/dev/null; wait_gone "${dpid[$n]}" 5 || kill -KILL "${dpid[$n]}" 2>/dev/null
    fi
    [[ -z ${dpid[$n]:-} ]] || d_stopped[$n]=1
    return 0
}

vm_kill_all() {
    local n
    for n in "${!qpid[@]}"; do kill -KILL "${qpid[$n]}" 2>/dev/null; done
    for n in "${!dpid[@]}"; do kill -KILL "${dpid[$n]}" 2>/dev/null; done
    return 0
}

# hmp N COMMAND...: one HMP command on VM N's monitor (vring_hmp, tests/lib/vring.sh).
hmp() { local n=$1; shift; vring_hmp "$tmp/q$n.mon" "$@"; }

# vm_status N: QEMU N's run state (running, paused, postmigrate, inmigrate, ...).
vm_status() { hmp "$1" info status | sed -n 's/^VM status: \([a-z-]*\).*/\1/p' | head -1; }

# migrate SRC URI SECS: starts a migration of VM SRC and echoes how it ended (completed, failed,
# cancelled, or timeout after SECS, which cancels it).
migrate() {
    local src=$1 uri=$2 secs=$3 st="" i out
    # For round_wait: a migration was tried since the last round that reported (this runs in
    # a command substitution, so a file, not a variable).
    : >"$tmp/migrated-since-round"
    hmp "$src" migrate_set_capability return-path on >/dev/null
    # HMP takes the URI as one word only when quoted (exec: has spaces). It says nothing when
    # the migration starts; anything it says means it did not, and the status shown
    # afterwards would be the last migration's.
    out=$(hmp "$src" migrate -d "\"$uri\"" 2>&1)
    echo "migrate -d \"$uri\": $out" >>"$tmp/q$src.hmp"
    if [[ -n ${out//[[:space:]]/} ]]; then
        echo "not-started: $(tr '\n' ' ' <<<"$out")"
        return 0
    fi
    for ((i = 0; i < secs * 4; i++)); do
        st=$(hmp "$src" info migrate | sed -n 's/^Migration status: *\([a-z-]*\).*/\1/p' | head -1)
        case $st in completed | failed | cancelled) echo "$st"; return 0 ;; esac
        sleep 0.25
    done
    hmp "$src" migrate_cancel >/dev/null
    echo "timeout($st)"
}

# request_ring N: what VM N's request queue shows (vring_state, tests/lib/vring.sh).
request_ring() { vring_state "$tmp/q$1.mon"; }

# wait_file PATH SECS: true once PATH exists.
wait_file() {
    local i
    for ((i = 0; i < $2 * 10; i++)); do
        [[ -e $1 ]] && return 0
        sleep 0.1
    done
    return 1
}

# metrics PID: "fds rss_kb" of the process that serves for a daemon (serving_pid, tests/lib/procs.sh).
metrics() {
    local p
    p=$(serving_pid "$1")
    echo "$(ls "/proc/$p/fd" 2>/dev/null | wc -l) $(awk '$1 == "VmRSS:" {print $2}' "/proc/$p/status" 2>/dev/null)"
}
