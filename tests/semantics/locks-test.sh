#!/usr/bin/env bash
# Guest e2e (make check): guest and host see each other's POSIX and flock locks through ferryfsd --posix-lock --flock; a waiting SETLKW does not stall the queue.
#
# Usage: locks-test.sh [PATH_TO_FERRYFSD]   Env: VIRTIOFSD (reference column on stable), FERRYFS_GUEST_DIR,
#        FERRYFS_DAEMON_USER=auto (ferryfsd as a user the test makes, tests/lib/unpriv.sh; no reference column)
# The reference column (printed, side by side, not judged): QEMU's C virtiofsd on the stable stack,
# the Rust virtiofsd on the current one.
#        FERRYFS_SHARE_ROOT=DIR (the shares in a fresh subdirectory of DIR, e.g. a GlusterFS mount:
#        tests/dfs/gluster-semantics-test.sh; sockets and binaries stay in /tmp; no reference column)
# Exit: 0 pass, 1 fail, 77 skipped (no QEMU or guest image).
# Not covered, because Linux's virtio-fs driver (6.1) never sends FUSE INTERRUPT: a signal
# interrupting a guest F_SETLKW (the guest process stays in a killable-only wait until the host
# lets go). INTERRUPT and cancellation are covered by tests/unit (test_fuse_decode, test_vhost_user).
set -euo pipefail

source "$(dirname "$0")/../lib/guest.sh"
ferryfsd="${1:-$ferryfsd}"
virtiofsd="${VIRTIOFSD:-/usr/lib/qemu/virtiofsd}"
guest_dir="$(stack_guest_dir)"

stack_prepare || skip "the $(stack_name) stack cannot be had here (see above)"
"$repo/tests/e2e/build-guest.sh" "$guest_dir" >/dev/null || skip "no guest image"

tmp="$(mktemp -d /tmp/ferryfs-locks.XXXXXX)"
shares="$tmp"
[[ -z "${FERRYFS_SHARE_ROOT:-}" ]] || shares="$(mktemp -d "$FERRYFS_SHARE_ROOT/locks.XXXXXX")"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    unpriv_cleanup || true
    rm -rf "$tmp" "$shares"
}
trap cleanup EXIT
unpriv_setup
unpriv_own "$tmp"
gcc -O2 -Wall -Werror -o "$tmp/host-locker" "$here/host-locker.c"

# One run: daemon command line in "$@"; prints the guest's CHECK lines and host results.
run_one() {
    local name="$1"; shift
    local share="$shares/$name" sock="$tmp/$name.sock" log="$tmp/$name.log" rc=0
    mkdir -p "$share"
    : >"$share/hostposix"; : >"$share/hostflock"
    unpriv_own "$share"
    "$@" --socket-path="$sock" >"$tmp/$name.daemon.log" 2>&1 &
    local dpid=$!; pids+=("$dpid")
    for _ in $(seq 100); do [[ -S "$sock" ]] && break; sleep 0.1; done
    ! unpriv_active || { unpriv_runs_as_user "$dpid" && echo daemon_as_user=yes || echo daemon_as_user=no; }
    "$tmp/host-locker" hold "$share/hostposix" "$share/hostflock" "$share/io-done" \
        >"$tmp/$name.hold" &
    local hpid=$!; pids+=("$hpid")
    # The host half of the reverse direction, once the guest holds its locks.
    (
        for _ in $(seq 2400); do [[ -e "$share/guest-holds" ]] && break; sleep 0.1; done
        "$tmp/host-locker" probe "$share/guestposix" "$share/guestflock" >"$tmp/$name.probe" 2>&1
        echo "probe_rc=$?" >>"$tmp/$name.probe"
        : >"$share/host-checked"
        "$tmp/host-locker" wait "$share/guestposix" "$share/guestflock" >"$tmp/$name.wait" 2>&1
        echo "wait_rc=$?" >>"$tmp/$name.wait"
    ) &
    local ppid=$!; pids+=("$ppid")
    "$repo/tests/e2e/run-guest.sh" --sock "$sock" --cmd run --args "/bin/fsops --hostlocks /mnt" \
        --log "$log" --quiet --timeout 300 --watch-pid "$dpid" || rc=$?
    wait "$hpid" 2>/dev/null || true
    wait "$ppid" 2>/dev/null || true
    # The daemon exits 0 once the guest is gone; a crash shows here.
    local drc=0
    wait "$dpid" 2>/dev/null || drc=$?
    echo "daemon_rc=$drc"
    echo "guest_rc=$rc"
    grep -a '^CHECK ' "$log" | tr -d '\r' || true
    cat "$tmp/$name.probe" "$tmp/$name.wait" 2>/dev/null || true
}

ferry_out="$(run_one ferryfsd "${unpriv_prefix[@]}" "$ferryfsd" --shared-dir="$shares/ferryfsd" --posix-lock --flock)"
echo "$ferry_out" | sed 's/^/  ferryfsd: /'
# The reference column: the virtiofsd users of each stack run. On stable, QEMU's C virtiofsd 7.2
# (-o posix_lock; no flock support); on current, the Rust virtiofsd 1.13, which has no lock
# options and answers lock requests with ENOSYS, so the guest's locks stay inside the guest.
ref_name="" ref_out=""
if unpriv_active; then
    say "no reference column: this run is about ferryfsd as $unpriv_user, one boot"
elif [[ -n "${FERRYFS_SHARE_ROOT:-}" ]]; then
    say "no reference column: this run is about ferryfsd on $FERRYFS_SHARE_ROOT, one boot"
elif [[ ${FERRYFS_CHECK_LONG:-} != 1 ]]; then
    # A second boot that decides nothing: make check-long runs it.
    say "no reference column in make check (make check-long, FERRYFS_CHECK_LONG=1, adds it), one boot"
elif stack_rust_reference; then
    ref_name=virtiofsd-rs
    ref_out="$(run_one virtiofsd-rs "$stack_virtiofsd_rs" --shared-dir="$tmp/virtiofsd-rs" 2>&1 || true)"
elif [[ -x "$virtiofsd" ]]; then
    ref_name=virtiofsd
    ref_out="$(run_one virtiofsd "$virtiofsd" -o source="$tmp/virtiofsd" -o posix_lock 2>&1 || true)"
fi
[[ -z "$ref_name" ]] || echo "$ref_out" | sed "s/^/  $ref_name (reference): /"

fail=0
for want in "guest_rc=0" "daemon_rc=0" "probe_rc=0" "wait_rc=0" \
    "CHECK setlk-sees-host PASS" "CHECK getlk-sees-host PASS" "CHECK flock-sees-host PASS" \
    "CHECK setlkw-waits-for-host PASS" "CHECK queue-not-stalled PASS" "CHECK child-io PASS" \
    "CHECK flock-waits-for-host PASS" "CHECK guest-locks PASS" "CHECK host-probed PASS" \
    ${unpriv_user:+daemon_as_user=yes}; do
    if ! grep -qF -- "$want" <<<"$ferry_out"; then
        say "FAIL: ferryfsd: missing '$want'"
        fail=1
    fi
done
# Side by side: each lock check as ferryfsd and the reference daemon answered it.
if [[ -n "$ref_name" ]]; then
    printf '  %-26s %-9s %s\n' check ferryfsd "$ref_name"
    for c in $(grep -o 'CHECK [a-z-]*' <<<"$ferry_out" | cut -d' ' -f2); do
        printf '  %-26s %-9s %s\n' "$c" "$(grep -m1 "^CHECK $c " <<<"$ferry_out" | cut -d' ' -f3)" \
            "$(grep -m1 "^CHECK $c " <<<"$ref_out" | cut -d' ' -f3 | sed 's/^$/-/')"
    done
fi
((fail)) && exit 1
say "PASS"
