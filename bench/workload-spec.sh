# bench/workload-spec.sh: sourced by bench/compare and bench/daemon-profile; turns a workload spec into ferryfs-load's options.
# spec_options SPEC: the ferryfs-load options of a workload spec (NAME[:bs=SIZE,qd=N,disk,cold]), one
# per line; "disk" and "cold" are printed as themselves for the caller ("cold": the data file is kept
# out of the host's page cache, ferryfs-load's --cold, so reads reach the disk or the file system's
# server). Fails with a message, prefixed with $spec_prog, on
# a setting it does not know.
spec_options() {
    local name=${1%%:*} item
    echo --workload; echo "$name"
    [[ $1 == *:* ]] || return 0
    local IFS=,
    for item in ${1#*:}; do
        case $item in
        bs=[0-9]*) echo --block-size; echo "${item#bs=}" ;;
        qd=[1-9]*) echo --queue-depth; echo "${item#qd=}" ;;
        disk | cold) echo "$item" ;;
        *) echo "${spec_prog:-bench}: workload $1: unknown setting '$item' (bs=SIZE, qd=N, disk, cold)" >&2; return 2 ;;
        esac
    done
}

# spec_split SPEC SHARE DISK_SHARE: sets spec_opts to SPEC's ferryfs-load options, spec_share to
# DISK_SHARE if SPEC has "disk", else SHARE, and spec_cold to 1 if SPEC has "cold", else empty. The
# spec must have passed spec_options already.
spec_split() {
    local opt
    spec_opts=() spec_share=$2 spec_cold=
    while read -r opt; do
        case $opt in
        disk) spec_share=$3 ;;
        cold) spec_cold=1 ;;
        *) spec_opts+=("$opt") ;;
        esac
    done < <(spec_options "$1")
}
