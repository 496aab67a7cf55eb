#!/usr/bin/env bash
# make check: a hostile guest (tests/security/attack_client.c) against a running ferryfsd; nothing outside the share changes, exit 0.
set -uo pipefail
source "$(dirname "$0")/../lib/common.sh"
cd "$repo"
daemon=${1:-$ferryfsd}
client=$build/tests/security/attack-client
need_built "$daemon" "$client"

base=$(mktemp -d /tmp/ferry-attack-sock-XXXXXX)
sockdir=$(mktemp -d /tmp/ferry-attack-sockdir-XXXXXX)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null
	rm -rf "$base" "$sockdir"
}
trap cleanup EXIT
mkdir "$base/share" "$base/canary" "$base/canary/sub"
echo canary >"$base/canary/secret"
echo data >"$base/share/f"
# Everything next to the share, down to inode numbers and times.
snapshot() {
	(cd "$base" && find . -path ./share -prune -o -printf '%p %i %m %n %U %G %s %T@ %C@\n' | sort)
}
before=$(snapshot)

"$daemon" --socket-path="$sockdir/vfs.sock" --shared-dir="$base/share" --log-level=error &
pid=$!
wait_socket "$sockdir/vfs.sock" "$pid"

fail=0
"$client" "$sockdir/vfs.sock" "$base/canary" || fail=1
# The client closed the connection: ferryfsd must exit on its own, with 0.
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then
	echo "FAIL  ferryfsd still running 10 s after the frontend left"
	fail=1
else
	wait "$pid"; rc=$?
	pid=
	if [ $rc -eq 0 ]; then echo "ok    ferryfsd exited with 0 after the frontend left"
	else echo "FAIL  ferryfsd exited with $rc"; fail=1; fi
fi
after=$(snapshot)
if [ "$before" == "$after" ]; then
	echo "ok    nothing next to the share changed"
else
	echo "FAIL  outside the share changed:"; diff <(echo "$before") <(echo "$after"); fail=1
fi
exit $fail
