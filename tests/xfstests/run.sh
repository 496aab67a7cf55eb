#!/usr/bin/env bash
# Runs xfstests (FSTYP=virtiofs) in QEMU guests against ferryfsd and the two virtiofsd, resumably, and writes the per-test table.
#
# Usage: tests/xfstests/run.sh [options] [TEST-SPEC...]
#   TEST-SPEC        generic/001, a range generic/001-099, or a group of the built tree (quick, auto,
#                    rw...: every generic test in it); default: quick. A file of such specs: @FILE.
#   --daemons "D..." ferryfsd (current stack: QEMU 10, Linux 6.12), virtiofsd-rs (the Rust virtiofsd
#                    1.13, current stack), virtiofsd (QEMU 7.2's C virtiofsd, stable stack: QEMU 7.2,
#                    Linux 6.1); default: all three
#   --first N        only the first N tests of the list
#   --jobs N         guests at once (default: the host's CPUs); each gets CPUs/N vCPUs, at least one
#   --out DIR        results (default: BUILD/xfstests); DIR/DAEMON/results.tsv keeps every finished
#                    test, and a later run with the same DIR goes on from there (resume)
#   --fresh          forget DIR's earlier results first
#   --test-timeout S a test still running after S seconds is stopped and counted as "timeout"
#                    (default 900)
#   --fs-size SIZE   size of each share's file system (default 3G)
#   --ferryfsd-args "A..."  extra ferryfsd arguments (e.g. a deliberately broken option set)
#   --no-table       do not print the table at the end
# Each guest's two shares (TEST_DEV, SCRATCH_DEV) are two daemons of the same kind, each on an ext4
# image of --fs-size loop-mounted by this script: xfstests' ENOSPC tests fill whatever is under a
# share, and the host's own file systems must never be what fills. The guest's userland is the
# host's root, shared read-only over 9p (tests/e2e/guest/cmds/xfstests); xfstests is built by
# tests/xfstests/build.sh from ../shared/third_party.
# Exit: 0 every test ran (whatever its outcome: judging is table.py's) and every daemon ended with
#       status 0 when its guest went away; 1 a lane could not run (daemon or guest would not start)
#       or a daemon ended otherwise; 77 xfstests or a stack cannot be had (the reason said).
set -euo pipefail

name=xfstests
# repo, build, ferryfsd, wait_socket and expect_daemon_exit
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
source "$repo/tests/e2e/stack-lib.sh"

daemons="ferryfsd virtiofsd-rs virtiofsd" first=0 jobs="$(nproc)" out="$build/xfstests" fresh=0
test_timeout=900 fs_size=3G ferryfsd_args="" table=1 specs=()
while (($#)); do
    case "$1" in
        --daemons) daemons="$2"; shift 2 ;;
        --first) first="$2"; shift 2 ;;
        --jobs) jobs="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --fresh) fresh=1; shift ;;
        --test-timeout) test_timeout="$2"; shift 2 ;;
        --fs-size) fs_size="$2"; shift 2 ;;
        --ferryfsd-args) ferryfsd_args="$2"; shift 2 ;;
        --no-table) table=0; shift ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "xfstests: unknown option $1" >&2; exit 2 ;;
        @*) mapfile -t more < <(sed 's/#.*//' "${1#@}" | tr -s ' \t' '\n' | grep .); specs+=("${more[@]}"); shift ;;
        *) specs+=("$1"); shift ;;
    esac
done
((${#specs[@]})) || specs=(quick)
((jobs >= 1)) || jobs=1
log() { echo "xfstests: $*" >&2; }

rc=0
xfsbuild="$("$here/build.sh")" || rc=$?
((rc == 0)) || exit "$rc"
xfsroot="$xfsbuild/xfstests"

# The test list: names, ranges and groups, in order, each once.
expand_specs() {
    local s dir n lo hi
    for s in "${specs[@]}"; do
        if [[ "$s" =~ ^([a-z0-9]+)/([0-9]+)-([0-9]+)$ ]]; then
            dir=${BASH_REMATCH[1]} lo=$((10#${BASH_REMATCH[2]})) hi=$((10#${BASH_REMATCH[3]}))
            for n in $(awk '/^[0-9]/ {print $1}' "$xfsroot/tests/$dir/group.list"); do
                ((10#$n >= lo && 10#$n <= hi)) && echo "$dir/$n"
            done
        elif [[ "$s" == */* ]]; then
            [[ -f "$xfsroot/tests/$s" ]] || { log "no test $s in xfstests"; exit 2; }
            echo "$s"
        else
            awk -v g="$s" '/^[0-9]/ { for (i = 2; i <= NF; i++) if ($i == g) { print "generic/" $1; break } }' \
                "$xfsroot/tests/generic/group.list"
        fi
    done | awk '!seen[$0]++'
}
mapfile -t all_tests < <(expand_specs)
((first == 0)) || all_tests=("${all_tests[@]:0:first}")
((${#all_tests[@]})) || { log "no test matches ${specs[*]}"; exit 2; }

for d in $daemons; do
    case "$d" in
        ferryfsd) [[ -x "$ferryfsd" ]] || { log "$ferryfsd not built (run make)"; exit 1; } ;;
        virtiofsd-rs) "$repo/tests/e2e/virtiofsd-rs" --version >/dev/null 2>&1 ||
            { log "the Rust virtiofsd is not cached (scripts/stack.sh fetch)"; exit 77; } ;;
        virtiofsd) [[ -x /usr/lib/qemu/virtiofsd ]] || { log "/usr/lib/qemu/virtiofsd missing (qemu-system-common)"; exit 77; } ;;
        *) log "unknown daemon $d (ferryfsd, virtiofsd-rs, virtiofsd)"; exit 2 ;;
    esac
done

daemon_stack() { [[ "$1" == virtiofsd ]] && echo stable || echo current; }
# A guest dir of its own per stack: the other guest tests rebuild theirs whenever their inputs
# change, and a run here lasts hours.
xfstests_guest_dir() { echo "${FERRYFS_CACHE:-/var/cache/ferryfs}/xfstests/guest-$1"; }

# daemon_argv DAEMON SOCK DIR: the command line of one share's daemon. Each serves xattrs and POSIX
# ACLs, as the xfstests' xattr and ACL tests need, with its default cache mode.
daemon_argv() {
    case "$1" in
        # shellcheck disable=SC2206 # --ferryfsd-args is a word list on purpose
        ferryfsd) argv=("$ferryfsd" --socket-path="$2" --shared-dir="$3" --xattr --posix-acl $ferryfsd_args) ;;
        virtiofsd-rs) argv=("$repo/tests/e2e/virtiofsd-rs" --socket-path="$2" --shared-dir="$3" --xattr --posix-acl) ;;
        virtiofsd) argv=(/usr/lib/qemu/virtiofsd --socket-path="$2" -o "source=$3,xattr,posix_acl") ;;
    esac
}

mkdir -p "$out"
out="$(cd "$out" && pwd)"
((fresh == 0)) || rm -rf "${out:?}"/{ferryfsd,virtiofsd-rs,virtiofsd}

# Loop mounts and daemons this run made, undone at exit whatever happens.
lanes_pids=()
cleanup() {
    local p m
    for p in "${lanes_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    for m in "$out"/*/lane*/mnt-*; do
        mountpoint -q "$m" 2>/dev/null && umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
    done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# lane DAEMON N TODO: one guest at a time works through TODO; a guest that hangs past the test
# timeout or dies is stopped, the test it was in is recorded, and the next guest goes on from the
# test after it. Results are appended to DAEMON/results.tsv as TEST STATUS SECONDS NOTE.
lane() {
    local daemon=$1 n=$2 todo=$3
    local ldir="$out/$daemon/lane$n" results="$out/$daemon/results.tsv"
    local stack guest smp=$(($(nproc) / jobs)) boot=0 aborts=" " daemon_bad=0
    ((smp >= 1)) || smp=1
    stack="$(daemon_stack "$daemon")"
    guest="$(xfstests_guest_dir "$stack")"
    mkdir -p "$ldir/run/check"
    cp "$todo" "$ldir/todo"
    # TEST_DEV and SCRATCH_DEV: a fresh ext4 each, loop-mounted, sized.
    local share
    for share in test scratch; do
        if ! mountpoint -q "$ldir/mnt-$share"; then
            mkdir -p "$ldir/mnt-$share"
            rm -f "$ldir/$share.img"
            truncate -s "$fs_size" "$ldir/$share.img"
            mkfs.ext4 -q -F "$ldir/$share.img"
            mount -o loop "$ldir/$share.img" "$ldir/mnt-$share"
        fi
    done
    cat >"$ldir/run/config" <<EOF
FSTYP=virtiofs
TEST_DEV=xfstest
TEST_DIR=/mnt/test
SCRATCH_DEV=xfscratch
SCRATCH_MNT=/mnt/scratch
RESULT_BASE=/run/xfsrun/results
EOF
    while [[ -s "$ldir/todo" ]]; do
        boot=$((boot + 1))
        cp "$ldir/todo" "$ldir/run/todo"
        local con="$ldir/console-$boot.log" pids=() s argv
        : >"$con"
        for s in test scratch; do
            rm -f "$ldir/$s.sock"
            daemon_argv "$daemon" "$ldir/$s.sock" "$ldir/mnt-$s"
            "${argv[@]}" >"$ldir/daemon-$s-$boot.log" 2>&1 &
            pids+=($!)
        done
        local i
        for i in 0 1; do
            s=$([[ $i == 0 ]] && echo test || echo scratch)
            wait_socket "$ldir/$s.sock" "${pids[i]}" ||
                { log "$daemon lane $n: the $s daemon did not listen: $(tail -2 "$ldir/daemon-$s-$boot.log")"; kill "${pids[@]}" 2>/dev/null; return 1; }
        done
        FERRYFS_STACK=$stack "$repo/tests/e2e/run-guest.sh" --guest "$guest" --9p / --9p-readonly \
            --tag hostroot --mntopts ro,cache=loose --cmd xfstests --mem 2G --smp "$smp" --quiet \
            --log "$con" --timeout $((test_timeout * (${#all_tests[@]} + 1))) -- \
            -object memory-backend-memfd,id=mem,size=2G,share=on -numa node,memdev=mem \
            -chardev "socket,id=ct,path=$ldir/test.sock" -device vhost-user-fs-pci,chardev=ct,tag=xfstest \
            -chardev "socket,id=cs,path=$ldir/scratch.sock" -device vhost-user-fs-pci,chardev=cs,tag=xfscratch \
            -virtfs "local,path=$xfsbuild,mount_tag=xfsbuild,security_model=none,readonly=on,id=xb" \
            -virtfs "local,path=$ldir/run,mount_tag=xfsrun,security_model=none,id=xr" \
            >"$ldir/run-guest-$boot.log" 2>&1 &
        local gpid=$! seen=0 cur="" cur_start=0 line t st secs note
        while :; do
            local alive=1
            kill -0 "$gpid" 2>/dev/null || alive=0
            # Each RESULT line that appeared since the last look.
            mapfile -t lines < <(tr -d '\r' <"$con" | grep -aoE 'FERRYFS-XFSTESTS-(START|RESULT) [^ ]+( [a-z]+ [0-9]+)?' || true)
            for ((; seen < ${#lines[@]}; seen++)); do
                line=${lines[seen]}
                read -r _ t st secs <<<"$line"
                if [[ "$line" == FERRYFS-XFSTESTS-START* ]]; then
                    cur=$t cur_start=$SECONDS
                    continue
                fi
                note=""
                if [[ "$st" == notrun ]]; then
                    note="$(head -c 300 "$ldir/run/results/$t.notrun" 2>/dev/null | tr '\t\n' '  ' || true)"
                fi
                printf '%s\t%s\t%s\t%s\n' "$t" "$st" "$secs" "$note" >>"$results"
                sed -i "\\|^$t\$|d" "$ldir/todo"
                cur=""
            done
            ((alive)) || break
            if [[ -n "$cur" ]] && ((SECONDS - cur_start > test_timeout)); then
                log "$daemon lane $n: $cur still running after ${test_timeout}s: stopping the guest"
                printf '%s\t%s\t%s\t%s\n' "$cur" timeout "$test_timeout" "stopped after ${test_timeout}s" >>"$results"
                sed -i "\\|^$cur\$|d" "$ldir/todo"
                cur=""
                pkill -TERM -P "$gpid" 2>/dev/null || true
                kill -TERM "$gpid" 2>/dev/null || true
            fi
            sleep 2
        done
        wait "$gpid" 2>/dev/null || true
        # The daemons end by themselves when their frontend goes away, with status 0.
        local p ok=1
        for p in "${pids[@]}"; do
            expect_daemon_exit "$p" "$daemon lane $n boot $boot" || ok=0
        done
        if ((!ok)); then
            log "$daemon lane $n boot $boot: a daemon exited non-zero (logs: $ldir/daemon-*-$boot.log)"
            daemon_bad=1
        fi
        if [[ -n "$cur" ]]; then
            # The guest ended inside a test: QEMU's own known abort earns that test one more try,
            # anything else is the test's outcome.
            local abort
            abort="$(stack_qemu_abort "$con" || true)"
            if [[ -n "$abort" && "$aborts" != *" $cur "* ]]; then
                log "$daemon lane $n: QEMU aborted in $cur ($abort): running it once more"
                aborts+="$cur "
                continue
            fi
            note="guest or daemon died in the test"
            ((ok)) || note="a daemon exited non-zero in the test"
            printf '%s\t%s\t%s\t%s\n' "$cur" crash "$((SECONDS - cur_start))" "$note" >>"$results"
            sed -i "\\|^$cur\$|d" "$ldir/todo"
        elif [[ -s "$ldir/todo" ]] && ! grep -aq FERRYFS-XFSTESTS-READY "$con"; then
            log "$daemon lane $n: the guest did not get ready (console: $con)"
            return 1
        fi
        ((boot < ${#all_tests[@]} + 5)) || { log "$daemon lane $n: too many boots"; return 1; }
    done
    for share in test scratch; do umount "$ldir/mnt-$share" 2>/dev/null || true; done
    rm -f "$ldir"/*.img
    return "$daemon_bad"
}

status=0
for daemon in $daemons; do
    stack="$(daemon_stack "$daemon")"
    stack_prepare "$stack" || exit 77
    FERRYFS_STACK=$stack "$repo/tests/e2e/build-guest.sh" "$(xfstests_guest_dir "$stack")" || exit $?
    mkdir -p "$out/$daemon"
    touch "$out/$daemon/results.tsv"
    # Resume: what is recorded is done.
    mapfile -t todo < <(printf '%s\n' "${all_tests[@]}" | grep -vxFf <(cut -f1 "$out/$daemon/results.tsv" | grep . || echo ///) || true)
    log "$daemon: ${#todo[@]} of ${#all_tests[@]} tests to run, $jobs guest(s) at once"
    ((${#todo[@]})) || continue
    lanes_pids=()
    for ((n = 0; n < jobs; n++)); do
        printf '%s\n' "${todo[@]}" | awk -v n="$n" -v j="$jobs" 'NR % j == n' >"$out/$daemon/todo-$n"
        [[ -s "$out/$daemon/todo-$n" ]] || continue
        lane "$daemon" "$n" "$out/$daemon/todo-$n" &
        lanes_pids+=($!)
    done
    for p in "${lanes_pids[@]}"; do wait "$p" || status=1; done
    lanes_pids=()
done

if ((table)); then
    python3 "$here/table.py" --out "$out" --known "$here/known-differences" \
        --tests <(printf '%s\n' "${all_tests[@]}") $daemons || true
fi
exit "$status"
