# Sourced by libvirt-real-test.sh (9.0, system mode) and libvirt-session-test.sh (11.3, session mode): a domain's XML, start, log check, destroy, and the cache-mode probe.
#
# The test sets, before calling these:
#   lv_virsh ARGS...   a function: virsh on the test's libvirt (its URI, namespace, user)
#   lv_in CMD...       a function: runs CMD where libvirt's run/log dirs are visible
#   lv_run_dir         libvirt's QEMU runtime dir (pid files: ID-NAME-fs0-fs.pid, NAME.pid)
#   lv_lib_dir         libvirt's QEMU lib dir (domain-ID-NAME/ holds the vhost-user socket)
#   lv_log_dir         libvirt's QEMU log dir (NAME-fs0-virtiofsd.log)
#   lv_emulator        the domain's <emulator>
#   lv_boot_dir        where vmlinuz and initrd.img are (readable by libvirt's QEMU)
#   lv_console_dir     where QEMU may create NAME-console.log
#   lv_domains         the domain names lv_cleanup destroys
#   lvpid              libvirtd's pid once started (lv_wait_up, lv_cleanup)
# Shares are $tmp/NAME-share; the guest runs /mnt/guest.sh (tests/e2e/guest/init) and prints
# LV-GUEST-DONE at its end.

# libvirt 11.3 and QEMU 10 of the current stack, unpacked (scripts/stack.sh), shown at their
# installed paths in the test's mount namespace: the guest image of that stack, lv_root and
# qemu_root, lv_daemon/lv_client (tests/e2e/libvirt-current), and LV_STACK_MOUNTS, the mounts
# the namespace's script runs: libvirt 11.3's cpu_map and schemas over /usr/share/libvirt
# (libvirt reads no other place), QEMU 10's modules over /usr/lib/x86_64-linux-gnu/qemu (QEMU 10
# also searches that compiled-in dir, where QEMU 7.2's are, and the capabilities probe's
# qom-list-types then aborts), and so QEMU 10 over /usr/bin/qemu-system-x86_64 too (7.2 without
# its TCG module cannot start, and libvirt probes the default emulator at start). Skips (77)
# when the stack cannot be had. Call before start_prepare.
lv_stack_current() {
    stack_prepare current || skip "the current stack (scripts/stack.sh) cannot be had here"
    export FERRYFS_GUEST_DIR="$(stack_guest_dir current)" FERRYFS_STACK=current
    lv_root="$("$repo/scripts/stack.sh" path libvirt-root)"
    qemu_root="$("$repo/scripts/stack.sh" path qemu-root)"
    [[ -x "$lv_root/usr/sbin/libvirtd" ]] || skip "libvirt 11.3 is not cached in $lv_root"
    lv_daemon=("$here/libvirt-current" libvirtd) lv_client=("$here/libvirt-current" virsh)
    lv_emulator="$here/qemu-current"
}
# Needs $tmp: the launcher the namespace shows as /usr/bin/qemu-system-x86_64 (qemu-current
# finds stack-lib.sh by its own path, so it cannot be bound there itself).
lv_stack_mounts() {
    printf '#!/bin/sh\nexec %q "$@"\n' "$here/qemu-current" >"$tmp/qemu-system-x86_64"
    chmod 755 "$tmp/qemu-system-x86_64"
    export LV_STACK_MOUNTS
    LV_STACK_MOUNTS="$(printf 'mount --bind %q /usr/share/libvirt; mount --bind %q /usr/lib/x86_64-linux-gnu/qemu; mount --bind %q /usr/bin/qemu-system-x86_64' \
        "$lv_root/usr/share/libvirt" "$qemu_root/usr/lib/x86_64-linux-gnu/qemu" "$tmp/qemu-system-x86_64")"
}

# README "With libvirt", step 1: `make install` into $inst (a tree the test lays over /usr/local).
lv_make_install() {
    inst="$tmp/inst"
    if ! make -C "$repo" --no-print-directory install DESTDIR="$inst" >"$tmp/install.log" 2>&1; then
        fail "make install: $(tail -5 "$tmp/install.log")"; finish
    fi
}

# Waits for libvirtd ($lvpid, its output in $tmp/libvirtd.log) to answer virsh; ends the
# test when it does not (77 when the mount namespace had no overlayfs).
lv_wait_up() {
    local up=0
    for _ in $(seq 150); do
        kill -0 "$lvpid" 2>/dev/null || break
        if lv_virsh version >/dev/null 2>&1; then up=1; break; fi
        sleep 0.2
    done
    ((up)) && return 0
    if grep -q "overlay" "$tmp/libvirtd.log"; then skip "no overlayfs here: $(head -3 "$tmp/libvirtd.log")"; fi
    fail "libvirtd did not come up:"; sed 's/^/    /' "$tmp/libvirtd.log" | tail -20
    finish
}

# Destroys what is left of the domains and stops libvirtd; its namespace goes with it.
lvpid=""
lv_cleanup() {
    [[ -z "$lvpid" ]] && return 0
    local d
    for d in "${lv_domains[@]}"; do lv_virsh destroy "$d" >/dev/null 2>&1 || true; done
    kill -TERM "$lvpid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$lvpid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$lvpid" 2>/dev/null || true
    lvpid=""
}

# Writes the domain XML: $1 name, $2 share, $3 the <filesystem>'s inside.
domain_xml() {
    cat <<XML
<domain type='qemu'>
  <name>$1</name>
  <memory unit='MiB'>512</memory>
  <vcpu>1</vcpu>
  <memoryBacking>
    <source type='memfd'/>
    <access mode='shared'/>
  </memoryBacking>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>$lv_boot_dir/vmlinuz</kernel>
    <initrd>$lv_boot_dir/initrd.img</initrd>
    <cmdline>console=ttyS0 quiet loglevel=3 panic=-1 ferryfs.cmd=/mnt/guest.sh ferryfs.tag=myfs</cmdline>
  </os>
  <on_poweroff>destroy</on_poweroff>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>$lv_emulator</emulator>
    <filesystem type='mount' accessmode='passthrough'>
$3
      <source dir='$2'/>
      <target dir='myfs'/>
    </filesystem>
    <serial type='file'>
      <source path='$lv_console_dir/$1-console.log'/>
      <target port='0'/>
    </serial>
    <memballoon model='none'/>
  </devices>
</domain>
XML
}

# The guest's console so far, without carriage returns.
lv_console() { tr -d '\r' <"$lv_console_dir/$1-console.log" 2>/dev/null || true; }

# Starts domain $1 and waits for the guest's marker; sets fs_pid (ferryfsd, the
# process libvirt's pid file names).
fs_pid=""
start_domain() { # NAME
    local d=$1 i
    if ! lv_virsh define "$tmp/$d.xml" >"$tmp/$d.virsh" 2>&1 || ! lv_virsh start "$d" >>"$tmp/$d.virsh" 2>&1; then
        fail "[$d] virsh define/start: $(cat "$tmp/$d.virsh")"
        return 1
    fi
    pass "[$d] virsh start"
    fs_pid="$(lv_in sh -c "cat $lv_run_dir/*-$d-fs0-fs.pid" 2>/dev/null || true)"
    for ((i = 0; i < guest_timeout * 2; i++)); do
        lv_console "$d" | grep -aq 'LV-GUEST-DONE' && break
        [[ "$(lv_virsh domstate "$d" 2>/dev/null)" == running ]] || break
        sleep 0.5
    done
    if lv_console "$d" | grep -aq 'FERRYFS-GUEST-MOUNTED'; then
        pass "[$d] the guest mounted the share"
    else
        fail "[$d] the guest did not mount the share: $(lv_console "$d" | tail -5)"
    fi
    lv_console "$d" | grep -aq 'LV-GUEST-DONE' ||
        fail "[$d] the guest never finished its checks (console: $lv_console_dir/$d-console.log)"
}

# The daemon's log as libvirt keeps it, copied to $tmp/NAME-virtiofsd.log.
fs_log() { # NAME
    lv_in cat "$lv_log_dir/$1-fs0-virtiofsd.log" >"$tmp/$1-virtiofsd.log" 2>/dev/null || true
}

# The daemon's log checked for the log format and INIT line.
check_fs_log() { # NAME
    local d=$1 log="$tmp/$1-virtiofsd.log"
    fs_log "$d"
    local stamp='^\[[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z\] ferryfsd (error|warn|info|debug): '
    if grep -Eq "${stamp}fuse: session 7\.[0-9]+, flags 0x" "$log" &&
        [[ "$(grep -c 'fuse: session' "$log")" == 1 ]]; then
        pass "[$d] libvirt's ferryfsd log: RFC 3339 times, INIT once ($(grep -o 'fuse: session.*' "$log"))"
    else
        fail "[$d] libvirt's ferryfsd log lacks a stamped INIT line: $(head -5 "$log")"
    fi
}

# virsh destroy: QEMU and ferryfsd go, and libvirt's files for them.
destroy_domain() { # NAME
    local d=$1 i
    lv_virsh destroy "$d" >/dev/null 2>&1 || fail "[$d] virsh destroy failed"
    for ((i = 0; i < 50; i++)); do
        [[ -n "$fs_pid" ]] && kill -0 "$fs_pid" 2>/dev/null || break
        sleep 0.2
    done
    local left
    left="$(pgrep -f "ferryfsd .*$tmp/$d-share|source.$tmp/$d-share" || true)"
    if [[ -n "$fs_pid" ]] && ! kill -0 "$fs_pid" 2>/dev/null && [[ -z "$left" ]]; then
        pass "[$d] virsh destroy: ferryfsd (pid $fs_pid) is gone"
    else
        fail "[$d] ferryfsd still running after virsh destroy: ${fs_pid:-no pid} $left"
    fi
    left="$(lv_in sh -c "ls $lv_run_dir/ $lv_lib_dir/domain-*-$d 2>/dev/null | grep -e '$d' || true")"
    if [[ -z "$left" ]]; then
        pass "[$d] libvirt removed the daemon's pid file and socket dir"
    else
        fail "[$d] left in libvirt's dirs: $left"
    fi
    lv_virsh undefine "$d" >/dev/null 2>&1 || fail "[$d] virsh undefine failed"
}

# What every domain ends with: the guest's file on the host, ferryfsd's log, virsh destroy.
finish_domain() { # NAME SHARE
    local d=$1 share=$2
    if [[ "$(cat "$share/guest-wrote.txt" 2>/dev/null)" == "written by the guest" ]]; then
        pass "[$d] the guest's file is on the host"
    else
        fail "[$d] guest-wrote.txt missing on the host"
    fi
    check_fs_log "$d"
    destroy_domain "$d"
}

# The cache mode's effect: the guest reads cached.txt, the host rewrites it (same
# size), the guest reads it again. cache=always (FOPEN_KEEP_CACHE, 86400 s
# attributes) keeps the guest's pages: it sees the old text; cache=auto drops
# them at each open: it sees the new one.
cache_guest='echo "LV-CACHED-1 $(cat /mnt/cached.txt)"
: >/mnt/guest-read
i=0; while [ ! -e /mnt/host-changed ] && [ $i -lt 1500 ]; do sleep 0.2; i=$((i+1)); done
echo "LV-CACHED-2 $(cat /mnt/cached.txt)"'
cache_host() { # SHARE
    echo "older" >"$1/cached.txt"
    (
        for _ in $(seq 3000); do [[ -e "$1/guest-read" ]] && break; sleep 0.1; done
        echo "newer" >"$1/cached.txt"
        : >"$1/host-changed"
    ) &
    cleanup_pids+=("$!")
}
check_cache() { # NAME CONSOLE MODE EXPECTED
    if grep -q '^LV-CACHED-1 older' <<<"$2" && grep -q "^LV-CACHED-2 $4" <<<"$2"; then
        pass "[$1] cache mode $3 took effect: after the host's rewrite the guest read '$4'"
    else
        fail "[$1] cache mode $3: expected '$4' after the host's rewrite: $(grep LV-CACHED <<<"$2" | tr '\n' ' ')"
    fi
}

# <driver queue='1024'/>: QEMU's queue-size, and ferryfsd's log (with its debug option, -d or
# --log-level debug) names each queue's size as QEMU set it up.
check_queue_1024() { # NAME
    local d=$1 qemu_pid
    qemu_pid="$(lv_in cat "$lv_run_dir/$d.pid" 2>/dev/null || true)"
    fs_log "$d"
    if tr '\0' ' ' <"/proc/$qemu_pid/cmdline" 2>/dev/null | grep -q '"queue-size":1024' &&
        grep -q 'queue 1 started (num 1024)' "$tmp/$d-virtiofsd.log"; then
        pass "[$d] <driver queue='1024'/> reached ferryfsd: $(grep -o 'queue 1 started (num 1024)' "$tmp/$d-virtiofsd.log" | head -1)"
    else
        fail "[$d] queue size: QEMU or ferryfsd did not get 1024: $(grep -o 'queue [0-9]* started.*' "$tmp/$d-virtiofsd.log" | tr '\n' ' ')"
    fi
}

# <binary xattr='on'>: the guest's xattr checks (fsops xattr, LV-XATTR rc) pass.
check_xattr() { # NAME CONSOLE
    if grep -q 'LV-XATTR rc=0' <<<"$2" && grep -q '^CHECK xattr PASS' <<<"$2"; then
        pass "[$1] xattr='on' took effect: the guest's xattr checks pass"
    else
        fail "[$1] xattr checks: $(grep -a 'CHECK xattr\|LV-XATTR' <<<"$2")"
    fi
}

# <thread_pool size='4'/>: ferryfsd logs the option it takes and has no use for.
check_thread_pool() { # NAME
    fs_log "$1"
    if grep -q -- '--thread-pool-size=4: ferryfsd has no thread pool' "$tmp/$1-virtiofsd.log"; then
        pass "[$1] <thread_pool size='4'/> reached ferryfsd (logged: it has no pool)"
    else
        fail "[$1] no --thread-pool-size=4 line in ferryfsd's log"
    fi
}
