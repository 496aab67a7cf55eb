#!/usr/bin/env bash
# make check: starts ferryfsd as libvirt does (inherited listening --fd=N, -o source=, --thread-pool-size, --syslog) and boots the guest against it.
#
# libvirt creates and listens on the socket itself and passes it down; the
# test plays that part with listen-fd-exec.py. Debian's real libvirtd is run by
# libvirt-real-test.sh; this one stays for what that cannot show: libvirt 9.0
# never passes --syslog (it writes the daemon's stderr to a file) nor
# --log-level, and always passes a good socket. --syslog is checked by serving
# /dev/log from a sink inside a private mount namespace (with-syslog-sink.sh),
# since this machine runs no syslog daemon and the host's /dev stays untouched.
# Also checks --log-level filtering and that a non-socket --fd is refused.
# Exit: 0 pass, 1 fail, 77 skipped (no QEMU or guest image).
set -euo pipefail
# It tests ferryfsd, not the guest's kernel: it runs on the current stack (QEMU 10, Linux 6.12),
# or on stable where that stack cannot be had or FERRYFS_STACK says so (tests/e2e/stack-lib.sh).
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/stack-lib.sh" && stack_default_current "$0" "$@"
name=libvirt-start
source "$(dirname "${BASH_SOURCE[0]}")/start-lib.sh"
start_prepare

sock="$tmp/vhost.sock" log="$tmp/syslog.txt"
: >"$log"
unshare -m "$here/with-syslog-sink.sh" "$log" "$tmp/sink.pid" -- \
    "$python" "$here/listen-fd-exec.py" "$sock" 7 \
    "$ferryfsd" --fd={fd} -o "source=$share,cache=auto,xattr" --thread-pool-size=4 --syslog \
    >"$tmp/daemon.out" 2>&1 &
pid=$!
cleanup_pids+=("$pid")
for ((i = 0; i < 100; i++)); do
    grep -q 'waiting for a vhost-user frontend' "$log" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
[[ -f "$tmp/sink.pid" ]] && cleanup_pids+=("$(cat "$tmp/sink.pid")")
# Each line names ferryfsd and its pid, which inside the default namespace
# sandbox is 1: the pid is not compared.
if grep -Eq 'ferryfsd\[[0-9]+\]: waiting for a vhost-user frontend on the inherited fd 7' "$log"; then
    pass "started on the inherited fd 7; its first message arrived in syslog"
    boot_demo_and_check "$sock" "$pid" libvirt
else
    fail "no 'waiting' message in syslog; daemon output:"
    sed 's/^/    /' "$tmp/daemon.out"
fi

# LOG_DAEMON|LOG_INFO is priority <30>.
for want in "--thread-pool-size=4: ferryfsd has no thread pool" \
    "frontend connected; sharing $share" "frontend gone; exiting"; do
    if grep -qF -- "<30>" "$log" && grep -Eq "ferryfsd\[[0-9]+\]: $(sed 's/[][\.*^$]/\\&/g' <<<"$want")" "$log"; then
        pass "syslog has '$want'"
    else
        fail "syslog lacks '$want'"
    fi
done
if grep -q 'ferryfsd \(info\|warn\|error\):' "$tmp/daemon.out"; then
    fail "with --syslog, log lines still went to stderr: $(head -1 "$tmp/daemon.out")"
else
    pass "with --syslog nothing was logged to stderr"
fi
[[ ! -f "$tmp/sink.pid" ]] || kill "$(cat "$tmp/sink.pid")" 2>/dev/null || true

# An inherited fd that is not a listening socket is refused up front.
rc=0
out="$("$ferryfsd" --fd=0 -o "source=$share" </dev/null 2>&1)" || rc=$?
if ((rc == 1)) && grep -q 'inherited fd 0 is not a listening stream socket' <<<"$out"; then
    pass "--fd=0 (not a socket) refused: $out"
else
    fail "--fd=0 (not a socket): exit $rc, '$out'"
fi

# --log-level: warn hides the info lines shown above; error still reports errors.
"$ferryfsd" --socket-path="$tmp/level.sock" --shared-dir="$share" --log-level=warn \
    >"$tmp/level.out" 2>&1 &
lpid=$!
cleanup_pids+=("$lpid")
if wait_socket "$tmp/level.sock" "$lpid"; then
    stop_daemon "$lpid" "--log-level=warn daemon" && pass "--log-level=warn: exit status 0 on SIGTERM"
    if grep -q 'info:' "$tmp/level.out"; then
        fail "--log-level=warn still logged info lines: $(grep -m1 'info:' "$tmp/level.out")"
    else
        pass "--log-level=warn: no info lines"
    fi
else
    fail "--log-level=warn: daemon did not listen: $(cat "$tmp/level.out")"
fi
rc=0
out="$("$ferryfsd" --socket-path="$tmp/err.sock" --shared-dir="$tmp/missing" --log-level=error 2>&1)" || rc=$?
if ((rc == 1)) && grep -q "error: shared directory $tmp/missing" <<<"$out"; then
    pass "--log-level=error: errors still reported"
else
    fail "--log-level=error with a missing directory: exit $rc, '$out'"
fi
finish
