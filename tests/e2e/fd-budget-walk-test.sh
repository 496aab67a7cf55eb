#!/usr/bin/env bash
# make check: ferryfsd with its default options and --rlimit-nofile=1024 while a guest stats every file of a 100,000-file tree: file handles where the host can reopen them, so no EMFILE/ENFILE in the guest.
#
# One O_PATH fd per inode the guest holds cannot serve this walk under a limit of 1024 (the guest's
# kernel keeps every inode it looked up); the default --inode-file-handles=prefer keeps a file
# handle instead wherever open_by_handle_at can reopen it. Checked:
#   - the start log names the share's mount as using file handles, once;
#   - the guest's `ls -lR` lists every one of the 100,000 files with its attributes, and prints no
#     error at all (EMFILE/ENFILE would be "Too many open files [in system]");
#   - a few files read back their contents;
#   - the serving process never held more than half the limit (sampled from the host), and the
#     daemon exits 0 when the guest powers off.
# The same walk under --inode-file-handles=never fails with ENFILE in the guest: the default is what
# makes it pass. In make check-long on the current stack the Rust virtiofsd walks the same tree as
# a reference column. Needs root (without it file handles cannot be opened: the daemon says so and
# keeps fds, tests/security/unprivileged-test.sh).
# Env: FERRYFS_WALK_FILES (default 100000, a multiple of 1000: 1000 files per directory).
set -euo pipefail
name=fd-budget-walk
# guest-lib.sh picks the stack (current, else stable) and makes $tmp, $share and $sock.
source "$(dirname "${BASH_SOURCE[0]}")/guest-lib.sh"
need_root "open_by_handle_at needs CAP_DAC_READ_SEARCH"
[[ -z "${FERRYFS_DAEMON_USER:-}" ]] || skip "needs root (FERRYFS_DAEMON_USER is set)"

files="${FERRYFS_WALK_FILES:-100000}"
((files >= 1000 && files % 1000 == 0)) || die "FERRYFS_WALK_FILES=$files is not a multiple of 1000"
dirs=$((files / 1000))
limit=1024

# Empty files (one mknod each, the quickest to make), but for the three the guest reads, which
# hold their own path below the tree.
start=$SECONDS
last=$(printf 'd%03d/f0999' $((dirs - 1)))
python3 - "$share/tree" "$dirs" d000/f0000 d000/f0999 "$last" <<'EOF'
import os, stat, sys
top, dirs, read_back = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
for d in range(dirs):
    dn = os.path.join(top, "d%03d" % d)
    os.makedirs(dn)
    for f in range(1000):
        os.mknod(os.path.join(dn, "f%04d" % f), 0o644 | stat.S_IFREG)
for rel in read_back:
    with open(os.path.join(top, rel), "w") as fh:
        fh.write(rel + "\n")
EOF
say "made $files files in $dirs directories on the host in $((SECONDS - start)) s"

cat >"$share/walk.sh" <<EOF
cd /mnt/tree || exit 1
t0=\$(date +%s)
ls -lR . >/tmp/ls 2>/tmp/err
t1=\$(date +%s)
echo "WALK listed=\$(grep -c '^-' /tmp/ls) errors=\$(grep -c . /tmp/err) fd_errors=\$(grep -c 'Too many open files' /tmp/err) secs=\$((t1 - t0)) first=\$(head -1 /tmp/err)"
ok=0
for f in d000/f0000 d000/f0999 $last; do [ "\$(cat \$f)" = "\$f" ] && ok=\$((ok + 1)); done
echo "READ ok=\$ok"
EOF

start_daemon --log-level=info --rlimit-nofile=$limit
# The serving process's fd count, sampled while the guest walks (looked up each time: the
# namespace sandbox forks it after the socket listens); the highest lands in $tmp/fd-max.
(max=0
 while kill -0 "$daemon_pid" 2>/dev/null; do
     n=$(fd_count "$(serving_pid "$daemon_pid")" 2>/dev/null) || n=0
     ((n > max)) && max=$n && echo "$max" >"$tmp/fd-max"
     sleep 0.5
 done) &
sampler=$!
cleanup_cmds+=("kill $sampler 2>/dev/null || true")

start=$SECONDS
start_guest walk /mnt/walk.sh "" --timeout 900 --watch-pid "$daemon_pid"
guest_result walk WALK
walk=$guest_line
say "guest ($guest_stack stack, $((SECONDS - start)) s with its boot): $walk"

fd_errors=$(line_field fd_errors "$walk")
errors=$(line_field errors "$walk")
listed=$(line_field listed "$walk")
((fd_errors == 0)) || die "the guest saw EMFILE/ENFILE $fd_errors times: $walk"
((errors == 0)) || die "the guest's walk printed $errors errors: $walk"
((listed == files)) || die "the guest listed $listed of $files files: $walk"
grep -aq '^READ ok=3' <<<"$guest_log" || die "files read back wrong: $(grep -a '^READ' <<<"$guest_log")"
((guest_rc == 0)) || die "run-guest exit $guest_rc"

# The start log: the share's mount judged once, with handles.
n=$(grep -c -- "--inode-file-handles=prefer: file handles on " "$tmp/daemon.log" || true)
((n == 1)) || die "start log: $n lines naming file handles on the share's mount, not 1: $(grep -- --inode-file-handles "$tmp/daemon.log" || true)"
grep -- "--inode-file-handles" "$tmp/daemon.log" | grep -vq "file handles on " &&
    die "start log: a mount without file handles: $(grep -- --inode-file-handles "$tmp/daemon.log")"

wait_gone "$daemon_pid" 30 || die "ferryfsd still running after the guest powered off"
drc=0
wait "$daemon_pid" || drc=$?
((drc == 0)) || die "ferryfsd exited with $drc"
wait "$sampler" 2>/dev/null || true
fd_max=$(cat "$tmp/fd-max" 2>/dev/null || echo 0)
((fd_max > 0)) || die "no fd count of the serving process was sampled"
((fd_max <= limit / 2)) || die "the serving process held up to $fd_max fds (limit $limit)"

# The Rust virtiofsd's column, the same walk with --inode-file-handles=prefer (its default from
# 1.13.3 on; the cached 1.13.2 still defaults to never), on the current stack, where it is the
# daemon users run; one more guest boot and walk, in make check-long (FERRYFS_CHECK_LONG=1) as
# every reference column. Reported, not judged.
if [[ ${FERRYFS_CHECK_LONG:-} == 1 ]] && stack_rust_reference; then
    sock="$tmp/rs.sock"
    "$stack_virtiofsd_rs" --socket-path="$sock" --shared-dir="$share" --inode-file-handles=prefer \
        --rlimit-nofile=$limit >"$tmp/virtiofsd-rs.log" 2>&1 &
    rs_pid=$!
    cleanup_cmds+=("kill -KILL $rs_pid 2>/dev/null || true")
    wait_socket "$sock" "$rs_pid" || die "the Rust virtiofsd did not create $sock: $(tail -3 "$tmp/virtiofsd-rs.log")"
    rs_max=0
    start_guest walk-rs /mnt/walk.sh "" --timeout 900 --watch-pid "$rs_pid"
    while kill -0 "${guest_pids[-1]}" 2>/dev/null; do
        n=$(fd_count "$(serving_pid "$rs_pid")" 2>/dev/null) || n=0
        ((n > rs_max)) && rs_max=$n
        sleep 0.5
    done
    rs_walk=$(tr -d '\r' <"$tmp/console-walk-rs.log" | grep -a '^WALK' || echo "no WALK line")
    say "reference: the Rust virtiofsd ($("$stack_virtiofsd_rs" --version | head -1)): $rs_walk; at most $rs_max fds"
    kill "$rs_pid" 2>/dev/null || true
    wait "$rs_pid" 2>/dev/null || true
else
    say "no Rust virtiofsd column (make check-long adds it on the current stack)"
fi
say "PASS: $listed files stat'ed under --rlimit-nofile=$limit with the defaults, no EMFILE/ENFILE, the serving process held at most $fd_max fds"
