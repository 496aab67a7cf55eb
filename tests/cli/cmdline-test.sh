#!/usr/bin/env bash
# make check: the same command lines given to ferryfsd and to the Rust virtiofsd 1.13; each must start both, refuse both, or differ as cmdline-known-differences says.
#
# Each row of the table below is one command line. Both daemons get it, each with a fresh
# socket path and share in a directory of its own, a few runs at a time (start-probe.py, which
# also says how a run is ended). A daemon's outcome is:
#   serves   it answered GET_FEATURES on its socket: it started and serves a frontend
#   exits    it ended with status 0 and nothing answered (--help, --version, --print-capabilities)
#   refuses  it ended with another status before serving (a bad option, a conflict, a check)
# Where the outcomes differ the row must be in cmdline-known-differences with its reason
# (docs/options.md, "The Rust virtiofsd's command line", gives the same), for root, without
# root or always; a listed row that no longer differs fails as stale, as does a listed name
# the table does not have.
#
# In a row: @sock is the socket path, @dir the share, @file a regular file, @missing a path
# that does not exist, @fd the number of a listening socket bound at @sock that the daemon
# inherits (the way libvirt passes it).
# Env: FERRYFSD (default build/ferryfsd); CMDLINE_JOBS (default 6) rows at once.
# Exit: 0 pass, 1 fail, 77 skipped (the current stack's Rust virtiofsd is not available here).
set -euo pipefail
source "$(dirname "$0")/../lib/common.sh"
source "$repo/tests/e2e/stack-lib.sh"

need_built "$ferryfsd"
need_cmd python3
rust="$stack_virtiofsd_rs"
if ! "$rust" --version >/dev/null 2>&1; then
    stack_prepare current >&2 || true
    "$rust" --version >/dev/null 2>&1 ||
        skip "the current stack's Rust virtiofsd is not available here (scripts/stack.sh fetch)"
fi
known="$here/cmdline-known-differences"
make_tmp
# A daemon's own environment: no socket activation meant for someone else.
unset LISTEN_PID LISTEN_FDS LISTEN_FDNAMES

# NAME  ARGS (split on blanks; no value below holds one)
table=$(cat <<'ROWS'
plain                       --socket-path=@sock --shared-dir=@dir
args-as-next-word           --socket-path @sock --shared-dir @dir
socket-deprecated           --socket=@sock --shared-dir=@dir
socket-missing              --shared-dir=@dir
socket-dir-missing          --socket-path=@missing/s.sock --shared-dir=@dir
socket-group                --socket-path=@sock --shared-dir=@dir --socket-group=root
socket-group-unknown        --socket-path=@sock --shared-dir=@dir --socket-group=no-such-group-ferryfs
fd                          --fd=@fd --shared-dir=@dir
fd-and-socket-path          --fd=@fd --socket-path=@sock --shared-dir=@dir
fd-and-socket               --fd=@fd --socket=@sock --shared-dir=@dir
fd-and-socket-group         --fd=@fd --shared-dir=@dir --socket-group=root
fd-not-a-number             --fd=three --socket-path=@sock --shared-dir=@dir
shared-dir-missing          --socket-path=@sock
shared-dir-nonexistent      --socket-path=@sock --shared-dir=@missing
shared-dir-file             --socket-path=@sock --shared-dir=@file
shared-dir-twice            --socket-path=@sock --shared-dir=@missing --shared-dir=@dir
tag                         --socket-path=@sock --shared-dir=@dir --tag=myfs
tag-36-bytes                --socket-path=@sock --shared-dir=@dir --tag=abcdefghijklmnopqrstuvwxyz0123456789
tag-37-bytes                --socket-path=@sock --shared-dir=@dir --tag=abcdefghijklmnopqrstuvwxyz0123456789x
tag-empty                   --socket-path=@sock --shared-dir=@dir --tag=
thread-pool-size-0          --socket-path=@sock --shared-dir=@dir --thread-pool-size=0
thread-pool-size-8          --socket-path=@sock --shared-dir=@dir --thread-pool-size=8
thread-pool-size-huge       --socket-path=@sock --shared-dir=@dir --thread-pool-size=5000000000
thread-pool-size-negative   --socket-path=@sock --shared-dir=@dir --thread-pool-size=-1
thread-pool-size-word       --socket-path=@sock --shared-dir=@dir --thread-pool-size=many
xattr                       --socket-path=@sock --shared-dir=@dir --xattr
xattr-with-value            --socket-path=@sock --shared-dir=@dir --xattr=yes
posix-acl                   --socket-path=@sock --shared-dir=@dir --posix-acl
posix-acl-and-xattr         --socket-path=@sock --shared-dir=@dir --xattr --posix-acl
posix-acl-with-value        --socket-path=@sock --shared-dir=@dir --posix-acl=always
security-label              --socket-path=@sock --shared-dir=@dir --security-label
security-label-no-xattr     --socket-path=@sock --shared-dir=@dir --security-label -o no_xattr
xattrmap                    --socket-path=@sock --shared-dir=@dir --xattrmap=:map::user.virtiofs.:
xattrmap-rules              --socket-path=@sock --shared-dir=@dir --xattrmap=:prefix:all::user.virtiofs.::bad:all:::
xattrmap-invalid            --socket-path=@sock --shared-dir=@dir --xattrmap=:bogus:all:::
xattrmap-unterminated       --socket-path=@sock --shared-dir=@dir --xattrmap=:ok:all::
xattrmap-no-xattr           --socket-path=@sock --shared-dir=@dir --xattrmap=:map::user.virtiofs.: -o no_xattr
sandbox-namespace           --socket-path=@sock --shared-dir=@dir --sandbox=namespace
sandbox-chroot              --socket-path=@sock --shared-dir=@dir --sandbox=chroot
sandbox-none                --socket-path=@sock --shared-dir=@dir --sandbox=none
sandbox-invalid             --socket-path=@sock --shared-dir=@dir --sandbox=jail
seccomp-kill                --socket-path=@sock --shared-dir=@dir --seccomp=kill
seccomp-log                 --socket-path=@sock --shared-dir=@dir --seccomp=log
seccomp-trap                --socket-path=@sock --shared-dir=@dir --seccomp=trap
seccomp-none                --socket-path=@sock --shared-dir=@dir --seccomp=none
seccomp-invalid             --socket-path=@sock --shared-dir=@dir --seccomp=allow
readonly                    --socket-path=@sock --shared-dir=@dir --readonly
cache-auto                  --socket-path=@sock --shared-dir=@dir --cache=auto
cache-always                --socket-path=@sock --shared-dir=@dir --cache=always
cache-never                 --socket-path=@sock --shared-dir=@dir --cache=never
cache-metadata              --socket-path=@sock --shared-dir=@dir --cache=metadata
cache-none                  --socket-path=@sock --shared-dir=@dir --cache=none
cache-invalid               --socket-path=@sock --shared-dir=@dir --cache=sometimes
cache-twice                 --socket-path=@sock --shared-dir=@dir --cache=never --cache=always
allow-mmap                  --socket-path=@sock --shared-dir=@dir --allow-mmap
allow-mmap-cache-never      --socket-path=@sock --shared-dir=@dir --cache=never --allow-mmap
allow-direct-io             --socket-path=@sock --shared-dir=@dir --allow-direct-io
announce-submounts          --socket-path=@sock --shared-dir=@dir --announce-submounts
no-announce-submounts       --socket-path=@sock --shared-dir=@dir --no-announce-submounts
announce-submounts-both     --socket-path=@sock --shared-dir=@dir --announce-submounts --no-announce-submounts
file-handles-never          --socket-path=@sock --shared-dir=@dir --inode-file-handles=never
file-handles-prefer         --socket-path=@sock --shared-dir=@dir --inode-file-handles=prefer
file-handles-mandatory      --socket-path=@sock --shared-dir=@dir --inode-file-handles=mandatory
file-handles-fallback       --socket-path=@sock --shared-dir=@dir --inode-file-handles=fallback
file-handles-invalid        --socket-path=@sock --shared-dir=@dir --inode-file-handles=always
file-handles-next-word      --socket-path=@sock --shared-dir=@dir --inode-file-handles prefer
file-handles-no-dac-read    --socket-path=@sock --shared-dir=@dir --inode-file-handles=prefer --modcaps=-dac_read_search
migration-find-paths        --socket-path=@sock --shared-dir=@dir --migration-mode=find-paths
migration-file-handles      --socket-path=@sock --shared-dir=@dir --migration-mode=file-handles
migration-mode-invalid      --socket-path=@sock --shared-dir=@dir --migration-mode=copy
migration-on-error-abort    --socket-path=@sock --shared-dir=@dir --migration-on-error=abort
migration-on-error-guest    --socket-path=@sock --shared-dir=@dir --migration-on-error=guest-error
migration-on-error-invalid  --socket-path=@sock --shared-dir=@dir --migration-on-error=ignore
migration-verify-handles    --socket-path=@sock --shared-dir=@dir --migration-verify-handles
migration-confirm-paths     --socket-path=@sock --shared-dir=@dir --migration-confirm-paths
migration-fh-verify         --socket-path=@sock --shared-dir=@dir --migration-mode=file-handles --migration-verify-handles
migration-fh-confirm        --socket-path=@sock --shared-dir=@dir --migration-mode=file-handles --migration-confirm-paths
log-level-error             --socket-path=@sock --shared-dir=@dir --log-level=error
log-level-warn              --socket-path=@sock --shared-dir=@dir --log-level=warn
log-level-info              --socket-path=@sock --shared-dir=@dir --log-level=info
log-level-debug             --socket-path=@sock --shared-dir=@dir --log-level=debug
log-level-trace             --socket-path=@sock --shared-dir=@dir --log-level=trace
log-level-off               --socket-path=@sock --shared-dir=@dir --log-level=off
log-level-upper-case        --socket-path=@sock --shared-dir=@dir --log-level=DEBUG
log-level-invalid           --socket-path=@sock --shared-dir=@dir --log-level=loud
debug-flag                  --socket-path=@sock --shared-dir=@dir -d
debug-long                  --socket-path=@sock --shared-dir=@dir --debug
syslog                      --socket-path=@sock --shared-dir=@dir --syslog
rlimit-nofile-0             --socket-path=@sock --shared-dir=@dir --rlimit-nofile=0
rlimit-nofile-1024          --socket-path=@sock --shared-dir=@dir --rlimit-nofile=1024
rlimit-nofile-above-max     --socket-path=@sock --shared-dir=@dir --rlimit-nofile=4000000000
rlimit-nofile-word          --socket-path=@sock --shared-dir=@dir --rlimit-nofile=lots
modcaps-add                 --socket-path=@sock --shared-dir=@dir --modcaps=+sys_admin
modcaps-remove              --socket-path=@sock --shared-dir=@dir --modcaps=-mknod
modcaps-colon-list          --socket-path=@sock --shared-dir=@dir --modcaps=+sys_admin:-mknod
modcaps-comma-list          --socket-path=@sock --shared-dir=@dir --modcaps=+sys_admin,-mknod
modcaps-cap-prefix          --socket-path=@sock --shared-dir=@dir --modcaps=+cap_sys_admin
modcaps-upper-case          --socket-path=@sock --shared-dir=@dir --modcaps=+SYS_ADMIN
modcaps-no-sign             --socket-path=@sock --shared-dir=@dir --modcaps=sys_admin
modcaps-unknown             --socket-path=@sock --shared-dir=@dir --modcaps=+sys_nothing
killpriv-v2                 --socket-path=@sock --shared-dir=@dir --killpriv-v2
no-killpriv-v2              --socket-path=@sock --shared-dir=@dir --no-killpriv-v2
writeback                   --socket-path=@sock --shared-dir=@dir --writeback
no-readdirplus              --socket-path=@sock --shared-dir=@dir --no-readdirplus
readdirplus                 --socket-path=@sock --shared-dir=@dir --readdirplus
preserve-noatime            --socket-path=@sock --shared-dir=@dir --preserve-noatime
translate-uid-map           --socket-path=@sock --shared-dir=@dir --translate-uid=map:1000:5000:10
translate-gid-guest         --socket-path=@sock --shared-dir=@dir --translate-gid=guest:1000:5000:10
translate-uid-squash        --socket-path=@sock --shared-dir=@dir --translate-uid=squash-guest:1000:5000:10 --translate-uid=squash-host:5000:1000:1
translate-uid-forbid        --socket-path=@sock --shared-dir=@dir --translate-uid=forbid-guest:0:1
translate-uid-invalid       --socket-path=@sock --shared-dir=@dir --translate-uid=map:1000:5000
translate-uid-bad-type      --socket-path=@sock --shared-dir=@dir --translate-uid=both:1000:5000:10
translate-uid-overlap       --socket-path=@sock --shared-dir=@dir --translate-uid=guest:1000:5000:10 --translate-uid=guest:1005:6000:10
posix-acl-translate-uid     --socket-path=@sock --shared-dir=@dir --posix-acl --translate-uid=map:1000:5000:10
posix-acl-translate-gid     --socket-path=@sock --shared-dir=@dir --xattr --posix-acl --translate-gid=map:1000:5000:10
uid-map                     --socket-path=@sock --shared-dir=@dir --uid-map=:0:100000:65536: --gid-map=:0:100000:65536:
uid-map-invalid             --socket-path=@sock --shared-dir=@dir --uid-map=0:100000:65536
posix-acl-uid-map           --socket-path=@sock --shared-dir=@dir --posix-acl --uid-map=:0:100000:65536: --gid-map=:0:100000:65536:
daemonize                   --socket-path=@sock --shared-dir=@dir --daemonize
foreground-flag             --socket-path=@sock --shared-dir=@dir -f
foreground-long             --socket-path=@sock --shared-dir=@dir --foreground
print-capabilities          --print-capabilities
print-capabilities-group    --print-capabilities --socket-group=root
version                     --version
version-short               -V
help                        --help
help-short                  -h
unknown-option              --socket-path=@sock --shared-dir=@dir --turbo
positional-argument         --socket-path=@sock --shared-dir=@dir extra
compat-source               --socket-path=@sock -o source=@dir
compat-cache-none           --socket-path=@sock -o source=@dir,cache=none
compat-cache-metadata       --socket-path=@sock -o source=@dir,cache=metadata
compat-cache-invalid        --socket-path=@sock -o source=@dir,cache=sometimes
compat-xattr                --socket-path=@sock --shared-dir=@dir -o xattr,no_xattr
compat-posix-acl            --socket-path=@sock --shared-dir=@dir -o posix_acl
compat-posix-acl-no-xattr   --socket-path=@sock --shared-dir=@dir -o posix_acl,no_xattr
compat-security-label       --socket-path=@sock --shared-dir=@dir -o security_label,no_security_label
compat-xattrmap             --socket-path=@sock --shared-dir=@dir -o xattrmap=:map::user.virtiofs.:
compat-readdirplus          --socket-path=@sock --shared-dir=@dir -o readdirplus,no_readdirplus
compat-readdirplus-never    --socket-path=@sock --shared-dir=@dir --cache=never -o readdirplus
compat-writeback            --socket-path=@sock --shared-dir=@dir -o writeback,no_writeback
compat-allow-direct-io      --socket-path=@sock --shared-dir=@dir -o allow_direct_io,no_allow_direct_io
compat-announce-submounts   --socket-path=@sock --shared-dir=@dir -o announce_submounts
compat-killpriv-v2          --socket-path=@sock --shared-dir=@dir -o killpriv_v2,no_killpriv_v2
compat-sandbox-namespace    --socket-path=@sock --shared-dir=@dir -o sandbox=namespace
compat-sandbox-chroot       --socket-path=@sock --shared-dir=@dir -o sandbox=chroot
compat-sandbox-none         --socket-path=@sock --shared-dir=@dir -o sandbox=none
compat-modcaps              --socket-path=@sock --shared-dir=@dir -o modcaps=+sys_admin:-mknod
compat-loglevel             --socket-path=@sock --shared-dir=@dir -o loglevel=debug
compat-loglevel-err         --socket-path=@sock --shared-dir=@dir -o loglevel=err
compat-log-level            --socket-path=@sock --shared-dir=@dir -o log_level=debug
compat-debug                --socket-path=@sock --shared-dir=@dir -o debug
compat-no-locks             --socket-path=@sock --shared-dir=@dir -o no_posix_lock,no_flock
compat-locks                --socket-path=@sock --shared-dir=@dir -o posix_lock,flock
compat-timeout              --socket-path=@sock --shared-dir=@dir -o timeout=5
compat-max-idle-threads     --socket-path=@sock --shared-dir=@dir -o max_idle_threads=8
compat-allow-root           --socket-path=@sock --shared-dir=@dir -o allow_root
compat-unknown              --socket-path=@sock --shared-dir=@dir -o turbo
compat-separate-words       --socket-path=@sock --shared-dir=@dir -o xattr -o writeback
compat-joined               --socket-path=@sock --shared-dir=@dir -oxattr
posix-lock                  --socket-path=@sock --shared-dir=@dir --posix-lock --flock
keep-listening              --socket-path=@sock --shared-dir=@dir --keep-listening
poll-max-us                 --socket-path=@sock --shared-dir=@dir --poll-max-us=10
stats-socket                --socket-path=@sock --shared-dir=@dir --stats-socket=@dir.stats
mount-and-socket            --socket-path=@sock --shared-dir=@dir --mount=@missing
ROWS
)

mkdir -p "$tmp/run"
t0=$SECONDS
# NAME<TAB>LABEL<TAB>OUTCOME a run (start-probe.py says how each is started and judged).
declare -A outcome=()
while IFS=$'\t' read -r row label result; do
    outcome[$row.$label]=$result
done < <("$here/start-probe.py" "$tmp" "${CMDLINE_JOBS:-6}" ferryfsd="$ferryfsd" virtiofsd-rs="$rust" <<<"$table")
names=()
while read -r row _; do
    [[ -n $row ]] && names+=("$row")
done <<<"$table"
say "${#names[@]} command lines through both daemons in $((SECONDS - t0)) s"

# The listed differences: NAME<TAB>WHEN<TAB>REASON, WHEN being always, root or not-root
# (whether make check runs as root: the Rust virtiofsd reads --modcaps and --uid-map
# differently then). A row for the other case is known, but not expected to differ here.
declare -A listed=() elsewhere=()
as=not-root
((EUID == 0)) && as=root
while IFS=$'\t' read -r row when reason; do
    [[ -z $row || $row == \#* ]] && continue
    case $when in
        always | "$as") listed[$row]=$reason ;;
        root | not-root) elsewhere[$row]=$when ;;
        *) fail "cmdline-known-differences: '$row' has WHEN '$when', not always, root or not-root" ;;
    esac
done <"$known"

printf '%-28s %-9s %-13s %s\n' "command line" ferryfsd virtiofsd-rs verdict
for row in "${names[@]}"; do
    f=${outcome[$row.ferryfsd]:-lost}
    r=${outcome[$row.virtiofsd-rs]:-lost}
    if [[ $f == hangs || $r == hangs || $f == lost || $r == lost ]]; then
        verdict="FAIL: no outcome (logs in $tmp/run/$row.*)"
        fail "$row: ferryfsd $f, virtiofsd-rs $r: a daemon neither served nor ended"
    elif [[ $f == "$r" && -z ${listed[$row]+x} ]]; then
        verdict=same
    elif [[ $f != "$r" && -n ${listed[$row]+x} ]]; then
        verdict="listed: ${listed[$row]}"
    elif [[ $f != "$r" ]]; then
        verdict="FAIL: not in cmdline-known-differences"
        fail "$row: ferryfsd $f, virtiofsd-rs $r, and cmdline-known-differences does not list it" \
            "(ferryfsd: $(tail -1 "$tmp/run/$row.ferryfsd/log"); virtiofsd-rs: $(tail -1 "$tmp/run/$row.virtiofsd-rs/log"))"
    else
        verdict="FAIL: stale (listed, but both: $f)"
        fail "$row: listed in cmdline-known-differences but both daemons: $f; remove its row there and in docs/options.md"
    fi
    printf '%-28s %-9s %-13s %s\n' "$row" "$f" "$r" "${verdict:0:90}"
done
for row in "${!listed[@]}" "${!elsewhere[@]}"; do
    printf '%s\n' "${names[@]}" | grep -qxF "$row" ||
        fail "cmdline-known-differences lists '$row', which is no command line of the table"
done
finish
