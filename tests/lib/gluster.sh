# Sourced by the distributed-file-system tests: a GlusterFS volume on this machine only, in network and mount namespaces of the test's own, mounted twice (two "hosts").
# Builds on common.sh (make_tmp, skip, die). Nothing runs at source time.
#
# glusterd refuses bricks on loopback addresses, so the namespace gets a veth pair with
# 10.255.255.1 on one end: an address of its own that no packet ever leaves (the peer end is
# in the same namespace, nothing is routed out). glusterd's state (/var/lib/glusterd,
# /var/log/glusterfs, /run) is bind-mounted from $tmp or a tmpfs inside the mount namespace, so
# the host keeps nothing; gluster_stop (registered as a cleanup) unmounts, stops the volume,
# ends every process of the namespace and the namespace with them.
#
#   gluster_start [VOL]   namespace, glusterd, volume VOL (default ferryfs) with one brick in
#                         $tmp/gluster/brick, started, mounted at $gluster_a and $gluster_b;
#                         skips (77) when glusterd/the client/unshare/nsenter/ip are missing
#   gl_ns CMD...          runs CMD in the namespaces (where the mounts are); QEMU and ferryfsd run
#                         there too (the vhost-user socket in $tmp is the same file on both sides)
#   "${gl_enter[@]}" CMD... &   the same for a background process: nsenter execs CMD, so $! is
#                         CMD's own pid (a function run with & would be a subshell around it)
#   gluster_mount DIR [OPTS]  one more FUSE mount of the volume (another "host"), with mount.glusterfs
#                         options OPTS (e.g. entry-timeout=0,attribute-timeout=0); gluster_start mounts
#                         $gluster_a and $gluster_b with $FERRYFS_GLUSTER_MOUNT_OPTS
#   gluster_stop          tears it all down (idempotent)
#   gluster_addr          10.255.255.1, the only address gluster uses (private range, this ns only)
# The tests source it through tests/lib/dfs.sh, which adds what they share with CephFS's
# (on_volume_start/on_volume_check, dfs_guest_prepare: the stack made ready outside the namespace,
# which has no network).

gluster_addr=10.255.255.1
gluster_vol=ferryfs
gluster_holder=""

gluster_need() {
    need_root "glusterd, mount namespaces and FUSE mounts"
    local c
    for c in glusterd gluster; do
        command -v "$c" >/dev/null || skip "$c missing: Debian package glusterfs-server (scripts/deps.sh installs it)"
    done
    command -v glusterfs >/dev/null && [[ -x /sbin/mount.glusterfs ]] ||
        skip "glusterfs FUSE client missing: Debian package glusterfs-client (scripts/deps.sh installs it)"
    need_cmd unshare nsenter ip
    [[ -c /dev/fuse ]] || skip "/dev/fuse missing"
}

gl_enter=()
gl_ns() { "${gl_enter[@]}" "$@"; }

gluster_start() {
    gluster_vol=${1:-ferryfs}
    gluster_need
    local g="$tmp/gluster" t0=$SECONDS i
    mkdir -p "$g/state" "$g/log" "$g/brick" "$g/a" "$g/b"
    cp -a /var/lib/glusterd/. "$g/state/" 2>/dev/null || true
    # The holder keeps the namespaces alive; everything else enters them with nsenter.
    unshare --net --mount --propagation private -- sleep infinity &
    gluster_holder=$!
    disown "$gluster_holder"  # its SIGKILL at the end is no news for the test's output
    gl_enter=(nsenter --target "$gluster_holder" --net --mount --)
    cleanup_cmds+=('gluster_stop')
    for ((i = 0; i < 50; i++)); do
        [[ "$(readlink "/proc/$gluster_holder/ns/net")" != "$(readlink /proc/self/ns/net)" ]] && break
        sleep 0.1
    done
    gl_ns bash -euc '
        mount --bind "$1/state" /var/lib/glusterd
        mount --bind "$1/log" /var/log/glusterfs
        mount -t tmpfs -o mode=755 tmpfs /run
        mkdir -p /run/gluster
        ip link set lo up
        ip link add gl0 type veth peer name gl1
        ip addr add "$2/24" dev gl0
        ip link set gl0 up
        ip link set gl1 up
    ' _ "$g" "$gluster_addr" || die "could not set up the gluster namespace"
    gl_ns glusterd -p /run/glusterd.pid --log-level=WARNING || die "glusterd did not start: $(tail -3 "$g/log/glusterd.log" 2>/dev/null)"
    for ((i = 0; i < 100; i++)); do
        gl_ns gluster --mode=script pool list >/dev/null 2>&1 && break
        sleep 0.1
    done
    gl_ns gluster --mode=script volume create "$gluster_vol" "$gluster_addr:$g/brick" force >"$g/create.out" 2>&1 ||
        die "volume create: $(cat "$g/create.out")"
    gl_ns gluster --mode=script volume start "$gluster_vol" >"$g/start.out" 2>&1 ||
        die "volume start: $(cat "$g/start.out")"
    gluster_a="$g/a" gluster_b="$g/b"
    gluster_mount "$gluster_a" "${FERRYFS_GLUSTER_MOUNT_OPTS:-}"
    gluster_mount "$gluster_b" "${FERRYFS_GLUSTER_MOUNT_OPTS:-}"
    say "gluster volume $gluster_vol on $gluster_addr mounted twice${FERRYFS_GLUSTER_MOUNT_OPTS:+ (-o $FERRYFS_GLUSTER_MOUNT_OPTS)} in $((SECONDS - t0)) s ($(gl_ns glusterfs --version | head -1))"
}

gluster_mount() {
    mkdir -p "$1"
    gl_ns mount -t glusterfs -o "log-file=$tmp/gluster/log/mount-$(basename "$1").log${2:+,$2}" \
        "$gluster_addr:/$gluster_vol" "$1" || die "mount -t glusterfs at $1 failed"
    gluster_mounts+=("$1")
}
gluster_mounts=()

gluster_stop() {
    [[ -n "$gluster_holder" ]] || return 0
    local m p ns i
    ns="$(readlink "/proc/$gluster_holder/ns/net" 2>/dev/null || true)"
    for m in "${gluster_mounts[@]}"; do gl_ns umount -l "$m" 2>/dev/null || true; done
    gl_ns gluster --mode=script volume stop "$gluster_vol" force >/dev/null 2>&1 || true
    # glusterd, the brick (glusterfsd), the FUSE clients and the self-heal daemon all live in
    # the namespace: end exactly those, found by their network namespace.
    if [[ -n "$ns" ]]; then
        for p in /proc/[0-9]*; do
            [[ "$(readlink "$p/ns/net" 2>/dev/null)" == "$ns" ]] || continue
            kill -KILL "${p#/proc/}" 2>/dev/null || true
        done
    fi
    for ((i = 0; i < 50; i++)); do kill -0 "$gluster_holder" 2>/dev/null || break; sleep 0.1; done
    gluster_holder=""
    gl_enter=()
}
