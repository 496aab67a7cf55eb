#!/usr/bin/env bash
# Guest e2e (make check): the permissions matrix (guest-perms.c) as non-root and capability-less guest users, on ferryfsd's shares against the guest's own tmpfs in the same boot; QEMU's virtiofsd as a reference column.
#
# Every cell (scenario/operation/identity: owner, group member through the primary or a
# supplementary group, other, root with and without CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID) must
# give ferryfsd the same outcome and the same owner, group and mode afterwards as the guest's
# tmpfs, except the cells tests/semantics/perms-known-differences lists (each says why; the same
# list is in docs/options.md). The reference columns (QEMU's C virtiofsd; the Rust virtiofsd when
# scripts/stack.sh has cached it) only report their differences.
#
# Usage: perms-test.sh   Env: FERRYFSD (default build/ferryfsd), FERRYFS_GUEST_DIR, VIRTIOFSD,
#        FERRYFS_STACK (stable or current: the guest kernel and QEMU, tests/e2e/stack-lib.sh)
# Exit: 0 pass, 1 fail, 77 skipped (no QEMU or guest image).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sem_init perms-test
virtiofsd="${VIRTIOFSD:-/usr/lib/qemu/virtiofsd}"

t="$sem_tmp"
main="$t/main" acl="$t/acl" kp="$t/kp" vd="$t/vd" va="$t/va" rd="$t/rd" ra="$t/ra"
mkdir -p "$main/out" "$acl" "$kp" "$vd" "$va" "$rd" "$ra"
chmod 755 "$main" "$acl" "$kp" "$vd" "$va" "$rd" "$ra"
virtiofsd_rs="$sem_repo/tests/e2e/virtiofsd-rs"
gcc -static -O2 -Wall -Wextra -Werror -o "$t/gperms" "$sem_here/guest-perms.c"

# ferryfsd with its defaults (cache=auto), and with POSIX ACLs and xattrs for the ACL scenario.
sem_daemon ferryfs "$main"
cp "$t/gperms" "$main/gperms"
sem_daemon facl "$acl" --xattr --posix-acl
# With killpriv v2 the guest's kernel says when suid/sgid must go, also for a root caller
# without CAP_FSETID that truncates on open, which it cannot tell without it.
sem_daemon fkp "$kp" --killpriv-v2
columns=(ferryfsd)
if [[ -x "$virtiofsd" ]]; then
    sem_daemon_cmd vd "$vd" "$virtiofsd" --socket-path="$t/vd.sock" -o source="$vd" -o cache=auto
    sem_daemon_cmd va "$va" "$virtiofsd" --socket-path="$t/va.sock" -o source="$va" -o cache=auto \
        -o xattr -o posix_acl
    columns+=(virtiofsd)
else
    sem_say "note: no $virtiofsd, no C virtiofsd column"
fi
if "$virtiofsd_rs" --version >/dev/null 2>&1; then
    sem_daemon_cmd rd "$rd" "$virtiofsd_rs" --socket-path="$t/rd.sock" --shared-dir="$rd" --cache=auto
    sem_daemon_cmd ra "$ra" "$virtiofsd_rs" --socket-path="$t/ra.sock" --shared-dir="$ra" --cache=auto \
        --xattr --posix-acl
    columns+=(virtiofsd-rs)
else
    sem_say "note: the Rust virtiofsd is not cached (scripts/stack.sh fetch), no column for it"
fi

# Each column writes its cells to the main share; the host compares them afterwards.
{
    echo '#!/bin/sh'
    sem_mount_line
    cat <<'GUEST'
mkdir -p /tmp/local
# tmpfs has user.* xattrs from Linux 6.6 on; without them the xattr cells cannot be compared.
x=""
/mnt/gperms --probe-xattr /tmp/local && x=--xattr
echo "xattr=$x" >/mnt/out/local-features
run() {  # COLUMN DIR ARGS...
    c="$1"; shift
    /mnt/gperms "$@" >"/mnt/out/$c.txt" 2>&1 || echo "CHECK gperms-$c FAIL"
}
run local-plain /tmp/local/plain
run local-acl /tmp/local/acl --acl $x
run local-setid /tmp/local/setid --only setid-file,sgid-dir
run ferryfsd-plain /mnt/m
run ferryfsd-acl /facl/m --acl $x
run ferryfsd-setid /fkp/m --only setid-file,sgid-dir
if [ -d /vd ]; then
    run virtiofsd-plain /vd/m
    run virtiofsd-acl /va/m --acl $x
fi
if [ -d /rd ]; then
    run virtiofsd-rs-plain /rd/m
    run virtiofsd-rs-acl /ra/m --acl $x
fi
exit 0
GUEST
} >"$main/guest.sh"
chmod 755 "$main/guest.sh"

sem_boot 1500

# The cells of one output file, sorted by name.
cells() { grep -a '^CELL ' "$1" | sort; }
# Cells a known host difference explains: "scenario/op/identity" patterns (globs), first field.
known="$sem_here/perms-known-differences"
is_known() {
    local cell="$1" pat
    while read -r pat _; do
        [[ -z "$pat" || "$pat" == \#* ]] && continue
        # shellcheck disable=SC2053
        [[ "$cell" == $pat ]] && return 0
    done <"${2:-$known}"
    return 1
}
# Cells a 6.12 guest's kernel leaves to the daemon where 6.1 decided them itself (any part).
known_current="$sem_here/perms-known-differences-current"
[[ "$(stack_name)" == current ]] || known_current=/dev/null

total=0
for part in plain acl setid; do
    ref="$main/out/local-$part.txt"
    [[ -s "$ref" ]] || { sem_say "FAIL: no tmpfs cells for $part"; sem_fail=1; continue; }
    n="$(grep -ac '^CELL ' "$ref" || true)"
    grep -aq '^CELL-SETUP-FAILED\|SETUP-FAILED' "$ref" && { sem_say "FAIL: tmpfs $part: $(grep -a SETUP "$ref" | head -3)"; sem_fail=1; }
    for col in "${columns[@]}"; do
        out="$main/out/$col-$part.txt"
        [[ $col != ferryfsd && $part == setid ]] && continue
        if [[ ! -s "$out" ]]; then
            sem_say "FAIL: $col $part: no cells"; [[ $col == ferryfsd ]] && sem_fail=1; continue
        fi
        diffs="$(diff <(cells "$ref") <(cells "$out") | sed -n 's/^> CELL //p' || true)"
        bad=0 explained=0
        while read -r cell rest; do
            [[ -z "$cell" ]] && continue
            if [[ $col == ferryfsd ]] && { [[ $part != setid ]] && is_known "$cell" ||
                is_known "$cell" "$known_current"; }; then
                explained=$((explained + 1))
                continue
            fi
            bad=$((bad + 1))
            want="$(grep -a "^CELL $cell " "$ref" | sed "s|^CELL $cell ||")"
            echo "  $col $part: $cell: got '$rest', tmpfs '$want'"
        done <<<"$diffs"
        missing="$(( n - $(grep -ac '^CELL ' "$out" || true) ))"
        ((missing == 0)) || { echo "  $col $part: $missing cells missing"; bad=$((bad + missing)); }
        echo "$col $part: $n cells, $bad differ from tmpfs$( ((explained)) && echo ", $explained known host differences")"
        if [[ $col == ferryfsd ]]; then
            total=$((total + n))
            ((bad == 0)) || sem_fail=1
        fi
    done
done
echo "matrix: $total ferryfsd cells compared ($(cat "$main/out/local-features" 2>/dev/null))"
((total > 0)) || { sem_say "FAIL: no cells compared"; sem_fail=1; }
sem_finish
