#!/usr/bin/env bash
# Fault test (make check): ferryfsd --rlimit-nofile=200 while the guest opens 1000 files and keeps
# them open. The guest must see EMFILE/ENFILE for the ones over the limit, the daemon must keep
# serving, and once the guest lets go (and drops its caches) everything works again. The listing
# is counted with a glob, not ls: ls stats every entry, and with one O_PATH fd per inode the guest
# cannot keep 1000 inodes cached under a limit of 200 (--inode-file-handles is the cure for that).
# Env: FERRYFS_SHARE_ROOT=DIR puts the share in a fresh subdirectory of DIR (e.g. a GlusterFS mount);
#      FERRYFS_SHARE_VIEW=DIR2, DIR seen through the volume's other mount: the file the guest writes
#      after the mass open is read there (share_from_env, tests/lib/guest.sh;
#      tests/dfs/gluster-faults-test.sh).
set -euo pipefail
# guest-lib.sh picks the stack (current, else stable) and makes $tmp, $share, $view and $sock.
name=rlimit-nofile
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/guest-lib.sh"

mkdir -p "$share/many"
for i in $(seq -w 0 999); do echo "$i" >"$share/many/f$i"; done
guest='cd /mnt/many; tail -f f* >/dev/null 2>/tmp/err & p=$!; n=0; last=-1; while [ "$n" != "$last" ]; do last=$n; sleep 3; n=$(ls /proc/$p/fd | wc -l); done; echo "MASS-OPEN open=$n errors=$(grep -c . /tmp/err) first=$(head -1 /tmp/err)"; kill $p; wait $p; cd /; echo 3 >/proc/sys/vm/drop_caches; echo after >/mnt/after && set -- /mnt/many/f* && echo "AFTER $(cat /mnt/after) $# $(cat /mnt/many/f999)"'
start_daemon --log-level=info --rlimit-nofile=200
start_guest w run "$guest" --timeout 900 --watch-pid "$daemon_pid"
guest_result w MASS-OPEN
line=$guest_line
say "$line"
open=$(line_field open "$line")
errors=$(line_field errors "$line")
((open < 1000 && errors > 0)) || die "expected failed opens: $line"
grep -qE 'Too many open files' <<<"$line" || die "errors are not EMFILE/ENFILE: $line"
grep -aq '^AFTER after 1000 999' <<<"$guest_log" || die "share unusable after the mass open: $(grep -a '^AFTER' <<<"$guest_log")"
((guest_rc == 0)) || die "run-guest exit $guest_rc"
[[ "$(cat "$view/after")" == after ]] || die "the guest's file written after the mass open is not on the host"
kill -0 "$daemon_pid" 2>/dev/null && die "ferryfsd still running after the guest powered off"
drc=0
wait "$daemon_pid" || drc=$?
((drc == 0)) || die "ferryfsd exited with $drc"
say "PASS: limit 200: $open fds held by the guest's tail, $errors opens refused, share works afterwards"
