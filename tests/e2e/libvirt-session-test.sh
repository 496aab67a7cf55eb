#!/usr/bin/env bash
# make check: libvirt 11.3 (bookworm-backports, unpacked) in session mode, run by an ordinary user the test creates, starts ferryfsd unprivileged from <binary path=...>, from ~/.config/qemu/vhost-user/50-ferryfsd.json and with an <idmap>.
#
# Follows README.md "With libvirt", "Session mode" literally as that user: a session libvirtd
# of its own (XDG_CONFIG_HOME, XDG_RUNTIME_DIR, XDG_CACHE_HOME in the test's tmp; no D-Bus, no
# polkit, no system service), virsh -c qemu:///session. The test (root) only makes the user and
# shows the unpacked stack at its installed paths in a mount namespace of libvirtd's own
# (lv_stack_current in libvirt-lib.sh: libvirt 11.3's cpu_map, QEMU 10 and only its modules),
# `make install`'s tree over /usr/local. libvirtd and virsh come from tests/e2e/libvirt-current,
# QEMU 10 from tests/e2e/qemu-current (the domains' <emulator>); the guest is the stack's 6.12.
# Domain s1 (<binary path=build/ferryfsd xattr='on'>, cache always, sandbox namespace,
# thread_pool 4, <lock posix='on' flock='on'/>, <driver queue=1024>): libvirt 11.3 reads
# --print-capabilities (no "separate-options") and passes -o source=...,cache=,sandbox=,xattr,
# flock,posix_lock, -d and, in session mode, the --uid-map/--gid-map ranges it builds from
# /etc/subuid and /etc/subgid; ferryfsd runs as the user, in a user namespace of its own, and each
# option takes effect (guest xattr checks, queue size 1024, thread pool logged, cached pages kept,
# POSIX and flock locks agreed at INIT); what the guest's root writes belongs to the user on the
# host. Domain s2 (no path): libvirt picks /usr/local/bin/ferryfsd from the user's
# ~/.config/qemu/vhost-user/50-ferryfsd.json.
# Domain s3: <idmap> uid/gid 0 -> the user's subordinate range: the guest's root creates files
# owned by SUBUID:SUBGID on the host, guest uid 1000 by SUBUID+1000, and ferryfsd's own host uid
# is SUBUID. Every domain: virsh destroy leaves no ferryfsd, pid file or socket dir. At the end
# no process of the user is left and the user is removed.
# Not covered here: system mode (libvirt-real-test.sh with 9.0, libvirt-system-current-test.sh
# with 11.3); guest and host seeing each other's locks (libvirt-real-test.sh checks it with 9.0
# and 11.3; here the INIT flags show the guest's kernel agreed to send its locks to ferryfsd).
# Exit: 0 pass, 1 fail, 77 skipped (not root, the current stack, libvirt 11.3 or newuidmap missing).
set -euo pipefail
name=libvirt-session
source "$(dirname "${BASH_SOURCE[0]}")/start-lib.sh"
source "$here/libvirt-lib.sh"

((EUID == 0)) || skip "not root: the test creates the ordinary user libvirt runs as"
for tool in unshare setpriv newuidmap newgidmap useradd; do
    command -v "$tool" >/dev/null || skip "$tool missing (Debian: util-linux, uidmap, passwd)"
done
# The current stack (QEMU 10, the 6.12 guest, libvirt 11.3), whatever FERRYFS_STACK says.
lv_stack_current
start_prepare
lv_stack_mounts
chmod 755 "$tmp"

unpriv_user_create
cleanup_cmds+=(lv_cleanup unpriv_cleanup)
sub_uid="$(awk -F: -v u="$unpriv_user" '$1 == u { print $2; exit }' /etc/subuid)"
sub_gid="$(awk -F: -v u="$unpriv_user" '$1 == u { print $2; exit }' /etc/subgid)"
[[ -n "$sub_uid" && -n "$sub_gid" ]] || skip "useradd gave $unpriv_user no /etc/subuid or /etc/subgid range"

# The user's world: home and XDG dirs (XDG_RUNTIME_DIR 0700, as pam_systemd makes it).
u="$tmp/user"
mkdir -p "$u/home" "$u/config" "$u/run" "$u/cache" "$u/console"
chmod 700 "$u/run"
cp "$guest_dir/vmlinuz" "$guest_dir/initrd.img" "$u/"
unpriv_own "$u"
user_env=(env -i PATH=/usr/bin:/bin HOME="$u/home" USER="$unpriv_user" XDG_CONFIG_HOME="$u/config"
    XDG_RUNTIME_DIR="$u/run" XDG_CACHE_HOME="$u/cache" LIBVIRT_AUTOSTART=0)
as_user() { "${unpriv_prefix[@]}" "${user_env[@]}" "$@"; }

lv_domains=(s1 s2 s3 s4)
lv_virsh() { as_user "${lv_client[@]}" -q -c qemu:///session "$@"; }
lv_in() { "$@"; }
# libvirt-lib.sh's paths: session mode's dirs under the XDG dirs.
lv_run_dir="$u/run/libvirt/qemu/run" lv_lib_dir="$u/config/libvirt/qemu/lib"
lv_log_dir="$u/cache/libvirt/qemu/log" lv_boot_dir="$u" lv_console_dir="$u/console"

# README "With libvirt", "Session mode", step 1 (as root): install; the user has its subuid range.
lv_make_install
# Step 2 (as the user): the description where session mode looks, and a qemu.conf without
# virtlogd; virtiofsd_debug = 1 makes libvirt pass --log-level debug.
as_user sh -c 'mkdir -p "$XDG_CONFIG_HOME/qemu/vhost-user" "$XDG_CONFIG_HOME/libvirt" &&
    ln -s /usr/local/share/qemu/vhost-user/50-ferryfsd.json "$XDG_CONFIG_HOME/qemu/vhost-user/" &&
    printf "stdio_handler = \"file\"\nvirtiofsd_debug = 1\n" >"$XDG_CONFIG_HOME/libvirt/qemu.conf"'

# Step 2: the user's session libvirtd, in the foreground (virsh would start it itself).
unshare -m --propagation private bash -c '
    set -e
    inst=$1; shift
    eval "$LV_STACK_MOUNTS"
    mount -t overlay overlay -o "lowerdir=$inst/usr/local:/usr/local" /usr/local
    exec "$@"
' ns "$inst" "${unpriv_prefix[@]}" "${user_env[@]}" "${lv_daemon[@]}" >"$tmp/libvirtd.log" 2>&1 &
lvpid=$!
cleanup_pids+=("$lvpid")
lv_wait_up
# Oracles: the daemon is the user's and maps the cached libvirt.so, not Debian 12's 9.0.
lib_maps="$(grep -o '/[^ ]*libvirt\.so\.0[^ ]*' "/proc/$lvpid/maps" | sort -u | tr '\n' ' ')"
if unpriv_runs_as_user "$lvpid" && [[ "$lib_maps" == "$lv_root/"* && "$lib_maps" != *" /usr/lib/"* ]]; then
    pass "libvirtd $(lv_virsh version | awk '/library: libvirt/ {print $NF; exit}') runs as $unpriv_user with $lib_maps"
else
    fail "libvirtd: uids $(awk '/^Uid:/ {print $2, $3, $4, $5}' "/proc/$lvpid/status"), libraries $lib_maps"
fi
caps="$(lv_virsh domcapabilities --emulatorbin "$lv_emulator" --virttype qemu 2>&1 || true)"
if grep -q '<machine>pc-i440fx-10\.0</machine>' <<<"$caps" &&
    grep -A4 "<filesystem supported='yes'>" <<<"$caps" | grep -q '<value>virtiofs</value>'; then
    pass "libvirt 11.3 probed QEMU 10 through $lv_emulator: pc-i440fx-10.0, virtiofs supported"
else
    fail "QEMU 10's capabilities probe: $(head -5 <<<"$caps")"
fi
user_ns="$(readlink "/proc/$lvpid/ns/user")"

# ferryfsd of a domain runs as host uid $2 in a user namespace of its own, its server in a new
# pid namespace (the pid file names the relay that made it: pid_for_children).
check_unprivileged() { # NAME UID
    local uids
    uids="$(awk '/^Uid:/ {print $2, $3, $4, $5}' "/proc/$fs_pid/status" 2>/dev/null || true)"
    if [[ "$uids" == "$2 $2 $2 $2" && -n "$user_ns" &&
        "$(readlink "/proc/$fs_pid/ns/user")" != "$user_ns" &&
        "$(readlink "/proc/$fs_pid/ns/pid_for_children")" != "$(readlink "/proc/$lvpid/ns/pid")" ]]; then
        pass "[$1] ferryfsd (pid $fs_pid) runs as host uid $2 in user namespace $(readlink "/proc/$fs_pid/ns/user"), its own"
    else
        fail "[$1] ferryfsd: uids '$uids' (expected $2), user ns $(readlink "/proc/$fs_pid/ns/user") (libvirtd's $user_ns)"
    fi
}
# ferryfsd's argv as libvirt built it, and its program.
check_args() { # NAME EXE PATTERN
    local args exe
    args="$(tr '\0' ' ' <"/proc/$fs_pid/cmdline" 2>/dev/null || true)"
    exe="$(readlink "/proc/$fs_pid/exe" 2>/dev/null || true)"
    if [[ "$exe" == "$2" ]] && grep -q -- "$3" <<<"$args"; then
        pass "[$1] libvirt ran $exe with: $args"
    else
        fail "[$1] ferryfsd's command line: exe '$exe', args '$args' (expected $2 $3)"
    fi
}
# <lock posix='on' flock='on'/> took effect: ferryfsd offered FUSE_POSIX_LOCKS (0x2) and
# FUSE_FLOCK_LOCKS (0x400) and the guest's kernel agreed (the INIT line's session flags).
check_lock_flags() { # NAME
    fs_log "$1"
    local flags
    flags="$(grep -o 'fuse: session 7\.[0-9]*, flags 0x[0-9a-f]*' "$tmp/$1-virtiofsd.log" | grep -o '0x[0-9a-f]*$' | tail -1)"
    if [[ -n "$flags" ]] && (((flags & 0x402) == 0x402)); then
        pass "[$1] <lock posix='on' flock='on'/> took effect: POSIX and flock locks agreed at INIT (flags $flags)"
    else
        fail "[$1] <lock>: INIT flags '${flags:-none}' lack FUSE_POSIX_LOCKS|FUSE_FLOCK_LOCKS (0x402)"
    fi
}
# The host owner of a file the guest made.
check_owner() { # NAME FILE UID:GID WHAT
    local got
    got="$(stat -c %u:%g "$2" 2>/dev/null || echo missing)"
    if [[ "$got" == "$3" ]]; then
        pass "[$1] $4: $(basename "$2") belongs to $3 on the host"
    else
        fail "[$1] $4: $(basename "$2") belongs to $got on the host, not $3"
    fi
}
write_guest() { # SHARE LINES...: guest.sh ending with the written file and the marker
    local share=$1; shift
    { printf '%s\n' "$@"; printf 'echo "written by the guest" >/mnt/guest-wrote.txt\necho LV-GUEST-DONE\nsleep 3600\n'; } >"$share/guest.sh"
}

# --- Domain s1: <binary path=...> with every option libvirt 11.3 passes a daemon of the -o dialect.
d=s1 share1="$tmp/s1-share"
mkdir -p "$share1"
write_guest "$share1" "$cache_guest" '/bin/fsops /mnt xattr' 'echo "LV-XATTR rc=$?"'
cache_host "$share1"
unpriv_own "$share1"
domain_xml "$d" "$share1" "      <driver type='virtiofs' queue='1024'/>
      <binary path='$ferryfsd' xattr='on'>
        <cache mode='always'/>
        <sandbox mode='namespace'/>
        <lock posix='on' flock='on'/>
        <thread_pool size='4'/>
      </binary>" >"$tmp/$d.xml"
if start_domain "$d"; then
    console="$(lv_console "$d")"
    # ferryfsd's -o lexer splits the list in place, so its words show apart in /proc.
    check_args "$d" "$(readlink -f "$ferryfsd")" "--fd=[0-9]* -o source $share1 cache always sandbox namespace xattr flock posix_lock --thread-pool-size=4 -d --uid-map=:0:$unpriv_uid:1: --uid-map=:1:$sub_uid:65536: --gid-map=:0:$unpriv_gid:1: --gid-map=:1:$sub_gid:65536:"
    check_unprivileged "$d" "$unpriv_uid"
    check_xattr "$d" "$console"
    check_thread_pool "$d"
    check_lock_flags "$d"
    check_queue_1024 "$d"
    check_cache "$d" "$console" always older
    check_owner "$d" "$share1/guest-wrote.txt" "$unpriv_uid:$unpriv_gid" "session idmap (guest root = the user)"
    finish_domain "$d" "$share1"
fi

# --- Domain s2: no path: libvirt finds ferryfsd through ~/.config/qemu/vhost-user/50-ferryfsd.json.
d=s2 share2="$tmp/s2-share"
mkdir -p "$share2"
write_guest "$share2" "$cache_guest"
cache_host "$share2"
unpriv_own "$share2"
domain_xml "$d" "$share2" "      <driver type='virtiofs'/>" >"$tmp/$d.xml"
if start_domain "$d"; then
    check_args "$d" /usr/local/bin/ferryfsd "--fd=[0-9]* -o source $share2 -d --uid-map=:0:$unpriv_uid:1:"
    check_unprivileged "$d" "$unpriv_uid"
    check_cache "$d" "$(lv_console "$d")" "auto (libvirt's default)" newer
    finish_domain "$d" "$share2"
fi

# --- Domain s3: <idmap>: guest ids 0.. are the user's subordinate ids SUBUID.. on the host.
d=s3 share3="$tmp/s3-share"
mkdir -p "$share3"
write_guest "$share3" 'echo "LV-ROOT-SEES $(stat -c %u:%g /mnt/guest.sh)"' \
    'mkdir /mnt/u1000 && chown 1000:1000 /mnt/u1000' \
    'su -s /bin/sh -c "echo by 1000 >/mnt/u1000/by-guest-1000" guest; echo "LV-SU rc=$?"'
chown -R "$sub_uid:$sub_gid" "$share3"
domain_xml "$d" "$share3" "      <driver type='virtiofs'/>
      <binary path='$ferryfsd'/>
      <idmap>
        <uid start='0' target='$sub_uid' count='65536'/>
        <gid start='0' target='$sub_gid' count='65536'/>
      </idmap>" >"$tmp/$d.xml"
if start_domain "$d"; then
    console="$(lv_console "$d")"
    check_args "$d" "$(readlink -f "$ferryfsd")" "--fd=[0-9]* -o source $share3 -d --uid-map=:0:$sub_uid:65536: --gid-map=:0:$sub_gid:65536: *\$"
    check_unprivileged "$d" "$sub_uid"
    if grep -q '^LV-ROOT-SEES 0:0' <<<"$console"; then
        pass "[$d] the guest sees the share's $sub_uid:$sub_gid files as 0:0"
    else
        fail "[$d] the guest sees guest.sh as: $(grep LV-ROOT-SEES <<<"$console")"
    fi
    check_owner "$d" "$share3/guest-wrote.txt" "$sub_uid:$sub_gid" "guest root -> <idmap> target"
    check_owner "$d" "$share3/u1000" "$((sub_uid + 1000)):$((sub_gid + 1000))" "guest chown 1000:1000"
    check_owner "$d" "$share3/u1000/by-guest-1000" "$((sub_uid + 1000)):$((sub_gid + 1000))" "guest uid 1000 ($(grep -o 'LV-SU rc=[0-9]*' <<<"$console"))"
    finish_domain "$d" "$share3"
fi

# libvirtd stops; its namespace goes with it. Nothing of the user is left running.
lv_cleanup
for _ in $(seq 50); do pgrep -u "$unpriv_uid" >/dev/null || break; sleep 0.1; done
procs="$(pgrep -u "$unpriv_uid" -a || true)"
pids="$(ls "$lv_run_dir"/*.pid 2>/dev/null | grep -v driver.pid || true)"
if [[ -z "$procs" && -z "$pids" && ! -e /usr/local/bin/ferryfsd ]]; then
    pass "nothing left: no process of $unpriv_user, no domain pid file, no /usr/local/bin/ferryfsd on the host"
else
    fail "left: $procs $pids"
fi
finish
