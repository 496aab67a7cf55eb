#!/bin/sh
# Guest half of xattr-test.sh's ACL id checks: the host's setfacl/getfacl (from /mnt/acltools) on the shares /aclx (--translate-uid/gid) and /aclns (--uid-map/--gid-map), the guest's own tmpfs the oracle.
T=/mnt/acltools
sf() { "$T/ld.so" --library-path "$T" "$T/setfacl" "$@"; }
gf() { "$T/ld.so" --library-path "$T" "$T/getfacl" -nc "$@" 2>/dev/null | tr '\n' ' '; }
O=/tmp/acl-oracle
mkdir -p "$O" && mount -t tmpfs -o mode=755 acl-oracle "$O" || echo "CHECK acl-oracle-tmpfs FAIL"

# same NAME SHARE_PATH ORACLE_PATH [getfacl option]: what getfacl shows on the share is what it shows on tmpfs.
same() {
    a="$(gf $4 "$2")" b="$(gf $4 "$3")"
    if [ -n "$b" ] && [ "$a" = "$b" ]; then echo "CHECK $1 PASS"; else echo "CHECK $1 FAIL share '$a' tmpfs '$b'"; fi
}
# refused NAME PATH SETFACL_ARGS...: setfacl fails with EINVAL and the ACL stays as it was.
refused() {
    n="$1" p="$2"; shift 2
    before="$(gf "$p") / $(gf -d "$p")"
    err="$(sf "$@" "$p" 2>&1)" && { echo "CHECK $n FAIL setfacl $* succeeded"; return; }
    after="$(gf "$p") / $(gf -d "$p")"
    case "$err" in
        *"Invalid argument"*) [ "$before" = "$after" ] && echo "CHECK $n PASS" ||
            echo "CHECK $n FAIL ACL changed: '$before' -> '$after'" ;;
        *) echo "CHECK $n FAIL $err" ;;
    esac
}

umask 022
touch "$O/f" "$O/h"
sf -m u:1003:rw,g:2005:r "$O/f"
mkdir "$O/d" && sf -d -m u:1004:rwx,g:2006:rx "$O/d" && touch "$O/d/in"
for s in aclx aclns; do
    S="/$s"
    touch "$S/f"
    sf -m u:1003:rw,g:2005:r "$S/f" || echo "CHECK $s-access-set FAIL"
    same "$s-access" "$S/f" "$O/f"
    mkdir "$S/d"
    sf -d -m u:1004:rwx,g:2006:rx "$S/d" || echo "CHECK $s-default-set FAIL"
    same "$s-default" "$S/d" "$O/d" -d
    touch "$S/d/in"
    same "$s-default-inherited" "$S/d/in" "$O/d/in"
done
# Set on the host (xattr-test.sh): host 5007/6008 are guest 1007/2008 on both shares;
# host 7777 is outside --uid-map's ranges: the overflow id 65534.
sf -m u:1007:r,g:2008:w "$O/h"
same aclx-host-set /aclx/h "$O/h"
sf -m u:1007:r,u:65534:r,g:2008:w,g:65534:r "$O/h"
same aclns-host-set /aclns/h "$O/h"
# Ids the maps refuse: forbid-guest under --translate-*, outside the ranges under --uid-map.
refused aclx-forbidden-uid /aclx/f -m u:4001:r
refused aclx-forbidden-gid /aclx/f -m g:4002:r
refused aclx-forbidden-default /aclx/d -d -m u:4003:r
refused aclns-unmapped-uid /aclns/f -m u:1500:r
refused aclns-unmapped-gid /aclns/f -m g:2500:r
refused aclns-unmapped-default /aclns/d -d -m g:3000:rx
umount "$O"
