#!/usr/bin/env bash
# The one place that maps a test stack (FERRYFS_STACK=stable|current) to its guest dir and QEMU; sourced by the harness, or run as a command.
#
# Stacks:  stable   Debian 12's QEMU 7.2 (qemu-system-x86_64 on PATH) + Debian 12's Linux 6.1 guest
#                   (the default, guest dir $FERRYFS_CACHE/guest)
#          current  QEMU 10.0 + Linux 6.12 (bookworm-backports), unpacked by scripts/stack.sh into
#                   $FERRYFS_CACHE/current, guest dir $FERRYFS_CACHE/guest-current
# Env:     FERRYFS_STACK (default stable); FERRYFS_GUEST_DIR overrides the guest dir of the stack
#          FERRYFS_STACK selects (not of another stack named explicitly, so a dir set for stable is
#          never rebuilt for current); FERRYFS_CACHE (default /var/cache/ferryfs).
#
# Sourced, it defines:
#   stack_name              the selected stack (exits 2 on an unknown FERRYFS_STACK)
#   stack_guest_dir [S]     the guest dir for stack S (default: the selected one; FERRYFS_GUEST_DIR
#                           counts only when S is the selected stack)
#   stack_qemu S ARGS...    runs S's qemu-system-x86_64 with ARGS (S "" = the selected stack)
#   stack_qemu_argv [S]     sets the array stack_qemu_cmd to S's QEMU program and leading options
#   stack_qemu_abort LOG    prints the line of QEMU's own assertion in console log LOG (a QEMU bug:
#                           QEMU 10.0's TCG has aborted at boot) and succeeds; fails if there is none
#   stack_prepare [S]       makes S usable: fetches the current stack's packages (scripts/stack.sh);
#                           returns 77 with a message naming what is missing, 0 when ready
#   stack_rust_reference    true when the Rust virtiofsd is the reference column: the current stack
#                           is selected and scripts/stack.sh has cached the Rust virtiofsd
#                           ($stack_virtiofsd_rs, the launcher)
#   stack_default_current SCRIPT ARGS...  with FERRYFS_STACK unset, re-executes SCRIPT on the
#                           current stack (stable when current cannot be had); for the guest tests
#                           that do not test the guest's kernel
# Run as a command:
#   stack-lib.sh guest-dir [S]        prints the guest dir
#   stack-lib.sh qemu [S] -- ARGS...   execs the stack's QEMU (e.g. `qemu current -- --version`)
#   stack-lib.sh prepare [S]          fetch (exit 0, or 77 with the reason)
#   stack-lib.sh run S CMD [ARGS...]  runs CMD with FERRYFS_STACK=S and FERRYFS_GUEST_DIR set, so any
#                                     existing guest test boots that stack, e.g.
#                                     tests/e2e/stack-lib.sh run current tests/semantics/locks-test.sh

stack_lib_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
stack_repo="$(cd "$stack_lib_dir/../.." && pwd)"

stack_name() {
    local s="${1:-${FERRYFS_STACK:-stable}}"
    case "$s" in
        stable | current) echo "$s" ;;
        *) echo "stack-lib: unknown stack '$s' (FERRYFS_STACK must be stable or current)" >&2; exit 2 ;;
    esac
}

stack_guest_dir() {
    local s sel cache="${FERRYFS_CACHE:-/var/cache/ferryfs}"
    s="$(stack_name "${1:-}")"
    sel="$(stack_name)"
    if [[ -n "${FERRYFS_GUEST_DIR:-}" && "$s" == "$sel" ]]; then
        echo "$FERRYFS_GUEST_DIR"
    elif [[ "$s" == stable ]]; then
        echo "$cache/guest"
    else
        echo "$cache/guest-$s"
    fi
}

# The unpacked QEMU 10 needs its firmware dirs (-L) and its own modules (QEMU_MODULE_DIR), or it
# loads QEMU 7.2's modules from the system and warns. stack_qemu_argv S sets the array
# stack_qemu_cmd (program and leading options) and exports QEMU_MODULE_DIR when needed.
stack_qemu_argv() {
    local s root
    s="$(stack_name "${1:-}")"
    if [[ "$s" == stable ]]; then
        stack_qemu_cmd=(qemu-system-x86_64)
        return 0
    fi
    root="${FERRYFS_CACHE:-/var/cache/ferryfs}/current/qemu"
    if [[ ! -x "$root/usr/bin/qemu-system-x86_64" ]]; then
        echo "stack-lib: QEMU 10 is not cached in $root (run scripts/stack.sh fetch)" >&2
        return 77
    fi
    export QEMU_MODULE_DIR="$root/usr/lib/x86_64-linux-gnu/qemu"
    stack_qemu_cmd=("$root/usr/bin/qemu-system-x86_64" -L "$root/usr/share/seabios" -L "$root/usr/share/qemu")
}

stack_qemu() {
    local stack_qemu_cmd=()
    stack_qemu_argv "${1:-}" || return $?
    shift
    "${stack_qemu_cmd[@]}" "$@"
}

# QEMU 10.0's TCG has aborted at boot on its own assertion ("iotlb_to_section:
# Assertion `section_index < d->map.sections_nb' failed"), twice so far in CI
# runs, before the guest's kernel ran. The line may start mid-line: the second
# time it came right after the firmware's screen-clearing escapes, which end
# with no newline.
stack_qemu_abort() {
    tr -d '\r' <"$1" 2>/dev/null | grep -aoE -m1 'qemu-system-[a-z0-9_]+: .*Assertion .* failed\.?'
}

stack_prepare() {
    local s rc=0
    s="$(stack_name "${1:-}")"
    if [[ "$s" == stable ]]; then
        command -v qemu-system-x86_64 >/dev/null || {
            echo "stack-lib: SKIP: qemu-system-x86_64 not installed (run scripts/deps.sh)" >&2
            return 77
        }
        return 0
    fi
    "$stack_repo/scripts/stack.sh" fetch || rc=$?
    if ((rc != 0)); then
        echo "stack-lib: SKIP: the current stack (QEMU 10, Linux 6.12, Rust virtiofsd) is not available (scripts/stack.sh exit $rc)" >&2
        return 77
    fi
}

# stack_default_current SCRIPT [ARGS...]: for a guest test that does not test the guest's kernel
# (start-up, faults, stats, sandbox), which runs on the current stack only (issue 14). With
# FERRYFS_STACK unset it re-executes SCRIPT on the current stack (as `stack-lib.sh run current`);
# when that stack cannot be fetched here it says so and returns, and the test goes on on stable,
# so a machine without the current stack still runs it. With FERRYFS_STACK set it returns at once.
stack_virtiofsd_rs="$stack_lib_dir/virtiofsd-rs"
# The reference daemon users of each stack run: QEMU's C virtiofsd with Debian 12, the Rust
# virtiofsd (Debian 13's) beside QEMU 10 and a 6.12 guest.
stack_rust_reference() {
    [[ "$(stack_name)" == current ]] && "$stack_virtiofsd_rs" --version >/dev/null 2>&1
}

stack_default_current() {
    [[ -z "${FERRYFS_STACK:-}" ]] || return 0
    local dir
    # Before FERRYFS_STACK changes: a FERRYFS_GUEST_DIR set for the stable stack is not this one's.
    dir="$(stack_guest_dir current)"
    if stack_prepare current >&2; then
        FERRYFS_STACK=current FERRYFS_GUEST_DIR="$dir" exec "$@"
    fi
    echo "stack-lib: the current stack cannot be had here; $(basename "$1") runs on the stable stack" >&2
}

# stack_require_current TEST [ARGS...]: a test of the current stack only runs itself again on it
# (its own guest dir), or exits 77 naming itself when that stack cannot be had here.
stack_require_current() {
    [[ "${FERRYFS_STACK:-}" != current ]] || return 0
    local dir
    # Before FERRYFS_STACK changes: a FERRYFS_GUEST_DIR set for the stable stack is not this one's.
    dir="$(stack_guest_dir current)"
    if ! stack_prepare current; then
        echo "$(basename "$1" .sh): SKIP: the current stack (QEMU 10, Linux 6.12) cannot be had here"
        exit 77
    fi
    FERRYFS_STACK=current FERRYFS_GUEST_DIR="$dir" exec "$@"
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
    set -euo pipefail
    case "${1:-}" in
        guest-dir) stack_guest_dir "${2:-}" ;;
        qemu)
            shift
            s=""
            if (($#)) && [[ "$1" != -- ]]; then s=$1; shift; fi
            [[ "${1:-}" == -- ]] && shift
            stack_qemu_argv "$s" || exit $?
            exec "${stack_qemu_cmd[@]}" "$@" ;;
        prepare) stack_prepare "${2:-}" ;;
        run)
            [[ -n "${2:-}" && -n "${3:-}" ]] || { echo "usage: stack-lib.sh run STACK CMD [ARGS...]" >&2; exit 2; }
            s="$(stack_name "$2")"
            shift 2
            FERRYFS_STACK="$s" FERRYFS_GUEST_DIR="$(stack_guest_dir "$s")" exec "$@" ;;
        *) sed -n '2,/^$/p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
    esac
fi
