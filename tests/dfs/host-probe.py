#!/usr/bin/env python3
"""What the host's own mount answers to the operations fsops found different (tests/dfs): the oracle
for "ferryfsd passes on the file system's own error". Prints an errno name, "ok", or a number.

  host-probe.py rename2-noreplace DIR | rename2-exchange DIR | tmpfile DIR   -> errno name or ok
  host-probe.py fallocate-keep-blocks DIR   -> st_blocks after fallocate(1 MiB) + KEEP_SIZE(1 MiB at 1 MiB)
"""
import ctypes
import errno
import os
import sys

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


if __name__ == "__main__":
    ops = {"rename2-noreplace": lambda d: rename2(d, RENAME_NOREPLACE),
           "rename2-exchange": lambda d: rename2(d, RENAME_EXCHANGE),
           "tmpfile": tmpfile, "fallocate-keep-blocks": fallocate_keep_blocks}
    if len(sys.argv) != 3 or sys.argv[1] not in ops:
        sys.exit(__doc__)
    print(ops[sys.argv[1]](sys.argv[2]))
