#!/usr/bin/env bash
# make check: Debian's own libvirtd (system mode, in a private mount namespace) starts ferryfsd for a TCG guest from <binary path=...> and from an installed 50-ferryfsd.json, passes its options, and stops it on virsh destroy.
#
# Follows README.md "With libvirt" literally, inside a mount namespace of its own so
# nothing of the host changes: tmpfs over /run, /var/lib, /var/log and /var/cache
# (libvirt's runtime, state, log and cache dirs, and no host D-Bus), a read-only
# overlay over /etc (libvirt-qemu user, /etc/qemu/vhost-user) with a writable
# private /etc/libvirt, and `make install`'s tree over /usr/local. libvirtd runs in
# the foreground there; virsh reaches it with nsenter. No system service is used.
# Domain 1 (<binary path=build/ferryfsd xattr='on'> with cache, sandbox, lock and
# thread_pool, <driver queue=1024>): the guest's xattr check passes, it sees the
# host's POSIX and flock locks and the host sees its own (posix_lock, flock), the
# daemon runs chrooted into the share, logs --thread-pool-size=4, its queues
# have 1024 entries, and the guest keeps its cached pages (cache=always). Domain 2 (no <binary>): libvirt picks /usr/local/bin/ferryfsd
# through /etc/qemu/vhost-user/50-ferryfsd.json, ahead of Debian's
# 50-qemu-virtiofsd.json, default namespace sandbox, cache=auto (the guest
# rereads a file the host changed). Both: the guest mounts the
# share and writes to it, ferryfsd's log has RFC 3339 times and one INIT line,
# virsh destroy leaves no ferryfsd, pid file or socket. At the end no process or
# file of the test is left on the host.
# FERRYFS_LIBVIRT=current (libvirt-system-current-test.sh): the same with libvirt 11.3 and
# QEMU 10 of the current stack (lv_stack_current), the same options and checks.
# Not covered: session mode (qemu:///session), which libvirt 9.0 refuses for
# virtiofs: libvirt-session-test.sh runs it with libvirt 11.3. The domain
# helpers are libvirt-lib.sh, shared with that test.
# Exit: 0 pass, 1 fail, 77 skipped (not root, libvirt or the guest missing, no overlayfs).
set -euo pipefail
name=libvirt-real
[[ "${FERRYFS_LIBVIRT:-debian}" == current ]] && name=libvirt-system-current
source "$(dirname "${BASH_SOURCE[0]}")/start-lib.sh"
source "$here/libvirt-lib.sh"

((EUID == 0)) || skip "not root: system-mode libvirtd and its mount namespace need root"
# FERRYFS_LIBVIRT=current: libvirt 11.3 and QEMU 10 of the current stack instead of Debian 12's
# (libvirt-system-current-test.sh).
current=0
[[ "${FERRYFS_LIBVIRT:-debian}" == current ]] && current=1
if ((current)); then
    lv_stack_current
else
    for tool in libvirtd virsh qemu-system-x86_64 unshare nsenter; do
        command -v "$tool" >/dev/null ||
            skip "$tool missing (Debian: libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients qemu-system-x86; make deps)"
    done
    [[ -f /usr/lib/x86_64-linux-gnu/libvirt/connection-driver/libvirt_driver_qemu.so ]] ||
        skip "libvirt's QEMU driver missing (libvirt-daemon-driver-qemu)"
    lv_daemon=(libvirtd) lv_client=(virsh) lv_emulator="$(command -v qemu-system-x86_64)"
fi
start_prepare
((current)) && lv_stack_mounts
# tmp_cleanup (tests/lib/common.sh) runs it before removing $tmp.
cleanup_cmds+=(lv_cleanup)

lv_domains=(ferryfs-t1 ferryfs-t2)
lv_virsh() { nsenter --mount --target "$lvpid" "${lv_client[@]}" -q -c qemu:///system "$@"; }
lv_in() { nsenter --mount --target "$lvpid" "$@"; }
# libvirt-lib.sh's paths: system mode's dirs, inside the namespace.
lv_run_dir=/run/libvirt/qemu lv_lib_dir=/var/lib/libvirt/qemu lv_log_dir=/var/log/libvirt/qemu
lv_boot_dir=$tmp lv_console_dir=$tmp

# README "With libvirt", step 1: install, and link the description where libvirt looks.
lv_make_install
etc="$tmp/etc"
mkdir -p "$etc/qemu/vhost-user" "$etc/libvirt"
ln -s /usr/local/share/qemu/vhost-user/50-ferryfsd.json "$etc/qemu/vhost-user/"
# Step 2: qemu.conf for a host without libvirt-daemon-system (no libvirt-qemu user of
# its own, no AppArmor, no cgroup delegation, no virtlogd): QEMU runs as root.
cat >"$etc/libvirt/qemu.conf" <<'CONF'
user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
stdio_handler = "file"
namespaces = [ ]
cgroup_controllers = [ ]
virtiofsd_debug = 1
CONF
cat >"$etc/libvirt/libvirtd.conf" <<'CONF'
auth_unix_ro = "none"
auth_unix_rw = "none"
unix_sock_rw_perms = "0700"
log_outputs = "3:stderr"
CONF
# libvirtd looks the compiled-in user up even when qemu.conf names another
# (libvirt-daemon-system creates it): only this namespace's /etc has it.
cp /etc/passwd /etc/group "$etc/"
echo 'libvirt-qemu:x:64055:64055:libvirt-qemu (test namespace):/nonexistent:/usr/sbin/nologin' >>"$etc/passwd"
echo 'libvirt-qemu:x:64055:' >>"$etc/group"
# libvirt's writable config dir (virsh define writes DOMAIN.xml there).
mkdir -p "$tmp/etc-libvirt"
cp "$etc/libvirt/"*.conf "$tmp/etc-libvirt/"
# The guest's kernel and initrd: /var/cache is a tmpfs in the namespace.
cp "$guest_dir/vmlinuz" "$guest_dir/initrd.img" "$tmp/"
gcc -O2 -Wall -Werror -o "$tmp/host-locker" "$repo/tests/semantics/host-locker.c"

unshare -m --propagation private bash -c '
    set -e
    tmp=$1 etc=$2 inst=$3; shift 3
    # The current stack lives in the cache under /var/cache: its mounts first, and the
    # cache kept through the tmpfs.
    cache=${FERRYFS_CACHE:-/var/cache/ferryfs}
    if [[ -n "${LV_STACK_MOUNTS:-}" ]]; then
        eval "$LV_STACK_MOUNTS"
        mkdir -p "$tmp/keep-cache"
        mount --bind "$cache" "$tmp/keep-cache"
    fi
    for d in /run /var/lib /var/log /var/cache; do mount -t tmpfs tmpfs "$d"; done
    if [[ -n "${LV_STACK_MOUNTS:-}" ]]; then
        mkdir -p "$cache"
        mount --move "$tmp/keep-cache" "$cache"
    fi
    mount -t overlay overlay -o "lowerdir=$etc:/etc" /etc
    mount --bind "$tmp/etc-libvirt" /etc/libvirt
    mount -t overlay overlay -o "lowerdir=$inst/usr/local:/usr/local" /usr/local
    exec "$@" --config /etc/libvirt/libvirtd.conf
' ns "$tmp" "$etc" "$inst" "${lv_daemon[@]}" >"$tmp/libvirtd.log" 2>&1 &
lvpid=$!
cleanup_pids+=("$lvpid")
lv_wait_up
pass "libvirtd $(lv_virsh version | awk '/library: libvirt/ {print $NF; exit}') answers on its private socket"

# --- Domain 1: <binary path=...> with every option libvirt 9.0 passes.
d=ferryfs-t1 share1="$tmp/$d-share"
mkdir -p "$share1"
: >"$share1/hostposix"; : >"$share1/hostflock"
{ echo "$cache_guest"; cat <<'GUEST'; } >"$share1/guest.sh"
/bin/fsops /mnt xattr
echo "LV-XATTR rc=$?"
/bin/fsops --hostlocks /mnt
echo "LV-LOCKS rc=$?"
echo "written by the guest" >/mnt/guest-wrote.txt
echo LV-GUEST-DONE
sleep 3600
GUEST
cache_host "$share1"
# Both libvirt versions pass the -o dialect (ferryfsd's --print-capabilities lists no
# "separate-options", so that libvirt 11.3 accepts <lock>); ferryfsd's -o lexer splits the list
# in place, so the words show apart in /proc.
lock="        <lock posix='on' flock='on'/>"
want_args="--fd=[0-9]* -o source $share1 cache always sandbox chroot xattr flock posix_lock --thread-pool-size=4 -d"
domain_xml "$d" "$share1" "      <driver type='virtiofs' queue='1024'/>
      <binary path='$ferryfsd' xattr='on'>
        <cache mode='always'/>
        <sandbox mode='chroot'/>
$lock
        <thread_pool size='4'/>
      </binary>" >"$tmp/$d.xml"
# The host's half of the lock checks (as tests/semantics/locks-test.sh).
"$tmp/host-locker" hold "$share1/hostposix" "$share1/hostflock" "$share1/io-done" >"$tmp/hold.out" 2>&1 &
cleanup_pids+=("$!")
(
    for _ in $(seq 2400); do [[ -e "$share1/guest-holds" ]] && break; sleep 0.1; done
    "$tmp/host-locker" probe "$share1/guestposix" "$share1/guestflock" >"$tmp/probe.out" 2>&1
    echo "probe_rc=$?" >>"$tmp/probe.out"
    : >"$share1/host-checked"
) &
cleanup_pids+=("$!")
if start_domain "$d"; then
    console="$(lv_console "$d")"
    args="$(tr '\0' ' ' <"/proc/$fs_pid/cmdline" 2>/dev/null || true)"
    exe="$(readlink "/proc/$fs_pid/exe" 2>/dev/null || true)"
    if [[ "$exe" == "$(readlink -f "$ferryfsd")" ]] && grep -q -- "$want_args" <<<"$args"; then
        pass "[$d] libvirt ran $ferryfsd with: $args"
    else
        fail "[$d] ferryfsd's command line: exe '$exe', args '$args'"
    fi
    check_xattr "$d" "$console"
    if grep -q 'HOSTLOCKS-SUMMARY pass' <<<"$console" && grep -q 'probe_rc=0' "$tmp/probe.out"; then
        pass "[$d] <lock posix='on' flock='on'/> took effect: guest and host see each other's locks"
    else
        fail "[$d] locks: $(grep -a '^CHECK .* FAIL\|HOSTLOCKS' <<<"$console" | tr '\n' ' ') probe: $(cat "$tmp/probe.out")"
    fi
    if [[ "$(readlink "/proc/$fs_pid/root")" == "$share1" ]]; then
        pass "[$d] <sandbox mode='chroot'/> took effect: ferryfsd's root is the share"
    else
        fail "[$d] ferryfsd's root is '$(readlink "/proc/$fs_pid/root")', not $share1"
    fi
    check_thread_pool "$d"
    # virtiofsd_debug = 1 (qemu.conf) makes libvirt add -d.
    check_queue_1024 "$d"
    check_cache "$d" "$console" always older
    finish_domain "$d" "$share1"
fi

# --- Domain 2: no <binary>: libvirt finds ferryfsd through the installed JSON.
d=ferryfs-t2 share2="$tmp/$d-share"
mkdir -p "$share2"
{ echo "$cache_guest"; printf 'echo "written by the guest" >/mnt/guest-wrote.txt\necho LV-GUEST-DONE\nsleep 3600\n'; } >"$share2/guest.sh"
cache_host "$share2"
domain_xml "$d" "$share2" "      <driver type='virtiofs'/>" >"$tmp/$d.xml"
if start_domain "$d"; then
    exe="$(readlink "/proc/$fs_pid/exe" 2>/dev/null || true)"
    if [[ "$exe" == /usr/local/bin/ferryfsd ]]; then
        pass "[$d] libvirt chose /usr/local/bin/ferryfsd from /etc/qemu/vhost-user/50-ferryfsd.json"
    else
        fail "[$d] libvirt started '$exe' (pid ${fs_pid:-none}), not /usr/local/bin/ferryfsd"
    fi
    check_cache "$d" "$(lv_console "$d")" "auto (libvirt's default)" newer
    if [[ -n "$fs_pid" && "$(readlink "/proc/$fs_pid/ns/mnt")" != "$(readlink "/proc/$lvpid/ns/mnt")" ]]; then
        pass "[$d] default sandbox: ferryfsd runs in a mount namespace of its own"
    else
        fail "[$d] ferryfsd shares libvirtd's mount namespace"
    fi
    finish_domain "$d" "$share2"
fi

# libvirtd stops; its namespace and everything in it go. The host has nothing of it.
lv_cleanup
left=()
for p in /run/libvirt /var/lib/libvirt /var/log/libvirt /var/cache/libvirt /etc/qemu \
    /usr/local/bin/ferryfsd /etc/libvirt/qemu /etc/libvirt/qemu.conf /etc/libvirt/libvirtd.conf; do
    [[ -e "$p" ]] && left+=("$p")
done
procs="$(pgrep -af "$tmp" | grep -v "^$$ " || true)"
if ((${#left[@]} == 0)) && [[ -z "$procs" ]]; then
    pass "nothing left on the host: no libvirt dirs, no /etc/qemu, no process of the test"
else
    fail "left on the host: ${left[*]} $procs"
fi
finish
