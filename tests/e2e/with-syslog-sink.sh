#!/usr/bin/env bash
# Test helper: runs a command with /dev/log served by syslog-sink.py, in a private mount namespace so the host's /dev is untouched.
# Usage: with-syslog-sink.sh OUTPUT_FILE SINK_PID_FILE -- COMMAND ARGS...   (run it under `unshare -m`)
set -euo pipefail
out=$1 pidfile=$2
shift 3
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# /dev/log may not exist and cannot be created on the shared devtmpfs: put a
# tmpfs over /dev holding only the nodes a daemon needs, and the sink's socket.
mount --make-rprivate /
realdev="$(mktemp -d)"
mount --bind /dev "$realdev"
mount -t tmpfs -o mode=0755 devlog /dev
for n in null zero full random urandom; do
    : >"/dev/$n"
    mount --bind "$realdev/$n" "/dev/$n"
done
ln -s /proc/self/fd /dev/fd
umount -l "$realdev" && rmdir "$realdev"

/usr/bin/python3 "$here/syslog-sink.py" /dev/log "$out" &
echo $! >"$pidfile"
for ((i = 0; i < 50; i++)); do
    [[ -S /dev/log ]] && break
    sleep 0.1
done
[[ -S /dev/log ]] || { echo "with-syslog-sink: the sink did not start" >&2; exit 1; }
exec "$@"
