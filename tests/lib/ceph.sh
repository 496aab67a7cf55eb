# Sourced by the CephFS tests: a one-node Ceph cluster (Debian 12's Ceph 16) in a network namespace of the test's own, its CephFS mounted twice on the host with ceph-fuse (two "hosts").
# Builds on common.sh (make_tmp, skip, die, say). Nothing runs at source time.
#
# The daemons (one mon, one mgr, one BlueStore OSD on an 8 GiB sparse file, one MDS) listen on
# 127.0.0.1 of a network namespace that a holder process (`unshare --net`) keeps alive: nothing
# outside it can reach them, and they reach nothing outside. Their state, logs, admin sockets and
# pid files are all under $tmp/ceph (a ceph.conf there, passed to every command by CEPH_CONF), with
# cephx off (auth none) and pools of size 1. ceph-fuse runs in that network namespace too (it
# must reach the mon) but stays in the host's mount namespace, so its mounts are plain host
# directories: ferryfsd, QEMU and the host-side checks need no nsenter to use them.
# Every process is started in the foreground of its own (-f) and its pid recorded: ceph_stop
# unmounts, then ends exactly those pids and the holder, and is registered as a cleanup. bash runs
# no EXIT trap when a signal ends it, and the mounts are the host's: so SIGTERM, SIGINT and SIGHUP
# (meson's timeout, ^C) are made to exit the test, which then cleans up as on any other exit.
#
#   ceph_need             skips (77) when root, /dev/fuse or a Ceph package is missing
#   ceph_start [ARGS...]  the cluster, one CephFS (pools of size 1), mounted at $ceph_a and
#                         $ceph_b (ceph-fuse ARGS for both); says how long it took ($ceph_ready_secs)
#   ceph_mount DIR [OPTS] one more ceph-fuse mount of the fs (another "host"); OPTS are extra
#                         ceph-fuse arguments (e.g. --client_acl_type=posix_acl)
#   ceph_ns CMD...        runs CMD in the cluster's network namespace (the `ceph` CLI)
#   ceph_attach           in a part run by tests/dfs/ceph-test.sh: the cluster it started
#                         (FERRYFS_CEPH_HOLDER, FERRYFS_CEPH_DIR), $ceph_a and $ceph_b; ceph_stop
#                         then removes only this process's own mounts
#   ceph_export           sets those two (and FERRYFS_CEPH_PIDS) for the parts, after ceph_start
#   ceph_stop             tears it all down (idempotent)
#   ceph_mon_pid, ceph_mgr_pid, ceph_osd_pid, ceph_mds_pid   the daemons' pids (a fault test
#                         stops and resumes them; attached, from FERRYFS_CEPH_PIDS)

ceph_holder=""
ceph_attached=0
ceph_dir=""
ceph_pids=()
ceph_fuse_pids=()
ceph_mounts=()
ceph_enter=()
ceph_fs=ferryfs

ceph_need() {
    need_root "the Ceph daemons, network namespaces and FUSE mounts"
    local c
    for c in ceph-mon:ceph-mon ceph-mgr:ceph-mgr ceph-osd:ceph-osd ceph-mds:ceph-mds ceph-fuse:ceph-fuse \
        ceph:ceph-common monmaptool:ceph-common; do
        command -v "${c%%:*}" >/dev/null || skip "${c%%:*} missing: Debian package ${c#*:} (scripts/deps.sh installs it)"
    done
    need_cmd unshare nsenter ip
    [[ -c /dev/fuse ]] || skip "/dev/fuse missing"
}

ceph_ns() { "${ceph_enter[@]}" "$@"; }

# ceph_conf DIR FSID: the cluster's whole configuration, every path under DIR.
ceph_conf() {
    cat <<EOF
[global]
fsid = $2
mon host = [v2:127.0.0.1:3300,v1:127.0.0.1:6789]
public addr = 127.0.0.1
cluster addr = 127.0.0.1
public network = 127.0.0.0/8
cluster network = 127.0.0.0/8
ms bind ipv6 = false
auth cluster required = none
auth service required = none
auth client required = none
auth supported = none
run dir = $1/run
admin socket = $1/run/\$cluster-\$name.asok
pid file = $1/run/\$cluster-\$name.pid
log file = $1/log/\$cluster-\$name.log
keyring = $1/keyring
crash dir = $1/crash
osd pool default size = 1
osd pool default min size = 1
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
osd crush chooseleaf type = 0
[mon]
mon data = $1/mon/\$cluster-\$id
mon cluster log file = $1/log/cluster.log
[mgr]
mgr data = $1/mgr/\$cluster-\$id
[osd]
osd data = $1/osd/\$cluster-\$id
osd objectstore = bluestore
bluestore block path = $1/osd/\$cluster-\$id.block
bluestore block create = true
bluestore block size = 8589934592
osd memory target = 939524096
[mds]
mds data = $1/mds/\$cluster-\$id
[client]
# The ceph CLI is a client too: no log or admin socket of its own; ceph_mount gives ceph-fuse both.
admin socket =
log file = /dev/null
EOF
}

# ceph_daemon NAME CMD...: CMD (a daemon with -f) in the namespace, in the background, its pid kept.
ceph_daemon() {
    local name=$1
    shift
    "${ceph_enter[@]}" "$@" >>"$ceph_dir/log/$name.out" 2>&1 &
    ceph_pids+=("$!")
    [[ $name == *-* ]] || printf -v "ceph_${name}_pid" %s "$!"
}

# ceph_wait SECS WHAT CMD...: CMD (in the namespace) succeeds within SECS, else the test dies.
ceph_wait() {
    local secs=$1 what=$2 i
    shift 2
    # The ceph CLI costs a few tenths of a second of CPU a call: asked once a second.
    for ((i = 0; i < secs; i++)); do
        ceph_ns "$@" >/dev/null 2>&1 && return 0
        sleep 1
    done
    die "Ceph: $what not within $secs s (logs in $ceph_dir/log)"
}

ceph_start() {
    ceph_need
    local c="$tmp/ceph" t0=$SECONDS fsid i uuid p
    ceph_dir=$c
    mkdir -p "$c/run" "$c/log" "$c/crash" "$c/mon/ceph-a" "$c/mgr/ceph-x" "$c/osd/ceph-0" "$c/mds/ceph-a" "$c/a" "$c/b"
    # The OSD's 8 GiB block file is sparse, but kept with the logs it would be 8 GiB to copy.
    tmp_drop+=("$c/osd")
    fsid=$(cat /proc/sys/kernel/random/uuid)
    ceph_conf "$c" "$fsid" >"$c/ceph.conf"
    ceph_exit_on_signals
    unshare --net -- sleep infinity &
    ceph_holder=$!
    disown "$ceph_holder" # its SIGKILL at the end is no news for the test's output
    cleanup_cmds+=('ceph_stop')
    for ((i = 0; i < 50; i++)); do
        [[ "$(readlink "/proc/$ceph_holder/ns/net")" != "$(readlink /proc/self/ns/net)" ]] && break
        sleep 0.1
    done
    ceph_enter=(nsenter --target "$ceph_holder" --net -- env CEPH_CONF="$c/ceph.conf")
    ceph_ns ip link set lo up || die "Ceph: no loopback in the namespace"
    # auth none still wants a keyring file to exist for mkfs.
    ceph-authtool --create-keyring "$c/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null ||
        die "Ceph: ceph-authtool failed"
    monmaptool --create --fsid "$fsid" --addv a '[v2:127.0.0.1:3300,v1:127.0.0.1:6789]' "$c/monmap" >/dev/null ||
        die "Ceph: monmaptool failed"
    ceph_ns ceph-mon --mkfs -i a --monmap "$c/monmap" >"$c/log/mon-mkfs.out" 2>&1 ||
        die "Ceph: ceph-mon --mkfs: $(tail -3 "$c/log/mon-mkfs.out")"
    ceph_daemon mon ceph-mon -f -i a
    ceph_wait 30 "the mon answering" ceph --connect-timeout 5 mon stat
    ceph_daemon mgr ceph-mgr -f -i x
    uuid=$(cat /proc/sys/kernel/random/uuid)
    ceph_ns ceph osd new "$uuid" >/dev/null 2>"$c/log/osd-new.out" || die "Ceph: osd new: $(cat "$c/log/osd-new.out")"
    ceph_ns ceph-osd -i 0 --mkfs --osd-uuid "$uuid" >"$c/log/osd-mkfs.out" 2>&1 ||
        die "Ceph: ceph-osd --mkfs: $(tail -3 "$c/log/osd-mkfs.out")"
    ceph_daemon osd ceph-osd -f -i 0
    for p in metadata data; do
        ceph_ns ceph osd pool create "${ceph_fs}_$p" 8 >/dev/null 2>>"$c/log/pools.out" &&
            ceph_ns ceph osd pool set "${ceph_fs}_$p" size 1 --yes-i-really-mean-it >/dev/null 2>>"$c/log/pools.out" ||
            die "Ceph: pool ${ceph_fs}_$p: $(tail -2 "$c/log/pools.out")"
    done
    ceph_ns ceph fs new "$ceph_fs" "${ceph_fs}_metadata" "${ceph_fs}_data" >/dev/null 2>"$c/log/fs-new.out" ||
        die "Ceph: fs new: $(cat "$c/log/fs-new.out")"
    ceph_daemon mds ceph-mds -f -i a
    ceph_wait 90 "an active MDS" bash -c 'ceph mds stat | grep -q "up:active"'
    ceph_a="$c/a" ceph_b="$c/b"
    ceph_mount "$ceph_a" "$@"
    ceph_mount "$ceph_b" "$@"
    ceph_ready_secs=$((SECONDS - t0))
    say "ceph $(ceph-fuse --version 2>/dev/null | awk '{print $3}'): fs $ceph_fs mounted twice (ceph-fuse${*:+ $*}) in $ceph_ready_secs s"
}

# ceph_mount DIR [ARGS...]: a ceph-fuse mount of the fs at DIR, in the host's mount namespace.
ceph_mount() {
    local dir=$1 i
    shift
    mkdir -p "$dir"
    local name
    name="fuse-$(basename "$dir")-$$"
    ceph_daemon "$name" ceph-fuse -f --log-file="$ceph_dir/log/$name.log" \
        --admin-socket="$ceph_dir/run/$name.asok" "$@" "$dir"
    ceph_mounts+=("$dir")
    ceph_fuse_pids+=("${ceph_pids[-1]}")
    for ((i = 0; i < 300; i++)); do
        awk -v m="$dir" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo && return 0
        kill -0 "${ceph_pids[-1]}" 2>/dev/null || break
        sleep 0.1
    done
    die "Ceph: ceph-fuse did not mount $dir: $(tail -3 "$ceph_dir/log/$name.out")"
}

ceph_exit_on_signals() {
    trap 'exit 129' HUP
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

ceph_export() {
    export FERRYFS_DFS=ceph FERRYFS_CEPH_HOLDER=$ceph_holder FERRYFS_CEPH_DIR=$ceph_dir \
        FERRYFS_CEPH_PIDS="mon=$ceph_mon_pid mgr=$ceph_mgr_pid osd=$ceph_osd_pid mds=$ceph_mds_pid"
}

ceph_attach() {
    ceph_need
    [[ -n ${FERRYFS_CEPH_HOLDER:-} && -f ${FERRYFS_CEPH_DIR:-}/ceph.conf ]] ||
        die "FERRYFS_DFS=ceph: no cluster given (tests/dfs/ceph-test.sh runs this with one)"
    kill -0 "$FERRYFS_CEPH_HOLDER" 2>/dev/null || die "FERRYFS_DFS=ceph: the cluster's namespace is gone"
    ceph_exit_on_signals
    ceph_holder=$FERRYFS_CEPH_HOLDER ceph_dir=$FERRYFS_CEPH_DIR ceph_attached=1
    ceph_enter=(nsenter --target "$ceph_holder" --net -- env CEPH_CONF="$ceph_dir/ceph.conf")
    ceph_a="$ceph_dir/a" ceph_b="$ceph_dir/b"
    local kv
    for kv in ${FERRYFS_CEPH_PIDS:-}; do printf -v "ceph_${kv%%=*}_pid" %s "${kv#*=}"; done
    cleanup_cmds+=('ceph_stop')
}

# ceph_any_running PID...: one of them has not exited (common.sh's daemon_alive).
ceph_any_running() {
    local p
    for p; do daemon_alive "$p" && return 0; done
    return 1
}

ceph_stop() {
    [[ -n "$ceph_holder" ]] || return 0
    local m p i
    for m in "${ceph_mounts[@]}"; do
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
    done
    # A ceph-fuse ends once unmounted, after closing its MDS session: given 5 s for that while
    # the MDS still runs; then the daemons, in the reverse order of their start.
    for ((i = 0; i < 50; i++)); do
        ceph_any_running "${ceph_fuse_pids[@]}" || break
        sleep 0.1
    done
    for ((i = ${#ceph_pids[@]} - 1; i >= 0; i--)); do kill -TERM "${ceph_pids[i]}" 2>/dev/null || true; done
    for ((i = 0; i < 100; i++)); do
        ceph_any_running "${ceph_pids[@]}" || break
        sleep 0.1
    done
    for p in "${ceph_pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    for p in "${ceph_pids[@]}"; do wait "$p" 2>/dev/null || true; done
    ((ceph_attached)) || kill -KILL "$ceph_holder" 2>/dev/null || true
    ceph_pids=() ceph_fuse_pids=() ceph_mounts=() ceph_enter=() ceph_holder=""
}
