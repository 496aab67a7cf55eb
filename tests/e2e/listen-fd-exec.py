# Test helper: plays libvirt's part, which creates the vhost-user listening socket itself and passes it to the daemon as an inherited fd.
# Usage: listen-fd-exec.py SOCKET_PATH FD PROGRAM ARGS...   ("{fd}" in ARGS becomes FD)
import os
import socket
import sys

path, fd, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.bind(path)
sock.listen(1)
os.dup2(sock.fileno(), fd, inheritable=True)
os.execv(argv[0], [a.replace("{fd}", str(fd)) for a in argv])
