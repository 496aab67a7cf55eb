#!/usr/bin/env bash
# Guest e2e (make check): submounts, O_DIRECT/O_NOATIME, --readonly, uid/gid translation and suid/sgid/capability clearing with and without --killpriv-v2 and --xattrmap, each checked in the guest and on the host; one boot, eight ferryfsd instances.
#
# Usage: access-test.sh   Env: FERRYFSD (default build/ferryfsd), FERRYFS_GUEST_DIR
# Exit: 0 pass, 1 fail, 77 skipped (no QEMU or guest image).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sem_init access-test
command -v strace >/dev/null || { sem_say "SKIP: no strace (scripts/deps.sh installs it)"; exit 77; }

t="$sem_tmp"
main="$t/main" ro="$t/ro" xl="$t/xl" kp="$t/kp" nokp="$t/nokp" kpmap="$t/kpmap" nokpmap="$t/nokpmap"
mkdir -p "$main/sub" "$ro/dir" "$xl" "$kp" "$nokp" "$kpmap" "$nokpmap"
# Host-set file capabilities for fsops cap_cleared_host_set (the real name, or the mapped one too).
source "$sem_repo/tests/e2e/host-checks.sh"
xmap=':map:security.:user.guest.:'
prepare_cap_files "$kp"
cap_name=user.guest.security.capability prepare_cap_files "$kpmap"
cap_name=user.guest.security.capability prepare_cap_files "$nokpmap"
# A host mount inside the share: the guest should get it as its own submount.
mount -t tmpfs -o size=16m ferryfs-sub "$main/sub"
sem_umounts+=("$main/sub")
printf host-tmpfs >"$main/sub/hostfile"
for f in direct noatime direct2 noatime2; do head -c 4096 /dev/zero >"$main/$f"; done
printf keep >"$ro/file"
chmod 1777 "$xl"
printf secret >"$xl/h5003"; chown 5003:5003 "$xl/h5003"; chmod 600 "$xl/h5003"
: >"$xl/h8002"; chown 8002:0 "$xl/h8002"
: >"$xl/h1234"; chown 1234:1234 "$xl/h1234"
ro_state() { (cd "$ro" && find . -printf '%p %m %s %u %g %T@\n' | sort && cat file) | sha256sum; }
ro_before="$(ro_state)"

# These two are looked at from outside (strace, /proc/PID/fd): without a sandbox their pid is
# the serving process and their fds show host paths. The others run in the default sandbox.
sem_daemon ferryfs "$main" --allow-direct-io --preserve-noatime --sandbox=none
sem_daemon nosub "$main" --no-announce-submounts --sandbox=none
sem_daemon ro "$ro" --readonly
sem_daemon xl "$xl" --translate-uid map:1000:5000:10 --translate-gid map:1000:5000:10 \
    --translate-uid squash-guest:2000:7000:5 --translate-gid squash-guest:2000:7000:5 \
    --translate-uid squash-host:8000:3000:5 --translate-uid forbid-guest:4000:10
sem_daemon kp "$kp" --xattr --killpriv-v2
sem_daemon nokp "$nokp" --xattr
sem_daemon kpmap "$kpmap" --xattr --killpriv-v2 "--xattrmap=$xmap"
sem_daemon nokpmap "$nokpmap" --xattr "--xattrmap=$xmap"

# syncfs is only visible from the host side of the daemon.
strace_pids=()
for d in ferryfs nosub; do
    pv="sem_pid_$d"
    strace -f -y -qq -e trace=syncfs -o "$t/strace.$d" -p "${!pv}" 2>/dev/null &
    strace_pids+=($!)
done
sleep 1

# The daemon's own fds while the guest holds the files open: O_DIRECT and O_NOATIME kept or not.
fd_flags() {  # PID PATH -> octal flags of the daemon's non-O_PATH fds on PATH
    local fd
    for fd in /proc/"$1"/fd/*; do
        [[ "$(readlink "$fd" 2>/dev/null)" == "$2" ]] || continue
        awk '/^flags:/ { print $2 }' "/proc/$1/fdinfo/${fd##*/}"
    done
}
has_flag() {  # PID PATH OCTAL_FLAG -> 1 if an open (non-O_PATH) fd has the flag
    local f r=0
    for f in $(fd_flags "$1" "$2"); do
        (( (8#$f & 8#10000000) == 0 )) || continue
        (( (8#$f & 8#$3) != 0 )) && r=1
    done
    echo "$r"
}
(
    for _ in $(seq 3000); do [[ -e "$main/held" ]] && break; sleep 0.1; done
    {
        sem_host direct-io-kept "$(has_flag "$sem_pid_ferryfs" "$main/direct" 40000)" "no O_DIRECT fd"
        sem_host noatime-kept "$(has_flag "$sem_pid_ferryfs" "$main/noatime" 1000000)" "no O_NOATIME fd"
        sem_host direct-io-dropped-by-default "$((1 - $(has_flag "$sem_pid_nosub" "$main/direct2" 40000)))" "O_DIRECT fd"
        sem_host noatime-dropped-by-default "$((1 - $(has_flag "$sem_pid_nosub" "$main/noatime2" 1000000)))" "O_NOATIME fd"
        echo "fds: $(fd_flags "$sem_pid_ferryfs" "$main/direct") / $(fd_flags "$sem_pid_ferryfs" "$main/noatime")"
    } >"$t/hold.result" 2>&1
    : >"$main/checked"
) &
sem_pids_helpers=($!)

{
    echo '#!/bin/sh'
    sem_mount_line
    cat <<'GUEST'
/mnt/gsem submounts /mnt /nosub
/mnt/gsem hold /mnt /nosub
/mnt/gsem readonly /ro
umount /ro
if mount -t virtiofs -o ro ro /ro && [ "$(cat /ro/file)" = keep ]; then
    echo "CHECK ro-guest-ro-mount PASS"
else
    echo "CHECK ro-guest-ro-mount FAIL"
fi
/mnt/gsem translate /xl
/mnt/gsem killpriv /kp
/mnt/gsem killpriv /nokp
# The whole fsops suite on the --killpriv-v2 share, its checks renamed.
# (host_file_read needs files only fsops-test.sh lays out)
/bin/fsops /kp $(/bin/fsops --list | grep -vx host_file_read) 2>&1 | sed -n 's/^CHECK /CHECK fsops-kp-/p'
# The privilege checks under --xattrmap, with and without killpriv v2.
for m in kpmap nokpmap; do
    /bin/fsops /$m suid_cleared_on_write suid_root_write_kept suid_cleared_on_truncate \
        suid_cleared_on_chown cap_cleared_host_set sgid_dir sgid_dir_outsider 2>&1 | sed -n "s/^CHECK /CHECK fsops-$m-/p"
done
exit 0
GUEST
} >"$main/guest.sh"
chmod 755 "$main/guest.sh"

sem_boot 900
# A guest that never got to "hold" leaves the helper waiting: end it (sem_boot said why).
[[ -e "$main/held" ]] || kill "${sem_pids_helpers[@]}" 2>/dev/null || true
wait "${sem_pids_helpers[@]}" 2>/dev/null || true
for p in "${strace_pids[@]}"; do wait "$p" 2>/dev/null || true; done

sem_expect submount-dev submount-in-proc-mounts submount-file-dev submount-read submount-syncfs \
    nosub-same-dev nosub-not-in-proc-mounts nosub-syncfs hold-open hold-host-checked \
    ro-read ro-open-wronly ro-open-rdwr ro-open-trunc ro-create ro-mkdir ro-mknod ro-symlink \
    ro-link ro-unlink ro-rmdir ro-rename ro-chmod ro-chown ro-truncate ro-utimens \
    ro-access-r ro-guest-ro-mount \
    xl-host-map xl-host-squash xl-host-unmapped xl-creds-mapped xl-creds-other xl-create-map \
    xl-create-map-attr xl-create-squash xl-create-squash-attr xl-forbid-create \
    xl-chown-root-create xl-chown-map xl-chown-map-attr xl-forbid-chown \
    kp-setup kp-write-owner kp-write-other kp-write-root-keeps kp-truncate kp-open-trunc kp-chown \
    kp-sgid-without-gx-kept kp-cap-set-root kp-cap-cleared-root kp-cap-set-user kp-cap-cleared-user
grep -q '^CHECK fsops-kp-' <<<"$sem_out" || { sem_say "FAIL: fsops did not run on the killpriv share"; sem_fail=1; }
for m in kpmap nokpmap; do
    sem_expect fsops-$m-suid_cleared_on_write fsops-$m-suid_root_write_kept fsops-$m-suid_cleared_on_truncate \
        fsops-$m-suid_cleared_on_chown fsops-$m-cap_cleared_host_set fsops-$m-sgid_dir fsops-$m-sgid_dir_outsider
done

{
    cat "$t/hold.result" 2>/dev/null || sem_host hold-result 0 "host half never ran"
    # Any fd on the tmpfs will do: the daemon syncs through the first inode it knows there.
    sem_host submount-syncfs-reached "$(grep -Eq "syncfs\([0-9]+<$main/sub[/>]" "$t/strace.ferryfs" && echo 1)" \
        "no syncfs on $main/sub: $(tr '\n' ' ' <"$t/strace.ferryfs")"
    sem_host nosub-syncfs-reaches-submount "$(grep -Eq "syncfs\([0-9]+<$main/sub[/>]" "$t/strace.nosub" && echo 1)" \
        "no syncfs on $main/sub: $(tr '\n' ' ' <"$t/strace.nosub")"
    sem_host submount-file-in-tmpfs "$([[ -f "$main/sub/fromguest" && "$(stat -c %d "$main/sub/fromguest")" == "$(stat -c %d "$main/sub")" && "$(stat -c %d "$main/sub")" != "$(stat -c %d "$main")" ]] && echo 1)" \
        "sub/fromguest not on the tmpfs"
    f_sub=$(( 16#$(sem_init_flags ferryfs | sed 's/0x//') ))
    f_nosub=$(( 16#$(sem_init_flags nosub | sed 's/0x//') ))
    sem_host submounts-agreed "$(( (f_sub >> 27) & 1 ))" "FUSE_SUBMOUNTS not in INIT"
    sem_host submounts-off "$(( 1 - ((f_nosub >> 27) & 1) ))" "FUSE_SUBMOUNTS in INIT"
    sem_host ro-host-unchanged "$([[ "$(ro_state)" == "$ro_before" ]] && echo 1)" "the read-only share changed"
    sem_host xl-host-create-map "$([[ "$(stat -c %u:%g "$xl/g1000")" == 5000:5000 ]] && echo 1)" "$(stat -c %u:%g "$xl/g1000" 2>&1)"
    sem_host xl-host-create-squash "$([[ "$(stat -c %u:%g "$xl/g2003")" == 7000:7000 ]] && echo 1)" "$(stat -c %u:%g "$xl/g2003" 2>&1)"
    sem_host xl-host-chown-map "$([[ "$(stat -c %u:%g "$xl/g0")" == 5005:5005 ]] && echo 1)" "$(stat -c %u:%g "$xl/g0" 2>&1)"
    sem_host xl-host-forbidden-absent "$([[ ! -e "$xl/g4001" ]] && echo 1)" "g4001 exists"
    for d in kp nokp; do
        f=$(( 16#$(sem_init_flags "$d" | sed 's/0x//') ))
        want=$([[ $d == kp ]] && echo 1 || echo 0)
        # FUSE_HANDLE_KILLPRIV_V2 is bit 28
        sem_host "$d-killpriv-v2-agreed-$want" "$([[ $(( (f >> 28) & 1 )) == "$want" ]] && echo 1)" "INIT flags $(sem_init_flags "$d")"
        dir="$t/$d/kp"
        modes="$(cd "$dir" && stat -c '%n=%a' w-owner w-other w-root trunc otrunc chown sgid-noexec | tr '\n' ' ')"
        sem_host "$d-host-modes" "$([[ "$modes" == "w-owner=755 w-other=777 w-root=4777 trunc=777 otrunc=777 chown=755 sgid-noexec=2764 " ]] && echo 1)" "$modes"
        caps="$(python3 -c 'import os,sys
for f in sys.argv[1:]:
    try: os.getxattr(f, "security.capability"); print(f, "has-cap")
    except OSError: pass' "$dir/cap-root" "$dir/cap-user")"
        sem_host "$d-host-caps-cleared" "$([[ -z "$caps" ]] && echo 1)" "$caps"
    done
    # The host-set capabilities (real and mapped) are gone from every file the guest changed.
    for d in kp kpmap nokpmap; do
        share="$t/$d" cap_name=$([[ $d == kp ]] || echo user.guest.security.capability)
        why="$(cap_name=$cap_name hc_caps_cleared 2>&1)" && sem_host "$d-host-caps-host-set" 1 "" ||
            sem_host "$d-host-caps-host-set" 0 "$why"
        k="$t/$d/fsops/keep"
        why="$(hc_sgid_outsider 2>&1)" && sem_host "$d-host-sgid-outsider" 1 "" || sem_host "$d-host-sgid-outsider" 0 "$why"
    done
} >"$t/host.result" 2>&1
cat "$t/host.result"
grep -q ' FAIL' "$t/host.result" && sem_fail=1
sem_finish
