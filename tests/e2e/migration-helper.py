# Host helper of migration-test.sh: talks to QEMU's HMP monitor, stands between two QEMUs as a damaging or pausing stream filter, hashes files.
#
# Usage:
#   migration-helper.py hmp SOCKET COMMAND...     one HMP command, its output on stdout
#   migration-helper.py filter MODE MARKER DEST CTL
#       run by the source QEMU as `migrate "exec:..."`: connects to the destination's
#       -incoming unix:DEST and copies the stream both ways (QEMU's return path), except that
#       from the first MARKER (the vhost-user-fs section's name) on, MODE applies:
#         pass       nothing (the control column)
#         truncate   the stream ends 64 bytes after MARKER: the device state is cut short
#         flip       every byte of the first "held-read" after MARKER is inverted: the name
#                    of a file the guest holds open, inside the daemon's state
#         pause      the bytes from MARKER on are held back until the source has sent
#                    everything (1 s quiet, or its end of the stream), CTL/paused is
#                    created, and until CTL/resume exists:
#                    the host acts between the source's save and the destination's load
#   migration-helper.py fnv FILE...                FNV-1a 64 of each file, as guest-migrate prints
#   migration-helper.py fnv-check DIR REPORT       the IO lines of a guest report against DIR
import os
import select
import socket
import sys
import threading
import time


def to_prompt(s):
    """What the monitor says up to its next prompt."""
    buf = b""
    while not buf.endswith(b"(qemu) "):
        chunk = s.recv(4096)
        if not chunk:
            break
        buf += chunk
    return buf


def hmp(path, cmd):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(path)
    to_prompt(s)  # the greeting
    s.sendall(cmd.encode() + b"\n")
    buf = to_prompt(s)
    s.close()
    text = buf.decode(errors="replace").replace("\r", "")
    lines = text.split("\n")
    # The echo of the command comes first (with terminal escapes), the prompt last.
    print("\n".join(lines[1:-1]))


def fnv(path):
    h = 0xCBF29CE484222325
    with open(path, "rb") as f:
        data = f.read()
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def filt(mode, marker, dest, ctl):
    marker = marker.encode()
    out = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    out.connect(dest)
    src_in, src_out = 0, 1  # QEMU's exec: channel: our stdin and stdout

    def back():  # destination -> source: the return path
        try:
            while True:
                d = out.recv(65536)
                if not d:
                    break
                while d:
                    d = d[os.write(src_out, d):]
        except OSError:
            pass

    threading.Thread(target=back, daemon=True).start()
    seen = b""  # bytes not yet forwarded, searched for the marker
    found = False
    held = b""
    flipped = False
    cut = None
    def pause_here():
        # The source has saved and sent everything: the host acts now, before the
        # destination has seen the device state.
        open(os.path.join(ctl, "paused"), "w").close()
        while not os.path.exists(os.path.join(ctl, "resume")):
            time.sleep(0.1)

    while True:
        if mode == "pause" and found:
            # Wait for the source to go quiet (it waits on the return path) or to close.
            r, _, _ = select.select([src_in], [], [], 1.0)
            if not r:
                pause_here()
                out.sendall(held)
                held = b""
                mode = "pass"
                continue
        d = os.read(src_in, 65536)
        if not d:
            if mode == "pause" and found:
                pause_here()
            break
        if not found:
            seen += d
            i = seen.find(marker)
            if i < 0:
                keep = len(marker)
                out.sendall(seen[:-keep])
                seen = seen[-keep:]
                continue
            found = True
            # Each mode leaves a trace, so the test can tell its damage from an accident.
            open(os.path.join(ctl, "marker-found"), "w").close()
            out.sendall(seen[:i])
            d = seen[i:]
            seen = b""
            if mode == "truncate":
                cut = 64
        if mode == "truncate":
            out.sendall(d[:cut])
            cut -= min(cut, len(d))
            if cut == 0:
                # The destination sees the end of its stream mid-device-state.
                open(os.path.join(ctl, "truncated"), "w").close()
                out.shutdown(socket.SHUT_WR)
                time.sleep(5)
                break
            continue
        if mode == "flip" and not flipped:
            held += d
            j = held.find(b"held-read")
            if j < 0 and len(held) < (1 << 20):
                continue
            if j >= 0:
                held = held[:j] + bytes(b ^ 0xFF for b in held[j:j + 9]) + held[j + 9:]
                open(os.path.join(ctl, "flipped"), "w").close()
            flipped = True
            out.sendall(held)
            held = b""
            continue
        if mode == "pause":
            held += d
            continue
        out.sendall(d)
    if seen:
        out.sendall(seen)
    if held:
        out.sendall(held)
    try:
        out.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    # Keep the return path open until the destination closes it.
    time.sleep(2)


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "hmp":
        hmp(sys.argv[2], " ".join(sys.argv[3:]))
    elif len(sys.argv) == 6 and sys.argv[1] == "filter":
        filt(*sys.argv[2:])
    elif len(sys.argv) >= 3 and sys.argv[1] == "fnv":
        for p in sys.argv[2:]:
            print("%016x %s" % (fnv(p), p))
    elif len(sys.argv) == 4 and sys.argv[1] == "fnv-check":
        # fnv-check DIR REPORT: every "IO NAME SIZE FNV" line of REPORT against DIR/NAME;
        # prints the mismatches and "checked N bad M".
        n = bad = 0
        for line in open(sys.argv[3]):
            w = line.split()
            if len(w) != 4 or w[0] != "IO":
                continue
            n += 1
            p = os.path.join(sys.argv[2], w[1])
            try:
                got = "%016x" % fnv(p)
                size = os.path.getsize(p)
            except OSError as e:
                got, size = str(e), -1
            if got != w[3] or str(size) != w[2]:
                bad += 1
                print("%s: guest %s %s, host %s %s" % (w[1], w[2], w[3], size, got))
        print("checked %d bad %d" % (n, bad))
    else:
        sys.stderr.write(__doc__ if __doc__ else "usage: see the header\n")
        sys.exit(2)


main()
