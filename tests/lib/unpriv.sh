# Sourced by common.sh: a throwaway ordinary user that ferryfsd runs as (README.md "Without root"), made on request (FERRYFS_DAEMON_USER=auto) and removed at the end.
#
# FERRYFS_DAEMON_USER: unset or empty, ferryfsd runs as the test (root) and every function here but
# unpriv_user_create is a no-op; "auto", unpriv_setup makes a user. Nothing runs at source time.
#   unpriv_user_create      (as root) useradd a user of its own: sets unpriv_user, unpriv_uid,
#                           unpriv_gid; skips (77) without root, useradd, userdel or setpriv
#   unpriv_setup            unpriv_user_create when FERRYFS_DAEMON_USER=auto (any other value: exit 2)
#   unpriv_active           true once the user exists
#   unpriv_own PATH...      chown -R PATH to the user (the share, the socket dir)
#   unpriv_prefix           array: the command line before a program to run it as the user
#                           (setpriv, which execs it, so $! of `"${unpriv_prefix[@]}" CMD &` is CMD's
#                           own pid); empty when no user was made
#   unpriv_as CMD...        runs CMD as the user, in the foreground
#   unpriv_runs_as_user PID true when no user was made, or PID's real, effective, saved and fs uids
#                           are all the user's (the oracle that the run was unprivileged)
#   unpriv_cleanup          waits for the user's last process, removes the user and its group;
#                           the test calls it from its exit trap
# The user has no home and no shell; useradd gives it /etc/subuid and /etc/subgid ranges.

unpriv_user="" unpriv_uid="" unpriv_gid=""
unpriv_prefix=()

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
        *) echo "FERRYFS_DAEMON_USER must be empty or auto, not '$FERRYFS_DAEMON_USER'" >&2; exit 2 ;;
    esac
}

unpriv_active() { [[ -n "$unpriv_user" ]]; }

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
    unpriv_user="" unpriv_prefix=()
}
