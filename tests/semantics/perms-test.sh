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
#        FERRYFS_STACK (stable or current: the guest kernel and QEMU, tests/e2e/stack-lib.sh),
#        FERRYFS_PERMS_PARTS="plain acl killpriv-v2" (the default: all three matrices),
#        FERRYFS_PERMS_ONLY=SCENARIO,... (the plain matrix of those scenarios only, gperms --only),
#        FERRYFS_DAEMON_USER=ranges (ferryfsd as a user the test makes, guest ids 1.. mapped to its
#        subordinate ranges, tests/lib/unpriv.sh; no reference columns; the cells
#        perms-known-differences-unprivileged lists are explained too)
# Exit: 0 pass, 1 fail, 77 skipped (no QEMU or guest image).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sem_init perms-test
virtiofsd="${VIRTIOFSD:-/usr/lib/qemu/virtiofsd}"

t="$sem_tmp"
main="$t/main" acl="$t/acl" kp="$t/kp" vd="$t/vd" rd="$t/rd"
mkdir -p "$main/out" "$acl" "$kp" "$vd" "$rd"
chmod 755 "$main" "$acl" "$kp" "$vd" "$rd"
gcc -static -O2 -Wall -Wextra -Werror -o "$t/gperms" "$sem_here/guest-perms.c"

# ferryfsd with its defaults (cache=auto), and with POSIX ACLs and xattrs for the ACL scenario.
sem_daemon ferryfs "$main"
cp "$t/gperms" "$main/gperms"
sem_daemon facl "$acl" --xattr --posix-acl
# With killpriv v2 the guest's kernel says when suid/sgid must go, also for a root caller
# without CAP_FSETID that truncates on open, which it cannot tell without it.
sem_daemon fkp "$kp" --killpriv-v2
columns=(ferryfsd)
parts="${FERRYFS_PERMS_PARTS:-plain acl killpriv-v2}"
# The reference columns run the plain matrix only: they decide nothing, and each ACL run costs
# minutes of guest time under TCG. A run about ferryfsd as an ordinary user leaves them out, and
# so does make check: the plain matrix alone is a good part of this test's guest time, so make
# check-long (FERRYFS_CHECK_LONG=1) runs them.
if unpriv_active; then
    sem_say "no reference columns: this run is about ferryfsd as $unpriv_user"
elif [[ ${FERRYFS_CHECK_LONG:-} != 1 ]]; then
    sem_say "no reference columns in make check (make check-long, FERRYFS_CHECK_LONG=1, adds them)"
elif [[ -x "$virtiofsd" ]]; then
    sem_daemon_cmd vd "$vd" "$virtiofsd" --socket-path="$t/vd.sock" -o source="$vd" -o cache=auto
    columns+=(virtiofsd)
else
    sem_say "note: no $virtiofsd, no C virtiofsd column"
fi
# The Rust virtiofsd beside a 6.12 guest, where users pick it (perms-current-test.sh).
if unpriv_active || [[ ${FERRYFS_CHECK_LONG:-} != 1 ]]; then
    :
elif stack_rust_reference; then
    sem_daemon_cmd rd "$rd" "$stack_virtiofsd_rs" --socket-path="$t/rd.sock" --shared-dir="$rd" --cache=auto
    columns+=(virtiofsd-rs)
else
    sem_say "note: no Rust virtiofsd column (it runs on the current stack, when scripts/stack.sh has cached it)"
fi

# Each column writes its cells to the main share; the host compares them afterwards.
{
    echo '#!/bin/sh'
    sem_mount_line
    echo "parts=\"$parts\" only=\"${FERRYFS_PERMS_ONLY:-}\""
    cat <<'GUEST'
want() { case " $parts " in *" $1 "*) return 0 ;; esac; return 1; }
o=""
[ -n "$only" ] && o="--only $only"
mkdir -p /tmp/local
# tmpfs has user.* xattrs from Linux 6.6 on; without them the xattr cells cannot be compared.
x=""
/mnt/gperms --probe-xattr /tmp/local && x=--xattr
echo "xattr=$x" >/mnt/out/local-features
run() {  # COLUMN DIR ARGS...
    c="$1"; shift
    /mnt/gperms "$@" >"/mnt/out/$c.txt" 2>&1 || echo "CHECK gperms-$c FAIL"
}
want plain && run local-plain /tmp/local/plain $o
want acl && run local-acl /tmp/local/acl --acl $x
want killpriv-v2 && run local-killpriv-v2 /tmp/local/setid --only setid-file,sgid-dir
want plain && run ferryfsd-plain /mnt/m $o
want acl && run ferryfsd-acl /facl/m --acl $x
want killpriv-v2 && run ferryfsd-killpriv-v2 /fkp/m --only setid-file,sgid-dir
[ -d /vd ] && run virtiofsd-plain /vd/m $o
[ -d /rd ] && run virtiofsd-rs-plain /rd/m $o
exit 0
GUEST
} >"$main/guest.sh"
chmod 755 "$main/guest.sh"

sem_boot 1500

# The cells of one output file, sorted by name.
cells() { grep -a '^CELL ' "$1" | sort; }
# Cells a known difference explains: "run/scenario/op/identity" globs, first field.
known="$sem_here/perms-known-differences"
known_files=("$known")
unpriv_active && known_files+=("$known-unprivileged")
is_known() {  # RUN/CELL
    local cell="$1" pat
    while read -r pat _; do
        [[ -z "$pat" || "$pat" == \#* ]] && continue
        # shellcheck disable=SC2053
        [[ "$cell" == $pat ]] && return 0
    done < <(cat "${known_files[@]}")
    return 1
}

total=0
for part in $parts; do
    ref="$main/out/local-$part.txt"
    [[ -s "$ref" ]] || { sem_say "FAIL: no tmpfs cells for $part"; sem_fail=1; continue; }
    n="$(grep -ac '^CELL ' "$ref" || true)"
    grep -aq '^CELL-SETUP-FAILED\|SETUP-FAILED' "$ref" && { sem_say "FAIL: tmpfs $part: $(grep -a SETUP "$ref" | head -3)"; sem_fail=1; }
    for col in "${columns[@]}"; do
        out="$main/out/$col-$part.txt"
        [[ $col != ferryfsd && $part != plain ]] && continue
        if [[ ! -s "$out" ]]; then
            sem_say "FAIL: $col $part: no cells"; [[ $col == ferryfsd ]] && sem_fail=1; continue
        fi
        diffs="$(diff <(cells "$ref") <(cells "$out") | sed -n 's/^> CELL //p' || true)"
        bad=0 explained=0
        while read -r cell rest; do
            [[ -z "$cell" ]] && continue
            if [[ $col == ferryfsd ]] && is_known "$part/$cell"; then
                explained=$((explained + 1))
                continue
            fi
            bad=$((bad + 1))
            want="$(grep -a "^CELL $cell " "$ref" | sed "s|^CELL $cell ||")"
            echo "  $col $part: $cell: got '$rest', tmpfs '$want'"
        done <<<"$diffs"
        missing="$(( n - $(grep -ac '^CELL ' "$out" || true) ))"
        ((missing == 0)) || { echo "  $col $part: $missing cells missing"; bad=$((bad + missing)); }
        echo "$col $part: $n cells, $bad differ from tmpfs$( ((explained)) && echo ", $explained listed in perms-known-differences")"
        if [[ $col == ferryfsd ]]; then
            total=$((total + n))
            ((bad == 0)) || sem_fail=1
        fi
    done
done
echo "matrix: $total ferryfsd cells compared ($(cat "$main/out/local-features" 2>/dev/null))"
((total > 0)) || { sem_say "FAIL: no cells compared"; sem_fail=1; }
sem_finish
