# Sourced by common.sh: a throwaway ordinary user that ferryfsd runs as (README.md "Without root"), made on request (FERRYFS_DAEMON_USER=auto) and removed at the end.
#
# FERRYFS_DAEMON_USER: unset or empty, ferryfsd runs as the test (root) and every function here but
# unpriv_user_create is a no-op; "auto", unpriv_setup makes a user; "ranges", the same plus
# unpriv_idmap. Nothing runs at source time.
#   unpriv_user_create      (as root) useradd a user of its own: sets unpriv_user, unpriv_uid,
#                           unpriv_gid; skips (77) without root, useradd, userdel or setpriv
#   unpriv_setup            unpriv_user_create when FERRYFS_DAEMON_USER=auto or ranges (any other
#                           value: exit 2); with ranges also unpriv_ranges
#   unpriv_ranges           sets unpriv_idmap: the ferryfsd options (README.md "Without root") that
#                           map 0 to the user and 1..COUNT to its /etc/subuid and /etc/subgid
#                           ranges, through newuidmap/newgidmap; skips (77) without them
#   unpriv_active           true once the user exists
#   unpriv_own PATH...      chown -R PATH to the user (the share, the socket dir)
#   unpriv_prefix           array: the command line before a program to run it as the user
#                           (setpriv, which execs it, so $! of `"${unpriv_prefix[@]}" CMD &` is CMD's
#                           own pid); empty when no user was made
#   unpriv_guest_gid GID    the guest's view of host gid GID under the ranges (0 for the user's
#                           group, 1.. in its range, 65534 outside); GID itself without ranges
#   unpriv_as CMD...        runs CMD as the user, in the foreground
#   unpriv_runs_as_user PID true when no user was made, or PID's real, effective, saved and fs uids
#                           are all the user's (the oracle that the run was unprivileged)
#   unpriv_cleanup          waits for the user's last process, removes the user and its group;
#                           the test calls it from its exit trap
# The user has no home and no shell; useradd gives it /etc/subuid and /etc/subgid ranges.

unpriv_user="" unpriv_uid="" unpriv_gid=""
unpriv_prefix=()
unpriv_idmap=() unpriv_subgid=""  # "first:count" of the user's /etc/subgid range, with ranges

unpriv_user_create() {
    [[ $(id -u) == 0 ]] || skip "needs root (it creates a user for ferryfsd to run as)"
    need_cmd useradd userdel setpriv
    # Names are at most 32 bytes; the pid keeps tests that run side by side apart.
    unpriv_user="ferryfs-unpriv$$"
    unpriv_user=${unpriv_user:0:31}
    useradd --no-create-home --shell /usr/sbin/nologin --user-group "$unpriv_user"
    unpriv_uid=$(id -u "$unpriv_user")
    unpriv_gid=$(id -g "$unpriv_user")
    unpriv_prefix=(setpriv --reuid="$unpriv_uid" --regid="$unpriv_gid" --init-groups --)
    say "ferryfsd runs as the ordinary user $unpriv_user ($unpriv_uid:$unpriv_gid)"
}

unpriv_setup() {
    case "${FERRYFS_DAEMON_USER:-}" in
        "") ;;
        auto) unpriv_user_create ;;
        ranges) unpriv_user_create; unpriv_ranges ;;
        *) echo "FERRYFS_DAEMON_USER must be empty, auto or ranges, not '$FERRYFS_DAEMON_USER'" >&2; exit 2 ;;
    esac
}

unpriv_ranges() {
    need_cmd newuidmap newgidmap
    local su sg
    # "user:first:count", the first line that is the user's.
    su=$(awk -F: -v u="$unpriv_user" '$1 == u { print $2 ":" $3; exit }' /etc/subuid 2>/dev/null)
    sg=$(awk -F: -v u="$unpriv_user" '$1 == u { print $2 ":" $3; exit }' /etc/subgid 2>/dev/null)
    [[ -n $su && -n $sg ]] || skip "useradd gave $unpriv_user no /etc/subuid or /etc/subgid range"
    unpriv_idmap=(--uid-map=":0:$unpriv_uid:1:" --uid-map=":1:$su:" --gid-map=":0:$unpriv_gid:1:" --gid-map=":1:$sg:")
    unpriv_subgid=$sg
    say "ferryfsd maps guest ids 1.. to the user's ranges: ${unpriv_idmap[*]}"
}

unpriv_active() { [[ -n "$unpriv_user" ]]; }

unpriv_guest_gid() {
    local first=${unpriv_subgid%%:*} count=${unpriv_subgid##*:}
    if [[ -z $unpriv_subgid ]]; then
        echo "$1"
    elif (($1 == unpriv_gid)); then
        echo 0
    elif (($1 >= first && $1 < first + count)); then
        echo $(($1 - first + 1))
    else
        echo 65534
    fi
}

unpriv_own() {
    unpriv_active || return 0
    chown -R "$unpriv_uid:$unpriv_gid" "$@"
}

unpriv_as() { "${unpriv_prefix[@]}" "$@"; }

unpriv_runs_as_user() {
    unpriv_active || return 0
    [[ "$(awk '$1 == "Uid:" { print $2, $3, $4, $5 }' "/proc/$1/status" 2>/dev/null)" == \
       "$unpriv_uid $unpriv_uid $unpriv_uid $unpriv_uid" ]]
}

unpriv_cleanup() {
    unpriv_active || return 0
    # userdel refuses while a process of the user lives: a daemon's watcher ends just after it.
    for _ in $(seq 50); do pgrep -u "$unpriv_uid" >/dev/null || break; sleep 0.1; done
    id "$unpriv_user" >/dev/null 2>&1 && userdel "$unpriv_user"
    getent group "$unpriv_user" >/dev/null && groupdel "$unpriv_user"
    unpriv_user="" unpriv_prefix=() unpriv_idmap=() unpriv_subgid=""
}
