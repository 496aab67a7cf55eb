# Host-side checks of what fsops left in a share (sourced by fsops-test.sh and fusemode-test.sh; needs $fsops).

check_sha() { # NAME FILE
    local want got
    [[ -f "$2" ]] || { echo "missing $(basename "$2")"; return 1; }
    want="$("$fsops" --expect "$1" | sha256sum | cut -d' ' -f1)"
    got="$(sha256sum <"$2" | cut -d' ' -f1)"
    [[ "$want" == "$got" ]] || { echo "sha256 mismatch"; return 1; }
}
eq() { # WHAT GOT WANT
    [[ "$2" == "$3" ]] || { echo "$1: got '$2' want '$3'"; return 1; }
}
hc_big_sha() { check_sha big "$k/big.bin"; }
hc_unaligned_sha() { check_sha unaligned "$k/unaligned.bin"; }
hc_mmap_sha() { check_sha mmap "$k/mmap.bin"; }
hc_copy_sha() { check_sha copy "$k/copy.bin"; }
hc_punched_sha() { check_sha punched "$k/punched.bin"; }
hc_owner_1000() {
    eq owned1000 "$(stat -c %u:%g "$k/nonroot/owned1000" 2>&1)" 1000:1000 &&
        eq subdir1000 "$(stat -c %u:%g "$k/nonroot/subdir1000" 2>&1)" 1000:1000
}
hc_mode_owner() { eq mode0751 "$(stat -c %a:%u:%g "$k/mode0751" 2>&1)" 751:1234:2000; }
hc_times_ns() {
    eq "atime mtime" "$(stat -c '%.9X %.9Y' "$k/mtime_ns" 2>&1)" \
        "1234567890.123456789 1500000000.987654321"
}
hc_symlink() {
    eq target "$(readlink "$k/symlink" 2>&1)" "some/target/../path" &&
        eq "absolute target" "$(readlink "$k/abs_symlink" 2>&1)" /etc/ferryfs-guest-target || return 1
    [[ ! -e /etc/ferryfs-guest-target ]] || { echo "/etc/ferryfs-guest-target exists on the host"; return 1; }
}
hc_hardlinks() {
    local a b c
    a="$(stat -c %h:%i "$k/hardlink_a" 2>&1)"
    b="$(stat -c %h:%i "$k/hardlink_b" 2>&1)"
    c="$(stat -c %h:%i "$k/hardlink_c" 2>&1)"
    eq nlink "${a%%:*}" 3 && eq "inode b" "$b" "$a" && eq "inode c" "$c" "$a"
}
hc_xattr() {
    eq user.ferryfs "$(getfattr --absolute-names --only-values -n user.ferryfs "$k/xattr_file" 2>&1)" hello-xattr &&
        eq "dir user.dirattr" "$(getfattr --absolute-names --only-values -n user.dirattr "$k" 2>&1)" d
}
hc_sparse_5g() {
    local f="$k/huge.bin"
    eq size "$(stat -c %s "$f" 2>&1)" 5368709124 || return 1
    local alloc=$(($(stat -c '%b * %B' "$f")))
    ((alloc < 1048576)) || { echo "allocated $alloc bytes: not sparse"; return 1; }
    eq tail "$(tail -c 4 "$f")" "END!"
}
hc_dir1000() {
    local d="$k/dir1000"
    [[ -d "$d" ]] || { echo "missing dir1000"; return 1; }
    diff -q <(ls -A "$d") <(seq -f 'f%04g' 0 999) >/dev/null || {
        echo "entries differ ($(ls -A "$d" | wc -l) present)"
        return 1
    }
}
hc_sgid() {
    eq "sgid dir" "$(stat -c %a:%g "$k/sgid" 2>&1)" 2777:2000 &&
        eq "file gid" "$(stat -c %g "$k/sgid/file" 2>&1)" 2000 &&
        eq "subdir" "$(stat -c %a:%g "$k/sgid/sub" 2>&1)" 2755:2000 &&
        eq "by1000" "$(stat -c %u:%g "$k/sgid/by1000" 2>&1)" 1000:2000
}
hc_special_files() {
    [[ -p "$k/fifo" ]] || { echo "fifo is not a FIFO"; return 1; }
    [[ -c "$k/chardev" ]] || { echo "chardev is not a char device"; return 1; }
    eq "chardev major:minor" "$(stat -c %t:%T "$k/chardev")" 1:3
}
hc_tmpfile() {
    [[ -e "$k/tmpfile_linked" ]] || { echo "tmpfile_linked missing"; return 1; }
    eq content "$(cat "$k/tmpfile_linked" 2>&1)" tmpfile-content
}
hc_exchange() {
    eq exchange_a "$(cat "$k/exchange_a" 2>&1)" B && eq exchange_b "$(cat "$k/exchange_b" 2>&1)" A
}
hc_host_files_intact() {
    eq hello.txt "$(cat "$share/host/hello.txt")" "hello from the host" &&
        eq pattern.bin "$(sha256sum <"$share/host/pattern.bin" | cut -d' ' -f1)" \
            "$("$fsops" --expect hostpat | sha256sum | cut -d' ' -f1)"
}
hc_sgid_outsider() {
    eq "sgid2000/out" "$(stat -c %a:%u:%g "$k/sgid2000/out" 2>&1)" 755:1000:2000 &&
        eq "sgid2000/outdir" "$(stat -c %a:%g "$k/sgid2000/outdir" 2>&1)" 2755:2000 &&
        eq "sgid0/out" "$(stat -c %a:%u:%g "$k/sgid0/out" 2>&1)" 755:1000:0 &&
        eq "sgid0/outdir" "$(stat -c %a:%g "$k/sgid0/outdir" 2>&1)" 2755:0
}

# Files the host gives a file capability before the guest starts (fsops cap_cleared_host_set).
# Under --xattrmap, $cap_name is the host name of the guest's security.capability; the files get
# both, the real one invisible to the guest: a write must not leave either behind.
cap_files=(cap_user cap_root cap_trunc cap_chown cap_keep)
prepare_cap_files() { # SHARE
    local f hex
    mkdir -p "$1/host"
    for f in "${cap_files[@]}"; do
        printf data >"$1/host/$f"
        chown 1000:1000 "$1/host/$f"
        chmod 0755 "$1/host/$f"
        setcap cap_net_raw+ep "$1/host/$f"
        [[ "${cap_name:-security.capability}" == security.capability ]] && continue
        hex="$(getfattr --absolute-names -e hex -n security.capability "$1/host/$f" |
            sed -n 's/^security.capability=//p')"
        setfattr -n "$cap_name" -v "$hex" "$1/host/$f"
    done
}
has_xattr() { getfattr --absolute-names -n "$2" "$1" >/dev/null 2>&1; }
hc_caps_cleared() {
    local f n
    for f in cap_user cap_root cap_trunc cap_chown; do
        for n in security.capability ${cap_name:-}; do
            ! has_xattr "$share/host/$f" "$n" || { echo "$f keeps $n"; return 1; }
        done
    done
    has_xattr "$share/host/cap_keep" "${cap_name:-security.capability}" || { echo "cap_keep lost it"; return 1; }
}
host_checks=(big_sha unaligned_sha mmap_sha copy_sha punched_sha owner_1000 mode_owner times_ns
             symlink hardlinks xattr sparse_5g dir1000 sgid sgid_outsider special_files tmpfile exchange
             caps_cleared host_files_intact)

run_host_checks() { # SHARE RESULTS
    share="$1"
    k="$share/fsops/keep"
    local name why
    for name in "${host_checks[@]}"; do
        if why="$("hc_$name" 2>&1)"; then
            printf 'host:%s\tPASS\n' "$name" >>"$2"
        else
            printf 'host:%s\tFAIL %s\n' "$name" "$(echo "$why" | head -1 | cut -c1-80)" >>"$2"
        fi
    done
}

