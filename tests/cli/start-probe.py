#!/usr/bin/env python3
"""Starts daemons on command lines and says what each did: served a vhost-user frontend, exited 0, or refused.

Usage: start-probe.py TMPDIR JOBS LABEL=DAEMON... < TABLE
TABLE: one command line a row, "NAME ARG..." (split on blanks; '#' starts a comment line).
Each row runs once per LABEL=DAEMON, JOBS runs at a time, each in TMPDIR/run/NAME.LABEL/
with its own socket path and share. In ARGs: @sock the socket path, @dir the share, @file a
regular file, @missing a path that does not exist, @fd the number of an inherited listening
socket bound at @sock (as libvirt passes one).
Prints "NAME<TAB>LABEL<TAB>OUTCOME" a run, OUTCOME being
  serves   it answered GET_FEATURES on the socket: started and serving a frontend
  exits    it ended with status 0 and nothing answered (--help, --version, --print-capabilities)
  refuses  it ended with another status and never answered
  hangs    none of these within 10 s
Each daemon starts in a session of its own; once it has an outcome it gets a second to end by
itself (both virtiofsds end when their frontend's connection closes), then its process group
is killed, and so is a process that went to the background (--daemonize) named by the pid file
beside the socket, when it is the same program.
"""
import concurrent.futures
import os
import signal
import socket
import stat
import struct
import subprocess
import sys
import time

START_SECS = 10
GRACE_SECS = 1.0


def is_socket(path):
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def answers(path, secs):
    """True when a vhost-user backend at path answers GET_FEATURES (request 1, version 1):
    a 12-byte header and a u64, within secs. A daemon still starting answers late, one that
    failed closes the connection; hanging up early would look like a frontend gone, which
    ends both daemons."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(max(secs, 0.1))
    try:
        s.connect(path)
        s.sendall(struct.pack("<III", 1, 1, 0))
        got = b""
        while len(got) < 20:
            part = s.recv(20 - len(got))
            if not part:
                break
            got += part
        return len(got) == 20
    except OSError:
        return False
    finally:
        s.close()


def end_background(pid_file, daemon):
    try:
        with open(pid_file) as f:
            pid = int(f.read().strip() or "0")
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv0 = f.read().split(b"\0")[0].decode()
    except (OSError, ValueError):
        return
    if pid > 0 and os.path.basename(argv0) == os.path.basename(daemon):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def run(tmp, name, label, daemon, words):
    w = os.path.join(tmp, "run", f"{name}.{label}")
    os.makedirs(os.path.join(w, "share"))
    open(os.path.join(w, "file"), "w").close()
    sock = os.path.join(w, "s.sock")
    listener = None
    if any("@fd" in a for a in words):
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(sock)
        listener.listen(8)
    args = []
    for a in words:
        a = a.replace("@sock", sock).replace("@dir", os.path.join(w, "share"))
        a = a.replace("@file", os.path.join(w, "file")).replace("@missing", os.path.join(w, "missing"))
        if listener:
            a = a.replace("@fd", str(listener.fileno()))
        args.append(a)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LISTEN_")}
    with open(os.path.join(w, "log"), "w") as log:
        p = subprocess.Popen([daemon] + args, stdin=subprocess.DEVNULL, stdout=log,
                             stderr=subprocess.STDOUT, env=env, start_new_session=True,
                             pass_fds=(listener.fileno(),) if listener else ())
    if listener:
        # Only the daemon holds it now: a connect is answered by the daemon or not at all.
        listener.close()
    outcome = "hangs"
    deadline = time.monotonic() + START_SECS
    while time.monotonic() < deadline:
        if is_socket(sock) and answers(sock, deadline - time.monotonic()):
            outcome = "serves"
            break
        rc = p.poll()
        if rc is not None:
            # A daemon that went to the background exits 0 once it listens.
            if rc != 0:
                outcome = "refuses"
            elif is_socket(sock) and answers(sock, deadline - time.monotonic()):
                outcome = "serves"
            else:
                outcome = "exits"
            break
        time.sleep(0.02)
    try:
        p.wait(GRACE_SECS)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except OSError:
        pass
    p.wait()
    end_background(sock + ".pid", daemon)
    return name, label, outcome


def main():
    tmp, jobs = sys.argv[1], int(sys.argv[2])
    daemons = [d.split("=", 1) for d in sys.argv[3:]]
    rows = []
    for line in sys.stdin:
        words = line.split()
        if words and not words[0].startswith("#"):
            rows.append(words)
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        runs = [pool.submit(run, tmp, r[0], label, daemon, r[1:])
                for r in rows for label, daemon in daemons]
        for f in concurrent.futures.as_completed(runs):
            print("\t".join(f.result()), flush=True)


if __name__ == "__main__":
    main()
