#!/usr/bin/env bash
# make check test: ferryfsd with num-request-queues=1,2,4 serving a 2-vCPU Linux 6.12 guest (current stack) under parallel fio, dd/cat, create/rename/unlink and appends; make check-long adds the Rust virtiofsd beside it.
#
# One boot, one device per daemon (tags q1, q2, q4: ferryfsd --cache=never with 1, 2 and 4 request
# queues; rs1: the Rust virtiofsd with 1 queue, a reference column). On each share the guest runs,
# four jobs at a time: fio randwrite with crc32c verify and fio direct sequential writes 16 deep
# with crc32c verify (if the guest has fio; ferryfsd writes those as runs), dd of tmpfs files
# then cat back through md5sum, create+rename(+unlink every other) in one directory, and appends of
# whole lines to one file. Oracles: the guest's tmpfs (the same directory workload run there, the
# md5 of the source files) and the host's view of each share afterwards. A second boot asks the Rust
# virtiofsd for 2 queues: it refuses (recorded, never a failure). rs1 and that boot only with
# FERRYFS_CHECK_LONG=1 (make check-long).
#
# Each ferryfsd runs with --queue-cpus (lists within CPUs 0 and 1; q4 names fewer CPUs than
# queues): each queue thread's Cpus_allowed_list in /proc agrees with the stats, the log and the
# list, and the hiprio and helper threads are on the whole list.
# Checked for each ferryfsd share: every request queue the guest's driver made carries requests
# (`ferryfsd --stats=SOCK --json`, queues 1..N), the driver made min(N, vCPUs) of them (6.12 caps
# request queues at the CPU count), RENAME and UNLINK counts equal what the guest issued (no request
# lost or repeated), data, names and lines intact in the guest and on the host, the daemon exits 0.
#
# Usage: multiqueue-test.sh [PATH_TO_FERRYFSD]
# Env:   FERRYFS_MQ_SMP=2 guest vCPUs; FERRYFS_E2E_TIMEOUT=600 guest timeout (s);
#        FERRYFS_E2E_KEEP=1 keep the tmp dir; FERRYFS_CACHE (stack-lib.sh);
#        FERRYFS_DAEMON_USER=auto: every ferryfsd runs as a user the test makes (tests/lib/unpriv.sh;
#        checked in /proc), no Rust virtiofsd columns
# Exit:  0 every ferryfsd check passed; 1 one failed; 77 the current stack or jq is missing.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# skip, need_cmd, the results table, wait_socket, expect_daemon_exit and FERRYFS_DAEMON_USER's
# functions (unpriv.sh).
source "$repo/tests/lib/common.sh"
ferryfsd="${1:-${FERRYFSD:-$repo/build/ferryfsd}}"
guest_timeout="${FERRYFS_E2E_TIMEOUT:-600}"
smp="${FERRYFS_MQ_SMP:-2}"
source "$here/stack-lib.sh"

if ! stack_prepare current; then
    say "SKIP: the current stack (QEMU 10, Linux 6.12) could not be fetched (see above)"
    exit 77
fi
# Before FERRYFS_STACK changes: a FERRYFS_GUEST_DIR set for the stable stack is not this one's.
FERRYFS_GUEST_DIR="$(stack_guest_dir current)"
export FERRYFS_GUEST_DIR FERRYFS_STACK=current
guest_dir="$FERRYFS_GUEST_DIR"
command -v jq >/dev/null || { say "SKIP: jq not installed (run scripts/deps.sh)"; exit 77; }
[[ -x "$ferryfsd" ]] || { say "FAIL: $ferryfsd not built"; exit 1; }
"$here/build-guest.sh" "$guest_dir" >/dev/null || { say "SKIP: could not build the current guest"; exit 77; }
initrd="$guest_dir/initrd-fio.img"
[[ -f "$initrd" ]] || { initrd="$guest_dir/initrd.img"; say "note: no fio in the guest image, dd/cat only"; }

make_tmp
# Every daemon and guest started here is killed at exit (cleanup_pids).
cleanup_cmds+=('unpriv_cleanup')
# FERRYFS_DAEMON_USER=auto: the user owns $tmp (the sockets) and each ferryfsd's share.
unpriv_setup
unpriv_own "$tmp"
results_table

# The main share holds the guest's script and its reports; it is not under test.
main="$tmp/main"
mkdir -p "$main/out"
unpriv_own "$main"
"${unpriv_prefix[@]}" "$ferryfsd" --socket-path="$tmp/main.sock" --shared-dir="$main" >"$tmp/main.log" 2>&1 &
main_pid=$!
cleanup_pids+=("$main_pid")
wait_socket "$tmp/main.sock" "$main_pid" || { fail main_daemon "$(tail -2 "$tmp/main.log")"; exit 1; }
! unpriv_active || pass_if main-daemon_as_user "$(unpriv_runs_as_user "$main_pid" && echo 1)" "uids not $unpriv_user's"

# Devices under test: tag, daemon, queues.
tags=() qemu_dev=()
declare -A queues daemon dpid
declare -A qcpus
add_device() {  # TAG DAEMON QUEUES [QUEUE_CPUS]
    local tag=$1 d=$2 n=$3 sock="$tmp/$1.sock" share="$tmp/$1"
    local place=(${4:+--queue-cpus="$4"})
    mkdir -p "$share"
    if [[ $d == ferryfsd ]]; then
        unpriv_own "$share"
        qcpus[$tag]=${4:-}
        "${unpriv_prefix[@]}" "$ferryfsd" --socket-path="$sock" --shared-dir="$share" --cache=never \
            --stats-socket="$tmp/$tag.stats" "${place[@]}" >"$tmp/$tag.log" 2>&1 &
    else
        "$here/virtiofsd-rs" --socket-path="$sock" --shared-dir="$share" --cache=never \
            >"$tmp/$tag.log" 2>&1 &
    fi
    dpid[$tag]=$!
    cleanup_pids+=("${dpid[$tag]}")
    if ! wait_socket "$sock" "${dpid[$tag]}"; then
        fail "$tag-daemon_start" "$(tail -2 "$tmp/$tag.log")"
        return
    fi
    [[ $d != ferryfsd ]] || ! unpriv_active ||
        pass_if "$tag-daemon_as_user" "$(unpriv_runs_as_user "${dpid[$tag]}" && echo 1)" "uids not $unpriv_user's"
    tags+=("$tag") queues[$tag]=$n daemon[$tag]=$d
    qemu_dev+=(-chardev "socket,id=c_$tag,path=$sock"
               -device "vhost-user-fs-pci,chardev=c_$tag,tag=$tag,num-request-queues=$n")
}
# --queue-cpus on every share, within CPUs 0 and 1 (all a small machine has): q1 on CPU 0; q2's
# list in reverse order (request thread 1 must take CPU 1, the list's first); q4 names one CPU for
# four queues, and its guest run must keep working.
if (($(nproc) >= 2)); then list_q1=0 list_q2=1,0 list_q4=1; else list_q1=0 list_q2=0 list_q4=0; fi
add_device q1 ferryfsd 1 "$list_q1"
add_device q2 ferryfsd 2 "$list_q2"
add_device q4 ferryfsd 4 "$list_q4"
# The reference columns (rs1, and rs2's second boot) are the root run's: a run about ferryfsd as
# an ordinary user leaves them out, which keeps it near a minute, and so does make check; make
# check-long (FERRYFS_CHECK_LONG=1) runs them.
reference=0
if unpriv_active; then
    say "no reference columns: this run is about ferryfsd as $unpriv_user"
elif [[ ${FERRYFS_CHECK_LONG:-} != 1 ]]; then
    say "no reference columns in make check (make check-long, FERRYFS_CHECK_LONG=1, adds them)"
elif "$here/virtiofsd-rs" --version >/dev/null 2>&1; then
    reference=1
    add_device rs1 virtiofsd-rs 1
else
    say "note: the Rust virtiofsd is not cached (scripts/stack.sh fetch), no rs1 column"
fi

# Four jobs of each kind per share; the numbers the host checks follow from these.
jobs=4 dir_iters=60 app_lines=100
cat >"$main/guest.sh" <<EOF
#!/bin/sh
tags="${tags[*]}" jobs=$jobs dir_iters=$dir_iters app_lines=$app_lines
EOF
cat >>"$main/guest.sh" <<'EOF'
out=/mnt/out
check() { if [ "$2" = 0 ]; then echo "CHECK $1 PASS"; else echo "CHECK $1 FAIL $3"; fi; }
js=$(seq 1 $jobs)
# Source data on tmpfs, and its md5 for the host.
for j in $js; do dd if=/dev/urandom of=/tmp/src.$j bs=65536 count=16 2>/dev/null; done
(cd /tmp && for j in $js; do md5sum src.$j; done) >$out/src.md5
# create, rename, unlink every other; the listing "name content" is what must be left.
dirwork() {  # DIR J
    i=0
    while [ $i -lt $dir_iters ]; do
        echo "$2 $i" >"$1/c.$2.$i" && mv "$1/c.$2.$i" "$1/r.$2.$i" || echo "dirwork: $1 $2 $i failed"
        [ $((i % 2)) = 1 ] && { rm "$1/r.$2.$i" || echo "dirwork: rm $1 $2 $i failed"; }
        i=$((i + 1))
    done
}
listing() { (cd "$1" && for f in $(ls | sort); do echo "$f $(cat "$f")"; done); }
mkdir /tmp/dirref
for j in $js; do dirwork /tmp/dirref $j & done
wait
listing /tmp/dirref >$out/dir.ref
appender() {  # FILE J: one write(2) per line, O_APPEND
    i=0
    while [ $i -lt $app_lines ]; do echo "w$2 $i" >>"$1"; i=$((i + 1)); done
}

for t in $tags; do
    mkdir -p /$t
    if ! mount -t virtiofs $t /$t; then echo "CHECK $t-mount FAIL"; continue; fi
    # The request virtqueues the driver made for this device (virtioN-requests.M interrupts).
    v=""
    for d in /sys/fs/virtiofs/*; do
        [ "$(cat $d/tag 2>/dev/null)" = "$t" ] && v=$(basename "$(readlink $d/device)")
    done
    if [ -n "$v" ]; then echo "VQS $t $(grep -c " $v-requests\." /proc/interrupts)"; else echo "VQS $t ?"; fi
    if command -v fio >/dev/null; then
        mkdir /$t/fio
        fio --name=mq --directory=/$t/fio --numjobs=$jobs --size=1M --bs=4k --rw=randwrite \
            --ioengine=psync --verify=crc32c --verify_fatal=1 --group_reporting >/tmp/fio.$t 2>&1
        rc=$?
        check $t-fio $rc "$(grep -i -m1 -E 'verify|err' /tmp/fio.$t)"
        [ $rc = 0 ] || tail -5 /tmp/fio.$t
        # Direct sequential writes 16 deep: adjacent WRITEs wait on the
        # rings together, which ferryfsd writes as runs (one pwritev).
        fio --name=seq --directory=/$t/fio --numjobs=$jobs --size=2M --bs=4k --rw=write \
            --ioengine=libaio --iodepth=16 --direct=1 --verify=crc32c --verify_fatal=1 \
            --group_reporting >/tmp/fio-seq.$t 2>&1
        rc=$?
        check $t-fio-seq-direct $rc "$(grep -i -m1 -E 'verify|err' /tmp/fio-seq.$t)"
        [ $rc = 0 ] || tail -5 /tmp/fio-seq.$t
    fi
    mkdir /$t/dd
    for j in $js; do dd if=/tmp/src.$j of=/$t/dd/f.$j bs=4096 2>/dev/null & done
    wait
    for j in $js; do (cat /$t/dd/f.$j | md5sum | cut -d' ' -f1 >/tmp/sum.$t.$j) & done
    wait
    bad=""
    for j in $js; do
        [ "$(cat /tmp/sum.$t.$j)" = "$(md5sum </tmp/src.$j | cut -d' ' -f1)" ] || bad="$bad f.$j"
    done
    [ -z "$bad" ]; check $t-dd-cat $? "differ:$bad"
    # Whole-file reads of 1 MiB: large READs, which start ferryfsd's read-split helper thread
    # (its CPUs are checked with --queue-cpus).
    for j in $js; do dd if=/$t/dd/f.$j of=/dev/null bs=1M 2>/dev/null; done
    mkdir /$t/dir
    for j in $js; do dirwork /$t/dir $j & done
    wait
    listing /$t/dir >/tmp/dir.$t
    cmp -s /tmp/dir.$t $out/dir.ref; check $t-dir-vs-tmpfs $? "$(diff $out/dir.ref /tmp/dir.$t | head -3 | tr '\n' ' ')"
    for j in $js; do appender /$t/app $j & done
    wait
    bad=""
    for j in $js; do
        grep "^w$j " /$t/app | cut -d' ' -f2 >/tmp/app.$t.$j
        seq 0 $((app_lines - 1)) | cmp -s - /tmp/app.$t.$j || bad="$bad w$j"
    done
    [ -z "$bad" ] && [ "$(wc -l </$t/app)" = $((jobs * app_lines)) ]
    check $t-appends $? "$(wc -l </$t/app) lines, out of order or missing:$bad"
done
echo FERRYFS-MQ-READY
while [ ! -e /mnt/mq-done ]; do sleep 0.2; done
EOF
chmod 755 "$main/guest.sh"

say "booting a $smp-vCPU $(cat "$guest_dir/kernel-version") guest: ${tags[*]} (timeout ${guest_timeout}s)"
"$here/run-guest.sh" --guest "$guest_dir" --initrd "$initrd" --sock "$tmp/main.sock" \
    --cmd /mnt/guest.sh --log "$tmp/console.log" --quiet --timeout "$guest_timeout" --smp "$smp" \
    --watch-pid "$main_pid" -- "${qemu_dev[@]}" &
guest_pid=$!
cleanup_pids+=("$guest_pid")
ready=0
for ((i = 0; i < guest_timeout * 5; i++)); do
    [[ -f "$tmp/console.log" ]] && grep -aq '^FERRYFS-MQ-READY' <(tr -d '\r' <"$tmp/console.log") &&
        { ready=1; break; }
    kill -0 "$guest_pid" 2>/dev/null || break
    sleep 0.2
done
pass_if guest_workloads_done "$ready" "no FERRYFS-MQ-READY on the console"

# While the guest waits: each ferryfsd's per-queue counts.
for t in "${tags[@]}"; do
    [[ ${daemon[$t]} == ferryfsd ]] || continue
    if ((ready)) && "$ferryfsd" --stats="$tmp/$t.stats" --json >"$tmp/$t.json" 2>"$tmp/$t.json.err" &&
        jq -e . "$tmp/$t.json" >/dev/null 2>&1; then
        pass "$t-stats"
    else
        fail "$t-stats" "no JSON from --stats: $(head -c 100 "$tmp/$t.json.err" 2>/dev/null)"
        rm -f "$tmp/$t.json"
    fi
done
# --queue-cpus: each queue thread's CPUs as the kernel has them (Cpus_allowed_list of its task in
# /proc, found by the thread id the stats give: NSpid's last field, the id inside the sandbox's pid
# namespace) against what the stats and the log say, and against the list: request thread k
# (k >= 1) on the list's ((k-1) mod length)-th CPU, the hiprio thread and the helpers
# (ferry-readsplit, which the guest's large reads start, and ferry-offload and ferry-blocking
# threads if any started) on the whole list.
# cpu_range LIST: the list as the kernel writes a set ("1,0" -> "0-1").
cpu_range() {
    tr ',' '\n' <<<"$1" | awk -F- '{ for (c = $1; c <= ($2 == "" ? $1 : $2); c++) print c }' | sort -nu |
        awk 'NR == 1 { s = p = $1; next } $1 == p + 1 { p = $1; next }
             { printf "%s%s,", s, (s == p ? "" : "-" p); s = p = $1 }
             END { if (NR) printf "%s%s\n", s, (s == p ? "" : "-" p) }'
}
# The daemon's tasks: "nspid name cpus" a line, over the daemon and its sandboxed child.
daemon_tasks() {  # PID
    local p t
    for p in "$1" $(pgrep -P "$1" || true); do
        for t in /proc/$p/task/*; do
            awk '/^Name:/ { n = $2 } /^NSpid:/ { id = $NF } /^Cpus_allowed_list:/ { c = $2 }
                 END { print id, n, c }' "$t/status" 2>/dev/null || true
        done
    done
}
for t in "${tags[@]}"; do
    [[ ${daemon[$t]} == ferryfsd && -f "$tmp/$t.json" ]] || continue
    list=${qcpus[$t]} whole="$(cpu_range "${qcpus[$t]}")" bad="" seen=""
    IFS=, read -r -a cpu_at <<<"$list"
    tasks="$(daemon_tasks "${dpid[$t]}")"
    while read -r worker tid cpus queues; do
        if ((worker == 0)); then want=$whole; else want=${cpu_at[(worker - 1) % ${#cpu_at[@]}]}; fi
        [[ $tid != 0 ]] || continue          # not started: no queue of it was
        kernel="$(awk -v id="$tid" '$1 == id { print $3 }' <<<"$tasks")"
        name="$(awk -v id="$tid" '$1 == id { print $2 }' <<<"$tasks")"
        [[ $cpus == "$want" ]] || bad+=" stats:thread$worker=$cpus,want:$want"
        [[ $kernel == "$want" ]] || bad+=" proc:thread$worker($name)=${kernel:-none},want:$want"
        # The log names the thread and CPU of each queue the driver started.
        for q in ${queues//,/ }; do
            grep -q "queue $q: served by thread $tid (queue thread $worker) on CPU $want\$" "$tmp/$t.log" ||
                bad+=" log:queue$q"
        done
        seen+=" $worker:$tid@$cpus[$queues]"
    done < <(jq -r '.threads[] | "\(.worker) \(.thread_id) \(.cpus) \(.queues | join(","))"' "$tmp/$t.json")
    # Every request queue the driver made has a thread that says so.
    served="$(jq '[.threads[] | select(.worker >= 1) | .queues[]] | length' "$tmp/$t.json")"
    want_q=$((${queues[$t]} < smp ? ${queues[$t]} : smp))
    ((served == want_q)) || bad+=" served-queues=$served,want:$want_q"
    helpers="$(awk '$2 ~ /^ferry-(readsplit|offload|blocking)$/' <<<"$tasks")"
    # The guest's 1 MiB reads started the read-split helper (a daemon with 2 CPUs or more has one).
    (($(nproc) < 2)) || grep -q ' ferry-readsplit ' <<<"$tasks" || bad+=" no-readsplit-helper"
    while read -r _ name cpus; do
        [[ -z $name || $cpus == "$whole" ]] || bad+=" proc:$name=$cpus,want:$whole"
    done <<<"$helpers"
    pass_if "$t-queue_cpus=$list" "$([[ -z $bad ]] && echo 1)" "$bad (threads:$seen)"
    say "$t --queue-cpus=$list: threads (worker:tid@cpus[queues])$seen; $(grep -c . <<<"$helpers" || true) helper(s)"
done
touch "$main/mq-done"
grc=0
wait "$guest_pid" || grc=$?
pass_if guest_finished "$((grc == 0))" "run-guest exit $grc"
if ((!ready)); then
    # For a run that stalled where nobody can look afterwards (CI): the guest's last words and
    # the main share's daemon's exit statistics, whose calls say whether its replies were
    # signalled (it exits once QEMU has gone).
    wait_gone "$main_pid" 5 || true
    say "stalled: the console's last lines"
    tr -d '\r' <"$tmp/console.log" | tail -n 15 | sed 's/^/  console: /'
    say "stalled: the main share's ferryfsd log"
    tail -n 15 "$tmp/main.log" | sed 's/^/  main: /'
fi
console="$(tr -d '\r' <"$tmp/console.log")"
# A reply for a request the driver does not know, or a reply twice, shows up in the guest's log.
bad_kernel="$(grep -a -E 'WARNING:|BUG:|Oops|virtio_fs.*(error|fail|unknown)|fuse:.*(unknown|bad)' <<<"$console" | head -3 || true)"
pass_if guest_kernel_quiet "$([[ -z "$bad_kernel" ]] && echo 1)" "$bad_kernel"

# Host side: the md5s of the sources, the listing and lines each share must hold.
listing() { (cd "$1" && for f in $(ls | LC_ALL=C sort); do echo "$f $(cat "$f")"; done); }
declare -A row
for t in "${tags[@]}"; do
    share="$tmp/$t" n=${queues[$t]} r="" ok=1
    vqs="$(grep -a "^VQS $t " <<<"$console" | awk '{print $3}' || true)"
    # Guest-side checks.
    gfail="$(grep -a -E "^CHECK $t-[^ ]+ FAIL" <<<"$console" || true)"
    gpass="$(grep -a -cE "^CHECK $t-[^ ]+ PASS" <<<"$console" || true)"
    fio_r="$(grep -a "^CHECK $t-fio " <<<"$console" | awk '{print $3}' || true)"
    fio_seq="$(grep -a "^CHECK $t-fio-seq-direct " <<<"$console" | awk '{print $3}' || true)"
    # Host-side checks of the data the guest left.
    hbad=""
    if [[ -f "$main/out/src.md5" ]]; then
        (cd "$share/dd" 2>/dev/null && sed 's/ src\./ f./' "$main/out/src.md5" | md5sum -c --quiet >/dev/null 2>&1) ||
            hbad+=" dd-files"
    fi
    [[ -f "$main/out/dir.ref" && -d "$share/dir" ]] && cmp -s <(listing "$share/dir") <(LC_ALL=C sort "$main/out/dir.ref") ||
        hbad+=" dir-listing"
    lines="$(wc -l <"$share/app" 2>/dev/null || echo 0)"
    for ((j = 1; j <= jobs; j++)); do
        cmp -s <(seq 0 $((app_lines - 1))) <(grep "^w$j " "$share/app" 2>/dev/null | cut -d' ' -f2) ||
            { hbad+=" app-w$j"; break; }
    done
    ((lines == jobs * app_lines)) || hbad+=" app-lines=$lines"
    active="-"
    if [[ ${daemon[$t]} == ferryfsd ]]; then
        # Guest checks and host checks fail the test for ferryfsd's shares.
        [[ -z "$gfail" && $gpass -ge 3 ]] || { ok=0; r+=" guest:$(head -1 <<<"$gfail" | cut -c1-80)"; }
        pass_if "$t-guest_checks" "$([[ -z "$gfail" && $gpass -ge 3 ]] && echo 1)" "$gfail"
        pass_if "$t-host_files" "$([[ -z "$hbad" ]] && echo 1)" "$hbad"
        [[ -z "$hbad" ]] || { ok=0; r+=" host:$hbad"; }
        if [[ -f "$tmp/$t.json" ]]; then
            active="$(jq '[.queues[] | select(.index >= 1 and .requests > 0)] | length' "$tmp/$t.json")"
            perq="$(jq -r '[.queues[] | select(.index >= 1) | "\(.index):\(.requests)"] | join(" ")' "$tmp/$t.json")"
            want=$((n < smp ? n : smp))
            pass_if "$t-driver_made_min(N,vCPUs)_queues" "$([[ "$vqs" == "$want" ]] && echo 1)" \
                "guest reports $vqs request queues, want $want"
            # Every queue the driver made carries requests, and none beyond them.
            pass_if "$t-every_queue_carries_requests" "$([[ "$active" == "$want" ]] &&
                jq -e --argjson w "$want" '[.queues[] | select(.index > $w and .requests > 0)] | length == 0' \
                    "$tmp/$t.json" >/dev/null && echo 1)" "queues 1..$want expected busy, got: $perq"
            [[ "$active" == "$want" ]] || { ok=0; r+=" queues:$perq"; }
            # One RENAME per mv and one UNLINK per rm: none lost, none served twice.
            cnt() { jq -r --arg op "$1" '[.ops[] | select(.op == $op) | .count] | add // 0' "$tmp/$t.json"; }
            renames="$(cnt RENAME)" unlinks="$(cnt UNLINK)"
            pass_if "$t-rename_count" "$((renames == jobs * dir_iters))" "RENAME $renames, guest issued $((jobs * dir_iters))"
            pass_if "$t-unlink_count" "$((unlinks == jobs * dir_iters / 2))" "UNLINK $unlinks, guest issued $((jobs * dir_iters / 2))"
            ((renames == jobs * dir_iters && unlinks == jobs * dir_iters / 2)) || { ok=0; r+=" RENAME=$renames UNLINK=$unlinks"; }
            active="$active ($perq) runs $(jq -r '.write_runs' "$tmp/$t.json")"
        else
            ok=0
        fi
    else
        # The reference column is reported, not judged.
        [[ -z "$gfail" && -z "$hbad" ]] || { ok=0; r+=" ${gfail:+guest:$(head -1 <<<"$gfail" | cut -c1-60)}${hbad:+ host:$hbad}"; }
    fi
    row[$t]="$(printf '%-13s %-7s %-10s %-9s %-26s %s' "${daemon[$t]}" "$n" "${vqs:-?}" "${fio_r:--}/${fio_seq:--}" "$active" \
        "$( ((ok)) && echo ok || echo "FAILED:$r")")"
done

# ferryfsd must exit 0 once QEMU is gone (the main share's too); the Rust virtiofsd's exit is
# not judged.
for t in "${tags[@]}"; do
    p=${dpid[$t]}
    if [[ ${daemon[$t]} == ferryfsd ]]; then
        expect_daemon_exit "$p" "$t-daemon_exit" 10 && pass "$t-daemon_exit"
    else
        wait_gone "$p" 10 || kill -KILL "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    fi
done
expect_daemon_exit "$main_pid" main-daemon_exit 10 && pass main-daemon_exit

# Side by side: the Rust virtiofsd asked for 2 request queues.
rs2="not run (Rust virtiofsd not cached, ferryfsd as an ordinary user, or not make check-long)"
if ((reference)); then
    mkdir -p "$tmp/rs2"
    "$here/virtiofsd-rs" --socket-path="$tmp/rs2.sock" --shared-dir="$tmp/rs2" --cache=never \
        >"$tmp/rs2.log" 2>&1 &
    rpid=$!
    cleanup_pids+=("$rpid")
    if wait_socket "$tmp/rs2.sock" "$rpid"; then
        qrc=0
        "$here/run-guest.sh" --guest "$guest_dir" --sock "$tmp/rs2.sock" --tag rs2 --cmd demo \
            --log "$tmp/console-rs2.log" --quiet --timeout 90 --smp "$smp" --watch-pid "$rpid" \
            -- -global vhost-user-fs-device.num-request-queues=2 >/dev/null 2>&1 || qrc=$?
        # Measured both ways: QEMU gives up setting up the rings at start (before the guest boots),
        # or the virtiofsd exits during the guest's probe and --watch-pid stops QEMU (exit 4).
        qmsg="$(tr -d '\r' <"$tmp/console-rs2.log" | grep -a -m1 -oE 'vhost[^:]*failed: [^(]*[^( ]|Failed to initialize virtqueue [0-9]+' || true)"
        kill -TERM "$rpid" 2>/dev/null || true
        wait "$rpid" 2>/dev/null || true
        rerr="$(grep -a -m1 -oE 'HandleRequest\([A-Za-z]*\)' "$tmp/rs2.log" || true)"
        if ((qrc == 0)); then
            rs2="served (the guest ran demo): the refusal measured on 1.13.2 is gone"
        else
            rs2="refused: run-guest exit $qrc; QEMU: ${qmsg:-?}; virtiofsd: ${rerr:-no HandleRequest error logged}"
        fi
    else
        rs2="daemon did not start: $(tail -1 "$tmp/rs2.log")"
    fi
fi

echo
printf '%-5s %-13s %-7s %-10s %-9s %-26s %s\n' tag daemon queues guest-vqs fio/seq "busy-queues (queue:reqs)" result
for t in "${tags[@]}"; do printf '%-5s %s\n' "$t" "${row[$t]}"; done
printf '%-5s %-13s %-7s %s\n' rs2 virtiofsd-rs 2 "$rs2"
results_report 44
