#!/usr/bin/env bash
# Guest e2e (make check): --read-only=PATH on the current stack (QEMU 10, Linux 6.12): every change in the protected subtree fails with EROFS in the guest, as root and as a non-root user, however the guest names it ('..', a symlink, a hard link the host made, the subtree renamed on the host after start); reads and the rest of the share keep working; the host's files are unchanged.
#
# Daemons (one boot): main (ferryfsd defaults, holds guest.sh), pol (ferryfsd --read-only=ro
# --read-only=moving; "moving" is renamed to "moved" on the host after the daemon started and
# before the guest boots: the policy follows the directory, not its name).
# Oracles: hard-coded expectations (the kernel's "Read-only file system" for each change; the
# bytes the host wrote for each read), the same changes outside the subtree succeeding (so the
# EROFS is the subtree's and not a permission), and the host's tree compared before and after.
# The guest user guest (1000) owns the tree, so without the policy each change would succeed.
#
# Usage: policy-current-test.sh   Env: FERRYFSD (default build/ferryfsd)
# Exit: 0 pass, 1 fail, 77 the current stack cannot be had here.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ "${FERRYFS_STACK:-}" != current ]]; then
    if ! "$here/../e2e/stack-lib.sh" prepare current; then
        echo "policy-current-test: SKIP: the current stack (QEMU 10, Linux 6.12) cannot be had here"
        exit 77
    fi
    exec "$here/../e2e/stack-lib.sh" run current "$0" "$@"
fi
source "$here/lib.sh"
sem_init policy-current-test

t="$sem_tmp"
main="$t/main" pol="$t/pol"
mkdir -p "$main" "$pol"/{ro/sub/deeper,ro/empty,moving,out}
chmod 755 "$main" "$pol"
printf data >"$pol/ro/file"
printf linked >"$pol/ro/linked"
printf moving >"$pol/moving/file"
ln "$pol/ro/linked" "$pol/out/hardlink"
ln -s ../ro "$pol/out/to-ro"
for who in root user; do printf free >"$pol/out/f-$who"; done
chown -R 1000:1000 "$pol"
chmod -R u+rwX,go+rX "$pol"
# The host's tree as the guest must leave it (out/ is the guest's to change).
# Taken after the host's rename of moving to moved.
tree_sum() { (cd "$pol" && { find ro moved -printf '%p %y %m %s %n\n' | sort
    cat ro/file ro/linked moved/file; }) 2>&1 | sha256sum | cut -d' ' -f1; }

sem_daemon main "$main"
sem_daemon pol "$pol" --read-only=ro --read-only=moving
# The policy is resolved when the backend starts, before the daemon waits for its frontend.
for _ in $(seq 100); do grep -q 'waiting for a vhost-user frontend' "$t/pol.log" && break; sleep 0.1; done
sem_host policy-resolved "$(grep -q 'waiting for a vhost-user frontend' "$t/pol.log" && echo 1)" \
    "$(tail -3 "$t/pol.log")"
mv "$pol/moving" "$pol/moved"
before="$(tree_sum)"

{
    echo '#!/bin/sh'
    sem_mount_line
    cat <<'GUEST'
P=/pol
# try NAME WHO CMD: CMD (a shell line) run by WHO must fail with EROFS.
try() {
    name=$1 who=$2 cmd=$3
    if [ "$who" = user ]; then out=$(cd / && su -s /bin/sh -c "$cmd" guest 2>&1); rc=$?
    else out=$(sh -c "$cmd" 2>&1); rc=$?; fi
    case "$out" in
    *"Read-only file system"*) [ $rc -ne 0 ] && echo "CHECK $who-$name PASS" || echo "CHECK $who-$name FAIL rc 0: $out";;
    *) echo "CHECK $who-$name FAIL rc $rc: $(echo $out | tr '\n' ' ')";;
    esac
}
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
done
exit 0
GUEST
} >"$main/guest.sh"
chmod 755 "$main/guest.sh"

sem_boot 600
echo "$sem_out" | sed 's/^/  guest: /'
n="$(grep -c '^CHECK .* PASS$' <<<"$sem_out" || true)"
# 22 refused and 7 working, each as root and as the user.
sem_host all-guest-checks-ran "$((n == 58))" "$n of 58 guest checks passed"
after="$(tree_sum)"
sem_host host-tree-unchanged "$([[ $before == "$after" ]] && echo 1)" "the protected files changed on the host"
sem_host host-file-bytes "$([[ $(cat "$pol/ro/file") == data && $(cat "$pol/out/hardlink") == linked ]] && echo 1)" \
    "ro/file '$(cat "$pol/ro/file")', out/hardlink '$(cat "$pol/out/hardlink")'"
sem_finish
