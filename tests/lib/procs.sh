# Sourced by tests and benchmarks: what /proc says of a daemon (its serving process, fds, memory). Nothing runs at source time.

# fd_count PID: open fds of PID.
fd_count() { ls "/proc/$1/fd" | wc -l; }
# serving_pid PID: the process that serves for the daemon started as PID, its innermost child.
# Under the namespace sandbox PID is the relay that stays outside and its child does the work
# (and holds the fds and memory worth watching); an unprivileged ferryfsd forks twice (user
# namespace, then the rest); without a sandbox it is PID itself.
serving_pid() {
    local p=$1 kids
    while kids=$(cat "/proc/$p/task/$p/children" 2>/dev/null) && [[ -n ${kids// /} ]]; do
        p=${kids%% *}
    done
    echo "$p"
}
# status_kb PID FIELD: a /proc/PID/status size in kB (VmRSS, VmHWM, RssAnon, RssShmem).
status_kb() { awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"; }
