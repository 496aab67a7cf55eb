#!/usr/bin/env bash
# Builds the QEMU test guest (Debian kernel + busybox initramfs with the virtio-fs/9p modules it needs and test helpers) into OUTDIR, cached.
#
# Usage: build-guest.sh OUTDIR
# Produces OUTDIR/vmlinuz, OUTDIR/initrd.img (busybox, modules, fsops and migrate helpers, /cmds),
# OUTDIR/initrd-fio.img (the same plus fio and its shared libraries), OUTDIR/fsops (host copy
# of the helper, for `fsops --expect`), OUTDIR/stack (which stack the guest is for).
# Env: FERRYFS_STACK=stable (default: Debian 12's 6.1 kernel, downloaded into FERRYFS_CACHE,
# default /var/cache/ferryfs; FERRYFS_KERNEL_PKG overrides the package name) or current (the
# 6.12 kernel from bookworm-backports, fetched by scripts/stack.sh). See stack-lib.sh.
# Exit: 0 built or up to date; 77 the stack's kernel cannot be fetched; 1 other errors; 2 usage.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:?usage: build-guest.sh OUTDIR}"
cache="${FERRYFS_CACHE:-/var/cache/ferryfs}"
source "$here/stack-lib.sh"
stack="$(stack_name)"
mkdir -p "$out" "$cache"
out="$(cd "$out" && pwd)"

log() { echo "build-guest: $*" >&2; }

# One stack's default dir must never be rebuilt with another stack's kernel: tests of the other
# stack may be booting from it.
for s in stable current; do
    [[ "$s" != "$stack" ]] || continue
    d="$(FERRYFS_GUEST_DIR="" stack_guest_dir "$s")"
    d="$(cd "$(dirname "$d")" && pwd)/$(basename "$d")"
    if [[ "$out" == "$d" ]]; then
        log "FERRYFS_STACK=$stack but $out is the $s stack's guest dir; use $(FERRYFS_GUEST_DIR="" stack_guest_dir "$stack")"
        log "(stack_guest_dir in tests/e2e/stack-lib.sh, or: tests/e2e/stack-lib.sh run $stack TEST)"
        exit 2
    fi
done

# Order matters: each module must follow the ones it links against. The 6.12 kernel of the
# current stack has virtio, virtio_pci, fuse and virtiofs built in; 9p is a module in both.
if [[ "$stack" == stable ]]; then
    modules=(virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci
             fuse virtiofs netfs fscache 9pnet 9pnet_virtio 9p)
else
    modules=(netfs 9pnet 9pnet_virtio 9p)
fi

find_kernel_deb() {
    local pkg
    for pkg in "$@"; do
        compgen -G "$cache/${pkg}_*.deb" >/dev/null && ls -1t "$cache/${pkg}_"*.deb | head -1 && return 0
    done
    return 1
}

kernel_pkgs() {
    if [[ -n "${FERRYFS_KERNEL_PKG:-}" ]]; then
        echo "$FERRYFS_KERNEL_PKG"
        return
    fi
    local dep
    dep="$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/ {print $2; exit}')"
    if [[ -n "$dep" ]]; then
        echo "$dep"
        echo "$dep-unsigned"
    fi
}

# Prefer the package apt currently points at; fall back to whatever is cached (offline reruns).
get_kernel_deb() {
    local pkgs deb pkg
    mapfile -t pkgs < <(kernel_pkgs)
    if ((${#pkgs[@]} == 0)); then
        if deb="$(ls -1t "$cache"/linux-image-*.deb 2>/dev/null | head -1)" && [[ -n "$deb" ]]; then
            echo "$deb"
            return
        fi
        log "no kernel package known to apt; running apt-get update"
        apt-get update -qq >&2
        mapfile -t pkgs < <(kernel_pkgs)
    fi
    if deb="$(find_kernel_deb "${pkgs[@]}")"; then
        echo "$deb"
        return
    fi
    local attempt
    for attempt in 1 2; do
        for pkg in "${pkgs[@]}"; do
            log "downloading $pkg into $cache"
            if (cd "$cache" && apt-get download -qq "$pkg" >&2 2>/dev/null); then
                find_kernel_deb "$pkg"
                return
            fi
        done
        # Stale package lists name versions the mirror no longer has.
        ((attempt == 1)) || break
        log "download failed; running apt-get update and retrying"
        apt-get update -qq >&2 || break
        mapfile -t pkgs < <(kernel_pkgs)
    done
    deb="$(ls -1t "$cache"/linux-image-*.deb 2>/dev/null | head -1 || true)"
    [[ -n "$deb" ]] || { log "cannot obtain a Debian kernel image package"; exit 1; }
    echo "$deb"
}

# Concurrent callers (tests, benchmarks) share one guest dir: build it once, under a lock.
exec 9>"$out/.lock"
flock 9

if [[ "$stack" == stable ]]; then
    kdeb="$(get_kernel_deb)"
else
    rc=0
    kdeb="$("$here/../../scripts/stack.sh" path kernel-deb)" || rc=$?
    ((rc == 0)) || { log "no kernel for the $stack stack (scripts/stack.sh exit $rc)"; exit "$rc"; }
fi
fio_bin="$(command -v fio || true)"

# Everything that can change the result goes into the stamp; an unchanged stamp means reuse.
stamp="$({
    echo "stack $stack"
    echo "kernel $(basename "$kdeb") $(stat -c %s "$kdeb")"
    echo "busybox $(dpkg-query -W -f='${Version}' busybox-static 2>/dev/null || stat -c %Y /bin/busybox)"
    echo "fio ${fio_bin:+$(sha256sum "$fio_bin" | cut -d' ' -f1)}"
    echo "gcc $(gcc -dumpfullversion 2>/dev/null)"
    echo "modules ${modules[*]}"
    sha256sum "$here/build-guest.sh" "$here/guest-fsops.c" "$here/guest-migrate.c" "$here/guest/init" "$here"/guest/cmds/*
} | sha256sum | cut -d' ' -f1)"

if [[ -f "$out/.stamp" && "$(cat "$out/.stamp")" == "$stamp" && -s "$out/vmlinuz" &&
      -s "$out/initrd.img" && -x "$out/fsops" ]]; then
    exit 0
fi
log "building guest in $out (kernel $(basename "$kdeb"))"
rm -f "$out/.stamp"

work="$(mktemp -d "${TMPDIR:-/tmp}/ferryfs-guest.XXXXXX")"
trap 'rm -rf "$work"' EXIT

dpkg-deb -x "$kdeb" "$work/kpkg"
vmlinuz="$(ls -1 "$work"/kpkg/boot/vmlinuz-* | head -1)"
kver="${vmlinuz##*/vmlinuz-}"
moddir="$work/kpkg/lib/modules/$kver/kernel"
[[ -d "$moddir" ]] || { log "no modules in $(basename "$kdeb")"; exit 1; }

root="$work/root"
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,proc,sys,dev,tmp,mnt,root,cmds,home/guest,lib/ferryfs-modules}
chmod 1777 "$root/tmp"
cp /bin/busybox "$root/bin/busybox"

: >"$root/lib/ferryfs-modules/order"
for m in "${modules[@]}"; do
    src="$(find "$moddir" \( -name "$m.ko" -o -name "$m.ko.xz" -o -name "$m.ko.zst" \) | head -1)"
    if [[ -z "$src" ]]; then
        log "module $m not in this kernel (ok if built in or not needed)"
        continue
    fi
    dst="$root/lib/ferryfs-modules/$m.ko"
    # busybox insmod cannot read compressed modules.
    case "$src" in
        *.xz) xz -dc "$src" >"$dst" ;;
        *.zst) zstd -qdc "$src" >"$dst" ;;
        *) cp "$src" "$dst" ;;
    esac
    echo "$m" >>"$root/lib/ferryfs-modules/order"
done
for m in virtio_ring:VIRTIO virtio:VIRTIO virtio_pci:VIRTIO_PCI fuse:FUSE_FS virtiofs:VIRTIO_FS; do
    grep -qx "${m%%:*}" "$root/lib/ferryfs-modules/order" ||
        grep -q "^CONFIG_${m#*:}=y" "$work"/kpkg/boot/config-* 2>/dev/null ||
        log "warning: required module ${m%%:*} missing"
done

gcc -static -O2 -Wall -o "$out/fsops.tmp" "$here/guest-fsops.c"
mv "$out/fsops.tmp" "$out/fsops"
cp "$out/fsops" "$root/bin/fsops"
gcc -static -O2 -Wall -o "$root/bin/migrate" "$here/guest-migrate.c"

install -m 0755 "$here/guest/init" "$root/init"
for c in "$here"/guest/cmds/*; do install -m 0755 "$c" "$root/cmds/$(basename "$c")"; done

cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
guest:x:1000:1000:guest:/home/guest:/bin/sh
EOF
cat >"$root/etc/group" <<'EOF'
root:x:0:
guest:x:1000:
grp2:x:2000:
EOF
chown 1000:1000 "$root/home/guest"
echo ferryfs-guest >"$root/etc/hostname"
# A console node lets the kernel give /init stdio even before devtmpfs is mounted.
mknod -m 600 "$root/dev/console" c 5 1 2>/dev/null || true

mkcpio() { (cd "$1" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet -R +0:+0 --reproducible); }

mkcpio "$root" | gzip -6 >"$out/initrd.img.tmp"
mv "$out/initrd.img.tmp" "$out/initrd.img"

# fio is dynamic on Debian and drags ~80 MB of libraries: keep it out of the everyday initrd.
# The kernel accepts concatenated cpio archives, so the fio image is the base plus one layer.
if [[ -n "$fio_bin" ]]; then
    fl="$work/fio"
    mkdir -p "$fl/usr/bin"
    cp -L "$fio_bin" "$fl/usr/bin/fio"
    ldd "$fio_bin" | awk '/=> \// {print $3} /^\t\/.*ld-linux/ {print $1}' | while read -r lib; do
        mkdir -p "$fl$(dirname "$lib")"
        cp -L "$lib" "$fl$lib"
    done
    mkcpio "$fl" | gzip -1 >"$work/fio.cpio.gz"
    cat "$out/initrd.img" "$work/fio.cpio.gz" >"$out/initrd-fio.img.tmp"
    mv "$out/initrd-fio.img.tmp" "$out/initrd-fio.img"
else
    log "fio not installed: no initrd-fio.img"
    rm -f "$out/initrd-fio.img"
fi

# Replace files by rename so a guest booting from this dir meanwhile never reads a partial image.
cp "$vmlinuz" "$out/vmlinuz.tmp"
mv "$out/vmlinuz.tmp" "$out/vmlinuz"
echo "$kver" >"$out/kernel-version"
echo "$stack" >"$out/stack"
echo "$stamp" >"$out/.stamp"
log "done: $(du -h "$out/initrd.img" | cut -f1) initrd, kernel $kver"
