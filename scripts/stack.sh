#!/usr/bin/env bash
# Fetches and caches the "current" test stack without installing it: QEMU 10, libvirt 11.3 and the Linux 6.12 guest kernel (bookworm-backports), the Rust virtiofsd (trixie) with its own glibc.
#
# Usage: scripts/stack.sh fetch [--refresh]   fetch and unpack once (cached; --refresh re-reads the indexes)
#        scripts/stack.sh path NAME           print a cached path (fetches first if needed):
#            qemu-root     unpacked QEMU 10 packages (usr/bin/qemu-system-x86_64, usr/share/qemu, ...)
#            kernel-deb    the 6.12 linux-image .deb (build-guest.sh unpacks it)
#            virtiofsd-rs-root  unpacked trixie virtiofsd, libc6, libgcc-s1, libseccomp2, libcap-ng0
#            libvirt-root  unpacked libvirt 11.3 (usr/sbin/libvirtd, usr/bin/virsh, its libraries and
#                          QEMU driver; how to run it unpacked: tests/e2e/libvirt-current)
#        scripts/stack.sh status              print what is cached (no network)
# Env:   FERRYFS_CACHE (default /var/cache/ferryfs): everything goes under $FERRYFS_CACHE/current/.
# Exit:  0 ok; 77 the stack cannot be fetched here (no mirror reachable, a package missing: the
#        message names what); 1 other errors; 2 usage.
#
# Nothing is installed: Debian 12's QEMU 7.2 (whose qemu-system-common carries the C virtiofsd)
# stays as it is. The mirror comes from this machine's own apt sources; a private source list
# and private package lists (Dir::Etc::SourceList, Dir::State::Lists) leave the system's apt alone.
set -euo pipefail

cache="${FERRYFS_CACHE:-/var/cache/ferryfs}"
top="$cache/current"
apt_dir="$top/apt"
debs="$top/debs"
qemu_root="$top/qemu"
vrs_root="$top/virtiofsd-rs"
lv_root="$top/libvirt"

# What the stack is made of. QEMU and the kernel come from bookworm-backports: they run on
# Debian 12's libraries. The Rust virtiofsd needs glibc 2.39, so it comes with trixie's own.
qemu_pkgs=(qemu-system-x86 qemu-system-common qemu-system-data seabios)
kernel_re='^linux-image-6\.12\.[0-9.]+\+deb12-amd64-unsigned$'
vrs_pkgs=(virtiofsd libc6 libgcc-s1 libseccomp2 libcap-ng0)
# libvirt 11.3 (session-mode virtiofs, <idmap>): the daemon, its QEMU driver, virsh, the library
# (and its cpu_map) and libvirt-common's schemas. Not virtlogd (stdio_handler = "file"), not
# libvirt-daemon-common (iohelper, for save/dump), not the lock daemon. Every library they link is
# on Debian 12 already; only libvirt0 must come from here (LD_LIBRARY_PATH), not the installed 9.0.
lv_pkgs=(libvirt0 libvirt-common libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients)
keyring=/usr/share/keyrings/debian-archive-keyring.gpg

log() { echo "stack.sh: $*" >&2; }
skip() { log "SKIP: $*"; exit 77; }
die() { log "error: $*"; exit 1; }

# The Debian mirror this machine already uses: the first URI serving a plain suite (not
# -security, not -updates) in the deb822 sources or in a one-line sources.list.
mirror_uri() {
    local f uri=""
    for f in /etc/apt/sources.list.d/*.sources; do
        [[ -f "$f" ]] || continue
        uri="$(awk '
            function flush() { if (types ~ /(^| )deb( |$)/ && suites ~ /(^| )(bookworm|trixie|stable|oldstable)( |$)/ && uris != "" && !found) { split(uris, u, " "); print u[1]; found = 1 } types = suites = uris = "" }
            /^[ \t]*$/ { flush(); next }
            /^Types:/ { sub(/^Types:[ \t]*/, ""); types = $0 }
            /^Suites:/ { sub(/^Suites:[ \t]*/, ""); suites = $0 }
            /^URIs:/ { sub(/^URIs:[ \t]*/, ""); uris = $0 }
            END { flush() }' "$f")"
        [[ -n "$uri" ]] && break
    done
    if [[ -z "$uri" ]]; then
        uri="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
            awk '$1 == "deb" { i = 2; if ($2 ~ /^\[/) while ($i !~ /\]$/) i++; if ($2 ~ /^\[/) i++; if ($(i+1) ~ /^(bookworm|trixie|stable|oldstable)$/) { print $i; exit } }')"
    fi
    [[ -n "$uri" ]] || return 1
    echo "${uri%/}"
}

aptp() { # apt-get/apt-cache on the private lists only
    local tool=$1; shift
    "$tool" -q -o Dir::Etc::SourceList="$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null \
        -o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache="$apt_dir/cache" \
        -o Dir::Cache::pkgcache="" -o Dir::Cache::srcpkgcache="" \
        -o APT::Sandbox::User=root -o Debug::NoLocking=1 "$@"
}

update_lists() {
    local uri
    uri="$(mirror_uri)" || skip "no Debian mirror found in /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list"
    [[ -r "$keyring" ]] || skip "$keyring missing (install debian-archive-keyring: scripts/deps.sh)"
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
    {
        echo "# Written by scripts/stack.sh from this machine's apt sources; used only through -o Dir::Etc::SourceList."
        for s in bookworm-backports trixie; do
            echo "deb [signed-by=$keyring] $uri $s main"
        done
    } >"$apt_dir/sources.list"
    log "reading the bookworm-backports and trixie indexes (private lists in $apt_dir)"
    local out
    if ! out="$(aptp apt-get update 2>&1)"; then
        echo "$out" | tail -5 >&2
        skip "cannot read the bookworm-backports/trixie indexes from the machine's Debian mirror (network?)"
    fi
    if grep -qE '^(W|E): (Failed|Some index)' <<<"$out"; then
        echo "$out" | grep -E '^(W|E):' | head -5 >&2
        skip "the Debian mirror did not serve the bookworm-backports/trixie indexes (network?)"
    fi
}

# The newest 6.12 image package that bookworm-backports has (the build number is not hard-coded).
kernel_pkg() {
    local p
    aptp apt-cache pkgnames linux-image-6.12. 2>/dev/null | grep -E "$kernel_re" | sort -rV |
        while read -r p; do
            if aptp apt-cache madison "$p" 2>/dev/null | grep -q ' bookworm-backports/'; then
                echo "$p"
                break
            fi
        done
}

download() { # SUITE PKG...: into $debs; prints nothing, fails with 77 naming a missing package
    local suite=$1; shift
    local p
    for p in "$@"; do
        if ! (cd "$debs" && aptp apt-get download "$p/$suite" >/dev/null 2>"$top/download.err"); then
            tail -3 "$top/download.err" >&2
            skip "cannot download $p from $suite (package missing from the mirror or no network)"
        fi
    done
}

deb_of() { # PKG: the downloaded .deb of PKG (newest if several)
    ls -1 "$debs/${1}_"*.deb 2>/dev/null | sort -V | tail -1
}

stamp_ok() {
    [[ -f "$top/.stamp" && -x "$qemu_root/usr/bin/qemu-system-x86_64" && -x "$vrs_root/usr/libexec/virtiofsd" &&
       -f "$(sed -n 's/^kernel-deb //p' "$top/.stamp")" ]]
}

fetch() {
    local refresh=${1:-0}
    mkdir -p "$top"
    exec 8>"$top/.lock"
    flock 8
    if ((!refresh)) && stamp_ok; then
        fetch_libvirt 0
        return 0
    fi
    local t0=$SECONDS
    update_lists
    local kpkg
    kpkg="$(kernel_pkg)"
    [[ -n "$kpkg" ]] || skip "bookworm-backports has no package matching $kernel_re"
    rm -rf "$debs.new"
    mkdir -p "$debs.new"
    local debs_final=$debs
    debs="$debs.new"
    log "downloading ${qemu_pkgs[*]} $kpkg (bookworm-backports), ${vrs_pkgs[*]} (trixie)"
    download bookworm-backports "${qemu_pkgs[@]}" "$kpkg"
    download trixie "${vrs_pkgs[@]}"
    rm -rf "$debs_final" "$qemu_root" "$vrs_root"
    mv "$debs" "$debs_final"
    debs=$debs_final

    local p d
    mkdir -p "$qemu_root.new" "$vrs_root.new"
    for p in "${qemu_pkgs[@]}"; do dpkg-deb -x "$(deb_of "$p")" "$qemu_root.new"; done
    for p in "${vrs_pkgs[@]}"; do dpkg-deb -x "$(deb_of "$p")" "$vrs_root.new"; done
    mv "$qemu_root.new" "$qemu_root"
    mv "$vrs_root.new" "$vrs_root"
    [[ -x "$qemu_root/usr/bin/qemu-system-x86_64" ]] || die "qemu-system-x86 has no usr/bin/qemu-system-x86_64"
    [[ -x "$vrs_root/usr/libexec/virtiofsd" ]] || die "virtiofsd has no usr/libexec/virtiofsd"
    {
        for d in "$debs"/*.deb; do echo "deb $(basename "$d")"; done
        echo "kernel-deb $(deb_of "$kpkg")"
    } >"$top/.stamp"
    log "cached in $top in $((SECONDS - t0)) s: $(status_line)"
    fetch_libvirt 1
}

# libvirt has a stamp of its own, so a cache made before it was part of the stack gains it
# without fetching the rest again. $1: 1 when this run already read the indexes.
fetch_libvirt() {
    local lists_fresh=$1 p
    [[ -f "$top/.stamp-libvirt" && -x "$lv_root/usr/sbin/libvirtd" ]] && return 0
    ((lists_fresh)) || update_lists
    rm -rf "$top/debs-libvirt" "$lv_root.new"
    mkdir -p "$top/debs-libvirt" "$lv_root.new"
    local debs_saved=$debs
    debs="$top/debs-libvirt"
    log "downloading ${lv_pkgs[*]} (bookworm-backports)"
    download bookworm-backports "${lv_pkgs[@]}"
    for p in "${lv_pkgs[@]}"; do dpkg-deb -x "$(deb_of "$p")" "$lv_root.new"; done
    debs=$debs_saved
    rm -rf "$lv_root"
    mv "$lv_root.new" "$lv_root"
    [[ -x "$lv_root/usr/sbin/libvirtd" ]] || die "libvirt-daemon has no usr/sbin/libvirtd"
    for p in "$top/debs-libvirt"/*.deb; do echo "deb $(basename "$p")"; done >"$top/.stamp-libvirt"
}

status_line() {
    local q v k l
    l="$(LD_LIBRARY_PATH="$lv_root/usr/lib/x86_64-linux-gnu" "$lv_root/usr/bin/virsh" --version 2>/dev/null || echo "?")"
    q="$(QEMU_MODULE_DIR="$qemu_root/usr/lib/x86_64-linux-gnu/qemu" "$qemu_root/usr/bin/qemu-system-x86_64" --version 2>/dev/null | head -1 || echo "QEMU ?")"
    v="$("$(dirname "${BASH_SOURCE[0]}")/../tests/e2e/virtiofsd-rs" --version 2>/dev/null | head -1 || echo "virtiofsd ?")"
    k="$(basename "$(sed -n 's/^kernel-deb //p' "$top/.stamp" 2>/dev/null)")"
    echo "$q; libvirt $l; Rust $v; kernel $k"
}

case "${1:-}" in
    fetch)
        refresh=0
        [[ "${2:-}" == --refresh ]] && refresh=1
        fetch "$refresh" ;;
    path)
        fetch 0
        case "${2:-}" in
            qemu-root) echo "$qemu_root" ;;
            kernel-deb) sed -n 's/^kernel-deb //p' "$top/.stamp" ;;
            virtiofsd-rs-root) echo "$vrs_root" ;;
            libvirt-root) echo "$lv_root" ;;
            *) echo "usage: stack.sh path qemu-root|kernel-deb|virtiofsd-rs-root|libvirt-root" >&2; exit 2 ;;
        esac ;;
    status)
        if stamp_ok; then echo "cached in $top: $(status_line)"; else echo "not cached in $top"; exit 1; fi ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//' ;;
    *) echo "usage: stack.sh fetch [--refresh] | path NAME | status" >&2; exit 2 ;;
esac
