#!/usr/bin/env bash
# Guest e2e (make check): --read-only=PATH and --hide=PATH on the current stack (QEMU 10, Linux 6.12): every change in the protected subtree fails with EROFS, and a hidden entry is absent from listings and unreachable (ENOENT), in the guest as root and as a non-root user, however the guest names them ('..', a symlink, a hard link the host made, renamed on the host after start); reads and the rest of the share keep working; the host's files are unchanged.
#
# Daemons (one boot): main (ferryfsd defaults, holds guest.sh), pol (ferryfsd --read-only=ro
# --read-only=moving --hide=a/secret --hide=hmoving; "moving" is renamed to "moved" and
# "hmoving" to "out/hmoved" on the host after the daemon started and before the guest boots:
# the policy follows the object, not its name).
# Oracles: hard-coded expectations (the kernel's "Read-only file system" for each change, "No
# such file or directory" for each way to a hidden file, "Permission denied" for taking its name;
# the bytes the host wrote for each read; each listing as it must read), the same changes outside the subtree succeeding (so the
# EROFS is the subtree's and not a permission), and the host's tree compared before and after.
# The guest user guest (1000) owns the tree, so without the policy each change would succeed.
#
# Usage: policy-current-test.sh   Env: FERRYFSD (default build/ferryfsd)
# Exit: 0 pass, 1 fail, 77 the current stack cannot be had here.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/lib.sh"
sem_init_current policy-current-test "$0" "$@"

t="$sem_tmp"
main="$t/main" pol="$t/pol"
mkdir -p "$main" "$pol"/{ro/sub/deeper,ro/empty,moving,out,a/sub}
chmod 755 "$main" "$pol"
printf data >"$pol/ro/file"
printf linked >"$pol/ro/linked"
printf moving >"$pol/moving/file"
ln "$pol/ro/linked" "$pol/out/hardlink"
ln -s ../ro "$pol/out/to-ro"
printf secret >"$pol/a/secret"
printf visible >"$pol/a/visible"
printf hidden >"$pol/hmoving"
ln "$pol/a/secret" "$pol/out/secret-link"
ln -s ../a/secret "$pol/out/to-secret"
for who in root user; do printf free >"$pol/out/f-$who"; done
chown -R 1000:1000 "$pol"
chmod -R u+rwX,go+rX "$pol"
# The host's tree as the guest must leave it (out/ is the guest's to change).
# Taken after the host's rename of moving to moved.
tree_sum() { (cd "$pol" && { find ro moved a out/hmoved -printf '%p %y %m %s %n\n' | sort
    cat ro/file ro/linked moved/file a/secret out/hmoved; }) 2>&1 | sha256sum | cut -d' ' -f1; }

sem_daemon main "$main"
sem_daemon pol "$pol" --read-only=ro --read-only=moving --hide=a/secret --hide=hmoving
# The policy is resolved when the backend starts, before the daemon waits for its frontend.
for _ in $(seq 100); do grep -q 'waiting for a vhost-user frontend' "$t/pol.log" && break; sleep 0.1; done
sem_host policy-resolved "$(grep -q 'waiting for a vhost-user frontend' "$t/pol.log" && echo 1)" \
    "$(tail -3 "$t/pol.log")"
mv "$pol/moving" "$pol/moved"
mv "$pol/hmoving" "$pol/out/hmoved"
before="$(tree_sum)"

{
    echo '#!/bin/sh'
    sem_mount_line
    cat <<'GUEST'
P=/pol
# fails NAME WHO MESSAGE CMD: CMD (a shell line) run by WHO must fail with MESSAGE.
fails() {
    name=$1 who=$2 msg=$3 cmd=$4
    if [ "$who" = user ]; then out=$(cd / && su -s /bin/sh -c "$cmd" guest 2>&1); rc=$?
    else out=$(sh -c "$cmd" 2>&1); rc=$?; fi
    case "$out" in
    *"$msg"*) [ $rc -ne 0 ] && echo "CHECK $who-$name PASS" || echo "CHECK $who-$name FAIL rc 0: $out";;
    *) echo "CHECK $who-$name FAIL rc $rc: $(echo $out | tr '\n' ' ')";;
    esac
}
try() { fails "$1" "$2" "Read-only file system" "$3"; }
absent() { fails "$1" "$2" "No such file or directory" "$3"; }
# works NAME WHO CMD: CMD must succeed.
works() {
    name=$1 who=$2 cmd=$3
    if [ "$who" = user ]; then out=$(cd / && su -s /bin/sh -c "$cmd" guest 2>&1); rc=$?
    else out=$(sh -c "$cmd" 2>&1); rc=$?; fi
    [ $rc -eq 0 ] && echo "CHECK $who-$name PASS" || echo "CHECK $who-$name FAIL rc $rc: $(echo $out | tr '\n' ' ')"
}
for who in root user; do
    # First, while the guest has not met ro/linked by its own name: only
    # its identity, listed at start, makes it read-only.
    try by-host-hardlink $who "echo x >$P/out/hardlink"
    try write-file $who "echo x >$P/ro/file"
    try append-file $who "echo x >>$P/ro/file"
    try create $who ": >$P/ro/new-$who"
    try mkdir $who "mkdir $P/ro/dir-$who"
    try mknod-fifo $who "mkfifo $P/ro/fifo-$who"
    try symlink $who "ln -s target $P/ro/sl-$who"
    try link-into $who "ln $P/out/f-$who $P/ro/ln-$who"
    try unlink $who "rm -f $P/ro/file"
    try rmdir $who "rmdir $P/ro/empty"
    try rename-within $who "mv $P/ro/file $P/ro/file2"
    try rename-out $who "mv $P/ro/linked $P/out/taken-$who"
    try rename-into $who "mv $P/out/f-$who $P/ro/given-$who"
    try chmod $who "chmod 600 $P/ro/file"
    try touch-times $who "touch $P/ro/file"
    try truncate $who "truncate -s 0 $P/ro/file"
    # however the guest names the subtree
    try by-dotdot $who "cd $P/ro/sub/deeper && echo x >../../dotdot-$who"
    try by-dotdot-existing $who "cd $P/ro/sub && echo x >../file"
    try by-symlink $who "echo x >$P/out/to-ro/file"
    try by-symlink-create $who "echo x >$P/out/to-ro/via-link-$who"
    try after-host-rename $who "echo x >$P/moved/file"
    try after-host-rename-create $who "mkdir $P/moved/dir-$who"
    # reads, and the rest of the share
    works read-file $who "[ \"\$(cat $P/ro/file)\" = data ]"
    works read-by-symlink $who "[ \"\$(cat $P/out/to-ro/file)\" = data ]"
    works read-hardlink $who "[ \"\$(cat $P/out/hardlink)\" = linked ]"
    works read-moved $who "[ \"\$(cat $P/moved/file)\" = moving ]"
    works list $who "[ \"\$(ls $P/ro | tr '\n' ' ')\" = 'empty file linked sub ' ]"
    works write-outside $who "echo ok >$P/out/f-$who && [ \"\$(cat $P/out/f-$who)\" = ok ]"
    works mkdir-outside $who "mkdir $P/out/dir-$who && rmdir $P/out/dir-$who"
    # --hide: absent from listings, unreachable by any name
    works hide-list $who "[ \"\$(ls $P/a | tr '\n' ' ')\" = 'sub visible ' ]"
    works hide-list-out $who "! ls $P/out | grep -qE '^(hmoved|secret-link)\$'"
    absent hide-open $who "cat $P/a/secret"
    absent hide-stat $who "stat $P/a/secret"
    absent hide-by-dotdot $who "cd $P/a/sub && cat ../secret"
    absent hide-by-symlink $who "cat $P/out/to-secret"
    absent hide-by-host-hardlink $who "cat $P/out/secret-link"
    absent hide-after-host-rename $who "cat $P/out/hmoved"
    absent hide-rename-away $who "mv $P/a/secret $P/a/taken-$who"
    absent hide-unlink $who "rm $P/a/secret"
    fails hide-create-name $who "Permission denied" "echo x >$P/a/secret"
    fails hide-rename-onto $who "Permission denied" "echo y >$P/a/mine-$who && mv $P/a/mine-$who $P/a/secret"
    works read-visible $who "[ \"\$(cat $P/a/visible)\" = visible ]"
    rm -f $P/a/mine-$who
done
exit 0
GUEST
} >"$main/guest.sh"
sem_boot_guest_sh 600
# 22 refused and 7 working under --read-only, 13 under --hide, each as root and as the user.
sem_all_guest_checks 84
after="$(tree_sum)"
sem_host host-tree-unchanged "$([[ $before == "$after" ]] && echo 1)" "the protected files changed on the host"
sem_host host-file-bytes "$([[ $(cat "$pol/ro/file") == data && $(cat "$pol/out/hardlink") == linked &&
    $(cat "$pol/a/secret") == secret && $(cat "$pol/out/hmoved") == hidden ]] && echo 1)" \
    "ro/file '$(cat "$pol/ro/file")', out/hardlink '$(cat "$pol/out/hardlink")', a/secret '$(cat "$pol/a/secret")'"
sem_finish
