#!/usr/bin/env bash
# `make demo`: share a host directory through ferryfsd with a QEMU guest that reads, writes and renames files in it.
#
# Usage: scripts/demo.sh [DEMO_DIR]     (default /tmp/ferryfs-demo; env FERRYFSD=path/to/ferryfsd,
#        FERRYFSD_ARGS="extra daemon options", FERRYFS_STACK=stable|current: tests/e2e/stack-lib.sh)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
demo="${1:-/tmp/ferryfs-demo}"
ferryfsd="${FERRYFSD:-$repo/build/ferryfsd}"
source "$repo/tests/e2e/stack-lib.sh"
stack="$(stack_name)"
guest_dir="$(stack_guest_dir)"
read -r -a extra <<<"${FERRYFSD_ARGS:-}"

step() { printf '\n==> %s\n' "$*"; }

if [[ ! -x "$ferryfsd" ]]; then
    echo "demo: $ferryfsd not found; build it first (make)" >&2
    exit 1
fi

step "Checking dependencies"
"$repo/scripts/deps.sh"

step "Preparing the $stack stack's guest image (Debian kernel + busybox initramfs) in $guest_dir"
stack_prepare || { echo "demo: the $stack stack is not available here" >&2; exit 1; }
"$repo/tests/e2e/build-guest.sh" "$guest_dir"

step "Creating the shared directory $demo"
share="$demo/share"
rm -rf "$share"
mkdir -p "$share/docs"
cat >"$share/welcome.txt" <<'EOF'
Hello, guest! This file lives on the host.
ferryfsd serves it to you over virtio-fs.
EOF
printf 'alpha\nbeta\ngamma\n' >"$share/docs/list.txt"
ls -l "$share"

sock="$demo/ferryfsd.sock"
rm -f "$sock"
step "Starting ferryfsd: $ferryfsd --socket-path=$sock --shared-dir=$share ${extra[*]}"
"$ferryfsd" --socket-path="$sock" --shared-dir="$share" "${extra[@]}" >"$demo/ferryfsd.log" 2>&1 &
pid=$!
trap 'kill -0 "$pid" 2>/dev/null && kill "$pid" 2>/dev/null; true' EXIT
for ((i = 0; i < 100; i++)); do
    [[ -S "$sock" ]] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
if [[ ! -S "$sock" ]]; then
    echo "demo: ferryfsd did not start; its log:" >&2
    cat "$demo/ferryfsd.log" >&2
    exit 1
fi

step "Booting the guest under QEMU (TCG, about 10 s); its console follows"
# Only the guest's own narration is shown; the full console is in console.log.
set +e
"$repo/tests/e2e/run-guest.sh" --guest "$guest_dir" --sock "$sock" --cmd demo \
    --log "$demo/console.log" --timeout 180 --watch-pid "$pid" |
    tr -d '\r' | grep -a --line-buffered -E '^\[guest\]|FERRYFS-GUEST|run-guest'
rc=${PIPESTATUS[0]}
set -e

step "Waiting for ferryfsd to exit after the guest disconnected"
for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
if kill -0 "$pid" 2>/dev/null; then
    echo "ferryfsd still running; stopping it"
    kill "$pid"
fi
wait "$pid" 2>/dev/null || true

step "What the host sees in $share now"
ls -lR "$share"
for f in "$share/guest-hello.txt" "$share/from-guest/renamed.txt"; do
    if [[ -f "$f" ]]; then
        printf '\n--- %s ---\n' "${f#"$share"/}"
        cat "$f"
    fi
done

if ((rc == 0)) && [[ -f "$share/guest-hello.txt" && -f "$share/from-guest/renamed.txt" ]]; then
    step "Demo finished: the guest's writes are on the host (console log: $demo/console.log)"
else
    step "Demo FAILED (guest exit $rc); see $demo/console.log and $demo/ferryfsd.log"
    exit 1
fi
