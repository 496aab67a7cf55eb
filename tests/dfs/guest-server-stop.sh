# Guest script (busybox sh, run from the share by ceph-server-stop.sh): writes numbered records, each fsync'ed, and reads the one before back, while the host stops the file system's servers for some seconds.
# shellcheck shell=dash
# Says "SYNCED N" once record N and its line in log were synced (sync FILE: fsync), "WRONG ..." for
# a read that gave other bytes, "ERR ..." for a call that failed; ends after the host makes "end".
cd /mnt || exit 1
# record N: the 256 lines of record N (about 5 KiB), the same on the host (ceph-server-stop.sh).
record() {
    i=0
    while [ $i -lt 256 ]; do echo "record $1 line $i"; i=$((i + 1)); done
}
n=0
touch started
while [ ! -e end ] && [ $n -lt 100000 ]; do
    n=$((n + 1))
    if ! out=$( (record $n >rec.$n && sync rec.$n) 2>&1); then
        echo "ERR write $n: $out"
    elif ! out=$( (echo "synced $n" >>log && sync log) 2>&1); then
        echo "ERR append $n: $out"
    else
        echo "SYNCED $n"
    fi
    if [ $n -gt 1 ]; then
        m=$((n - 1))
        if out=$(cat rec.$m 2>&1); then
            [ "$out" = "$(record $m)" ] || echo "WRONG rec.$m"
        else
            echo "ERR read $m: $out"
        fi
    fi
done
echo "SERVERSTOP done $n"
