#!/usr/bin/env bash
# Guest e2e (make check): what a Linux 6.12 guest sends (current stack): its INIT offer decoded against what ferryfsd agreed, FUSE_CREATE_SUPP_GROUP set-group-ID creation against the guest's tmpfs, --allow-mmap with cache=never (shared writable mmap, msync, the bytes on the host), FUSE_STATX birth time against the host's, and an idmapped mount of the share (FUSE_ALLOW_IDMAP) against one of the guest's tmpfs.
#
# Daemons (one boot): ferryfs (ferryfsd defaults; the set-group-ID directory, birth times; an
# idmapped mount of it must be refused), idm (--allow-idmap: the idmapped mount), mm (ferryfsd
# --cache=never --allow-mmap), nomm (--cache=never alone: the shared mapping must be refused, or
# --allow-mmap would not be what makes mm work), and the Rust virtiofsd 1.13 as a reference
# column for both (rs: defaults; rsmm: --cache=never --allow-mmap), reported, never judged.
# Oracles: the guest's tmpfs (the same program on /tmp), the host's view of the files, and for
# the INIT flags two sources apart from ferryfsd: Linux 6.12's own code for what the guest offers
# (the offer ferryfsd logs, "fuse: client 7.N offers 0x...", must be exactly that) and
# docs/options.md's INIT section for what ferryfsd agrees to (its "session ..., flags 0x..." must
# be exactly the offer less every flag the section puts behind an option or does not serve).
# The flags with an effect the guest shows are checked by it too: CREATE_SUPP_GROUP by the
# set-group-ID files, DIRECT_IO_ALLOW_MMAP by the shared mapping, ALLOW_IDMAP by an idmapped
# mount (owners, opens, an unmapped caller: as on tmpfs; the owners on the host), and the
# session's 7.41 by STATX (birth times as the host's statx has them).
#
# Usage: guest612-current-test.sh   Env: FERRYFSD (default build/ferryfsd), FERRYFS_CACHE
# Exit: 0 pass, 1 fail, 77 the current stack cannot be had here.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/lib.sh"
sem_init_current guest612-current-test "$0" "$@"

t="$sem_tmp"
main="$t/main" mm="$t/mm" nomm="$t/nomm" rs="$t/rs" rsmm="$t/rsmm" idm="$t/idm"
mkdir -p "$main" "$mm" "$nomm" "$rs" "$rsmm" "$idm"
chmod 755 "$main" "$mm" "$nomm" "$rs" "$rsmm" "$idm"
gcc -static -O2 -Wall -Wextra -Werror -o "$t/g612" "$sem_here/guest-612.c"
size=1048576 seed=7

sem_daemon ferryfs "$main"
cp "$t/g612" "$main/g612"
sem_daemon mm "$mm" --cache=never --allow-mmap
sem_daemon nomm "$nomm" --cache=never
sem_daemon idm "$idm" --allow-idmap
if "$sem_repo/tests/e2e/virtiofsd-rs" --version >/dev/null 2>&1; then
    sem_daemon_cmd rs "$rs" "$sem_repo/tests/e2e/virtiofsd-rs" --socket-path="$t/rs.sock" --shared-dir="$rs"
    sem_daemon_cmd rsmm "$rsmm" "$sem_repo/tests/e2e/virtiofsd-rs" --socket-path="$t/rsmm.sock" \
        --shared-dir="$rsmm" --cache=never --allow-mmap
else
    sem_say "note: the Rust virtiofsd is not cached (scripts/stack.sh fetch), no reference column"
fi

{
    echo '#!/bin/sh'
    sem_mount_line
    cat <<GUEST
G=/mnt/g612
# Set-group-ID directories of group grp2 (2000); user guest (1000:1000) holds grp2 only as a
# supplementary group: the case FUSE_CREATE_SUPP_GROUP exists for.
for c in tmpfs:/tmp ferryfsd:/mnt virtiofsd-rs:/rs; do
    d=\${c#*:}
    [ -d \$d ] || continue
    mkdir \$d/sg && chown 0:2000 \$d/sg && chmod 2775 \$d/sg || echo "CHECK sgid-setup-\${c%%:*} FAIL"
    \$G sgid \$d/sg 1000 1000 2000 | sed "s/^/\${c%%:*} /"
done
for c in tmpfs:/tmp ferryfsd:/mm ferryfsd-no-allow-mmap:/nomm virtiofsd-rs:/rsmm; do
    d=\${c#*:}
    [ -d \$d ] || continue
    \$G mmap \$d/mm.bin $size $seed | sed "s/^/\${c%%:*} /"
done
# FUSE_STATX: birth time of a file the host made and of one the guest makes.
for c in tmpfs:/tmp ferryfsd:/mnt virtiofsd-rs:/rs; do
    d=\${c#*:}
    [ -d \$d ] || continue
    : >\$d/bt-guest
    for f in bt-host bt-guest; do [ -e \$d/\$f ] && \$G btime \$d/\$f | sed "s/^/\${c%%:*} /"; done
done
# FUSE_ALLOW_IDMAP: an idmapped mount of the share (of /tmp for the oracle; of the default
# daemon's share, which must be refused).
for c in tmpfs:/tmp ferryfsd:/idm ferryfsd-default:/mnt virtiofsd-rs:/rs; do
    d=\${c#*:}
    [ -d \$d ] || continue
    mkdir -p /idm-\${c%%:*}
    \$G idmap \$d /idm-\${c%%:*} | sed "s/^/\${c%%:*} /"
done
exit 0
GUEST
} >"$main/guest.sh"
chmod 755 "$main/guest.sh"

: >"$main/bt-host"
: >"$rs/bt-host"
sem_boot 600
out="$(tr -d '\r' <"$t/console.log" | grep -a -E '^[a-z-]+ (SGID|MMAP|BTIME|IDMAP) ' || true)"
echo "$out" | sed 's/^/  guest: /'

# --- INIT: the guest's offer against Linux 6.12, what ferryfsd agreed against docs/options.md ---
# Bit names of the FUSE INIT flags (include/uapi/linux/fuse.h up to 7.42).
flag_names=(ASYNC_READ POSIX_LOCKS FILE_OPS ATOMIC_O_TRUNC EXPORT_SUPPORT BIG_WRITES DONT_MASK
    SPLICE_WRITE SPLICE_MOVE SPLICE_READ FLOCK_LOCKS HAS_IOCTL_DIR AUTO_INVAL_DATA DO_READDIRPLUS
    READDIRPLUS_AUTO ASYNC_DIO WRITEBACK_CACHE NO_OPEN_SUPPORT PARALLEL_DIROPS HANDLE_KILLPRIV
    POSIX_ACL ABORT_ERROR MAX_PAGES CACHE_SYMLINKS NO_OPENDIR_SUPPORT EXPLICIT_INVAL_DATA
    MAP_ALIGNMENT SUBMOUNTS HANDLE_KILLPRIV_V2 SETXATTR_EXT INIT_EXT INIT_RESERVED SECURITY_CTX
    HAS_INODE_DAX CREATE_SUPP_GROUP HAS_EXPIRE_ONLY DIRECT_IO_ALLOW_MMAP PASSTHROUGH
    NO_EXPORT_SUPPORT HAS_RESEND ALLOW_IDMAP OVER_IO_URING REQUEST_TIMEOUT)
decode() {
    local v=$(($1)) b names=()
    for ((b = 0; b < 64; b++)); do
        (((v >> b) & 1)) && names+=("${flag_names[$b]:-bit$b}")
    done
    echo "${names[*]:-none}"
}
mask() { # NAME...: the flags' bits together
    local n b v=0
    for n; do
        for ((b = 0; b < ${#flag_names[@]}; b++)); do
            [[ ${flag_names[$b]} == "$n" ]] && v=$((v | (1 << b)))
        done
    done
    printf '0x%x\n' "$v"
}
has() { (((($1) >> $2) & 1)); }
# What a 6.12 virtiofs mount offers, from the kernel's code and not from ferryfsd: fs/fuse/inode.c
# fuse_send_init sends FUSE 7.41 (FUSE_KERNEL_MINOR_VERSION) and every flag up to ALLOW_IDMAP but
# FILE_OPS, MAP_ALIGNMENT (only with a dax= mount) and INIT_RESERVED; HAS_INODE_DAX because
# Debian builds CONFIG_FUSE_DAX and the default dax mode is per inode, SUBMOUNTS because the
# virtio-fs driver sets auto_submounts, PASSTHROUGH because Debian builds CONFIG_FUSE_PASSTHROUGH.
offer_612_minor=41
offer_612="$(mask ASYNC_READ POSIX_LOCKS ATOMIC_O_TRUNC EXPORT_SUPPORT BIG_WRITES DONT_MASK \
    SPLICE_WRITE SPLICE_MOVE SPLICE_READ FLOCK_LOCKS HAS_IOCTL_DIR AUTO_INVAL_DATA DO_READDIRPLUS \
    READDIRPLUS_AUTO ASYNC_DIO WRITEBACK_CACHE NO_OPEN_SUPPORT PARALLEL_DIROPS HANDLE_KILLPRIV \
    POSIX_ACL ABORT_ERROR MAX_PAGES CACHE_SYMLINKS NO_OPENDIR_SUPPORT EXPLICIT_INVAL_DATA \
    SUBMOUNTS HANDLE_KILLPRIV_V2 SETXATTR_EXT INIT_EXT SECURITY_CTX HAS_INODE_DAX CREATE_SUPP_GROUP \
    HAS_EXPIRE_ONLY DIRECT_IO_ALLOW_MMAP PASSTHROUGH NO_EXPORT_SUPPORT HAS_RESEND ALLOW_IDMAP)"
# docs/options.md ("What a Linux 6.12 guest asks for at INIT"): the flags ferryfsd serves behind
# an option ("FUSE_A and FUSE_B (`--option`)" in its paragraph) and those it does not serve (the
# first cell of each table row not marked "served"). By the section, every other flag the guest
# offers is agreed, the table's "served" rows included.
doc_flags() { # behind|served|never
    python3 - "$1" "$sem_repo/docs/options.md" <<'PY'
import re, sys
text = open(sys.argv[2]).read()
sec = text.split("## What a Linux 6.12 guest asks for at INIT", 1)[1].split("\n## ", 1)[0]
if sys.argv[1] == "behind":
    para = " ".join(sec.split("behind an option", 1)[1].split("It does not", 1)[0].split())
    for group, opt in re.findall(r"((?:FUSE_[A-Z0-9_]+(?:, | and )?)+) \(`(--[a-z0-9-]+)`\)", para):
        for flag in re.findall(r"FUSE_([A-Z0-9_]+)", group):
            print(flag, opt)
elif sys.argv[1] == "served":
    for row in sec.splitlines():
        if row.startswith("| FUSE_") and row.split("|")[2].strip().startswith("served"):
            print("\n".join(re.findall(r"FUSE_([A-Z0-9_]+)", row.split("|")[1])))
else:
    for row in sec.splitlines():
        if row.startswith("| FUSE_") and not row.split("|")[2].strip().startswith("served"):
            print("\n".join(re.findall(r"FUSE_([A-Z0-9_]+)", row.split("|")[1])))
PY
}
behind="$(doc_flags behind)" never="$(doc_flags never)"
sem_host docs-init-section-parsed "$([[ -n $behind && -n $never ]] && echo 1)" \
    "no flags behind options or not served found in docs/options.md's INIT section"
expected="$(printf '0x%x' $((offer_612 & ~$(mask $(cut -d' ' -f1 <<<"$behind") $never))))"
# Per the ALLOW_IDMAP row, --uid-map/--gid-map (the daemon started with ranges,
# FERRYFS_DAEMON_USER=ranges) withdraw it even with --allow-idmap.
idmap_withdrawn=0
[[ " ${unpriv_idmap[*]:-} " == *" --uid-map="* ]] && idmap_withdrawn=1
# client_line DAEMON: "MINOR OFFERED" from ferryfsd's INIT log.
client_line() {
    sed -n 's/.*fuse: client 7\.\([0-9]*\) offers \(0x[0-9a-f]*\), not agreed.*/\1 \2/p' "$t/$1.log" | tail -1
}
read -r minor offered <<<"$(client_line ferryfs)" || true
agreed="$(sem_init_flags ferryfs)"
if [[ -z "${minor:-}" ]]; then
    sem_host init-offer-logged 0 "no 'fuse: client 7.N offers' line in the ferryfsd log"
    minor=0 offered=0
else
    sem_host init-offer-logged 1 ""
fi
echo "INIT: guest offers FUSE 7.$minor, flags $offered; ferryfsd (defaults) agreed $agreed; docs/options.md: $expected"
echo "  offered:           $(decode "$offered")"
echo "  agreed:            $(decode "$agreed")"
echo "  per the docs:      $(decode "$expected")"
# The offer ferryfsd read is the one Linux 6.12 sends: ferryfsd decoded flags and flags2 right
# (and a newer guest, with flags the docs have not judged, fails here until they have).
sem_host init-offer-is-linux-6.12s "$(( minor == offer_612_minor && offered == offer_612 ))" \
    "ferryfsd read 7.$minor $offered; 6.12 sends 7.$offer_612_minor $offer_612: differ in $(decode $((offered ^ offer_612)))"
# What ferryfsd agreed with its defaults is exactly what the docs say it agrees.
sem_host init-agreed-as-documented "$(( agreed == expected ))" \
    "agreed but not by the docs: $(decode $((agreed & ~expected))); by the docs but not agreed: $(decode $((expected & ~agreed)))"
# The options the docs name turn their flag on: --allow-mmap (mm) agrees DIRECT_IO_ALLOW_MMAP,
# without it (nomm) not; the shared mappings below show the guest acting on it.
read -r _ mm_offered <<<"$(client_line mm)" || true
mmap_bit=$(( $(mask DIRECT_IO_ALLOW_MMAP) ))
sem_host allow-mmap-is-behind-the-option-in-docs "$(grep -qx 'DIRECT_IO_ALLOW_MMAP --allow-mmap' <<<"$behind" && echo 1)" \
    "docs/options.md does not put DIRECT_IO_ALLOW_MMAP behind --allow-mmap"
sem_host allow-mmap-offered-by-6.12 "$(( (${mm_offered:-0} & mmap_bit) != 0 ))" "offer ${mm_offered:-none}"
sem_host allow-mmap-agreed-with-option "$(( ($(sem_init_flags mm) & mmap_bit) != 0 ))" "mm flags $(sem_init_flags mm)"
sem_host allow-mmap-not-agreed-without "$(( ($(sem_init_flags nomm) & mmap_bit) == 0 ))" "nomm flags $(sem_init_flags nomm)"
# FUSE_ALLOW_IDMAP: a "served" row of the table, behind --allow-idmap, agreed with it (idm) at
# 7.41, and withdrawn where the row says (--uid-map/--gid-map, the ranges run).
served="$(doc_flags served)"
sem_host allow-idmap-served-in-docs "$(grep -qx ALLOW_IDMAP <<<"$served" && echo 1)" \
    "docs/options.md's table has no 'served' row for FUSE_ALLOW_IDMAP"
sem_host allow-idmap-is-behind-the-option-in-docs "$(grep -qx 'ALLOW_IDMAP --allow-idmap' <<<"$behind" && echo 1)" \
    "docs/options.md does not put ALLOW_IDMAP behind --allow-idmap"
idm_flags="$(sem_init_flags idm)"
if ((idmap_withdrawn)); then
    sem_host allow-idmap-withdrawn-under-uid-map "$(( (idm_flags & $(mask ALLOW_IDMAP)) == 0 ))" "idm flags $idm_flags"
else
    sem_host allow-idmap-agreed-with-option "$(( (idm_flags & $(mask ALLOW_IDMAP)) != 0 ))" "idm flags $idm_flags"
fi
sem_host session-minor-41 "$(grep -aq 'fuse: session 7\.41,' "$t/ferryfs.log" && echo 1)" \
    "$(grep -ao 'fuse: session 7\.[0-9]*' "$t/ferryfs.log" | tail -1)"

# --- FUSE_STATX: birth time ------------------------------------------------------------------
# The guest's statx of a file on the share against the host's statx of the same file; the
# guest's tmpfs answers the same question with STATX_BTIME too.
btime_of() { # COLUMN FILE: "yes S.N" / "no" / "" as the guest saw it
    grep -a "^$1 BTIME $2 " <<<"$out" | head -1 | cut -d' ' -f4-
}
sem_host btime-tmpfs-has-btime "$([[ $(btime_of tmpfs /tmp/bt-guest) == yes* ]] && echo 1)" \
    "tmpfs: '$(btime_of tmpfs /tmp/bt-guest)'"
for f in bt-host bt-guest; do
    host_bt="$("$t/g612" btime "$main/$f" | cut -d' ' -f3-)"
    got="$(btime_of ferryfsd "/mnt/$f")"
    sem_host "btime-$f-as-host" "$([[ $host_bt == yes* && $got == "$host_bt" ]] && echo 1)" \
        "guest '$got' host '$host_bt'"
    rsb="$(btime_of virtiofsd-rs "/rs/$f")"
    [[ -z $rsb ]] || echo "reference: virtiofsd-rs btime $f: $rsb (host: $("$t/g612" btime "$rs/$f" | cut -d' ' -f3-))"
done

# --- FUSE_ALLOW_IDMAP: an idmapped mount of the share ---------------------------------------
# Every IDMAP line (owners seen and on disk, opens allowed and refused, the unmapped caller)
# as on the guest's tmpfs; the host sees the on-disk owners the guest's kernel mapped.
idmap_of() { grep -a "^$1 IDMAP " <<<"$out" | sed "s/^$1 //"; }
ref="$(idmap_of tmpfs)"
got="$(idmap_of ferryfsd)"
sem_host idmap-refused-without-option "$([[ $(idmap_of ferryfsd-default) == "IDMAP mount errno 22" ]] && echo 1)" \
    "ferryfsd (defaults): '$(idmap_of ferryfsd-default | tr '\n' ';')'"
sem_host idmap-tmpfs-ran "$(grep -q '^IDMAP created-on-disk 1:1$' <<<"$ref" && echo 1)" "tmpfs: $(tr '\n' ';' <<<"$ref")"
owner_on_host() { # PATH: uid:gid on the host (guest ids are host ids when ALLOW_IDMAP is agreed)
    if [[ -e $1 ]]; then stat -c %u:%g "$1"; else echo missing; fi
}
if ((idmap_withdrawn)); then
    # Without the flag the guest's kernel refuses an idmapped mount of the share (EINVAL).
    sem_host idmap-mount-refused-without-flag "$([[ $got == "IDMAP mount errno 22" ]] && echo 1)" \
        "ferryfsd '$(tr '\n' ';' <<<"$got")'"
else
    sem_host idmap-like-tmpfs "$([[ -n $ref && $got == "$ref" ]] && echo 1)" \
        "ferryfsd '$(tr '\n' ';' <<<"$got")' tmpfs '$(tr '\n' ';' <<<"$ref")'"
    sem_host idmap-mkdir-owner-on-host "$([[ $(owner_on_host "$idm/idm/newdir") == 1:1 ]] && echo 1)" \
        "host: $(owner_on_host "$idm/idm/newdir")"
    sem_host idmap-chown-owner-on-host "$([[ $(owner_on_host "$idm/idm/new") == 3:4 ]] && echo 1)" \
        "host: $(owner_on_host "$idm/idm/new")"
fi
rsi="$(idmap_of virtiofsd-rs)"
[[ -z $rsi ]] || echo "reference: virtiofsd-rs idmapped mount $([[ $rsi == "$ref" ]] && echo "matches tmpfs" ||
    echo "differs: '$(tr '\n' ';' <<<"$rsi")'")"

# --- set-group-ID creation as a supplementary-group member ---------------------------------
sgid_of() { grep -a "^$1 SGID " <<<"$out" | sed "s/^$1 //" | sort; }
ref="$(sgid_of tmpfs)"
sem_host sgid-tmpfs-ran "$([[ $(grep -c '^SGID [a-z]* [0-7]* [0-9]*$' <<<"$ref") == 3 ]] && echo 1)" "tmpfs: $ref"
got="$(sgid_of ferryfsd)"
sem_host sgid-supp-group-like-tmpfs "$([[ -n "$ref" && "$got" == "$ref" ]] && echo 1)" \
    "ferryfsd '$(tr '\n' ';' <<<"$got")' tmpfs '$(tr '\n' ';' <<<"$ref")'"
# On the host: the same mode and group (guest ids are host ids; under FERRYFS_DAEMON_USER=ranges
# the host's group seen through the user's range, unpriv_guest_gid).
host="$(for n in file dir node; do
    if [[ -e "$main/sg/$n" ]]; then echo "SGID $n $(stat -c %04a "$main/sg/$n") $(unpriv_guest_gid "$(stat -c %g "$main/sg/$n")")"; else echo "SGID $n missing"; fi
done | sort)"
sem_host sgid-on-host-like-tmpfs "$([[ -n "$ref" && "$host" == "$ref" ]] && echo 1)" \
    "host '$(tr '\n' ';' <<<"$host")' tmpfs '$(tr '\n' ';' <<<"$ref")'"
rsg="$(sgid_of virtiofsd-rs)"
[[ -z "$rsg" ]] || echo "reference: virtiofsd-rs sgid $([[ "$rsg" == "$ref" ]] && echo "matches tmpfs" ||
    echo "differs: '$(tr '\n' ';' <<<"$rsg")'")"

# --- --allow-mmap with cache=never ---------------------------------------------------------
"$t/g612" expect "$size" "$seed" >"$t/expected.bin"
sem_host mmap-tmpfs-works "$(grep -aq "^tmpfs MMAP /tmp/mm.bin ok" <<<"$out" && echo 1)" "$(grep -a '^tmpfs MMAP' <<<"$out")"
sem_host mmap-shared-write-allow-mmap "$(grep -aq "^ferryfsd MMAP /mm/mm.bin ok" <<<"$out" && echo 1)" \
    "$(grep -a '^ferryfsd MMAP' <<<"$out" || echo 'no result')"
sem_host mmap-data-on-host-after-msync "$(cmp -s "$t/expected.bin" "$mm/mm.bin" && echo 1)" \
    "$(cmp "$t/expected.bin" "$mm/mm.bin" 2>&1 | head -1)"
sem_host mmap-refused-without-allow-mmap \
    "$(grep -aq "^ferryfsd-no-allow-mmap MMAP /nomm/mm.bin refused errno 19 " <<<"$out" && echo 1)" \
    "$(grep -a '^ferryfsd-no-allow-mmap MMAP' <<<"$out" || echo 'no result')"
if grep -aq '^virtiofsd-rs MMAP' <<<"$out"; then
    echo "reference: virtiofsd-rs --allow-mmap: $(grep -a '^virtiofsd-rs MMAP' <<<"$out" | cut -d' ' -f3-)," \
        "host bytes $(cmp -s "$t/expected.bin" "$rsmm/mm.bin" && echo intact || echo differ)"
fi
sem_finish
