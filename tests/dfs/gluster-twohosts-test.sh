#!/usr/bin/env bash
# make check (suite dfs): two "hosts" on one GlusterFS volume (two mounts, a ferryfsd and a QEMU on each): a file written in guest A read in guest B with cache=never and cache=auto (how long B takes, timed), POSIX and flock locks of guest A probed from guest B, and a guest migrated from the daemon on mount A to the daemon on mount B keeping its open files. FERRYFS_DFS=ceph: the same on CephFS, as a part of ceph-test.sh.
#
# Usage: gluster-twohosts-test.sh   Env: FERRYFSD, FERRYFS_E2E_KEEP=1, FERRYFS_E2E_TIMEOUT
#        FERRYFS_TWOHOSTS_MIG="ferryfsd"  migration columns; "ferryfsd virtiofsd-rs" (the Rust
#                                  virtiofsd is the reference: recorded, not judged) with
#                                  FERRYFS_CHECK_LONG=1 (make check-long); "none" skips the move
#        FERRYFS_TWOHOSTS_SECS=20  how long guest B may take to see guest A's write
#        FERRYFS_TWOHOSTS_PAIRS="never auto"  the cache modes of the guest pairs (never: with
#                                  locks); "none": no pair
# Exit:  0 B read A's write in both cache modes within FERRYFS_TWOHOSTS_SECS, what guest B saw
#        of A's locks is what a process on host mount B sees (gluster's own answer), ferryfsd's
#        guest kept its held files across the move A -> B and the host reads through mount A
#        what it wrote; 1 otherwise; 77 not root, glusterfs packages, the current stack or gcc
#        -static missing.
# Time:  ~5 s gluster, two pairs of guests booted in parallel (~20-30 s a pair under TCG), one
#        migration guest per column (~25 s).
set -uo pipefail
source "$(dirname "$0")/../lib/guest.sh"
source "$lib_dir/dfs.sh"
dfs_need
need_built "$ferryfsd"
stack_prepare current >/dev/null 2>&1 || skip "the current stack (QEMU 10, Linux 6.12) is not available"
FERRYFS_GUEST_DIR="$(stack_guest_dir current)"
export FERRYFS_STACK=current FERRYFS_GUEST_DIR
guest_prepare
make_tmp
# The lock helper runs in the guests from the share: a static binary needs nothing of the image.
gcc -static -O2 -Wall -o "$tmp/locks" "$here/guest-locks.c" 2>"$tmp/gcc.out" ||
    skip "gcc -static failed (libc6-dev): $(head -2 "$tmp/gcc.out")"
secs=${FERRYFS_TWOHOSTS_SECS:-20}
dfs_start
# The mounts as this shell sees them (through the namespace holder's root): the host's checks
# and timings need no nsenter per look.
A="$(dfs_view "$dfs_a")" B="$(dfs_view "$dfs_b")"
say "stack $guest_stack, guest $guest_dir"

# mark PATH SECS: the time (EPOCHREALTIME) at which PATH exists; false after SECS.
mark() {
    local i
    for ((i = 0; i < $2 * 50; i++)); do
        [[ -e $1 ]] && { echo "$EPOCHREALTIME"; return 0; }
        sleep 0.02
    done
    return 1
}

# probe_host DIR: what a host process on that mount sees of guest A's locks (the oracle).
probe_host() {
    python3 - "$1" <<'EOF'
import errno, fcntl, os, sys
d = sys.argv[1]
for kind, name in (("posix-setlk", "lk-posix"), ("flock", "lk-flock")):
    fd = os.open(os.path.join(d, name), os.O_RDWR)
    try:
        if kind == "flock":
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        print("LOCK %s granted" % kind)
    except OSError as e:
        print("LOCK %s %s" % (kind, "refused" if e.errno in (errno.EAGAIN, errno.EACCES) else "error " + os.strerror(e.errno)))
    os.close(fd)
EOF
}

# pair MODE LOCKS: a ferryfsd on each mount (--cache=MODE) with a guest each, booted together.
pair() {
    local mode=$1 locks=$2 side s t0 t1 p
    local dir="th-$mode"
    local -A dp gp mnt=([a]=$dfs_a [b]=$dfs_b)
    mkdir -p "$A/$dir"
    printf 'v1 written by H\n' >"$A/$dir/data"
    cp "$here/guest-twohosts.sh" "$tmp/locks" "$A/$dir/"
    local lockopts=()
    [[ $locks == locks ]] && lockopts=(--posix-lock --flock)
    for side in a b; do
        s="$tmp/$mode-$side.sock"
        "${dfs_enter[@]}" "$ferryfsd" --socket-path="$s" --shared-dir="${mnt[$side]}/$dir" \
            --cache="$mode" "${lockopts[@]}" >"$tmp/$mode-$side.log" 2>&1 &
        dp[$side]=$!
        cleanup_pids+=("${dp[$side]}")
        wait_socket "$s" "${dp[$side]}" || die "ferryfsd $side did not listen: $(tail -3 "$tmp/$mode-$side.log")"
    done
    for side in a b; do
        "${dfs_enter[@]}" "$run_guest" --guest "$guest_dir" --sock "$tmp/$mode-$side.sock" --cmd run \
            --args "sh /mnt/guest-twohosts.sh ${side^^} $locks $secs" --quiet --mem 256M --smp 1 \
            --log "$tmp/console-$mode-$side.log" --timeout "$guest_timeout" --watch-pid "${dp[$side]}" \
            >"$tmp/run-guest-$mode-$side.out" 2>&1 &
        gp[$side]=$!
        guest_pids+=("${gp[$side]}")
    done
    mark "$A/$dir/a-up" "$guest_timeout" >/dev/null && mark "$B/$dir/b-up" "$guest_timeout" >/dev/null ||
        die "[$mode] the guests did not come up: $(tr -d '\r' <"$tmp/console-$mode-a.log" | tail -3)"
    touch "$A/$dir/go-write"
    if t0=$(mark "$A/$dir/a-wrote" 30) && t1=$(mark "$B/$dir/b-saw" "$((secs + 5))"); then
        bsaw[$mode]=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
        pass "[cache=$mode] guest B read guest A's write ${bsaw[$mode]} s after A wrote it"
    else
        fail "[cache=$mode] guest B did not read guest A's write: $(tr -d '\r' <"$tmp/console-$mode-b.log" | grep -a TWOHOSTS)"
    fi
    # In place (same size): measured, not judged (docs/distributed.md, "Two hosts").
    if mark "$B/$dir/b-saw2" 30 >/dev/null; then
        touch "$A/$dir/go-inplace"
        if t0=$(mark "$A/$dir/a-inplace" 30) && t1=$(mark "$B/$dir/b-saw3" 7); then
            say "INFO [cache=$mode] guest B read guest A's in-place rewrite $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s after A wrote it"
        else
            say "INFO [cache=$mode] guest B did not read guest A's in-place rewrite within 5 s"
        fi
    fi
    if [[ $locks == locks ]]; then
        touch "$A/$dir/go-lock"
        if mark "$A/$dir/a-locked" 30 >/dev/null; then
            probe_host "$A/$dir" | sed 's/^/host A: /' >"$tmp/locks-host"
            probe_host "$B/$dir" | sed 's/^/host B: /' >>"$tmp/locks-host"
            touch "$B/$dir/go-probe"
            mark "$B/$dir/b-probed" 30 >/dev/null || fail "guest B did not probe the locks"
            tr -d '\r' <"$tmp/console-$mode-b.log" | grep -a '^LOCK' | sed 's/^/guest B: /' >>"$tmp/locks-host"
            sed 's/^/    /' "$tmp/locks-host"
            # Guest B must see what a process on B's own host mount sees: the file system's answer.
            for p in posix-setlk flock; do
                local hb gb
                hb=$(sed -n "s/^host B: LOCK $p //p" "$tmp/locks-host")
                gb=$(sed -n "s/^guest B: LOCK $p //p" "$tmp/locks-host")
                if [[ -n $hb && $hb == "$gb" ]]; then
                    pass "[locks] $p of guest A: guest B gets '$gb', as a process on host mount B"
                else
                    fail "[locks] $p of guest A: guest B gets '$gb', a process on host mount B '$hb'"
                fi
            done
        else
            fail "guest A did not take the locks: $(tr -d '\r' <"$tmp/console-$mode-a.log" | grep -a LOCK)"
        fi
        touch "$A/$dir/release"
    fi
    touch "$A/$dir/done"
    for side in a b; do
        wait "${gp[$side]}" || fail "[cache=$mode] guest ${side^^} exit $?: $(tr -d '\r' <"$tmp/console-$mode-$side.log" | grep -a TWOHOSTS | tail -2)"
        # README.md: ferryfsd exits 0 once its frontend is gone.
        expect_daemon_exit "${dp[$side]}" "[cache=$mode] ferryfsd $side" || true
    done
    tr -d '\r' <"$tmp/console-$mode-b.log" | grep -a '^TWOHOSTS' | sed 's/^/    /'
}
declare -A bsaw
t_all=$SECONDS
for m in ${FERRYFS_TWOHOSTS_PAIRS:-never auto}; do
    case $m in never) pair never locks ;; none) ;; *) pair "$m" nolocks ;; esac
done
say "pairs took $((SECONDS - t_all)) s"

# ---- migration: the guest on mount A's daemon moves to mount B's ----
source "$repo/tests/e2e/migration-lib.sh"
cleanup_cmds+=('vm_kill_all')
mig_exec=("${dfs_enter[@]}")
share=unused

# mig_round N: round N on the guest (go.N through mount A) passed by its own report.
mig_round() {
    echo "" >"$mig/go.$1"
    local i
    for ((i = 0; i < 600; i++)); do [[ -e $mig/result.$1 ]] && break; sleep 0.1; done
    [[ -e $mig/result.$1 ]] || { echo "no report"; return 1; }
    grep -q '^END fails=0$' "$mig/result.$1" || { grep '^CHECK .* FAIL' "$mig/result.$1" | tr '\n' ';'; return 1; }
}

# rw_at I [DDFLAG]: the 8 bytes round I wrote into held-rw.dat, read through mount A (DDFLAG:
# iflag=direct past mount A's page cache).
rw_at() { dd if="$mig/held-rw.dat" bs=4096 count=1 ${2:+"$2"} 2>/dev/null | cut -b $(($1 * 8 + 1))-$(($1 * 8 + 8)) | tr -d '\0'; }

# host_sees ROUNDS DDFLAG [SECS]: what the held files hold, read through mount A; echoes what
# differs. (mount A's own caches may keep what it read before for a while: SECS, default 10, are
# given, and the time taken is said)
host_sees() {
    local i t bad
    for ((t = 0; t < ${3:-10} * 10; t++)); do
        bad=""
        [[ $(cat "$mig/held-append.log") == "$(printf 'round %d\n' $(seq 1 "$1"))" ]] || bad+=" append"
        for ((i = 1; i <= $1; i++)); do
            [[ $(rw_at "$i" "$2") == "$(printf 'rw%06d' "$i")" ]] || bad+=" rw.$i"
            [[ $(cat "$mig/sub/via-dirfd.$i" 2>/dev/null) == d ]] || bad+=" dirfd.$i"
            [[ $(cat "$mig/cwd/deep/cwd.$i" 2>/dev/null) == c ]] || bad+=" cwd.$i"
        done
        [[ -z $bad ]] && { echo "after $((t / 10)).$((t % 10)) s"; return 0; }
        sleep 0.1
    done
    echo "still wrong after ${3:-10} s:$bad"
    return 1
}

# vm_reap: every VM and daemon of the column gone, reaped quietly (no "Killed" job notices).
vm_reap() {
    local p
    vm_kill_all
    for p in "${qpid[@]}" "${dpid[@]}"; do wait "$p" 2>/dev/null; done
    return 0
}

# col_fail WHY: a failure of ferryfsd's column; the reference column's is only said.
col_fail() {
    if [[ $mig_daemon == ferryfsd ]]; then fail "$1"; else say "INFO (reference) $1"; fi
}

migrate_across() {
    mig_daemon=$1
    local root="mig-$1" st r seen verdict=fail
    mig="$A/$root/mig"
    mkdir -p "$mig/sub" "$mig/cwd/deep" "$mig/io"
    seq 1 20000 >"$mig/held-read.dat"
    : >"$mig/held-append.log"
    head -c 4096 /dev/zero >"$mig/held-rw.dat"
    dpid=() qpid=()
    rm -f "$tmp"/d[12].sock "$tmp"/q[12].mon "$tmp"/console-[12].log
    d_share="$dfs_a/$root" vm_start 1 find-paths abort || { col_fail "[$1] VM 1 did not start"; return; }
    wait_file "$mig/ready" "$guest_timeout" || { col_fail "[$1] the guest never got ready: $(tr -d '\r' <"$tmp/console-1.log" | tail -3)"; vm_reap; return; }
    r=$(mig_round 1) || { col_fail "[$1] round 1 on mount A: $r"; vm_reap; return; }
    d_share="$dfs_b/$root" vm_start 2 find-paths abort "unix:$tmp/in2.sock" || { col_fail "[$1] VM 2 did not start"; vm_reap; return; }
    st=$(migrate 1 "unix:$tmp/in2.sock" 120)
    if [[ $st == completed ]]; then
        vm_stop 1
        if r=$(mig_round 2); then
            echo quit >"$mig/go.3"
            wait_gone "${qpid[2]}" 60
            if ! tr -d '\r' <"$tmp/console-2.log" | grep -aq 'FERRYFS-GUEST-DONE rc=0'; then
                r="the guest did not exit 0 on VM 2"
            elif ! seen=$(host_sees 2 iflag=direct); then
                r="mount A does not show what the guest wrote through mount B: $seen"
            else
                verdict=pass r="completed; round 2 on mount B's daemon passed (read, append, rw, dir fd, cwd), the files right through mount A $seen"
                say "INFO [$1] mount A's buffered reads: $(host_sees 2 "" 2)"
            fi
        fi
    else
        r="migration $st; destination log: $(grep -ai 'mig\|error\|refus' "$tmp/d2.log" | tail -3 | tr '\n' ' ')"
        cp "$tmp/d2.log" "$tmp/d2-$1.log"
    fi
    vm_reap
    if [[ $verdict == pass ]]; then pass "[migration A -> B, $1] $r"
    else col_fail "[migration A -> B, $1] $r"; fi
}
# The reference column costs a guest and decides nothing: make check-long runs it.
default_migcols=ferryfsd
[[ ${FERRYFS_CHECK_LONG:-} != 1 ]] || default_migcols="ferryfsd virtiofsd-rs"
read -r -a migcols <<<"${FERRYFS_TWOHOSTS_MIG:-$default_migcols}"
cp "$guest_dir/vmlinuz" "$guest_dir/initrd.img" "$tmp/"
guest_dir=$tmp
for c in "${migcols[@]}"; do
    [[ $c == none ]] && continue
    if [[ $c == virtiofsd-rs ]] && ! "$repo/tests/e2e/virtiofsd-rs" --version >/dev/null 2>&1; then
        say "INFO the Rust virtiofsd is not cached: no reference column"
        continue
    fi
    t0=$SECONDS
    migrate_across "$c"
    say "migration column $c: $((SECONDS - t0)) s"
done
say "took $((SECONDS - t_all)) s after the volume was up"
finish
