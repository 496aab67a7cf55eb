#!/usr/bin/env bash
# Guest e2e (make check): --add-dir=NAME[,ro]:DIR on the current stack (QEMU 10, Linux 6.12): the added dirs are directories at the share's root, '..' and symlinks never leave them, every object has its own inode number, rename(2) and link(2) between them and the shared dir fail with EXDEV (so mv copies), a ',ro' dir refuses every change with EROFS, statfs reports each dir's own file system; as guest root and as a non-root user.
#
# Daemons (one boot): main (ferryfsd defaults, holds guest.sh and the gadd helper), multi
# (ferryfsd --shared-dir=mshare --add-dir=one:one --add-dir=ro,ro:rodir --add-dir=same:one
# --add-dir=tm:tm; "same" is "one" again, so one host file is reached in two dirs; tm is a
# tmpfs of its own when the host lets the test mount one).
# Oracles: the guest kernel's own answer between two file systems (a rename from the guest's
# /tmp into the share: EXDEV) next to each cross-directory rename and link; hard-coded
# expectations ("Read-only file system" for each change in ro, each listing as it must read);
# the host's statfs of each dir; the host's tree after the run (what mv copied, what must not
# have changed).
#
# Usage: adddir-current-test.sh   Env: FERRYFSD (default build/ferryfsd)
# Exit: 0 pass, 1 fail, 77 the current stack cannot be had here.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/lib.sh"
sem_init_current adddir-current-test "$0" "$@"

t="$sem_tmp"
main="$t/main" ms="$t/mshare" one="$t/one" ro="$t/rodir" tm="$t/tm"
mkdir -p "$main" "$ms/md" "$one/sub/deep" "$ro/d" "$tm"
chmod 755 "$main" "$ms" "$one" "$ro" "$tm"
# A file system of its own for tm where the host allows it: different device, own statfs.
if mount -t tmpfs -o size=8m,mode=755 tmpfs "$tm" 2>/dev/null; then
    sem_umounts+=("$tm")
    tm_fs=tmpfs
else
    tm_fs="the same file system (no tmpfs mount here)"
fi
printf secret >"$t/secret-outside"
ln -s .. "$one/up"
ln -s "$t" "$one/abs"
printf ro >"$ro/f"
for who in root user; do
    printf "m-$who" >"$ms/mfile-$who"
    printf "f-$who" >"$one/f-$who"
    printf "mv-$who" >"$one/mv-$who"
    mkdir "$one/dmv-$who" && printf "d-$who" >"$one/dmv-$who/x"
    printf "t-$who" >"$tm/t-$who"
done
chown -R 1000:1000 "$ms" "$one" "$ro" "$tm"
unpriv_own "$one" "$ro" "$tm"
ro_sum() { (cd "$ro" && find . -printf '%p %y %m %s\n' | sort && cat f) | sha256sum | cut -d' ' -f1; }
ro_before="$(ro_sum)"

# Refused at start, before any guest: a NAME the shared dir has, a NAME that is a path.
"$sem_ferryfsd" --socket-path="$t/bad.sock" --shared-dir="$ms" --add-dir=md:"$one" >"$t/bad1.log" 2>&1 &&
    r1=0 || r1=$?
"$sem_ferryfsd" --socket-path="$t/bad.sock" --shared-dir="$ms" --add-dir=a/b:"$one" >"$t/bad2.log" 2>&1 &&
    r2=0 || r2=$?
sem_host refuses-name-taken "$( ((r1 != 0)) && grep -q "has an entry 'md' already" "$t/bad1.log" && echo 1)" \
    "exit $r1: $(tail -2 "$t/bad1.log")"
sem_host refuses-name-path "$( ((r2 != 0)) && grep -q "NAME must be one file name" "$t/bad2.log" && echo 1)" \
    "exit $r2: $(tail -2 "$t/bad2.log")"

sem_daemon main "$main"
gcc -static -O2 -Wall -Werror -o "$main/gadd" "$here/guest-adddir.c"
sem_daemon multi "$ms" --add-dir=one:"$one" --add-dir=ro,ro:"$ro" --add-dir=same:"$one" \
    --add-dir=tm:"$tm"
blocks() { stat -f -c %b "$1"; }

{
    echo '#!/bin/sh'
    sem_mount_line
    echo "MS_BLOCKS=$(blocks "$ms") TM_BLOCKS=$(blocks "$tm") HOST_TOP=$t"
    cat <<'GUEST'
M=/multi G=/mnt/gadd
mkdir -p /tmp && chmod 1777 /tmp
as() { if [ "$1" = user ]; then shift; (cd / && su -s /bin/sh -c "$*" guest 2>&1)
       else shift; sh -c "$*" 2>&1; fi; }
# is NAME WHO WANT CMD: CMD's output must be WANT.
is() {
    out=$(as "$2" "$4")
    [ "$out" = "$3" ] && echo "CHECK $2-$1 PASS" || echo "CHECK $2-$1 FAIL want '$3' got '$(echo $out)'"
}
# fails NAME WHO MESSAGE CMD: CMD must fail saying MESSAGE.
fails() {
    out=$(as "$2" "$4"); rc=$?
    case "$out" in
    *"$3"*) [ $rc -ne 0 ] && echo "CHECK $2-$1 PASS" || echo "CHECK $2-$1 FAIL rc 0: $out";;
    *) echo "CHECK $2-$1 FAIL rc $rc: $(echo $out)";;
    esac
}
works() {
    out=$(as "$2" "$3"); rc=$?
    [ $rc -eq 0 ] && echo "CHECK $2-$1 PASS" || echo "CHECK $2-$1 FAIL rc $rc: $(echo $out)"
}
try() { fails "$1" "$2" "Read-only file system" "$3"; }
# Listings leave out what the root's turn moved in or out.
F="| grep -v -e ^moved- -e mv- | tr '\n' ' '"
ROOT='md mfile-root mfile-user one ro same tm '
for who in root user; do
    is list $who "$ROOT" "ls $M $F"
    is list-one $who 'abs f-root f-user sub up ' "ls $M/one $F"
    is list-same $who "$(ls $M/one | tr '\n' ' ')" "ls $M/same | tr '\n' ' '"
    # '..' and symlinks: the share's root, never the host's parent of a dir
    is dotdot $who "$ROOT" "cd $M/one/sub/deep && cd ../../.. && ls $F"
    is dotdot-ro $who "$ROOT" "cd $M/ro/d && cd ../.. && ls $F"
    is symlink-up $who "$ROOT" "ls $M/one/up/ $F"
    fails symlink-abs $who "No such file or directory" "cat $M/one/abs/secret-outside"
    fails dotdot-out $who "No such file or directory" "cat $M/one/../../secret-outside"
    # rename(2) and link(2) between the dirs: EXDEV, as the guest's own between two file systems
    : >/tmp/oracle-$who; chmod 666 /tmp/oracle-$who
    is oracle-tmpfs-rename $who EXDEV "$G rename /tmp/oracle-$who $M/oracle-$who"
    is rename-out $who EXDEV "$G rename $M/one/f-$who $M/f-$who"
    is rename-in $who EXDEV "$G rename $M/mfile-$who $M/one/mfile-$who"
    is rename-same-host-dir $who EXDEV "$G rename $M/one/f-$who $M/same/g-$who"
    is rename-other-device $who EXDEV "$G rename $M/one/f-$who $M/tm/f-$who"
    is rename-dir $who EXDEV "$G rename $M/one/dmv-$who $M/dmv-$who"
    is link-out $who EXDEV "$G link $M/one/f-$who $M/l-$who"
    is link-in $who EXDEV "$G link $M/mfile-$who $M/one/l-$who"
    is rename-within $who OK "$G rename $M/one/f-$who $M/one/sub/f-$who && $G rename $M/one/sub/f-$who $M/one/f-$who >/dev/null"
    # so mv copies and deletes
    works mv-file $who "mv $M/one/mv-$who $M/moved-$who && [ \"\$(cat $M/moved-$who)\" = mv-$who ] && [ ! -e $M/one/mv-$who ]"
    works mv-dir $who "mv $M/one/dmv-$who $M/tm/ && [ \"\$(cat $M/tm/dmv-$who/x)\" = d-$who ] && [ ! -e $M/one/dmv-$who ]"
    # NAME at the root is the added dir's, as a mount point
    is rename-name $who EBUSY "$G rename $M/one $M/renamed-$who"
    fails rmdir-name $who "busy" "rmdir $M/same"
    fails mkdir-name $who "exists" "mkdir $M/tm"
    # the ,ro dir
    try write $who "echo x >$M/ro/f"
    try create $who ": >$M/ro/new-$who"
    try mkdir $who "mkdir $M/ro/dir-$who"
    try symlink $who "ln -s x $M/ro/sl-$who"
    try unlink $who "rm -f $M/ro/f"
    try rmdir $who "rmdir $M/ro/d"
    try chmod $who "chmod 600 $M/ro/f"
    try touch $who "touch $M/ro/f"
    is rename-in-ro $who EROFS "$G rename $M/ro/f $M/ro/g"
    try mv-out-of-ro $who "mv $M/ro/f $M/taken-$who"
    rm -f $M/taken-$who
    is read-ro $who ro "cat $M/ro/f"
    # every object its own number, one device for the whole share
    is inos $who "objects $(find $M | wc -l) duplicates 0 other-devices 0" "$G inos $M"
    # statfs: each dir's own file system
    is statfs-share $who "$MS_BLOCKS" "stat -f -c %b $M/md"
    is statfs-tm $who "$TM_BLOCKS" "stat -f -c %b $M/tm"
done
exit 0
GUEST
} >"$main/guest.sh"
sem_boot_guest_sh 600
# 36 checks as root and as the user. (A LOOKUP of '..' from the guest's export operations
# needs a handle of a directory whose inode the guest dropped, and then forgot to the daemon,
# which answers such a handle ESTALE: test_added_dirs sends those LOOKUPs itself.)
sem_all_guest_checks 72
sem_host tm-file-system "1" "tm: $tm_fs"
sem_host ro-unchanged "$([[ $ro_before == "$(ro_sum)" ]] && echo 1)" "rodir changed on the host"
sem_host mv-copied "$([[ $(cat "$ms/moved-root") == mv-root && $(cat "$ms/moved-user") == mv-user &&
    ! -e $one/mv-root && $(cat "$tm/dmv-user/x") == d-user ]] && echo 1)" "$(ls "$ms" "$one" "$tm" | tr '\n' ' ')"
sem_host not-moved "$([[ -e $one/f-root && -e $one/f-user && -e $ms/mfile-root && ! -e $ms/f-root &&
    ! -e $ms/l-root && ! -e $one/l-root && ! -e $ms/renamed-root ]] && echo 1)" "$(ls "$ms" "$one" | tr '\n' ' ')"
sem_host outside-unchanged "$([[ $(cat "$t/secret-outside") == secret ]] && echo 1)" "secret-outside changed"
sem_finish
