# Test helper: a syslog receiver on a unix datagram socket (/dev/log in a private mount namespace) that appends every message to a file.
# Usage: syslog-sink.py SOCKET_PATH OUTPUT_FILE
import socket
import sys

sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
sock.bind(sys.argv[1])
with open(sys.argv[2], "ab", buffering=0) as out:
    while True:
        out.write(sock.recv(65536).rstrip(b"\0\n") + b"\n")
