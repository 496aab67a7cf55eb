#!/usr/bin/env bash
# make check test: fsops in a Linux 6.12 guest under QEMU 10 on packed virtqueues (vhost-user-fs packed=on) against ferryfsd.
#
# Usage: fsops-packed-test.sh [PATH_TO_FERRYFSD]   (or env FERRYFSD; default build/ferryfsd)
# Env:   FERRYFS_E2E_TIMEOUT=300 guest timeout (s); FERRYFS_E2E_KEEP=1 keep the tmp dir
# Exit:  0 pass; 1 fail; 77 the current stack (QEMU 10, Linux 6.12 guest) cannot be had here.
# Neither virtiofsd offers packed rings, so there is no reference column.
set -uo pipefail
export FERRYFS_STACK=current
source "$(dirname "$0")/../lib/guest.sh"
ferryfsd="${1:-$ferryfsd}"
guest_timeout="${FERRYFS_E2E_TIMEOUT:-300}"
make_tmp
guest_prepare
fsops="$guest_dir/fsops"
source "$repo/tests/e2e/host-checks.sh"
share=$tmp/share sock=$tmp/vhost.sock
# What fsops-test.sh puts in the share for the guest, and checks afterwards.
mkdir -p "$share/host"
printf 'hello from the host\n' >"$share/host/hello.txt"
"$fsops" --expect hostpat >"$share/host/pattern.bin"
prepare_cap_files "$share"
start_daemon --xattr
say "booting the $guest_stack guest with packed=on (timeout ${guest_timeout}s)"
t0=$SECONDS grc=0
# The property lives on the virtio device inside vhost-user-fs-pci.
"$run_guest" --guest "$guest_dir" --sock "$sock" --cmd fsops --log "$tmp/console.log" --quiet \
    --timeout "$guest_timeout" --watch-pid "$daemon_pid" \
    -- -global vhost-user-fs-device.packed=on || grc=$?
say "guest finished in $((SECONDS - t0))s (run-guest exit $grc)"
check "the guest's fsops passed (run-guest exit $grc)" test "$grc" -eq 0
check "ferryfsd negotiated packed virtqueues" grep -q "packed virtqueues negotiated" "$tmp/daemon.log"
check "no queue broke" bash -c "! grep -q 'broken' '$tmp/daemon.log'"
run_host_checks "$share" "$tmp/results"
check "host checks of the share: $(grep -c $'\tPASS' "$tmp/results") pass, none fails" \
    bash -c "! grep $'\tFAIL' '$tmp/results'"
# README.md: ferryfsd exits 0 once its frontend is gone.
expect_daemon_exit "$daemon_pid" ferryfsd && echo "  ok   ferryfsd exited 0 by itself after QEMU quit"
if ((fails)); then
    grep $'\tFAIL' "$tmp/results" | sed 's/^/    /'
    tr -d '\r' <"$tmp/console.log" | grep -a 'CHECK .* FAIL' | sed 's/^/    console: /'
    tail -10 "$tmp/daemon.log" | sed 's/^/    daemon: /'
fi
tmp_drop+=("$share")
finish
