#!/usr/bin/env bash
# make check: `make deb` builds the Debian package, apt installs it on this machine, the installed /usr/bin/ferryfsd serves a guest, and purging it leaves nothing behind.
#
# Checks: the build (with its check step, as a distribution builds it) runs the unit suite
# and no other test; it leaves the tree as it was; the package holds the daemon, the
# load generator, both man pages, libvirt's vhost-user JSON naming /usr/bin/ferryfsd
# (its type is what --print-capabilities says) and the systemd templates starting
# /usr/bin/ferryfsd; lintian reports no error and no warning (debian/ferryfs.lintian-overrides
# holds any with its reason); apt installs it; the installed daemon (namespace sandbox)
# serves the guest's demo, logs RFC 3339 times and the FUSE session's version and flags
# once at INIT; apt purges it, and every file `dpkg -L` listed is gone, as is dpkg's record.
# Needs root (it installs into this machine) and the build tools (`make deb-deps`).
# Exit: 0 pass, 1 fail, 77 skipped (not root, build tools or guest missing, or a
# ferryfs package or /usr/bin/ferryfsd already on this machine, which it would replace).
set -euo pipefail
name=deb-test
here_install="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here_install/../.." && pwd)"
export FERRYFSD=/usr/bin/ferryfsd
# The e2e harness: a share, the guest boot with the demo command, the host-side checks.
source "$repo/tests/e2e/start-lib.sh"

((EUID == 0)) || skip "not root: installing a package needs root"
for tool in dpkg-buildpackage dh apt-get; do
    command -v "$tool" >/dev/null || skip "$tool missing (run 'make deb-deps')"
done
if dpkg-query -W -f='${db:Status-Status}' ferryfs 2>/dev/null | grep -qv '^not-installed$'; then
    skip "a ferryfs package is already on this machine ($(dpkg-query -W -f='${Version} ${db:Status-Status}' ferryfs)); this test would replace and purge it"
fi
[[ ! -e /usr/bin/ferryfsd ]] || skip "/usr/bin/ferryfsd exists and belongs to no ferryfs package"

# Builds into a temporary directory: no new file may appear in the tree (obj-*/,
# debian/ferryfs/, debian/files...) or beside it (../ferryfs_*.deb), where
# dpkg-buildpackage run in the tree would leave them. Untracked and ignored
# paths only, so edits to tracked files meanwhile do not count.
new_files() {
    git -C "$repo" status --porcelain --ignored 2>/dev/null | grep '^[?!]' || true
    ls -d "$repo"/../ferryfs_* "$repo"/../ferryfs-dbgsym_* 2>/dev/null || true
}
tree_before="$(new_files)"
out="$(mktemp -d /tmp/ferryfs-deb-out.XXXXXX)"
installed=0
cleanup_deb() {
    if ((installed)); then
        say "removing the package after a failure"
        apt-get purge -y -qq ferryfs >/dev/null 2>&1 || dpkg --purge ferryfs >/dev/null 2>&1 || true
    fi
    if ((fails)); then say "package and logs kept in $out"; else rm -rf "$out"; fi
}
trap cleanup_deb EXIT

t0=$SECONDS
rc=0
# The build as a user or a distribution runs it, checks included: the unit suite only
# (debian/rules), so it stays short.
make -C "$repo" --no-print-directory deb DEB_OUT="$out" >"$out/make-deb.log" 2>&1 || rc=$?
if ((rc == 77)); then
    skip "$(grep 'SKIP' "$out/make-deb.log" | tail -1)"
elif ((rc != 0)); then
    fail "make deb exit $rc:"; tail -30 "$out/make-deb.log" | sed 's/^/    /'
    exit 1
fi
deb="$(ls "$out"/ferryfs_*.deb)"
pass "make deb built $(basename "$deb") in $((SECONDS - t0)) s"
# dh_auto_test ran meson's unit suite and nothing else: no guest, QEMU or e2e test in a
# package build. (With DEB_BUILD_OPTIONS=nocheck dh_auto_test runs nothing at all.)
ran="$(grep -E '^ *[0-9]+/[0-9]+ ferryfs:[a-z0-9-]+ / ' "$out/build.log" || true)"
units="$(grep -c 'ferryfs:unit / ' <<<"$ran" || true)"
others="$(grep -v 'ferryfs:unit / ' <<<"$ran" | sed -E 's/^ *[0-9]+\/[0-9]+ ferryfs:([a-z0-9-]+) \/ ([^ ]+).*/\1\/\2/' | tr '\n' ' ' || true)"
if [[ " ${DEB_BUILD_OPTIONS:-} " == *" nocheck "* ]]; then
    say "DEB_BUILD_OPTIONS has nocheck: the package build ran no tests, none checked"
elif ((units > 0)) && [[ -z ${others// /} ]] && grep -q '^Fail: *0 *$' "$out/build.log"; then
    pass "the package build ran the unit suite only ($units tests, none failed)"
else
    fail "the package build's tests: $units of suite unit, others: ${others:-none}; $(grep -E '^(Ok|Fail|Skipped):' "$out/build.log" | tr -s ' ' | tr '\n' ' ')"
fi
tree_after="$(new_files)"
if [[ "$tree_before" == "$tree_after" ]]; then
    pass "the build left no file in the tree or beside it"
else
    fail "make deb left files behind:"
    diff <(echo "$tree_before") <(echo "$tree_after") | sed 's/^/    /' || true
fi

# What the package holds, before anything is installed.
contents="$(dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|')"
for f in /usr/bin/ferryfsd /usr/bin/ferryfs-load /usr/share/man/man1/ferryfsd.1.gz \
    /usr/share/man/man1/ferryfs-load.1.gz /usr/share/qemu/vhost-user/50-ferryfsd.json \
    /lib/systemd/system/ferryfsd@.service /lib/systemd/system/ferryfsd@.socket \
    /usr/share/doc/ferryfs/copyright; do
    if grep -qxF "$f" <<<"$contents"; then pass "package holds $f"; else fail "package lacks $f"; fi
done
if grep -q '^/usr/local\|/read-cost$\|/wake-cost$\|/lookup-cost$\|/test_' <<<"$contents"; then
    fail "package holds files it should not: $(grep '^/usr/local\|cost$\|/test_' <<<"$contents" | tr '\n' ' ')"
else
    pass "nothing under /usr/local, no benchmark or test programs"
fi

# lintian: deb.sh already failed on errors; warnings must be overridden (with a reason).
if grep -q '^[EW]: ' "$out/lintian.txt" 2>/dev/null; then
    fail "lintian: $(grep '^[EW]: ' "$out/lintian.txt" | tr '\n' ' ')"
elif [[ -f "$out/lintian.txt" ]]; then
    pass "lintian: no errors or warnings$( [[ -s "$out/lintian.txt" ]] && echo " ($(grep -c '^[IP]: ' "$out/lintian.txt") info/pedantic tags)")"
else
    fail "no lintian report (lintian missing? run 'make deb-deps')"
fi

# Installs with apt, as a user would (dependencies from the mirror if any are missing).
rc=0
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$deb" >"$out/apt-install.log" 2>&1 || rc=$?
if ((rc == 0)) && dpkg-query -W -f='${db:Status-Status}' ferryfs | grep -qx installed; then
    installed=1
    pass "apt-get install ./$(basename "$deb")"
else
    fail "apt-get install exit $rc:"; tail -20 "$out/apt-install.log" | sed 's/^/    /'
    # It may have half-installed: cleanup_deb purges.
    installed=1
    exit 1
fi
listed="$(dpkg -L ferryfs)"

version="$(dpkg-query -W -f='${Version}' ferryfs)"
if [[ "$(/usr/bin/ferryfsd --version)" == "ferryfsd ${version%%-*}" ]]; then
    pass "/usr/bin/ferryfsd --version matches the package ($version)"
else
    fail "/usr/bin/ferryfsd --version says '$(/usr/bin/ferryfsd --version)', package $version"
fi
json=/usr/share/qemu/vhost-user/50-ferryfsd.json
caps_type="$(/usr/bin/ferryfsd --print-capabilities | jq -r .type)"
if [[ "$(jq -r .binary "$json")" == /usr/bin/ferryfsd && "$(jq -r .type "$json")" == "$caps_type" ]]; then
    pass "$json names /usr/bin/ferryfsd, type $caps_type as --print-capabilities says"
else
    fail "$json: $(tr -d '\n' <"$json"); --print-capabilities type $caps_type"
fi
if grep -q '^ExecStart=/usr/bin/ferryfsd ' /lib/systemd/system/ferryfsd@.service; then
    pass "ferryfsd@.service starts /usr/bin/ferryfsd"
else
    fail "ferryfsd@.service: $(grep ExecStart /lib/systemd/system/ferryfsd@.service)"
fi
for page in ferryfsd ferryfs-load; do
    warn="$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings "$page" 2>&1 >/dev/null || echo "man failed")"
    if [[ -z "$warn" ]]; then pass "man $page renders without warnings"
    else fail "man $page: $warn"; fi
done

# The installed daemon serves a guest, with its default namespace sandbox.
start_prepare
# start_prepare's EXIT trap (tmp_cleanup) runs the package's cleanup too.
cleanup_cmds+=(cleanup_deb)
sock="$tmp/vhost.sock"
start_and_boot_demo installed "$tmp/daemon.log" "$sock" \
    /usr/bin/ferryfsd --socket-path="$sock" --shared-dir="$share"
stamp='^\[[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z\] ferryfsd (error|warn|info|debug): '
if [[ -s "$tmp/daemon.log" ]] && ! grep -Evq "$stamp" "$tmp/daemon.log"; then
    pass "every log line starts with an RFC 3339 UTC time in microseconds ($(head -1 "$tmp/daemon.log" | cut -c1-29))"
else
    fail "log lines without the RFC 3339 stamp: $(grep -Ev "$stamp" "$tmp/daemon.log" | head -3)"
fi
sessions="$(grep -Ec "$stamp"'fuse: session 7\.[0-9]+, flags 0x[0-9a-f]+, max_write [0-9]+$' "$tmp/daemon.log" || true)"
if [[ "$sessions" == 1 && "$(grep -E 'fuse: session' "$tmp/daemon.log" | grep -c ' info: ')" == 1 ]]; then
    pass "INIT logged once at info: $(grep -o 'fuse: session.*' "$tmp/daemon.log")"
else
    fail "expected one info line 'fuse: session 7.N, flags 0x...', found $sessions"
fi

# Purge: dpkg's record and every file it listed go; directories only stay if
# another package owns them or something else is in them.
rc=0
DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq ferryfs >"$out/apt-purge.log" 2>&1 || rc=$?
if ((rc == 0)); then
    installed=0
    pass "apt-get purge ferryfs"
else
    fail "apt-get purge exit $rc: $(tail -5 "$out/apt-purge.log")"
fi
status="$(dpkg-query -W -f='${db:Status-Status}' ferryfs 2>/dev/null || echo not-installed)"
if [[ "$status" == not-installed ]] && ! compgen -G '/var/lib/dpkg/info/ferryfs.*' >/dev/null; then
    pass "dpkg has no record of ferryfs (status $status, no /var/lib/dpkg/info/ferryfs.*)"
else
    fail "dpkg still knows ferryfs: status $status, $(ls /var/lib/dpkg/info/ferryfs.* 2>/dev/null | tr '\n' ' ')"
fi
left=() files=0 dirs=()
while IFS= read -r p; do
    [[ -n "$p" && "$p" != /. ]] || continue
    if [[ -d "$p" ]]; then
        # Also /lib, a symlink to usr/lib on a merged /usr.
        dirs+=("$p")
    elif [[ -L "$p" || -e "$p" ]]; then
        left+=("$p")
    else
        files=$((files + 1))
    fi
done <<<"$listed"
# A directory may stay if another package owns it or it holds others' files.
for d in "${dirs[@]}"; do
    [[ -z "$(ls -A "$d")" ]] || continue
    dpkg-query -S "$d" >/dev/null 2>&1 || left+=("$d/")
done
if ((${#left[@]} == 0)) && ((files > 0)); then
    pass "all $files files dpkg -L listed are gone; no directory of its own is left"
else
    fail "left after purge: ${left[*]}"
fi
if [[ ! -e /usr/bin/ferryfsd && ! -e /etc/ferryfs ]] && ! command -v ferryfs-load >/dev/null; then
    pass "no ferryfsd or ferryfs-load on PATH any more"
else
    fail "ferryfsd or ferryfs-load still found after purge"
fi
say "run time $((SECONDS - t0)) s"
finish
