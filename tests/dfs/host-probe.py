#!/usr/bin/env python3
"""What the host's own mount answers to the operations fsops found different (tests/dfs): the oracle
for "ferryfsd passes on the file system's own error". Prints an errno name, "ok", or a number.

  host-probe.py rename2-noreplace DIR | rename2-exchange DIR | tmpfile DIR   -> errno name or ok
  host-probe.py fallocate-keep-blocks DIR   -> st_blocks after fallocate(1 MiB) + KEEP_SIZE(1 MiB at 1 MiB)
  host-probe.py punch-hole-blocks DIR       -> "blocks B -> A": st_blocks of a written 1 MiB file
                                               before and after a 512 KiB hole is punched in it
  host-probe.py seek-hole DIR               -> "SEEK_HOLE at EOF" when SEEK_HOLE from 0 of a file
                                               with a hole (data at 0 and 1 MiB, 2 MiB long) gives
                                               its size, as without FUSE_LSEEK; else "SEEK_HOLE(0)=N"
  host-probe.py sparse-blocks DIR           -> "blocks N" of a 16 MiB file with one byte at 8 MiB
  host-probe.py huge-blocks DIR             -> "N blocks" of a file with 4 bytes at 5 GiB
  host-probe.py suid-open-trunc DIR         -> "mode M" of a 06775 file of uid/gid 1000 after uid
                                               1000 opened it with O_TRUNC
  host-probe.py chown-sgid-nogx DIR         -> "mode M" of a 02745 file after root chowns it to 1000
  host-probe.py setxattr=NAME DIR           -> errno name or ok: setxattr(NAME, "v") on a new file
  host-probe.py acl-set DIR | acl-default-set DIR -> errno name or ok: a user:1000:r-- access ACL on a
                                               new file, or a default ACL on a new directory
  host-probe.py held-replace A_PATH B_PATH [fstat] -> tries: A_PATH (on mount A) is opened and held,
                                               B_PATH (the same file through mount B) removed and
                                               written anew, then A_PATH stat'ed every 0.1 s (and
                                               the held fd fstat'ed first, with fstat) until its
                                               inode changes: "N" tries, or "old" after 300
  host-probe.py flock DIR | ofd-lock DIR    -> errno name or ok: the second of two open files asks for
                                               the lock the first holds (LOCK_NB, F_OFD_SETLK):
                                               "ok" when it is refused with EWOULDBLOCK/EAGAIN as on a
                                               local file system, "granted" when both got it
"""
import ctypes
import errno
import fcntl
import os
import struct
import sys
import time

libc = ctypes.CDLL(None, use_errno=True)
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE = 1, 2


def errname(e):
    # The guest program names 95 EOPNOTSUPP; Python's table says ENOTSUP (the same number).
    return "EOPNOTSUPP" if e == errno.EOPNOTSUPP else errno.errorcode.get(e, str(e))


def rename2(d, flags):
    a, b = os.path.join(d, "probe-a"), os.path.join(d, "probe-b")
    for p in (a, b):
        open(p, "w").close()
    target = b if flags == RENAME_EXCHANGE else os.path.join(d, "probe-c")
    r = libc.renameat2(-100, a.encode(), -100, target.encode(), flags)
    return "ok" if r == 0 else errname(ctypes.get_errno())


def tmpfile(d):
    try:
        os.close(os.open(d, os.O_TMPFILE | os.O_RDWR, 0o600))
        return "ok"
    except OSError as e:
        return errname(e.errno)


def fallocate_keep_blocks(d):
    fd = os.open(os.path.join(d, "probe-falloc"), os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
    os.posix_fallocate(fd, 0, 1 << 20)
    if libc.fallocate(fd, FALLOC_FL_KEEP_SIZE, ctypes.c_long(1 << 20), ctypes.c_long(1 << 20)) < 0:
        return errname(ctypes.get_errno())
    blocks = os.fstat(fd).st_blocks
    os.close(fd)
    return str(blocks)


def fsynced_blocks(p, size, writes, punch=None):
    fd = os.open(p, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
    try:
        if size:
            os.ftruncate(fd, size)
        for off, data in writes:
            os.pwrite(fd, data, off)
        os.fsync(fd)
        before = os.fstat(fd).st_blocks
        if punch and libc.fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                    ctypes.c_long(punch[0]), ctypes.c_long(punch[1])) < 0:
            return errname(ctypes.get_errno()), None
        os.fsync(fd)
        return before, os.fstat(fd).st_blocks
    finally:
        os.close(fd)


def punch_hole_blocks(d):
    before, after = fsynced_blocks(os.path.join(d, "probe-punch"), 0, [(0, b"p" * (1 << 20))],
                                   (256 << 10, 512 << 10))
    return before if after is None else "blocks %d -> %d" % (before, after)


def seek_hole(d):
    p = os.path.join(d, "probe-seek")
    fsynced_blocks(p, 2 << 20, [(0, b"\xab" * 4096), (1 << 20, b"\xab" * 4096)])
    fd = os.open(p, os.O_RDONLY)
    try:
        h = os.lseek(fd, 0, os.SEEK_HOLE)
    finally:
        os.close(fd)
    return "SEEK_HOLE at EOF" if h == 2 << 20 else "SEEK_HOLE(0)=%d" % h


def as_user(uid, d, fn):
    """fn() as uid (and gid) uid in directory d: d is entered first, so the directories above it
    (a test's 0700 temp dir) need not be open to uid."""
    pid = os.fork()
    if pid == 0:
        try:
            os.chdir(d)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            fn()
            os._exit(0)
        except OSError:
            os._exit(1)
    return os.waitpid(pid, 0)[1] == 0


def suid_open_trunc(d):
    p = new_file(d, "probe-suid")
    os.chown(p, 1000, 1000)
    os.chmod(p, 0o6775)
    if not as_user(1000, d, lambda: os.close(os.open("probe-suid", os.O_WRONLY | os.O_TRUNC))):
        return "open failed"
    return "mode %o" % (os.stat(p).st_mode & 0o7777)


def chown_sgid_nogx(d):
    p = new_file(d, "probe-nogx")
    os.chmod(p, 0o2745)
    os.chown(p, 1000, 1000)
    return "mode %o" % (os.stat(p).st_mode & 0o7777)


def new_file(d, name):
    p = os.path.join(d, name)
    open(p, "w").close()
    return p


def setxattr(d, name):
    try:
        os.setxattr(new_file(d, "probe-xattr"), name, b"v")
        return "ok"
    except OSError as e:
        return errname(e.errno)


# The kernel's POSIX ACL xattr (include/uapi/linux/posix_acl_xattr.h): version 2, then
# (tag u16, perm u16, id u32) entries in tag order.
ACL_USER_OBJ, ACL_USER, ACL_GROUP_OBJ, ACL_MASK, ACL_OTHER = 1, 2, 4, 0x10, 0x20


def acl_set(d, default):
    entries = [(ACL_USER_OBJ, 6, 0xffffffff), (ACL_USER, 4, 1000), (ACL_GROUP_OBJ, 4, 0xffffffff),
               (ACL_MASK, 4, 0xffffffff), (ACL_OTHER, 4, 0xffffffff)]
    blob = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)
    if default:
        p = os.path.join(d, "probe-acl-dir")
        os.makedirs(p, exist_ok=True)
        name = "system.posix_acl_default"
    else:
        p, name = new_file(d, "probe-acl"), "system.posix_acl_access"
    try:
        os.setxattr(p, name, blob)
        return "ok"
    except OSError as e:
        return errname(e.errno)


def held_replace(pa, pb, fstat):
    """The wait of a name for a file replaced through the other mount while this one holds it
    (docs/distributed.md: gluster's md-cache, refreshed by an fstat of the held file)."""
    with open(pa, "w") as f:
        f.write("old\n")
    fd = os.open(pa, os.O_RDONLY)
    try:
        os.read(fd, 16)
        old = os.stat(pa).st_ino
        os.unlink(pb)
        with open(pb, "w") as f:
            f.write("new\n")
        for n in range(300):
            if fstat:
                try:
                    os.fstat(fd)
                except OSError:
                    pass
            try:
                if os.stat(pa).st_ino != old:
                    return str(n)
            except OSError:
                pass
            time.sleep(0.1)
        return "old"
    finally:
        os.close(fd)


F_OFD_SETLK = 37


def conflict(d, take):
    p = new_file(d, "probe-lock")
    fds = [os.open(p, os.O_RDWR) for _ in range(2)]
    try:
        take(fds[0])
        try:
            take(fds[1])
            return "granted"
        except OSError as e:
            return "ok" if e.errno in (errno.EAGAIN, errno.EWOULDBLOCK) else errname(e.errno)
    except OSError as e:
        return errname(e.errno)
    finally:
        for fd in fds:
            os.close(fd)


def ofd_lock(fd):
    # struct flock on x86-64: l_type, l_whence (short), l_start, l_len (off_t), l_pid (int).
    fcntl.fcntl(fd, F_OFD_SETLK, struct.pack("hhxxxxqqixxxx", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))


if __name__ == "__main__":
    ops = {"rename2-noreplace": lambda d: rename2(d, RENAME_NOREPLACE),
           "rename2-exchange": lambda d: rename2(d, RENAME_EXCHANGE),
           "tmpfile": tmpfile, "fallocate-keep-blocks": fallocate_keep_blocks,
           "punch-hole-blocks": punch_hole_blocks, "seek-hole": seek_hole,
           "sparse-blocks": lambda d: "blocks %d" % fsynced_blocks(os.path.join(d, "probe-sparse"),
                                                                   16 << 20, [(8 << 20, b"M")])[1],
           "huge-blocks": lambda d: "%d blocks" % fsynced_blocks(os.path.join(d, "probe-huge"),
                                                                 0, [(5 << 30, b"END!")])[1],
           "suid-open-trunc": suid_open_trunc, "chown-sgid-nogx": chown_sgid_nogx}
    ops.update({"acl-set": lambda d: acl_set(d, False), "acl-default-set": lambda d: acl_set(d, True),
                "flock": lambda d: conflict(d, lambda fd: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)),
                "ofd-lock": lambda d: conflict(d, ofd_lock)})
    if len(sys.argv) in (4, 5) and sys.argv[1] == "held-replace" and sys.argv[4:] in ([], ["fstat"]):
        print(held_replace(sys.argv[2], sys.argv[3], len(sys.argv) == 5))
        sys.exit(0)
    if len(sys.argv) == 3 and sys.argv[1].startswith("setxattr="):
        print(setxattr(sys.argv[2], sys.argv[1][len("setxattr="):]))
        sys.exit(0)
    if len(sys.argv) != 3 or sys.argv[1] not in ops:
        sys.exit(__doc__)
    print(ops[sys.argv[1]](sys.argv[2]))
