# Shared by the tests/semantics/*-test.sh scripts (sourced): several ferryfsd instances, one guest boot.
# A test calls sem_init NAME, sem_daemon TAG SHARE ARGS... for each share (the first is mounted on
# /mnt and holds the guest's programs), writes "$sem_main/guest.sh", then sem_boot; CHECK lines of
# the guest end up in "$sem_out". Each further TAG is mounted by guest.sh itself (see sem_mount_line).

sem_here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# Paths, skip and the guest image: tests/lib/ (which sources tests/e2e/stack-lib.sh).
source "$sem_here/../lib/guest.sh"
sem_repo="$repo"
sem_ferryfsd="$ferryfsd"
# The guest of the stack FERRYFS_STACK selects (stable by default).
sem_guest_dir="$(stack_guest_dir)"
sem_pids=()
sem_qemu_extra=()
sem_tags=()
sem_fail=0

sem_say() { say "$@"; }

sem_cleanup() {
    for p in "${sem_pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    for m in "${sem_umounts[@]}"; do umount -l "$m" 2>/dev/null || true; done
    unpriv_cleanup || true
    rm -rf "$sem_tmp"
}

# sem_init NAME: skips (77) without QEMU or a guest image; builds the guest program.
# sem_init_current NAME TEST [ARGS...]: sem_init for a test of the current stack only, which
# first runs itself again on that stack (or skips, saying so, where it cannot be had).
sem_init_current() {
    local name=$1
    shift
    stack_require_current "$@"
    sem_init "$name"
}

sem_init() {
    sem_name="$1" test_name="$1"
    sem_umounts=()
    guest_prepare
    sem_tmp="$(mktemp -d "/tmp/ferryfs-$sem_name.XXXXXX")"
    chmod 755 "$sem_tmp"
    trap sem_cleanup EXIT
    # FERRYFS_DAEMON_USER=auto: a user of its own runs each ferryfsd, its sockets in $sem_tmp.
    unpriv_setup
    unpriv_own "$sem_tmp"
    sem_main=""
    gcc -static -O2 -Wall -Werror -o "$sem_tmp/gsem" "$sem_here/guest-semantics.c"
}

# sem_daemon TAG SHARE [ferryfsd args...]: starts ferryfsd for SHARE; the guest sees it as TAG.
# Under FERRYFS_DAEMON_USER=auto the user runs it, and SHARE becomes the user's.
sem_daemon() {
    local tag="$1" share="$2"; shift 2
    unpriv_own "$share"
    sem_daemon_cmd "$tag" "$share" "${unpriv_prefix[@]}" "$sem_ferryfsd" --socket-path="$sem_tmp/$tag.sock" --shared-dir="$share" \
        "${unpriv_idmap[@]}" "$@"
    unpriv_runs_as_user "${sem_pids[-1]}" || { sem_say "FAIL: $tag: ferryfsd does not run as $unpriv_user"; sem_fail=1; }
}

# sem_daemon_cmd TAG SHARE CMD...: starts any vhost-user-fs daemon (a reference virtiofsd) whose
# command line makes it listen on $sem_tmp/TAG.sock; the guest sees it as TAG.
sem_daemon_cmd() {
    local tag="$1" share="$2"; shift 2
    local sock="$sem_tmp/$tag.sock"
    "$@" >"$sem_tmp/$tag.log" 2>&1 &
    local pid=$!
    sem_pids+=("$pid")
    printf -v "sem_pid_${tag}" '%s' "$pid"
    wait_socket "$sock" || true
    if [[ -z "$sem_main" ]]; then
        sem_main="$share" sem_main_tag="$tag" sem_main_pid="$pid"
        cp "$sem_tmp/gsem" "$share/gsem"
    else
        sem_qemu_extra+=(-chardev "socket,id=c_$tag,path=$sock"
                         -device "vhost-user-fs-pci,chardev=c_$tag,tag=$tag")
        sem_tags+=("$tag")
    fi
}

# The guest.sh line that mounts every extra tag on /TAG.
sem_mount_line() {
    local t
    for t in "${sem_tags[@]}"; do
        printf 'mkdir -p /%s && mount -t virtiofs %s /%s || echo "CHECK mount-%s FAIL"\n' "$t" "$t" "$t" "$t"
    done
}

# sem_boot TIMEOUT: runs /mnt/guest.sh (extra kernel arguments in $sem_append); sets sem_out (CHECK lines), checks every daemon exits 0.
sem_boot() {
    local rc=0
    "$sem_repo/tests/e2e/run-guest.sh" --guest "$sem_guest_dir" --sock "$sem_tmp/$sem_main_tag.sock" --tag "$sem_main_tag" \
        --cmd /mnt/guest.sh --log "$sem_tmp/console.log" --quiet --timeout "$1" \
        ${sem_append:+--append "$sem_append"} \
        --watch-pid "$sem_main_pid" -- "${sem_qemu_extra[@]}" || rc=$?
    ((rc == 0)) || { sem_say "FAIL: guest run exited $rc"; sem_fail=1; }
    sem_out="$(tr -d '\r' <"$sem_tmp/console.log" | grep -a '^CHECK ' || true)"
    local p drc
    for p in "${sem_pids[@]}"; do
        drc=0
        for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        # A daemon no guest ever reached (QEMU refused to start, say) still listens: say so
        # and end it rather than wait for it without end.
        if kill -0 "$p" 2>/dev/null; then
            sem_say "FAIL: daemon $p still running 10 s after the guest run (no frontend reached it?)"
            sem_fail=1
            kill -TERM "$p" 2>/dev/null || true
            for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
            kill -KILL "$p" 2>/dev/null || true
        fi
        wait "$p" 2>/dev/null || drc=$?
        ((drc == 0)) || { sem_say "FAIL: daemon $p exited $drc"; sem_fail=1; }
    done
}

# sem_boot_guest_sh TIMEOUT [HELPER_PID]: sem_boot of the guest.sh the test wrote into the main share, with
# the guest's CHECK lines shown; sets sem_passed (how many passed).
sem_boot_guest_sh() {
    chmod 755 "$sem_main/guest.sh"
    sem_boot "$1"
    # A host-side helper that ran beside the guest (its pid, HELPER_PID) ends with it.
    if [[ -n ${2:-} ]]; then
        kill "$2" 2>/dev/null || true
        wait "$2" 2>/dev/null || true
    fi
    echo "$sem_out" | sed 's/^/  guest: /'
    sem_passed="$(grep -c '^CHECK .* PASS$' <<<"$sem_out" || true)"
}

# sem_all_guest_checks N: after sem_boot_guest_sh, all N guest checks must have passed (a check
# the guest never reached counts as failed too).
sem_all_guest_checks() {
    sem_host all-guest-checks-ran "$((sem_passed == $1))" "$sem_passed of $1 guest checks passed"
}

# sem_expect NAME...: each guest check must have passed.
sem_expect() {
    local c
    for c in "$@"; do
        grep -qx "CHECK $c PASS" <<<"$sem_out" || { sem_say "FAIL: $c: $(grep -a "^CHECK $c " <<<"$sem_out" || echo missing)"; sem_fail=1; }
    done
}

# sem_host NAME OK DETAIL: a host-side check.
sem_host() {
    if [[ "$2" == 1 ]]; then echo "HOST $1 PASS"; else echo "HOST $1 FAIL $3"; sem_fail=1; fi
}

# The INIT flags a daemon logged ("fuse: session 7.x, flags 0x...").
sem_init_flags() {
    local f
    f="$(grep -ao 'flags 0x[0-9a-f]*' "$sem_tmp/$1.log" | tail -1 | sed 's/flags //')"
    echo "${f:-0x0}"
}

# Any failed guest check fails the test, listed or not.
sem_finish() {
    if grep -a '^CHECK .* FAIL' <<<"$sem_out" | sed "s/^/$sem_name: /"; then
        sem_fail=1
    fi
    if ((sem_fail)); then
        for t in "$sem_tmp"/*.log; do cp "$t" "/tmp/$sem_name-$(basename "$t")" 2>/dev/null || true; done
        sem_say "FAIL (console and daemon logs copied to /tmp/$sem_name-*.log)"
        exit 1
    fi
    sem_say "PASS"
}
