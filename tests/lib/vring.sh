# Sourced by the guest tests: what a QEMU guest's virtio-fs request queue shows, read from guest memory through its HMP monitor. Nothing runs at source time.
# Builds on common.sh ($repo). vring_hmp is any HMP command; the migration and reboot-loop tests send theirs through it.

# vring_hmp SOCKET COMMAND...: one HMP command on the monitor listening at SOCKET, its output.
# Debian's python3 when there: a version manager's shim on PATH can add 100 ms to every call.
vring_hmp() {
    local py=/usr/bin/python3
    [[ -x $py ]] || py=python3
    timeout 30 "$py" "$repo/tests/e2e/migration-helper.py" hmp "$@"
}

# vring_idx SOCKET RING: the idx of the avail or used ring at guest address RING, its second
# 16-bit field.
vring_idx() { vring_hmp "$1" xp /1hx $(($2 + 2)) | awk '{ print $2 }'; }

# vring_state SOCKET: what the guest's request queue (vhost queue 1; 0 is the high-priority one)
# shows, from its avail and used indices in guest memory (HMP xp at the addresses `info
# virtio-vhost-queue-status` gives), read twice 1 s apart: "waiting: avail A, used U for 1 s"
# when the driver has queued requests the daemon has not answered and nothing moved, "idle: ..."
# when every request is answered, "moving" otherwise, "unknown" when the monitor does not answer.
# Never `info virtio-queue-status` on this device: in QEMU 10 it stopped the guest's requests to a
# vhost-user-fs device in both tries here.
vring_state() {
    local mon=$1 path st a u a1 u1 a2 u2
    path=$(vring_hmp "$mon" info virtio | awk '/virtio-user-fs/ { print $1; exit }')
    [[ -n $path ]] && st=$(vring_hmp "$mon" info virtio-vhost-queue-status "$path" 1)
    a=$(awk '$1 == "avail_phys:" { print $2 }' <<<"${st:-}")
    u=$(awk '$1 == "used_phys:" { print $2 }' <<<"${st:-}")
    [[ $a == 0x* && $u == 0x* ]] || { echo unknown; return 0; }
    a1=$(vring_idx "$mon" "$a") u1=$(vring_idx "$mon" "$u")
    sleep 1
    a2=$(vring_idx "$mon" "$a") u2=$(vring_idx "$mon" "$u")
    [[ $a1 == 0x* && $u1 == 0x* ]] || { echo unknown; return 0; }
    if [[ $a1 != "$a2" || $u1 != "$u2" ]]; then
        echo moving
    elif [[ $a1 == "$u1" ]]; then
        echo "idle: avail $a1, used $u1 for 1 s"
    else
        echo "waiting: avail $a1, used $u1 for 1 s"
    fi
}
