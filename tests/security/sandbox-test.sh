#!/usr/bin/env bash
# Guest e2e (make check): the process that serves a real guest is confined as docs/security.md says (seccomp, no new privileges, the kept capabilities, its own namespaces and root), and the guest cannot read a host file outside the share by any path.
#
# Two boots, one daemon each:
#   a) the defaults: --sandbox=namespace --seccomp=kill --inode-file-handles=prefer (the serving
#      process is the forked child)
#   b) --sandbox=chroot --inode-file-handles=mandatory --modcaps=-mknod (the process itself serves)
# While the guest holds 300 looked-up inodes, the host reads /proc/PID/{status,ns,root,fd} of the
# serving process; under --rlimit-nofile=400 (a fd budget of 272, half of it 136) held inodes past
# half the budget give their fds back and keep only their file handles, so the process holds
# fewer fds than the guest holds inodes. The guest tries to read a marker file that lies next to the share on the host
# through absolute and relative symlinks, a symlinked directory, '..' from the mount root and the
# marker's host path, and tries to hard-link it; symlinks to /etc/passwd must show the guest's own
# passwd, never the host's. In (b) a device node cannot be made (EPERM) while files and FIFOs can.
# Exit: 0 pass, 1 fail, 77 skipped (no QEMU or guest image).
set -euo pipefail
# guest-lib.sh picks the stack (current, else stable) and makes $tmp, $share, $view and $sock.
name=sandbox
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/guest-lib.sh"
outside="$tmp/outside"
marker="FERRYFS-OUTSIDE-MARKER-$$-$RANDOM"
mkdir -p "$outside"
echo "$marker" >"$outside/marker"

# The capability numbers of the set docs/security.md names ("Sandbox", Capabilities).
declare -A capnum=([chown]=0 [dac_override]=1 [dac_read_search]=2 [fowner]=3 [fsetid]=4
                   [setgid]=6 [setuid]=7 [mknod]=27 [setfcap]=31)
cap_mask() { # NAME... -> the 16-hex-digit mask /proc/PID/status shows
    local m=0 c
    for c in "$@"; do m=$((m | (1 << capnum[$c]))); done
    printf '%016x' "$m"
}
status_field() { awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"; }

# prepare_share: what the guest will try; the share of the current mode is $share.
prepare_share() {
    mkdir -p "$share/many"
    echo inside-the-share >"$share/inside"
    ln -s /etc/passwd "$share/abs-passwd"
    ln -s ../../../../etc/passwd "$share/rel-passwd"
    ln -s "$outside/marker" "$share/abs-marker"
    ln -s ../outside/marker "$share/rel-marker"
    ln -s ../outside "$share/outdir-link"
    ln -s "$outside" "$share/abs-outdir-link"
    local i
    for i in $(seq 300); do : >"$share/many/f$i"; done
    # Every read is tagged so the host can tell which path produced what.
    cat >"$share/guest.sh" <<GUEST
#!/bin/sh
show() {
    if out=\$(cat "\$2" 2>&1); then
        printf '%s\n' "\$out" | sed "s|^|READ \$1: |"
    else
        echo "NOREAD \$1: \$out"
    fi
}
sed 's/^/OWN: /' /etc/passwd
show inside /mnt/inside
show abs-passwd /mnt/abs-passwd
show rel-passwd /mnt/rel-passwd
show abs-marker /mnt/abs-marker
show rel-marker /mnt/rel-marker
show outdir-link /mnt/outdir-link/marker
show abs-outdir-link /mnt/abs-outdir-link/marker
show dotdot /mnt/../outside/marker
show dotdot-deep /mnt/../../../..$outside/marker
show host-path $outside/marker
ls -a /mnt/.. | sed 's/^/PARENT: /'
for l in abs-marker rel-marker; do ln /mnt/\$l /mnt/hl-\$l 2>&1 | sed 's/^/LN: /'; done
ln /mnt/../outside/marker /mnt/hl-dotdot 2>&1 | sed 's/^/LN: /'
mknod /mnt/cdev c 1 3 2>&1 | sed 's/^/MKNOD-CHR: /'
[ -c /mnt/cdev ] && echo "MKNOD-CHR made"
mknod /mnt/fifo p && [ -p /mnt/fifo ] && echo "MKNOD-FIFO made"
echo regular >/mnt/regular && [ "\$(cat /mnt/regular)" = regular ] && echo "REGULAR made"
ls -l /mnt/many >/dev/null && echo HOLDING
n=0
while [ ! -e /mnt/host-done ] && [ \$n -lt 600 ]; do sleep 1; n=\$((n + 1)); done
echo RELEASED
GUEST
    chmod 755 "$share/guest.sh"
}

# check_process MODE PID KEPT_CAPS...: what the host sees of the serving process.
check_process() {
    local mode=$1 pid=$2
    shift 2
    local want got f
    [[ "$(status_field "$pid" Seccomp)" == 2 ]] || die "$mode: Seccomp: $(status_field "$pid" Seccomp), want 2 (filter)"
    [[ "$(status_field "$pid" NoNewPrivs)" == 1 ]] || die "$mode: NoNewPrivs: $(status_field "$pid" NoNewPrivs)"
    want=$(cap_mask "$@")
    for f in CapEff CapPrm CapBnd; do
        got=$(status_field "$pid" "$f")
        [[ "$got" == "$want" ]] || die "$mode: $f $got, want $want ($*)"
    done
    [[ "$(status_field "$pid" CapAmb)" == 0000000000000000 ]] || die "$mode: ambient caps $(status_field "$pid" CapAmb)"
    # Its "/" is the share: a host path outside it does not exist for the process.
    [[ "$(stat -L -c %d:%i "/proc/$pid/root/")" == "$(stat -c %d:%i "$share")" ]] ||
        die "$mode: the process's root is not the share"
    [[ ! -e "/proc/$pid/root/etc/passwd" && ! -e "/proc/$pid/root$outside/marker" ]] ||
        die "$mode: host paths visible in the process's root"
}

# guest_saw MODE: what the guest printed must show no host file and the expected errors.
guest_saw() {
    local mode=$1 out own l n=0
    out="$(tr -d '\r' <"$tmp/console-$mode.log")"
    grep -aq '^READ inside: inside-the-share$' <<<"$out" || die "$mode: the guest could not read a file of the share"
    ! grep -aqF "$marker" <<<"$out" || die "$mode: the guest read the marker outside the share: $(grep -aF "$marker" <<<"$out" | head -3)"
    # The guest resolves symlinks itself: both /etc/passwd links show its own file...
    grep -aq '^READ abs-passwd: guest:x:1000:' <<<"$out" || die "$mode: abs-passwd did not resolve to the guest's passwd"
    grep -aq '^READ rel-passwd: guest:x:1000:' <<<"$out" || die "$mode: rel-passwd did not resolve to the guest's passwd"
    # ...and no line of the host's that the guest's lacks.
    own="$(sed -n 's/^OWN: //p' <<<"$out")"
    [[ -n "$own" ]] || die "$mode: the guest printed no passwd of its own"
    while IFS= read -r l; do
        grep -qxF -- "$l" <<<"$own" && continue
        n=$((n + 1))
        ! grep -aqxF -- "READ abs-passwd: $l" <<<"$out" || die "$mode: host passwd line via abs-passwd: $l"
        ! grep -aqxF -- "READ rel-passwd: $l" <<<"$out" || die "$mode: host passwd line via rel-passwd: $l"
    done </etc/passwd
    ((n > 0)) || die "$mode: the host's /etc/passwd has no line the guest's lacks: the check would prove nothing"
    for l in abs-marker rel-marker outdir-link abs-outdir-link dotdot dotdot-deep host-path; do
        grep -aq "^NOREAD $l: .*No such file or directory" <<<"$out" ||
            die "$mode: $l: $(grep -a " $l: " <<<"$out" | head -1)"
    done
    grep -aqx 'PARENT: mnt' <<<"$out" || die "$mode: '..' of /mnt is not the guest's root"
    ! grep -aqx "PARENT: outside" <<<"$out" || die "$mode: the guest's root lists the host's $outside"
    # Hard links: the guest can only name the symlinks, never the marker.
    [[ "$(stat -c %h "$outside/marker")" == 1 ]] || die "$mode: the marker gained a link"
    [[ -z "$(find "$share" -samefile "$outside/marker")" ]] || die "$mode: the marker is linked into the share"
    [[ ! -e "$share/hl-dotdot" ]] || die "$mode: a link through '..' was made"
    grep -aqx 'MKNOD-FIFO made' <<<"$out" || die "$mode: mknod of a FIFO failed"
    grep -aqx 'REGULAR made' <<<"$out" || die "$mode: a regular file could not be written"
}

# run_mode MODE [ferryfsd args...]: one boot against one daemon; sets $serving.
run_mode() {
    local mode=$1 rc
    shift
    share="$tmp/share-$mode"
    mkdir -p "$share"
    prepare_share
    : >"$tmp/daemon.log"
    start_daemon --log-level=info "$@"
    start_guest "$mode" /mnt/guest.sh "" --timeout 900 --watch-pid "$daemon_pid"
    wait_console "$mode" '^HOLDING' 600
    serving=$daemon_pid
}

# finish_mode MODE: lets the guest end; QEMU and then the daemon must exit 0.
finish_mode() {
    local rc=0
    : >"$share/host-done"
    wait "${guest_pids[-1]}" || rc=$?
    ((rc == 0)) || die "$1: run-guest exit $rc: $(tr -d '\r' <"$tmp/console-$1.log" | tail -5)"
    wait_gone "$daemon_pid" 30 || die "$1: ferryfsd still running after the guest quit"
    rc=0
    wait "$daemon_pid" || rc=$?
    ((rc == 0)) || die "$1: ferryfsd exited $rc: $(tail -3 "$tmp/daemon.log")"
}

# --- a) the default sandbox: namespaces, seccomp kill.
run_mode ns --seccomp=kill --rlimit-nofile=400
serving=$(ps -o pid= --ppid "$daemon_pid" | tr -d ' ')
[[ "$serving" =~ ^[0-9]+$ ]] || die "ns: no single child of $daemon_pid: '$serving'"
for n in mnt pid net; do
    [[ "$(readlink "/proc/$serving/ns/$n")" != "$(readlink "/proc/self/ns/$n")" ]] ||
        die "ns: the serving process shares the host's $n namespace"
done
[[ "$(status_field "$daemon_pid" CapEff)" == 0000000000000000 ]] ||
    die "ns: the waiting parent keeps capabilities $(status_field "$daemon_pid" CapEff)"
# The default --inode-file-handles=prefer keeps CAP_DAC_READ_SEARCH for open_by_handle_at, and the
# inodes the guest holds past half the fd budget keep handles, not fds.
check_process ns "$serving" chown dac_override dac_read_search fowner fsetid setgid setuid mknod setfcap
fds_ns=$(fd_count "$serving")
((fds_ns < 250)) || die "ns: $fds_ns fds while the guest holds 300 inodes under the default file handles"
grep -q -- "--inode-file-handles=prefer: file handles on " "$tmp/daemon.log" ||
    die "ns: the start log does not name the share's mount as using file handles"
finish_mode ns
guest_saw ns
grep -aqx 'MKNOD-CHR made' < <(tr -d '\r' <"$tmp/console-ns.log") || die "ns: mknod of a char device failed with all kept caps"
[[ -c "$share/cdev" ]] || die "ns: no char device on the host"
say "ns: child $serving in its own mnt/pid/net namespaces, Seccomp 2, NoNewPrivs 1, CapEff $(cap_mask chown dac_override dac_read_search fowner fsetid setgid setuid mknod setfcap), root = share, $fds_ns fds for 300 held inodes (file handles); nothing outside the share reachable"

# --- b) chroot, file handles, no CAP_MKNOD.
run_mode chroot --sandbox=chroot --inode-file-handles=mandatory --modcaps=-mknod --rlimit-nofile=400
check_process chroot "$serving" chown dac_override dac_read_search fowner fsetid setgid setuid setfcap
fds_chroot=$(fd_count "$serving")
((fds_chroot < 250)) || die "chroot: $fds_chroot fds while the guest holds 300 inodes under mandatory file handles"
finish_mode chroot
guest_saw chroot
grep -aq '^MKNOD-CHR: .*Operation not permitted' < <(tr -d '\r' <"$tmp/console-chroot.log") ||
    die "chroot: mknod of a char device without CAP_MKNOD: $(tr -d '\r' <"$tmp/console-chroot.log" | grep -a MKNOD-CHR)"
[[ ! -e "$share/cdev" ]] || die "chroot: a device node was made without CAP_MKNOD"
say "chroot: Seccomp 2, NoNewPrivs 1, CapEff $(cap_mask chown dac_override dac_read_search fowner fsetid setgid setuid setfcap), root = share, $fds_chroot fds for 300 held inodes, mknod c EPERM, FIFO and files work; nothing outside the share reachable"
say PASS
