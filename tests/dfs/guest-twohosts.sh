# Guest script (busybox sh, run from the share by gluster-twohosts-test.sh): role A writes a file (rewritten, then two bytes in place) and holds locks through the daemon on mount A; role B, on mount B, reads the file until it sees each write and probes A's locks.
# shellcheck shell=dash
# $1: A or B; $2: locks (hold/probe them) or nolocks; $3: seconds B may take to see the write.
# Every step waits for a marker file the host makes (through that guest's own mount) and says
# what it did by a marker file of its own; the host times the markers.
role=$1 locks=$2 secs=${3:-20}
cd /mnt || exit 1
wait_for() {
    i=0
    while [ ! -e "$1" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
    [ -e "$1" ] || { echo "TWOHOSTS $role FAIL no $1 from the host"; exit 1; }
}
if [ "$role" = A ]; then
    touch a-up
    wait_for go-write
    # Same length as the host's v1, so only the mtime tells the change.
    printf 'v2 written by A\n' >data
    touch a-wrote
    echo "TWOHOSTS A wrote"
    # In place: two bytes overwritten, the size unchanged (no O_TRUNC).
    wait_for go-inplace
    printf 'v3' | dd of=data bs=2 count=1 conv=notrunc 2>/dev/null
    touch a-inplace
    if [ "$locks" = locks ]; then
        wait_for go-lock
        ./locks hold /mnt
    fi
    wait_for "done"
    exit 0
fi
echo "TWOHOSTS B first read: $(cat data)"
touch b-up
n=0 seen=""
while [ $n -lt $((secs * 20)) ]; do
    out=$(cat data 2>&1)
    [ "$out" = "v2 written by A" ] && break
    case "$seen" in *"[$out]"*) ;; *) seen="${seen}[$out]" ;; esac
    sleep 0.05
    n=$((n + 1))
done
if [ "$out" = "v2 written by A" ]; then
    touch b-saw
    echo "TWOHOSTS B saw A's write after $n reads (before: $seen)"
else
    echo "TWOHOSTS B FAIL never saw A's write in $secs s (saw: $seen)"
fi
# The in-place rewrite: for 5 s at most (only measured).
touch b-saw2
n=0
while [ $n -lt 100 ]; do
    [ "$(cat data 2>&1)" = "v3 written by A" ] && { touch b-saw3; break; }
    sleep 0.05
    n=$((n + 1))
done
echo "TWOHOSTS B in-place rewrite: $(cat data 2>&1) after $n reads"
if [ "$locks" = locks ]; then
    wait_for go-probe
    ./locks probe /mnt
    touch b-probed
fi
wait_for "done"
