#!/usr/bin/env bash
# Guest e2e (make check): --request-timeout on the current stack (QEMU 10, Linux 6.12) over host storage that really hangs (a host FUSE mount whose daemon is stopped with SIGSTOP): the guest's stuck calls fail with ETIMEDOUT within about the deadline, as root and as a non-root user, the rest of the share keeps working, abandoned calls stop at the cap and show in the stats, and after SIGCONT nothing is lost and the hung subtree is served again.
#
# Layout: share/ (served by ferryfsd "dl" with --request-timeout=2, mounted on /dl in the guest)
# holds other, work/ and hung/, and hung/ is a host FUSE mount: a second ferryfsd --mount serving
# backing/. main (ferryfsd defaults) holds guest.sh and the markers by which guest and host take
# turns: the guest writes data into hung/ and fsyncs it, says ready-1; the host stops the FUSE
# daemon, says stopped; the guest meets the hang, fills the cap, says ready-2; the host reads the
# stats, tries a live migration (the source must refuse to save while calls are stuck, and the
# guest run on), sends SIGCONT, waits for every stuck call to return, says resumed; the guest
# reads its data back and writes more.
# Oracles: hard-coded expectations (the kernel's "Connection timed out" for each stuck call, its
# time against the deadline, the bytes written before the stop, "No such file or directory" for
# a name that never existed once the host answers again), the stats JSON's counts against the
# cap, and the backing files' bytes on the host.
#
# Usage: deadline-current-test.sh   Env: FERRYFSD (default build/ferryfsd)
#        FERRYFS_DEADLINE_HUNG_DIR and FERRYFS_DEADLINE_HUNG_PID: instead of a host FUSE mount,
#        hang this empty directory of other storage (bind-mounted on share/hung) by stopping that
#        process (tests/dfs/gluster-deadline-test.sh: a directory of a GlusterFS volume, its brick)
# Exit: 0 pass, 1 fail, 77 the current stack cannot be had here, not root, no /dev/fuse.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/lib.sh"
[[ $(id -u) == 0 ]] || skip "needs root (the storage that hangs is a mount it makes)"
[[ -c /dev/fuse ]] || skip "/dev/fuse missing"
sem_init_current deadline-current-test "$0" "$@"

t="$sem_tmp"
main="$t/main" share="$t/share" backing="${FERRYFS_DEADLINE_HUNG_DIR:-$t/backing}"
deadline=2 cap=16
mkdir -p "$main" "$share"/{hung,work} "$backing"
printf other >"$share/other"
chown -R 1000:1000 "$share" "$backing"
chmod -R u+rwX,go+rX "$main" "$share" "$backing"

# The storage that will hang: mounted before the share's daemon starts, so its sandbox (a
# recursive bind of the share) has it.
sem_umounts+=("$share/hung")
if [[ -n ${FERRYFS_DEADLINE_HUNG_DIR:-} ]]; then
    mount --bind "$backing" "$share/hung"
    hung_pid=$FERRYFS_DEADLINE_HUNG_PID
else
    "$sem_ferryfsd" --mount="$share/hung" --shared-dir="$backing" >"$t/hung.log" 2>&1 &
    hung_pid=$!
    for _ in $(seq 100); do mountpoint -q "$share/hung" && break; sleep 0.1; done
fi
mountpoint -q "$share/hung" || { sem_say "FAIL: the storage to hang is not mounted"; cat "$t/hung.log" 2>&1; exit 1; }
# A stopped daemon must not outlive the test, whatever happens.
# (Another storage's process is only resumed: its own test ends it.)
if [[ -n ${FERRYFS_DEADLINE_HUNG_DIR:-} ]]; then
    trap 'kill -CONT $hung_pid 2>/dev/null || true; sem_cleanup' EXIT
else
    trap 'kill -CONT $hung_pid 2>/dev/null || true; kill -TERM $hung_pid 2>/dev/null || true; sem_cleanup' EXIT
fi

sem_daemon main "$main"
sem_daemon dl "$share" --request-timeout="$deadline" --stats-socket="$t/dl.stats"
# The monitor, for a migration tried while calls are stuck.
sem_qemu_extra+=(-monitor "unix:$t/mon.sock,server=on,wait=off")
source "$sem_repo/tests/lib/vring.sh"
hmp() { vring_hmp "$t/mon.sock" "$@"; }

# stat_field NAME: a field of the dl daemon's request_timeout stats.
stat_field() {
    "$sem_ferryfsd" --stats="$t/dl.stats" --json 2>/dev/null |
        python3 -c "import json,sys; print(json.load(sys.stdin)['request_timeout']['$1'])" 2>/dev/null || echo none
}
# wait_marker NAME [SECONDS]: the guest wrote main/NAME (by default within 15 min: the guest
# boots under TCG).
wait_marker() {
    for _ in $(seq $((${2:-900} * 10))); do [[ -e "$main/$1" ]] && return 0; sleep 0.1; done
    return 1
}

# The host's turns, beside the guest run.
host_side() {
    wait_marker ready-1 || return 0
    kill -STOP "$hung_pid"
    touch "$main/stopped"
    # The guest's part under the hang takes about a minute. A daemon whose deadline never
    # fires would leave the guest stuck for good: the storage comes back after 4 minutes, so
    # that the run ends, failing, instead of hanging.
    wait_marker ready-2 240 || echo "the guest was still stuck 240 s after the stop" >"$t/watchdog"
    echo "$(stat_field stuck) $(stat_field timed_out) $(stat_field refused)" >"$t/at-cap"
    # A live migration now: the source must refuse to save and the guest run on.
    local st="" out
    out=$(hmp migrate -d '"exec:cat >/dev/null"' 2>&1) || true
    for _ in $(seq 240); do
        st=$(hmp info migrate | sed -n 's/^Migration status: *\([a-z-]*\).*/\1/p' | head -1)
        case $st in completed | failed | cancelled) break ;; esac
        sleep 0.25
    done
    echo "${st:-none} $out" >"$t/migrate"
    # Whatever happened, the guest must go on for the rest of the test.
    [[ $(hmp info status) == *running* ]] || hmp cont >/dev/null || true
    kill -CONT "$hung_pid"
    for _ in $(seq 300); do [[ $(stat_field stuck) == 0 ]] && break; sleep 0.1; done
    echo "$(stat_field stuck) $(stat_field timed_out) $(stat_field returned_late)" >"$t/drained"
    touch "$main/resumed"
}

{
    echo '#!/bin/sh'
    sem_mount_line
    cat <<GUEST
D=/dl H=/dl/hung DEADLINE=$deadline CAP=$cap
GUEST
    cat <<'GUEST'
run_as() { if [ "$1" = user ]; then (cd / && su -s /bin/sh -c "$2" guest 2>&1); else sh -c "$2" 2>&1; fi; }
# works NAME WHO CMD: CMD must succeed.
works() {
    out=$(run_as "$2" "$3"); rc=$?
    [ $rc -eq 0 ] && echo "CHECK $2-$1 PASS" || echo "CHECK $2-$1 FAIL rc $rc: $(echo $out | tr '\n' ' ')"
}
# fails NAME WHO MESSAGE CMD: CMD must fail with MESSAGE.
fails() {
    out=$(run_as "$2" "$4"); rc=$?
    case "$out" in
    *"$3"*) [ $rc -ne 0 ] && echo "CHECK $2-$1 PASS" || echo "CHECK $2-$1 FAIL rc 0: $out";;
    *) echo "CHECK $2-$1 FAIL rc $rc: $(echo $out | tr '\n' ' ')";;
    esac
}
# stuck NAME WHO CMD: CMD must fail with ETIMEDOUT, no sooner than the deadline and well before
# a hang would end (the calls a command makes may each wait for one deadline).
stuck() {
    start=$(date +%s)
    fails "$1" "$2" "timed out" "$3"
    took=$(( $(date +%s) - start ))
    if [ $took -ge $((DEADLINE - 1)) ] && [ $took -le $((DEADLINE * 4 + 10)) ]; then
        echo "CHECK $2-$1-time PASS"
    else
        echo "CHECK $2-$1-time FAIL took $took s for a deadline of $DEADLINE s"
    fi
}
wait_for() { i=0; while [ ! -e "/mnt/$1" ] && [ $i -lt 1800 ]; do sleep 0.5; i=$((i + 1)); done; [ -e "/mnt/$1" ]; }

# Before the hang: written and fsynced.
works write-before root "printf kept-root | dd of=$H/data-root conv=fsync 2>/dev/null"
works write-before user "printf kept-user | dd of=$H/data-user conv=fsync 2>/dev/null"
: >/mnt/ready-1
wait_for stopped || echo "CHECK root-host-stopped FAIL"

# The storage hangs: each call into it fails at the deadline, the rest of the share works.
stuck lookup-new root "stat $H/new-root"
stuck lookup-new user "stat $H/new-user"
stuck create user "echo x >$H/created-user"
stuck lookup-existing root "stat $H/data-root"
for who in root user; do
    works other-read $who "[ \"\$(cat $D/other)\" = other ]"
    works other-write $who "echo ok-$who >$D/work/f-$who && [ \"\$(cat $D/work/f-$who)\" = ok-$who ]"
    works other-list $who "ls $D/work | grep -q f-$who"
    works other-share $who "ls /mnt >/dev/null"
done
# More stuck calls than the cap: each still fails, and those past the cap at once.
i=0
while [ $i -lt $((CAP + 4)) ]; do
    (stat $H/cap-$i >/tmp/cap-$i 2>&1; echo "rc $?" >>/tmp/cap-$i) &
    i=$((i + 1))
done
wait
n=$(grep -l "timed out" /tmp/cap-* | wc -l)
[ "$n" -eq $((CAP + 4)) ] && echo "CHECK root-past-cap PASS" ||
    echo "CHECK root-past-cap FAIL $n of $((CAP + 4)): $(cat /tmp/cap-* | tr '\n' ' ')"
: >/mnt/ready-2
wait_for resumed || echo "CHECK root-host-resumed FAIL"

# The storage answers again: nothing was lost, and the subtree is served.
works read-after root "[ \"\$(cat $H/data-root)\" = kept-root ]"
works read-after user "[ \"\$(cat $H/data-user)\" = kept-user ]"
works write-after root "printf after-root | dd of=$H/after-root conv=fsync 2>/dev/null && [ \"\$(cat $H/after-root)\" = after-root ]"
works write-after user "printf after-user | dd of=$H/after-user conv=fsync 2>/dev/null && [ \"\$(cat $H/after-user)\" = after-user ]"
fails lookup-after root "No such file or directory" "stat $H/new-root"
works list-after root "[ \"\$(ls $H | tr '\n' ' ')\" = 'after-root after-user data-root data-user ' ]"
works other-after user "[ \"\$(cat $D/other)\" = other ]"
exit 0
GUEST
} >"$main/guest.sh"

host_side &
sem_boot_guest_sh 900 $!
# 2 writes, 4 stuck calls and their times, 4 other-share checks each as root and user, the cap,
# 7 after the resume.
sem_all_guest_checks 26
sem_host no-watchdog "$([[ ! -e $t/watchdog ]] && echo 1)" "$(cat "$t/watchdog" 2>/dev/null)"
read -r cap_stuck cap_timed cap_refused <"$t/at-cap" 2>/dev/null || cap_stuck=none
sem_host stats-at-cap "$([[ $cap_stuck == "$cap" && $cap_timed -ge $cap && $cap_refused -ge 1 ]] && echo 1)" \
    "stuck $cap_stuck (cap $cap), timed out ${cap_timed:-?}, refused ${cap_refused:-?}"
read -r dr_stuck dr_timed dr_late <"$t/drained" 2>/dev/null || dr_stuck=none
sem_host stuck-calls-returned "$([[ $dr_stuck == 0 && $dr_late == "$dr_timed" ]] && echo 1)" \
    "after SIGCONT: stuck $dr_stuck, timed out ${dr_timed:-?}, returned ${dr_late:-?}"
read -r mig_status mig_out <"$t/migrate" 2>/dev/null || mig_status=none
sem_host migration-refused-while-stuck "$([[ $mig_status == failed ]] &&
    grep -q 'request-timeout: [0-9]* host system call(s) that timed out have not returned yet' "$t/dl.log" && echo 1)" \
    "migration $mig_status ${mig_out:-}; $(grep -a -i 'state' "$t/dl.log" | tail -2)"
sem_host log-says "$(grep -q "got no answer from the host within $deadline s" "$t/dl.log" &&
    grep -q 'returned .* after its deadline' "$t/dl.log" && echo 1)" "$(grep -a request-timeout "$t/dl.log" | tail -3)"
sem_host backing-bytes "$([[ $(cat "$backing/data-root") == kept-root && $(cat "$backing/data-user") == kept-user &&
    $(cat "$backing/after-root") == after-root && $(stat -c %u "$backing/data-user") == 1000 ]] && echo 1)" \
    "data-root '$(cat "$backing/data-root" 2>&1)', data-user '$(cat "$backing/data-user" 2>&1)'"
sem_finish
