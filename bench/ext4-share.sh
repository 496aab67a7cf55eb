# bench/ext4-share.sh: sourced by bench/compare and bench/daemon-profile; a scratch ext4 with a journal, loop-mounted, for the "disk" workloads' share.
#
# Why not a directory on the root file system: an ext4 without a journal (this machine's root has
# none) skips, when it allocates an inode, every free inode whose inode was deleted in the last
# minute (six while its inode table block is dirty): recently_deleted() in fs/ext4/ialloc.c. Churn
# of creates and unlinks then scans further the faster it goes, and whether a run lands in a block
# group full of such inodes decides its speed: the host's own loop of create, close and unlink
# moved several-fold from one round to the next (docs/benchmarks.md, "Conditions on this machine"). A user's
# ext4 has a journal, and with one ext4 never makes that check.
#
# ext4_share_make DIR: mounts a fresh 1 GiB ext4 (mkfs.ext4's defaults, journal included, inode
# tables written now so no lazy init runs under a measurement) on the empty directory DIR. Its image
# is the sparse file DIR.img, on the disk DIR is on, read and written by the loop device with
# direct I/O (one page cache: ext4's). Returns 1 with the reason on stderr when it cannot (not root,
# no mkfs.ext4 or losetup, no loop device); DIR is then left as it was.
# ext4_share_remove DIR: unmounts DIR, detaches its loop device, removes the image. Safe to call on
# a DIR that ext4_share_make did not mount.

ext4_share_make() {
    local dir=$1 img=$1.img dev
    ((EUID == 0)) || { echo "not root (mount and losetup need it)" >&2; return 1; }
    command -v mkfs.ext4 >/dev/null && command -v losetup >/dev/null ||
        { echo "no mkfs.ext4 or losetup (Debian: e2fsprogs, mount)" >&2; return 1; }
    truncate -s 1G "$img" || return 1
    if ! mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$img"; then
        rm -f "$img"; echo "mkfs.ext4 failed" >&2; return 1
    fi
    if ! dev=$(losetup --direct-io=on --find --show "$img"); then
        rm -f "$img"; echo "no free loop device" >&2; return 1
    fi
    if ! mount -t ext4 "$dev" "$dir"; then
        losetup -d "$dev"; rm -f "$img"; echo "mount of $dev failed" >&2; return 1
    fi
}

ext4_share_remove() {
    local dir=$1 dev
    if mountpoint -q "$dir"; then
        dev=$(findmnt -n -o SOURCE --mountpoint "$dir")
        umount "$dir" && [[ $dev == /dev/loop* ]] && losetup -d "$dev"
    fi
    rm -f "$dir.img"
}
