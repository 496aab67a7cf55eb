#!/usr/bin/env python3
"""What name_to_handle_at/open_by_handle_at do on a mount (tests/dfs): one result line per call.

  handles.py get PATH            -> "ok TYPE HEX" or "err ERRNONAME"
  handles.py open MOUNTDIR TYPE HEX -> "ok" (and the reopened file's inode) or "err ERRNONAME"
"""
import ctypes
import errno
import os
import sys

libc = ctypes.CDLL(None, use_errno=True)
MAX_HANDLE_SZ = 128


class FileHandle(ctypes.Structure):
    _fields_ = [("handle_bytes", ctypes.c_uint), ("handle_type", ctypes.c_int),
                ("f_handle", ctypes.c_ubyte * MAX_HANDLE_SZ)]


def err():
    return "err " + errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))


def get(path):
    fh = FileHandle(handle_bytes=MAX_HANDLE_SZ)
    mnt = ctypes.c_int()
    if libc.name_to_handle_at(-100, path.encode(), ctypes.byref(fh), ctypes.byref(mnt), 0) < 0:
        return err()
    return "ok %d %s" % (fh.handle_type, bytes(fh.f_handle[:fh.handle_bytes]).hex())


def reopen(mount_dir, htype, hexbytes):
    raw = bytes.fromhex(hexbytes)
    fh = FileHandle(handle_bytes=len(raw), handle_type=int(htype))
    ctypes.memmove(fh.f_handle, raw, len(raw))
    mfd = os.open(mount_dir, os.O_RDONLY | os.O_DIRECTORY)
    fd = libc.open_by_handle_at(mfd, ctypes.byref(fh), os.O_RDONLY)
    if fd < 0:
        return err()
    ino = os.fstat(fd).st_ino
    os.close(fd)
    return "ok %d" % ino


if __name__ == "__main__":
    if sys.argv[1:2] == ["get"] and len(sys.argv) == 3:
        print(get(sys.argv[2]))
    elif sys.argv[1:2] == ["open"] and len(sys.argv) == 5:
        print(reopen(*sys.argv[2:]))
    else:
        sys.exit(__doc__)
