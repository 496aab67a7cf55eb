# Sourced by the distributed-file-system tests (tests/dfs/): which file system they run on, and the steps they share whatever it is.
# Builds on common.sh (and guest.sh for dfs_guest_prepare). Nothing runs at source time.
#
# FERRYFS_DFS=gluster (the default): the test makes a GlusterFS volume of its own (tests/lib/gluster.sh).
# FERRYFS_DFS=ceph: the test runs on the CephFS that tests/dfs/ceph-test.sh brought up once for all
# its parts (tests/lib/ceph.sh), given by FERRYFS_CEPH_HOLDER and FERRYFS_CEPH_DIR; mounts a part
# makes of its own (dfs_mount) are its own to remove.
#
#   dfs_need              skips (77) naming the package when the file system cannot run here
#   dfs_start             the file system, mounted at $dfs_a and $dfs_b (two "hosts"); sets $dfs_kind
#                         (gluster or ceph), $dfs_fstype (the mounts' type in mountinfo), $dfs_name
#                         (for messages)
#   dfs_ns CMD...         runs CMD where the mounts are (gluster: its namespaces; ceph: the host)
#   "${dfs_enter[@]}" CMD... &   the same for a background process ($! is CMD's own pid)
#   dfs_view PATH         PATH as this shell sees it without dfs_ns
#   dfs_mount DIR [OPTS]  one more mount of the file system at DIR (gluster: mount.glusterfs
#                         options; ceph: ceph-fuse arguments)
#   dfs_guest_prepare     the guest stack for a test on the file system (current when it can be had)
#   on_volume_start PART / on_volume_check PART SCRIPT   around a run of SCRIPT with its share in
#                         $dfs_a/PART: it really ran there and left nothing (below)
#   dfs_listed CHECK      the probe column of the known-differences line ($known) whose glob
#                         matches CHECK; false when none does
#   dfs_own CHECK PROBE [MOUNT]   the host's own call answers what CHECK's FAIL reason in
#                         $dfs_results says (host-probe.py PROBE), pass or fail

dfs_kind=${FERRYFS_DFS:-gluster}
case $dfs_kind in
    gluster) source "$lib_dir/gluster.sh" ;;
    ceph) source "$lib_dir/ceph.sh" ;;
    *) echo "FERRYFS_DFS=$dfs_kind: gluster or ceph" >&2; exit 1 ;;
esac
dfs_enter=()
dfs_ns() { "${dfs_enter[@]}" "$@"; }

dfs_need() {
    if [[ $dfs_kind == ceph ]]; then ceph_need; else gluster_need; fi
}

dfs_start() {
    if [[ $dfs_kind == ceph ]]; then
        ceph_attach
        dfs_a=$ceph_a dfs_b=$ceph_b dfs_fstype=fuse.ceph-fuse dfs_name=CephFS
        dfs_enter=()
    else
        gluster_start
        dfs_a=$gluster_a dfs_b=$gluster_b dfs_fstype=fuse.glusterfs dfs_name=gluster
        dfs_enter=("${gl_enter[@]}")
    fi
}

dfs_view() {
    if [[ $dfs_kind == ceph ]]; then echo "$1"; else echo "/proc/$gluster_holder/root$1"; fi
}

dfs_mount() {
    if [[ $dfs_kind == ceph ]]; then
        local args
        read -r -a args <<<"${2:-}"
        ceph_mount "$1" "${args[@]}"
    else
        gluster_mount "$1" "${2:-}"
    fi
}

dfs_guest_prepare() {
    if stack_prepare current >/dev/null 2>&1; then
        FERRYFS_GUEST_DIR="$(stack_guest_dir current)"
        export FERRYFS_STACK=current FERRYFS_GUEST_DIR
    fi
    guest_prepare
}

# on_volume_start PART / on_volume_check PART SCRIPT: SCRIPT's share went in a subdirectory of
# $dfs_a/PART and was removed at its end (unless FERRYFS_E2E_KEEP), seen through mount B: PART's
# modification time, set to 1 before, moved (so the run really was on the file system), and it is
# empty. A finding is the caller's fail (common.sh: counted, not fatal).
on_volume_start() {
    dfs_ns mkdir -p "$dfs_a/$1"
    dfs_ns touch -d @1 "$dfs_a/$1"
}
on_volume_check() {
    local m
    m="$(dfs_ns stat -c %Y "$dfs_b/$1")"
    ((m > 1)) || fail "$1: $2 made nothing in $dfs_a/$1 (its share was not on the $dfs_name mount)"
    [[ "${FERRYFS_E2E_KEEP:-0}" == 1 || -z "$(dfs_ns find "$dfs_b/$1" -mindepth 1 -maxdepth 1)" ]] ||
        fail "$1: $2 left its share on the $dfs_name mount"
}

dfs_listed() {
    local glob probe
    while IFS=$'\t' read -r glob probe _; do
        [[ -z "$glob" || "$glob" == \#* ]] && continue
        # shellcheck disable=SC2053
        [[ "$1" == $glob ]] && { echo "$probe"; return 0; }
    done <"$known"
    return 1
}

# dfs_own: the host's answer (an errno name or a figure) appears in the guest's FAIL reason, by
# name or as its strerror text, as the guest programs print it; "ok" from the host never matches.
dfs_own() {
    local got want text m="${3:-$dfs_a}"
    got="$(grep "^$1"$'\t' "$dfs_results" | cut -f2 | head -1)"
    dfs_ns mkdir -p "$m/probe-$2"
    want="$(dfs_ns python3 "$here/host-probe.py" "$2" "$m/probe-$2" </dev/null)"
    text="$(python3 -c 'import errno, os, sys; print(os.strerror(getattr(errno, sys.argv[1], 0)) if hasattr(errno, sys.argv[1]) else "")' "$want")"
    if [[ "$want" != ok && ( "$got" == FAIL*"$want"* || ( -n "$text" && "$got" == FAIL*"$text"* ) ) ]]; then
        pass "$1: the guest got what the host's $dfs_name mount answers ($want)"
    else
        fail "$1: the guest got '$got', the host's $dfs_name mount answers $2 with '$want'"
    fi
}
