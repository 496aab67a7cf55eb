# bench/workload-spec.sh: sourced by bench/compare and bench/daemon-profile; turns a workload spec into ferryfs-load's options.
# spec_options SPEC: the ferryfs-load options of a workload spec (NAME[:bs=SIZE,qd=N,disk]), one per
# line; "disk" is printed as itself for the caller. Fails with a message, prefixed with $spec_prog, on
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
        disk) echo disk ;;
        *) echo "${spec_prog:-bench}: workload $1: unknown setting '$item' (bs=SIZE, qd=N, disk)" >&2; return 2 ;;
        esac
    done
}

# spec_split SPEC SHARE DISK_SHARE: sets spec_opts to SPEC's ferryfs-load options and spec_share to
# DISK_SHARE if SPEC has "disk", else SHARE. The spec must have passed spec_options already.
spec_split() {
    local opt
    spec_opts=() spec_share=$2
    while read -r opt; do
        if [[ $opt == disk ]]; then spec_share=$3; else spec_opts+=("$opt"); fi
    done < <(spec_options "$1")
}
