#!/usr/bin/env bash
# make check: the same command lines given to ferryfsd and to the Rust virtiofsd 1.13; each must start both, refuse both, or differ as cmdline-known-differences says.
#
# Each row of cmdline-command-lines is one command line. Both daemons get it, each with a fresh
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
# In a row there: @sock is the socket path, @dir the share, @file a regular file, @missing a path
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

table=$(grep -v "^#" "$here/cmdline-command-lines")

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
