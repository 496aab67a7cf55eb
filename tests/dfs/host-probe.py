#!/usr/bin/env python3
"""What the host's own mount answers to the operations fsops found different (tests/dfs): the oracle
for "ferryfsd passes on the file system's own error". Prints an errno name, "ok", or a number.

  host-probe.py rename2-noreplace DIR | rename2-exchange DIR | tmpfile DIR   -> errno name or ok
  host-probe.py fallocate-keep-blocks DIR   -> st_blocks after fallocate(1 MiB) + KEEP_SIZE(1 MiB at 1 MiB)
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
FALLOC_FL_KEEP_SIZE = 1


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
           "tmpfile": tmpfile, "fallocate-keep-blocks": fallocate_keep_blocks}
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
