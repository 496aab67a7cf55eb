#!/usr/bin/env bash
# Guest e2e (make check): --xattrmap, --posix-acl, --security-label and trusted.* in a real guest, with the host checking the names, ACLs and labels on disk; ACL ids under --translate-uid/gid and --uid-map/--gid-map.
#
# One boot with SELinux active in the guest (security=selinux, no policy loaded: it still labels new
# files, so the kernel sends FUSE_SECURITY_CTX). The share uses --xattrmap=':map:security.:user.guest.:'
# and --modcaps=+sys_admin (trusted.* needs CAP_SYS_ADMIN on the host). A reference virtiofsd runs the
# same guest program as a column (QEMU's C virtiofsd on stable, the Rust one on current); only
# ferryfsd's results decide.
# Two more ferryfsd shares in the same boot, aclx (--translate-uid/gid) and aclns (--uid-map/
# --gid-map), take ACLs with ACL_USER and ACL_GROUP entries from the host's setfacl/getfacl run in
# the guest (guest-acl-idmap.sh): the guest sees what the same commands show on its own tmpfs, the
# host's getfacl shows the mapped host ids, and ids the maps refuse fail with EINVAL and change
# nothing. (The Rust virtiofsd refuses --posix-acl with id translation: no column for these.)
# Usage: xattr-test.sh   Env: FERRYFSD, VIRTIOFSD, FERRYFS_GUEST_DIR. Exit: 0 pass, 1 fail, 77 skip.
#        FERRYFS_SHARE_ROOT=DIR: the share in a fresh subdirectory of DIR (e.g. a GlusterFS mount:
#        tests/dfs/gluster-semantics-test.sh); sockets and binaries stay in /tmp; no reference column.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/lib.sh"
virtiofsd="${VIRTIOFSD:-/usr/lib/qemu/virtiofsd}"
map=':map:security.:user.guest.:'

sem_init xattr-test
command -v getfacl >/dev/null || { sem_say "SKIP: getfacl missing (package acl, scripts/deps.sh)"; exit 77; }
gcc -static -O2 -Wall -Werror -o "$sem_tmp/gx" "$here/guest-xattrs.c"

# What the host sets before the guest looks: a mapped name, a host-only security.* name, a plain one.
prepare() {
    mkdir -p "$1/t"
    cp "$sem_tmp/gx" "$1/gx"
    : >"$1/t/hostset"
    setfattr -n user.guest.security.fromhost -v h "$1/t/hostset"
    setfattr -n security.hostonly -v h "$1/t/hostset"
    setfattr -n user.hostplain -v h "$1/t/hostset"
    cat >"$1/guest.sh" <<'GUEST'
mount -t securityfs none /sys/kernel/security 2>/dev/null
/mnt/gx /mnt/t
GUEST
}

share="$sem_tmp/ferry"
if [[ -n "${FERRYFS_SHARE_ROOT:-}" ]]; then
    shares="$(mktemp -d "$FERRYFS_SHARE_ROOT/xattr.XXXXXX")"
    trap 'sem_cleanup; rm -rf "$shares"' EXIT
    share="$shares/ferry"
fi
prepare "$share"
sem_append="security=selinux"
sem_daemon ferry "$share" --xattr --posix-acl --security-label --modcaps=+sys_admin "--xattrmap=$map"

# ACL ids under id maps. A daemon run as an ordinary user (FERRYFS_DAEMON_USER) could not set
# ACLs for other host ids, and a run about another share root (FERRYFS_SHARE_ROOT) is not about
# id maps: those runs leave the two shares out.
acl_ids=0
unpriv_active || [[ -n "${FERRYFS_SHARE_ROOT:-}" ]] || acl_ids=1
if ((acl_ids)); then
    tools="$share/acltools"
    mkdir -p "$tools"
    cp -L "$(command -v setfacl)" "$(command -v getfacl)" "$tools/"
    # The host's dynamic setfacl/getfacl, run in the guest through the host's own loader.
    ldd "$(command -v setfacl)" "$(command -v getfacl)" | awk '/=> \// {print $3}' | sort -u |
        while read -r lib; do cp -L "$lib" "$tools/"; done
    cp -L "$(ldd "$(command -v setfacl)" | awk '/^\t\/.*ld-/ {print $1}')" "$tools/ld.so"
    cp "$here/guest-acl-idmap.sh" "$share/acl-idmap.sh"
    aclx="$sem_tmp/aclx" aclns="$sem_tmp/aclns"
    mkdir -p "$aclx" "$aclns"
    for d in "$aclx" "$aclns"; do : >"$d/h"; chmod 644 "$d/h"; done
    setfacl -m u:5007:r,g:6008:w "$aclx/h"
    setfacl -m u:5007:r,u:7777:r,g:6008:w,g:7777:r "$aclns/h"
    sem_daemon aclx "$aclx" --xattr --posix-acl \
        --translate-uid map:1000:5000:10 --translate-uid forbid-guest:4000:10 \
        --translate-gid map:2000:6000:10 --translate-gid forbid-guest:4000:10
    sem_daemon aclns "$aclns" --xattr --posix-acl --uid-map=:0:0:1: --uid-map=:1000:5000:10: \
        --gid-map=:0:0:1: --gid-map=:2000:6000:10:
    { sem_mount_line; echo 'sh /mnt/acl-idmap.sh'; } >>"$share/guest.sh"
fi
sem_boot 900
echo "$sem_out" | sed 's/^/  ferryfsd: /'
grep -a '^GUEST lsm=' "$sem_tmp/console.log" | tr -d '\r' | sed 's/^/  ferryfsd: /' || true

sem_expect xattr-user xattr-security-mapped xattr-trusted xattr-mapped-name-refused \
    xattr-list-unmapped xattr-list-hidden xattr-list-probe acl-set acl-allows-read acl-denies-write \
    acl-none-denies acl-default-set acl-default-no-umask acl-default-inherited \
    umask-without-default-acl acl-sgid-setup acl-sgid-cleared cap-set cap-write cap-cleared-in-guest

if ((acl_ids)); then
    for s in aclx aclns; do
        sem_expect $s-access $s-default $s-default-inherited $s-host-set
    done
    sem_expect aclx-forbidden-uid aclx-forbidden-gid aclx-forbidden-default \
        aclns-unmapped-uid aclns-unmapped-gid aclns-unmapped-default
    ah() { getfacl -nc "$@" 2>/dev/null | tr '\n' ' '; }
    for s in aclx aclns; do
        d="$sem_tmp/$s"
        sem_host "$s-access-on-host" "$(ah "$d/f" | grep -q 'user:5003:rw- .*group:6005:r--' && echo 1)" "$(ah "$d/f")"
        sem_host "$s-default-on-host" "$(ah -d "$d/d" | grep -q 'user:5004:rwx .*group:6006:r-x' && echo 1)" \
            "$(ah -d "$d/d")"
        sem_host "$s-inherited-on-host" "$(ah "$d/d/in" | grep -q 'user:5004:rwx' && echo 1)" "$(ah "$d/d/in")"
        all="$(ah "$d/f"; ah -d "$d/d"; ah "$d/d/in")"
        sem_host "$s-refused-not-on-host" "$(grep -Eq ':(4001|4002|4003|1500|2500|3000):' <<<"$all" || echo 1)" "$all"
    done
fi

flags="$(sem_init_flags ferry)"
sem_host init-posix-acl-dont-mask $(( (flags & 0x100000) && (flags & 0x40) ? 1 : 0 )) "flags $flags"
t="$share/t"
g() { getfattr --absolute-names --only-values -n "$2" "$t/$1" 2>/dev/null || true; }
sem_host user-name-unchanged "$([[ "$(g x user.plain)" == p ]] && echo 1)" "user.plain missing"
sem_host security-stored-mapped "$([[ "$(g x user.guest.security.test)" == s && -z "$(g x security.test)" ]] && echo 1)" \
    "$(getfattr -d -m - --absolute-names "$t/x" 2>&1 | tr '\n' ' ')"
sem_host trusted-on-host "$([[ "$(g x trusted.t)" == t ]] && echo 1)" "trusted.t missing on the host"
sem_host acl-on-host "$(getfacl -ncp "$t/aclf" 2>/dev/null | grep -qx 'user:1000:r--' && echo 1)" \
    "$(getfacl -ncp "$t/aclf" 2>&1 | tr '\n' ' ')"
sem_host default-acl-on-host "$(getfacl -ncp "$t/dacl/f" 2>/dev/null | grep -q '^user:1000:rwx' && \
    getfacl -ncpd "$t/dacl/sub" 2>/dev/null | grep -q '^user:1000:rwx' && echo 1)" \
    "$(getfacl -ncp "$t/dacl/f" 2>&1 | tr '\n' ' ')"
sem_host sgid-cleared-on-host "$(( ($(stat -c '0%a' "$t/sg") & 02000) == 0 ? 1 : 0 ))" "mode $(stat -c %a "$t/sg")"
sem_host capability-cleared-on-host "$([[ -z "$(getfattr --absolute-names -n user.guest.security.capability "$t/capf" 2>/dev/null)" ]] && echo 1)" \
    "user.guest.security.capability still on capf"
label="$(g labelled user.guest.security.selinux | tr -d '\0')"
sem_host label-stored-mapped "$([[ -n "$label" ]] && echo 1)" \
    "no user.guest.security.selinux on a file the guest created: $(getfattr -d -m - --absolute-names "$t/labelled" 2>&1 | tr '\n' ' ')"
echo "  ferryfsd: host: label of t/labelled is '${label}'"

# One run of the guest program against a reference daemon (printed, not judged): ref_run NAME CMD...
# where CMD makes the daemon listen on $sem_tmp/NAME.sock and share $sem_tmp/NAME.
ref_run() {
    local rname="$1"; shift
    local rshare="$sem_tmp/$rname" rlog="$sem_tmp/$rname.log"
    "$@" >"$rlog" 2>&1 &
    local rpid=$!; sem_pids+=("$rpid")
    for _ in $(seq 100); do [[ -S "$sem_tmp/$rname.sock" ]] && break; sleep 0.1; done
    "$sem_repo/tests/e2e/run-guest.sh" --sock "$sem_tmp/$rname.sock" --tag "$rname" --cmd /mnt/guest.sh \
        --log "$sem_tmp/$rname-console.log" --quiet --timeout 600 --append "$sem_append" \
        --watch-pid "$rpid" || true
    tr -d '\r' <"$sem_tmp/$rname-console.log" | grep -a '^CHECK ' | sed "s/^/  $rname (reference): /" || true
    echo "  $rname (reference): host: trusted.t='$(getfattr --absolute-names --only-values -n trusted.t "$rshare/t/x" 2>/dev/null)'" \
        "label='$(getfattr --absolute-names --only-values -n user.guest.security.selinux "$rshare/t/labelled" 2>/dev/null | tr -d '\0')'"
}

# The reference column is the virtiofsd users of the stack run: QEMU's C virtiofsd on stable, the
# Rust virtiofsd on current; both with the same map and capabilities.
if [[ -n "${FERRYFS_SHARE_ROOT:-}" ]]; then
    sem_say "no reference column: this run is about ferryfsd on $FERRYFS_SHARE_ROOT"
elif [[ ${FERRYFS_CHECK_LONG:-} != 1 ]]; then
    # A second boot that decides nothing: make check-long runs it.
    sem_say "no reference column in make check (make check-long, FERRYFS_CHECK_LONG=1, adds it)"
elif stack_rust_reference; then
    prepare "$sem_tmp/virtiofsd-rs"
    ref_run virtiofsd-rs "$stack_virtiofsd_rs" --socket-path="$sem_tmp/virtiofsd-rs.sock" --shared-dir="$sem_tmp/virtiofsd-rs" \
        --xattr --posix-acl --security-label --modcaps=+sys_admin --xattrmap="$map"
elif [[ -x "$virtiofsd" ]]; then
    prepare "$sem_tmp/virtiofsd"
    ref_run virtiofsd "$virtiofsd" --socket-path="$sem_tmp/virtiofsd.sock" \
        -o source="$sem_tmp/virtiofsd",xattr,posix_acl,security_label -o modcaps=+sys_admin -o "xattrmap=$map"
fi
sem_finish
