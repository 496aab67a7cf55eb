#!/usr/bin/env bash
# Boots the test guest under QEMU (TCG) against a vhost-user-fs socket (or a 9p dir) and captures its console.
#
# Usage: run-guest.sh [options]
#   --guest DIR       guest dir from build-guest.sh (default: the stack's, stack_guest_dir in stack-lib.sh;
#                     ${FERRYFS_CACHE:-/var/cache/ferryfs}/guest for the stable stack)
#   --kernel F / --initrd F   override the images (e.g. --initrd DIR/initrd-fio.img for fio)
#   --sock PATH       vhost-user-fs socket of a running daemon (virtio-fs mode)
#   --9p DIR          share DIR with QEMU's built-in 9p server instead (comparison runs)
#   --9p-readonly     the --9p share is read-only (the host's root as the guest's userland)
#   --tag TAG         mount tag (default ferryfs)
#   --cmd NAME        guest command: /cmds/NAME in the initrd, or an absolute guest path (default fsops)
#   --args "A B"      arguments for the command (no commas)
#   --mntopts O       extra mount options (comma separated)
#   --log FILE        keep the console log in FILE (default: a temporary file)
#   --quiet           do not echo the console to stdout (log file only)
#   --timeout SECS    kill QEMU after SECS (default 300)
#   --mem SIZE        guest RAM (default 1G); --smp N (default 2)
#   --append STR      extra kernel command line
#   --watch-pid PID   stop QEMU if process PID (the daemon) dies while the guest runs
#   --allow-reboot    a guest reboot restarts the guest (default: QEMU exits, -no-reboot)
#   -- ARGS           extra QEMU arguments
# The QEMU is the stack's (stack-lib.sh): the one the guest dir was built for (DIR/stack), else
# FERRYFS_STACK's (default stable: qemu-system-x86_64 on PATH; current: the cached QEMU 10).
# FERRYFS_STACK naming another stack than the guest dir's is an error (exit 2), not a silent
# boot of the wrong stack.
# Exit: 0 guest command succeeded; 1 guest command failed; 3 no boot/mount or no finish marker;
#       4 the --watch-pid process died mid-run; 5 QEMU aborted on an assertion of its own (the
#       line is appended to $FERRYFS_QEMU_ABORTS when set, for tests/lib/run-test.sh); 124 timeout.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/stack-lib.sh"
guest="$(stack_guest_dir)"
kernel="" initrd="" sock="" p9dir="" tag="ferryfs" cmd="fsops" args="" mntopts="" logf=""
p9ro="" quiet=0 watch_pid="" timeout_s=300 no_reboot=(-no-reboot) mem="1G" smp=2 append="" extra=()

while (($#)); do
    case "$1" in
        --guest) guest="$2"; shift 2 ;;
        --kernel) kernel="$2"; shift 2 ;;
        --initrd) initrd="$2"; shift 2 ;;
        --sock) sock="$2"; shift 2 ;;
        --9p) p9dir="$2"; shift 2 ;;
        # The host's root spans several file systems; remapping keeps their inode numbers apart,
        # or the guest's 9p client takes /proc, /sys and /dev (each inode 1) for one directory.
        --9p-readonly) p9ro=",readonly=on,multidevs=remap"; shift ;;
        --tag) tag="$2"; shift 2 ;;
        --cmd) cmd="$2"; shift 2 ;;
        --args) args="$2"; shift 2 ;;
        --mntopts) mntopts="$2"; shift 2 ;;
        --log) logf="$2"; shift 2 ;;
        --quiet) quiet=1; shift ;;
        --timeout) timeout_s="$2"; shift 2 ;;
        --mem) mem="$2"; shift 2 ;;
        --smp) smp="$2"; shift 2 ;;
        --append) append="$2"; shift 2 ;;
        --watch-pid) watch_pid="$2"; shift 2 ;;
        --allow-reboot) no_reboot=(); shift ;;
        --) shift; extra=("$@"); break ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | grep '^#'; exit 0 ;;
        *) echo "run-guest.sh: unknown option $1" >&2; exit 2 ;;
    esac
done

kernel="${kernel:-$guest/vmlinuz}"
initrd="${initrd:-$guest/initrd.img}"
for f in "$kernel" "$initrd"; do
    [[ -f "$f" ]] || { echo "run-guest.sh: missing $f (run tests/e2e/build-guest.sh)" >&2; exit 3; }
done
if [[ -z "$sock" && -z "$p9dir" ]] || [[ -n "$sock" && -n "$p9dir" ]]; then
    echo "run-guest.sh: need exactly one of --sock or --9p" >&2
    exit 2
fi

cmdline="console=ttyS0 quiet loglevel=3 panic=-1 ferryfs.cmd=$cmd ferryfs.tag=$tag"
[[ -n "$args" ]] && cmdline+=" ferryfs.args=${args// /,}"
[[ -n "$mntopts" ]] && cmdline+=" ferryfs.mntopts=$mntopts"
[[ -n "$append" ]] && cmdline+=" $append"

stack="$(stack_name)"
if [[ -f "$guest/stack" ]]; then
    gstack="$(cat "$guest/stack")"
    if [[ -n "${FERRYFS_STACK:-}" && "$gstack" != "$stack" ]]; then
        echo "run-guest.sh: FERRYFS_STACK=$stack but $guest is a $gstack guest (use stack_guest_dir from tests/e2e/stack-lib.sh, or: tests/e2e/stack-lib.sh run $stack TEST)" >&2
        exit 2
    fi
    stack="$gstack"
fi
if [[ "$stack" == stable ]]; then
    qemu=(qemu-system-x86_64)
else
    qemu=("$here/stack-lib.sh" qemu "$stack" --)
fi
qemu+=(-accel tcg -m "$mem" -smp "$smp" -nographic "${no_reboot[@]}"
      -kernel "$kernel" -initrd "$initrd")
if [[ -n "$sock" ]]; then
    # vhost-user needs the guest RAM in a shareable memfd the daemon can map.
    qemu+=(-chardev "socket,id=char0,path=$sock"
           -device "vhost-user-fs-pci,chardev=char0,tag=$tag"
           -object "memory-backend-memfd,id=mem,size=$mem,share=on" -numa node,memdev=mem)
else
    cmdline+=" ferryfs.fstype=9p"
    qemu+=(-virtfs "local,path=$p9dir,mount_tag=$tag,security_model=passthrough,id=fs0$p9ro")
fi
qemu+=(-append "$cmdline" "${extra[@]}")

if [[ -z "$logf" ]]; then
    logf="$(mktemp "${TMPDIR:-/tmp}/ferryfs-console.XXXXXX")"
    trap 'rm -f "$logf"' EXIT
fi
# stdin is /dev/null so QEMU never puts a caller's terminal into raw mode.
timeout --kill-after=10 "$timeout_s" "${qemu[@]}" </dev/null >"$logf" 2>&1 &
qpid=$!
tailpid=""
if ((!quiet)); then
    tail -n +1 -f --pid="$qpid" "$logf" &
    tailpid=$!
fi
# A dead daemon leaves the guest blocked on FUSE requests forever; stop QEMU early instead.
daemon_died=0
if [[ -n "$watch_pid" ]]; then
    while kill -0 "$qpid" 2>/dev/null; do
        if ! kill -0 "$watch_pid" 2>/dev/null; then
            sleep 5
            if kill -0 "$qpid" 2>/dev/null; then
                daemon_died=1
                kill -TERM "$qpid" 2>/dev/null || true
            fi
            break
        fi
        sleep 0.5
    done
fi
rc=0
wait "$qpid" || rc=$?
[[ -z "$tailpid" ]] || wait "$tailpid" 2>/dev/null || true
if ((daemon_died)); then
    echo "run-guest.sh: daemon (pid $watch_pid) exited while the guest was running; QEMU stopped" >&2
    exit 4
fi

# QEMU's own abort (stack_qemu_abort) is QEMU's bug and not the daemon's: say
# so plainly, apart from the exits that blame the guest or the daemon.
qemu_abort="$(stack_qemu_abort "$logf" || true)"
if [[ -n "$qemu_abort" ]]; then
    echo "run-guest.sh: QEMU aborted on its own assertion (a QEMU bug, not the daemon's): $qemu_abort" >&2
    [[ -z "${FERRYFS_QEMU_ABORTS:-}" ]] || echo "$qemu_abort" >>"$FERRYFS_QEMU_ABORTS"
    exit 5
fi
if ((rc == 124 || rc == 137)) && ((!daemon_died)); then
    echo "run-guest.sh: QEMU killed after ${timeout_s}s" >&2
    exit 124
fi
done_line="$(tr -d '\r' <"$logf" | grep -ao 'FERRYFS-GUEST-DONE rc=[0-9]*' | tail -1 || true)"
if ! tr -d '\r' <"$logf" | grep -aq 'FERRYFS-GUEST-MOUNTED'; then
    echo "run-guest.sh: guest did not mount the share (QEMU exit $rc)" >&2
    exit 3
fi
[[ -n "$done_line" ]] || { echo "run-guest.sh: guest never finished (QEMU exit $rc)" >&2; exit 3; }
[[ "$done_line" == "FERRYFS-GUEST-DONE rc=0" ]] && exit 0
exit 1
