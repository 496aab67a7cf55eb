#!/usr/bin/env bash
# Guest e2e (make check): ferryfsd started by an ordinary user (one this test creates and removes) with the default sandbox serves a real guest from inside a user namespace, as README.md "Without root" says.
#
# As root, the test makes a user and a share and a socket directory that user owns, then starts
# ferryfsd as that user exactly as the README's "Without root" section does (no --sandbox: the
# default namespace sandbox). The host checks the serving process in /proc: NoNewPrivs 1,
# Seccomp 2, a user namespace (and mnt/pid/net) other than init's, uid 0 inside mapping to the
# user. One boot (QEMU runs as root and connects to the user's socket) runs a guest script from
# the share that tries to leave it (symlinks, '..', the host path of a marker next to the share,
# hard links), tries what a single mapped id cannot do (chown to another id, mknod of a device),
# then the fsops battery without the checks that need host root (listed below with the reason).
# Afterwards every file the guest created belongs to the user on the host.
# A second boot starts ferryfsd with README's --uid-map/--gid-map ranges (newuidmap/newgidmap, the
# user's /etc/subuid and /etc/subgid ranges from useradd): the namespace maps 0 and the ranges,
# a guest chown to 1000 lands as subuid+999 on the host, an id outside the ranges is refused,
# and the fsops checks the first boot left out for needing other ids pass.
# Last, host FUSE mode as the user (README's --mount line, fusermount3): the user reads and writes
# through the mount, files land as the user's, and fusermount3 -u, SIGTERM and SIGKILL of the
# daemon each leave no mount behind.
# Exit: 0 pass, 1 fail, 77 skipped (not root, no useradd/setpriv, no user namespaces, no guest).
set -euo pipefail
name=unprivileged
source "$(dirname "${BASH_SOURCE[0]}")/../lib/guest.sh"
# Every check says its verdict (pass, fail); the test fails at the end if one failed.

# fsops checks that need host root, and why (docs/security.md, "Without root"):
#   setattr_chown, nonroot_user, sgid_dir, sgid_dir_outsider, suid_cleared_on_chown,
#   suid_cleared_on_write, suid_cleared_on_truncate:
#       they chown to, or create as, guest ids 1000/1234/2000, which a user namespace mapping
#       one id does not have (EINVAL)
#   mknod_chr:  device nodes need CAP_MKNOD in the initial user namespace (EPERM)
#   cap_cleared_host_set, suid_root_write_kept: the host prepares files owned by other ids
#       (1000, root) with file capabilities; to the user they are someone else's files
root_only=(setattr_chown nonroot_user sgid_dir sgid_dir_outsider suid_cleared_on_chown
           suid_cleared_on_write suid_cleared_on_truncate mknod_chr
           cap_cleared_host_set suid_root_write_kept)
# The host checks that look at what those checks left.
root_only_host=(owner_1000 mode_owner sgid sgid_outsider special_files caps_cleared)

need_root "it creates a user"
need_cmd useradd userdel setpriv
guest_prepare
make_tmp
fsops="$guest_dir/fsops"
source "$repo/tests/e2e/host-checks.sh"

daemon_pid=""
cleanup_cmds+=('[[ -z "$daemon_pid" ]] || kill -KILL "$daemon_pid" 2>/dev/null; sleep 0.5')
cleanup_cmds+=('unpriv_cleanup')
# The user (tests/lib/unpriv.sh, which the other guest tests use under FERRYFS_DAEMON_USER=auto).
unpriv_user_create
user=$unpriv_user uid=$unpriv_uid gid=$unpriv_gid

# The user's own corner of $tmp: the share and the socket directory.
chmod 0711 "$tmp"
home="$tmp/home"
share="$home/share"
run="$home/run"
sock="$run/ferryfs.sock"
outside="$home/outside"
marker="FERRYFS-OUTSIDE-MARKER-$$-$RANDOM"
mkdir -p "$share/host" "$run" "$outside"
tmp_drop=("$share")
echo "$marker" >"$outside/marker"
printf 'hello from the host\n' >"$share/host/hello.txt"
"$fsops" --expect hostpat >"$share/host/pattern.bin"
ln -s ../outside/marker "$share/rel-marker"
ln -s "$outside/marker" "$share/abs-marker"
ln -s ../outside "$share/outdir-link"

checks=()
while read -r c; do
    [[ " ${root_only[*]} " == *" $c "* ]] || checks+=("$c")
done < <("$fsops" --list)

cat >"$share/guest.sh" <<GUEST
#!/bin/sh
show() {
    if out=\$(cat "\$2" 2>&1); then echo "READ \$1: \$out"; else echo "NOREAD \$1: \$out"; fi
}
show inside /mnt/host/hello.txt
show abs-marker /mnt/abs-marker
show rel-marker /mnt/rel-marker
show outdir-link /mnt/outdir-link/marker
show dotdot /mnt/../outside/marker
show host-path $outside/marker
ln /mnt/rel-marker /mnt/hl-marker 2>&1 | sed 's/^/LN: /'
echo made-by-guest >/mnt/by-guest && echo "OWNER \$(stat -c %u:%g /mnt/by-guest)"
chown 1000:1000 /mnt/by-guest 2>&1 | sed 's/^/CHOWN-OTHER: /'
chown 0:0 /mnt/by-guest && echo "CHOWN-ROOT ok"
mknod /mnt/cdev c 1 3 2>&1 | sed 's/^/MKNOD-CHR: /'
mknod /mnt/fifo p && [ -p /mnt/fifo ] && echo "MKNOD-FIFO made"
sh /cmds/fsops ${checks[*]}
GUEST
chmod 755 "$share/guest.sh"
chown -R "$uid:$gid" "$home"
chmod 0700 "$run"

# README.md, "Without root": the user starts it with no option about privileges.
: >"$tmp/daemon.log"
"${unpriv_prefix[@]}" \
    "$ferryfsd" --socket-path="$sock" --shared-dir="$share" --xattr >>"$tmp/daemon.log" 2>&1 &
daemon_pid=$!
if ! wait_socket "$sock" "$daemon_pid"; then
    if grep -q "cannot create a user namespace" "$tmp/daemon.log"; then
        skip "user namespaces are not available to ordinary users here: $(tail -1 "$tmp/daemon.log")"
    fi
    die "ferryfsd as $user did not listen: $(tail -3 "$tmp/daemon.log")"
fi

st() { awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"; }
# The serving process: the relay's only child.
serving=""
for _ in $(seq 50); do
    serving=$(ps -o pid= --ppid "$daemon_pid" | tr -d ' ')
    [[ "$serving" =~ ^[0-9]+$ ]] && [[ "$(awk '$1 == "Seccomp:" { print $2 }' "/proc/$serving/status")" == 2 ]] && break
    sleep 0.1
done
[[ "$serving" =~ ^[0-9]+$ ]] || die "no single child of $daemon_pid: '$serving'"
[[ "$(st "$serving" Seccomp)" == 2 ]] || die "Seccomp: $(st "$serving" Seccomp), want 2"
[[ "$(st "$serving" NoNewPrivs)" == 1 ]] || die "NoNewPrivs: $(st "$serving" NoNewPrivs)"
[[ "$(st "$serving" Uid)" == "$uid" && "$(st "$serving" Gid)" == "$gid" ]] ||
    die "the serving process runs as $(st "$serving" Uid):$(st "$serving" Gid) on the host, want $uid:$gid"
for n in user mnt pid net; do
    [[ "$(readlink "/proc/$serving/ns/$n")" != "$(readlink /proc/1/ns/$n)" ]] ||
        die "the serving process shares init's $n namespace"
done
[[ "$(cat "/proc/$serving/uid_map" | tr -s ' ' | sed 's/^ //')" == "0 $uid 1" ]] ||
    die "uid_map: $(cat "/proc/$serving/uid_map")"
[[ "$(stat -L -c %d:%i "/proc/$serving/root/")" == "$(stat -c %d:%i "$share")" ]] ||
    die "the serving process's root is not the share"
say "serving pid $serving: Seccomp 2, NoNewPrivs 1, host ids $uid:$gid, own user/mnt/pid/net namespaces, uid_map 0 $uid 1, root = share"

t0=$SECONDS
rc=0
"$run_guest" --guest "$guest_dir" --sock "$sock" --cmd /mnt/guest.sh --quiet \
    --log "$tmp/console.log" --timeout "${FERRYFS_E2E_TIMEOUT:-600}" --watch-pid "$daemon_pid" || rc=$?
say "guest finished in $((SECONDS - t0)) s (run-guest exit $rc)"
out="$(tr -d '\r' <"$tmp/console.log")"
grep -aq FERRYFS-GUEST-MOUNTED <<<"$out" || die "the guest did not mount the share: $(tail -5 <<<"$out")"
wait_gone "$daemon_pid" 30 || die "ferryfsd still running after the guest quit"
drc=0
wait "$daemon_pid" || drc=$?
daemon_pid=""
((drc == 0)) || fail "ferryfsd exited $drc: $(tail -3 "$tmp/daemon.log")"

# Leaving the share.
grep -aq '^READ inside: hello from the host$' <<<"$out" || fail "the guest could not read the share"
! grep -aqF "$marker" <<<"$out" || fail "the guest read the marker outside the share"
for l in abs-marker rel-marker outdir-link dotdot host-path; do
    grep -aq "^NOREAD $l: .*No such file or directory" <<<"$out" ||
        fail "$l: $(grep -a " $l: " <<<"$out" | head -1)"
done
[[ "$(stat -c %h "$outside/marker")" == 1 ]] || fail "the marker outside the share gained a link"
# What one mapped id allows.
grep -aqx 'OWNER 0:0' <<<"$out" || fail "a new file is not the guest's root's: $(grep -a '^OWNER' <<<"$out")"
grep -aq '^CHOWN-OTHER: .*\(Invalid argument\|Operation not permitted\)' <<<"$out" ||
    fail "chown to another id: $(grep -a '^CHOWN-OTHER' <<<"$out" || echo succeeded)"
grep -aqx 'CHOWN-ROOT ok' <<<"$out" || fail "chown to the guest's root (the user) failed"
grep -aq '^MKNOD-CHR: .*Operation not permitted' <<<"$out" ||
    fail "mknod of a char device: $(grep -a '^MKNOD-CHR' <<<"$out" || echo succeeded)"
[[ ! -e "$share/cdev" ]] || fail "a device node was made on the host"
grep -aqx 'MKNOD-FIFO made' <<<"$out" || fail "mknod of a FIFO failed"

# The fsops battery, less root_only.
grep -aq FSOPS-SUMMARY <<<"$out" || fail "no FSOPS-SUMMARY: $(tail -5 <<<"$out")"
res="$tmp/results"
grep -ao 'CHECK [A-Za-z0-9_]* \(PASS\|FAIL.*\)' <<<"$out" | sed 's/^CHECK //' >"$res" || true
for c in "${checks[@]}"; do
    grep -q "^$c " "$res" || echo "$c FAIL not run" >>"$res"
done
host_checks=($(for h in "${host_checks[@]}"; do
    [[ " ${root_only_host[*]} " == *" $h "* ]] || echo "$h"; done))
hres="$tmp/host-results"
: >"$hres"
run_host_checks "$share" "$hres"
sed 's/\t/ /' "$hres" >>"$res"
if grep -q ' FAIL' "$res"; then
    fail "fsops: $(grep -c ' FAIL' "$res") failed: $(grep ' FAIL' "$res" | tr '\n' ';' | cut -c1-600)"
else
    say "fsops: $(grep -c ' PASS' "$res") checks passed (guest and host), ${#root_only[@]} excluded as root-only"
fi

# Ownership on the host: everything under the share is the user's.
others=$(find "$share" \( ! -user "$uid" -o ! -group "$gid" \) -printf '%u:%g %P\n' | head -5)
[[ -z "$others" ]] || fail "files in the share not owned by $uid:$gid: $others"
[[ "$(stat -c %u:%g "$share/by-guest")" == "$uid:$gid" ]] || fail "by-guest: $(stat -c %u:%g "$share/by-guest")"
grep -q "user namespace with one id" "$tmp/daemon.log" || fail "the single-id fallback was not logged"
# The default --inode-file-handles=prefer cannot open handles without root: said once, fds kept.
n=$(grep -c "without root file handles cannot be opened" "$tmp/daemon.log" || true)
((n == 1)) || fail "the file-handle fallback was logged $n times, not once: $(grep -- --inode-file-handles "$tmp/daemon.log" | head -3)"

# --- Ranges: README.md's second command, --uid-map/--gid-map through newuidmap/newgidmap with the
# user's /etc/subuid and /etc/subgid ranges (useradd gave them). The id checks left out above run.
sub_uid=$(awk -F: -v u="$user" '$1 == u { print $2; exit }' /etc/subuid 2>/dev/null || true)
sub_gid=$(awk -F: -v u="$user" '$1 == u { print $2; exit }' /etc/subgid 2>/dev/null || true)
if ! command -v newuidmap >/dev/null || [[ -z "$sub_uid" || -z "$sub_gid" ]]; then
    say "ranges: not run (no newuidmap, or useradd gave $user no /etc/subuid range: scripts/deps.sh installs uidmap)"
else
    # setattr_chmod makes the file setattr_chown changes.
    id_checks=(setattr_chmod setattr_chown nonroot_user sgid_dir sgid_dir_outsider suid_cleared_on_chown
               suid_cleared_on_write suid_cleared_on_truncate)
    # The same share, as in README (the first boot's files stay; fsops starts afresh).
    share="$home/share"
    cat >"$share/guest.sh" <<GUEST
#!/bin/sh
echo by-guest >/mnt/by-guest && chown 1000:1000 /mnt/by-guest && echo "CHOWN-1000 ok"
echo by-guest >/mnt/by-guest-out && chown 70000 /mnt/by-guest-out 2>&1 | sed 's/^/CHOWN-OUTSIDE: /'
sh /cmds/fsops ${id_checks[*]}
GUEST
    chmod 755 "$share/guest.sh"
    chown -R "$uid:$gid" "$share"
    rm -f "$sock"
    : >"$tmp/daemon-ranges.log"
    "${unpriv_prefix[@]}" \
        "$ferryfsd" --socket-path="$sock" --shared-dir="$share" \
        --uid-map=":0:$uid:1:" --uid-map=":1:$sub_uid:65536:" \
        --gid-map=":0:$gid:1:" --gid-map=":1:$sub_gid:65536:" >>"$tmp/daemon-ranges.log" 2>&1 &
    daemon_pid=$!
    wait_socket "$sock" "$daemon_pid" || die "ranges: ferryfsd did not listen: $(tail -3 "$tmp/daemon-ranges.log")"
    serving=""
    for _ in $(seq 50); do
        serving=$(ps -o pid= --ppid "$daemon_pid" | tr -d ' ')
        [[ "$serving" =~ ^[0-9]+$ && "$(st "$serving" Seccomp 2>/dev/null)" == 2 ]] && break
        sleep 0.1
    done
    want_map=$(printf '0 %s 1\n1 %s 65536' "$uid" "$sub_uid")
    [[ "$(tr -s ' ' <"/proc/$serving/uid_map" | sed 's/^ //')" == "$want_map" ]] ||
        fail "ranges: uid_map: $(cat "/proc/$serving/uid_map")"
    [[ "$(st "$serving" Seccomp)" == 2 && "$(st "$serving" NoNewPrivs)" == 1 ]] ||
        fail "ranges: Seccomp $(st "$serving" Seccomp), NoNewPrivs $(st "$serving" NoNewPrivs)"
    rc=0
    "$run_guest" --guest "$guest_dir" --sock "$sock" --cmd /mnt/guest.sh --quiet \
        --log "$tmp/console-ranges.log" --timeout "${FERRYFS_E2E_TIMEOUT:-600}" --watch-pid "$daemon_pid" || rc=$?
    out="$(tr -d '\r' <"$tmp/console-ranges.log")"
    grep -aq FERRYFS-GUEST-MOUNTED <<<"$out" ||
        die "ranges: the guest did not mount the share (run-guest exit $rc): $(tail -3 <<<"$out")"
    wait_gone "$daemon_pid" 30 || fail "ranges: ferryfsd still running after the guest quit"
    wait "$daemon_pid" || fail "ranges: ferryfsd exited $?: $(tail -3 "$tmp/daemon-ranges.log")"
    daemon_pid=""
    grep -aqx 'CHOWN-1000 ok' <<<"$out" || fail "ranges: chown 1000 in the guest failed"
    [[ "$(stat -c %u:%g "$share/by-guest")" == "$((sub_uid + 999)):$((sub_gid + 999))" ]] ||
        fail "ranges: guest 1000:1000 is $(stat -c %u:%g "$share/by-guest") on the host, want $((sub_uid + 999)):$((sub_gid + 999))"
    grep -aq '^CHOWN-OUTSIDE: .*\(Invalid argument\|Operation not permitted\)' <<<"$out" ||
        fail "ranges: chown to an id outside the ranges: $(grep -a '^CHOWN-OUTSIDE' <<<"$out" || echo succeeded)"
    for c in "${id_checks[@]}"; do
        grep -aq "^CHECK $c PASS" <<<"$out" || fail "ranges: $(grep -a "^CHECK $c " <<<"$out" || echo "$c not run")"
    done
    ((fails)) || say "ranges: uid_map 0 $uid 1 + 1 $sub_uid 65536 by newuidmap; guest 1000 is $((sub_uid + 999)) on the host, an id outside refused, ${#id_checks[@]} id checks pass"
fi

# --- Host FUSE mode: README's --mount line as the user, through fusermount3. Stopped three ways
# (fusermount3 -u, SIGTERM, SIGKILL); each time the mount must be gone afterwards.
mounted() { grep -q " $1 fuse.ferryfs " /proc/mounts; }
if ! command -v fusermount3 >/dev/null; then
    say "mount: not run (no fusermount3: scripts/deps.sh installs fuse3)"
else
    # Debian makes /dev/fuse 0666; a machine that has it 0600 gets that for the test only.
    fuse_mode=$(stat -c %a /dev/fuse)
    if [[ "$fuse_mode" != 666 ]]; then
        say "mount: /dev/fuse is $fuse_mode here; 0666 (Debian's mode) until the test ends"
        cleanup_cmds+=("chmod $fuse_mode /dev/fuse")
        chmod 0666 /dev/fuse
    fi
    view="$home/view"
    share="$home/share"
    mkdir -p "$view"
    echo from-the-host >"$share/host.txt"
    chown -R "$uid:$gid" "$view" "$share"
    cleanup_cmds+=('grep -q " $view " /proc/mounts && umount -l "$view"')
    for how in unmount TERM KILL; do
        : >"$tmp/daemon-mount.log"
        # The prefix, not unpriv_as: $! must be ferryfsd's pid (setpriv execs it).
        "${unpriv_prefix[@]}" \
            "$ferryfsd" --mount="$view" --shared-dir="$share" >>"$tmp/daemon-mount.log" 2>&1 &
        daemon_pid=$!
        for _ in $(seq 100); do mounted "$view" && break; sleep 0.1; done
        mounted "$view" || die "mount ($how): not mounted: $(tail -3 "$tmp/daemon-mount.log")"
        # The filter comes once mounted, before serving.
        for _ in $(seq 50); do [[ "$(st "$daemon_pid" Seccomp)" == 2 ]] && break; sleep 0.1; done
        [[ "$(st "$daemon_pid" Seccomp)" == 2 ]] || fail "mount ($how): Seccomp $(st "$daemon_pid" Seccomp)"
        [[ "$(unpriv_as cat "$view/host.txt")" == from-the-host ]] || fail "mount ($how): the user cannot read the share"
        unpriv_as sh -c "echo $how >'$view/by-user-$how' && mkdir '$view/dir-$how'" ||
            fail "mount ($how): the user cannot write through the mount"
        [[ "$(stat -c %u:%g "$share/by-user-$how" 2>&1):$(cat "$share/by-user-$how" 2>&1)" == "$uid:$gid:$how" ]] ||
            fail "mount ($how): by-user-$how on the host: $(stat -c %u:%g "$share/by-user-$how" 2>&1)"
        case $how in
            unmount) unpriv_as fusermount3 -u "$view"; want=0 ;;
            TERM) kill -TERM "$daemon_pid"; want=0 ;;
            KILL) kill -KILL "$daemon_pid"; want=137 ;;
        esac
        rc=0
        wait "$daemon_pid" 2>/dev/null || rc=$?
        daemon_pid=""
        ((rc == want)) || fail "mount ($how): ferryfsd exited $rc, want $want: $(tail -3 "$tmp/daemon-mount.log")"
        for _ in $(seq 50); do mounted "$view" || break; sleep 0.1; done
        ! mounted "$view" || fail "mount ($how): still mounted after ferryfsd ended"
    done
    ((fails)) || say "mount: fusermount3 mounted $view for $user, Seccomp 2, files written are $uid:$gid on the host; unmount, SIGTERM and SIGKILL each leave no mount"
fi

((fails == 0)) || die "$fails check(s) failed (logs in $tmp)"
say PASS
