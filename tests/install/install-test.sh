#!/usr/bin/env bash
# make check: `make install` into a DESTDIR with a non-default PREFIX installs the daemon, the load generator, ferryfsd(1) and libvirt's vhost-user description, and they agree with the daemon.
#
# Checks: exactly the expected files are installed, the binaries run; the
# JSON names PREFIX/bin/ferryfsd and its type is what that binary's
# --print-capabilities reports; the man page renders without groff warnings
# and carries every option of --help and the hand-written sections; every
# option of --help appears in docs/options.md.
# Exit: 0 pass, 1 fail.
set -euo pipefail
source "$(dirname "$0")/../lib/common.sh"
prefix=/opt/ferryfs-test

dest="$(mktemp -d /tmp/ferryfs-install.XXXXXX)"
trap 'rm -rf "$dest"' EXIT
if ! make -C "$repo" install PREFIX="$prefix" DESTDIR="$dest" >"$dest.log" 2>&1; then
    fail "make install: $(tail -5 "$dest.log")"
    rm -f "$dest.log"
    exit 1
fi
rm -f "$dest.log"
root="$dest$prefix"

want="bin/ferryfs-load
bin/ferryfsd
share/man/man1/ferryfsd.1
share/qemu/vhost-user/50-ferryfsd.json"
got="$(cd "$root" && find . -type f | sed 's|^\./||' | sort)"
if [[ "$got" == "$want" && -z "$(find "$dest" -path "$root" -prune -o -type f -print)" ]]; then
    pass "installed exactly: $(tr '\n' ' ' <<<"$want")"
else
    fail "installed files differ: $(find "$dest" -type f | sed "s|^$dest||" | tr '\n' ' ')"
fi

daemon="$root/bin/ferryfsd"
if "$daemon" --version | grep -q '^ferryfsd [0-9]' && "$root/bin/ferryfs-load" --help >/dev/null 2>&1; then
    pass "installed ferryfsd --version and ferryfs-load --help run"
else
    fail "an installed binary does not run"
fi

json="$root/share/qemu/vhost-user/50-ferryfsd.json"
caps="$("$daemon" --print-capabilities)"
if jq -e --arg bin "$prefix/bin/ferryfsd" \
    '(keys == ["binary", "description", "features", "type"]) and .binary == $bin and
     (.description | length > 0) and (.features | index("migrate-precopy"))' "$json" >/dev/null; then
    pass "50-ferryfsd.json has description, type, binary $prefix/bin/ferryfsd and migrate-precopy"
else
    fail "50-ferryfsd.json: $(tr -d '\n' <"$json")"
fi
# libvirt reads the features from the JSON: they must be the ones the daemon reports.
if [[ "$(jq -r .type "$json")" == "$(jq -r .type <<<"$caps")" ]] &&
    jq -e '.type == "fs" and (.features | type == "array")' <<<"$caps" >/dev/null &&
    [[ "$(jq -c .features <<<"$caps")" == "$(jq -c .features "$json")" ]]; then
    pass "--print-capabilities agrees with the JSON (type $(jq -r .type "$json"))"
else
    fail "--print-capabilities '$caps' disagrees with the JSON"
fi

man="$root/share/man/man1/ferryfsd.1"
warnings="$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$man" 2>&1 >/dev/null || echo "man failed")"
text="$(LC_ALL=C.UTF-8 MANWIDTH=200 man -l "$man" 2>/dev/null | col -b)"
if [[ -z "$warnings" ]]; then
    pass "ferryfsd(1) renders without warnings"
else
    fail "ferryfsd(1) warnings: $(head -3 <<<"$warnings")"
fi
missing=()
for section in NAME SYNOPSIS DESCRIPTION STARTING LOGGING "EXIT STATUS" FILES EXAMPLES "SEE ALSO"; do
    grep -q "^$section\$" <<<"$text" || missing+=("section $section")
done
options="$("$daemon" --help | grep -oE -- '(^|[ ,])--[a-z][a-z-]*' | sed 's/^[ ,]*//' | sort -u)"
for opt in $options; do
    grep -qF -- "$opt" <<<"$text" || missing+=("$opt")
done
if ((${#missing[@]} == 0)); then
    pass "ferryfsd(1) has every section and all $(wc -w <<<"$options") long options of --help"
else
    fail "ferryfsd(1) lacks: ${missing[*]}"
fi

undocumented=()
for opt in $options; do
    grep -qF -- "\`$opt" "$repo/docs/options.md" || undocumented+=("$opt")
done
if ((${#undocumented[@]} == 0)); then
    pass "docs/options.md lists every long option of --help"
else
    fail "docs/options.md lacks: ${undocumented[*]}"
fi

finish
