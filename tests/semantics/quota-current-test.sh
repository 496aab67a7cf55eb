#!/usr/bin/env bash
# Guest e2e (make check): --quota-bytes and --quota-inodes on the current stack (QEMU 10, Linux 6.12): df shows the quota, writing past it fails with "Disk quota exceeded" and leaves the file with exactly the acknowledged bytes, creating past --quota-inodes fails, room comes back after a removal, a file the host adds counts, and a restarted daemon measures the same usage; in the guest as root and as a non-root user.
#
# Daemons (one boot): main (ferryfsd defaults, holds guest.sh), q (ferryfsd --quota-bytes=8M
# --quota-inodes=64 on a tree that already holds a file and a file with two names). While the
# guest runs, the host adds a file under q when the guest asks for it; after the boot a second
# ferryfsd with the same options is started on q and asked for its stats (no guest needed).
# Oracles: the limits as given (8 MiB, 64 inodes) for df's totals; dd's own count of the bytes
# it was told were written for the file's size, and the file read back all zeros; df's free
# figures before a fill and after its removal; the host file's st_blocks for what its addition
# must take; the tree's own blocks and inodes (find, a file with several names once) for the
# guest's last df and for the restarted daemon's stats.
#
# Usage: quota-current-test.sh   Env: FERRYFSD (default build/ferryfsd)
# Exit: 0 pass, 1 fail, 77 the current stack cannot be had here.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/lib.sh"
sem_init_current quota-current-test "$0" "$@"

t="$sem_tmp"
main="$t/main" q="$t/q"
limit_bytes=$((8 * 1024 * 1024)) limit_inodes=64
mkdir -p "$main" "$q/pre"
chmod 755 "$main" "$q"
head -c $((1024 * 1024)) /dev/urandom >"$q/pre/old"
printf linked >"$q/pre/linked"
ln "$q/pre/linked" "$q/pre/linked2"
chown -R 1000:1000 "$q"
quota_opts=(--quota-bytes=8M --quota-inodes=$limit_inodes)

# The tree's usage as the quota counts it: allocated bytes, then inodes.
tree_usage() {
    find "$q" -printf '%D:%i %b\n' | sort -u |
        awk '{ b += $2 * 512; n++ } END { print b, n }'
}

sem_daemon main "$main"
sem_daemon q "$q" "${quota_opts[@]}"

# The host's side of the guest's request: a file added under the share while it runs.
(
    for _ in $(seq 1200); do [[ -e $q/host-please ]] && break; sleep 0.5; done
    head -c $((2 * 1024 * 1024)) /dev/zero >"$q/host-added"
    sync "$q/host-added"
    : >"$q/host-done"
) &
host_helper=$!

{
    echo '#!/bin/sh'
    sem_mount_line
    cat <<GUEST
Q=/q LIMIT=$limit_bytes ILIMIT=$limit_inodes
GUEST
    cat <<'GUEST'
# as WHO CMD: CMD (a shell line) run by root or by the guest user; its output in $out, status $rc.
as() {
    if [ "$1" = user ]; then out=$(cd / && su -s /bin/sh -c "$2" guest 2>&1); rc=$?
    else out=$(sh -c "$2" 2>&1); rc=$?; fi
}
check() { if [ "$2" = 1 ]; then echo "CHECK $1 PASS"; else echo "CHECK $1 FAIL $3"; fi; }
# The bytes dd says it wrote, from its "N+P records out" (P: short writes) and block size BS;
# empty when a record was short, whose bytes dd does not say.
dd_wrote() { echo "$out" | sed -n "s/^\([0-9][0-9]*\)+0 records out.*/\1/p" | { read n && echo $((n * $1)); }; }
# df's figures: total blocks, block size, free blocks, total inodes, free inodes.
figures() { stat -f -c '%b %S %f %c %d' $Q; }
df -k $Q; df -i $Q 2>/dev/null || true
set -- $(figures)
check df-total "$([ $(($1 * $2)) -eq $LIMIT ] && echo 1)" "df shows $(($1 * $2)) bytes, not $LIMIT"
check df-inodes "$([ "$4" -eq $ILIMIT ] && echo 1)" "df -i shows $4 inodes, not $ILIMIT"
for who in root user; do
    set -- $(figures); bs=$2 free0=$3 ifree0=$5
    # Past the quota: dd says what it was told was written; the file holds exactly that.
    as $who "dd if=/dev/zero of=$Q/fill-$who bs=65536 count=1000"
    copied=$(dd_wrote 65536)
    check $who-write-refused "$([ $rc -ne 0 ] && case "$out" in *"Disk quota exceeded"*) echo 1;; esac)" \
        "rc $rc: $(echo $out | tr '\n' ' ')"
    size=$(stat -c %s $Q/fill-$who)
    echo "INFO $who: dd wrote '$copied' bytes before EDQUOT; the file has $size"
    check $who-size-acknowledged "$([ -n "$copied" ] && [ "$copied" -gt 0 ] && [ "$size" = "$copied" ] && echo 1)" \
        "file size $size, dd copied '$copied'"
    check $who-content "$([ "$(tr -d '\000' <$Q/fill-$who | wc -c)" -eq 0 ] && echo 1)" "not all zeros"
    # The last blocks, one at a time, to the same end.
    as $who "dd if=/dev/zero of=$Q/fill-$who bs=4096 count=64 seek=$((size / 4096)) conv=notrunc"
    copied=$(dd_wrote 4096)
    size2=$(stat -c %s $Q/fill-$who)
    check $who-last-blocks "$([ $rc -ne 0 ] && [ -n "$copied" ] && [ "$size2" = $((size + copied)) ] && echo 1)" \
        "rc $rc: size $size then $size2, dd copied '$copied'"
    set -- $(figures)
    check $who-df-full "$([ "$3" = 0 ] && echo 1)" "$3 blocks still free after the fill"
    as $who "mkdir $Q/dir-$who"
    check $who-mkdir-full "$([ $rc -ne 0 ] && [ ! -e $Q/dir-$who ] && case "$out" in *"Disk quota exceeded"*) echo 1;; esac)" "rc $rc: $out"
    # Removed, its room comes back, to the block.
    as $who "rm $Q/fill-$who"
    set -- $(figures)
    check $who-space-back "$([ "$3" = "$free0" ] && echo 1)" "free $3 blocks, $free0 before the fill"
    as $who "dd if=/dev/zero of=$Q/again-$who bs=65536 count=16 && rm $Q/again-$who"
    check $who-write-again "$([ $rc -eq 0 ] && echo 1)" "rc $rc: $out"
    # Past --quota-inodes: exactly the free inodes df showed can be made.
    as $who "i=0; while [ \$i -lt 200 ]; do true >$Q/i-$who-\$i || break; i=\$((i + 1)); done; echo made \$i"
    made=$(echo "$out" | sed -n 's/^made //p')
    check $who-inodes-refused "$([ "$made" = "$ifree0" ] && case "$out" in *"Disk quota exceeded"*) echo 1;; esac)" \
        "made $made files, df -i said $ifree0 free: $(echo $out | tr '\n' ' ')"
    as $who "ln -s target $Q/sl-$who"
    check $who-symlink-refused "$([ $rc -ne 0 ] && case "$out" in *"Disk quota exceeded"*) echo 1;; esac)" "rc $rc: $out"
    as $who "rm $Q/i-$who-*"
    set -- $(figures)
    check $who-inodes-back "$([ "$5" = "$ifree0" ] && echo 1)" "free inodes $5, $ifree0 before"
done
# A file the host adds counts once the daemon measures the tree again.
set -- $(figures); free_before=$3 ifree_before=$5
: >$Q/host-please
i=0; while [ ! -e $Q/host-done ] && [ $i -lt 600 ]; do sleep 0.5; i=$((i + 1)); done
sleep 3
host_blocks=$(stat -c %b $Q/host-added)
set -- $(figures)
check host-file-counts "$([ $((free_before - $3)) -eq $((host_blocks * 512 / $2)) ] && [ $((ifree_before - $5)) -eq 3 ] && echo 1)" \
    "free $free_before -> $3 blocks, the host file has $host_blocks sectors; inodes $ifree_before -> $5"
set -- $(figures)
echo "USAGE $(($1 * $2 - $3 * $2)) $(($4 - $5))"
exit 0
GUEST
} >"$main/guest.sh"

sem_boot_guest_sh 600 "$host_helper"
# 2 for df's totals, 11 as root and 11 as the user, 1 for the host's file.
sem_all_guest_checks 25

read -r tree_bytes tree_inodes < <(tree_usage)
guest_usage="$(tr -d '\r' <"$sem_tmp/console.log" | sed -n 's/^USAGE //p' | tail -1)"
sem_host guest-df-is-the-tree "$([[ $guest_usage == "$tree_bytes $tree_inodes" ]] && echo 1)" \
    "the guest's last df: used '$guest_usage', the tree: $tree_bytes $tree_inodes"

# A restart measures the same: a second daemon with the same options, asked for its stats
# while it waits for a frontend.
"${unpriv_prefix[@]}" "$sem_ferryfsd" --socket-path="$t/q2.sock" --shared-dir="$q" \
    --stats-socket="$t/q2.stats" "${unpriv_idmap[@]}" "${quota_opts[@]}" >"$t/q2.log" 2>&1 &
q2=$!
sem_pids+=("$q2")
json=""
for _ in $(seq 100); do
    json="$("$sem_ferryfsd" --stats="$t/q2.stats" --json 2>/dev/null || true)"
    [[ $json == *'"quota"'* ]] && break
    sleep 0.1
done
kill -TERM "$q2" 2>/dev/null || true
wait "$q2" 2>/dev/null || true
quota_json="$(grep -o '"quota":{[^}]*}' <<<"$json" || true)"
echo "  restarted daemon: $quota_json"
sem_host restart-stats "$([[ $quota_json == *"\"limit_bytes\":$limit_bytes,\"used_bytes\":$tree_bytes,\"limit_inodes\":$limit_inodes,\"used_inodes\":$tree_inodes,"* ]] && echo 1)" \
    "stats after a restart '$quota_json', the tree: $tree_bytes bytes $tree_inodes inodes"
sem_finish
