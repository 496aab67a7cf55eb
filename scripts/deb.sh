#!/usr/bin/env bash
# `make deb`: builds the ferryfs binary package from this tree with Debian's tools (dpkg-buildpackage, debhelper, meson) in a temporary copy and checks it with lintian.
#
# The build's check step runs the unit suite only (debian/rules), as a build chroot can;
# DEB_BUILD_OPTIONS=nocheck skips it.
#
# Usage: scripts/deb.sh [OUTDIR]   build; OUTDIR (default build-deb) receives the .deb,
#                                   .buildinfo, .changes and lintian.txt
#        scripts/deb.sh deps       install the build tools and debian/control's Build-Depends
# The copy holds the tree's files as they are now (tracked and untracked, not ignored
# ones), so dpkg-buildpackage's obj-*/ and debian/ferryfs/ never land in the tree.
# Exit: 0 built (lintian's findings are in lintian.txt, its errors fail); 1 error;
#       77 a build tool is missing and `make deb-deps` was not run.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
say() { echo "deb.sh: $*" >&2; }

if [[ "${1:-}" == deps ]]; then
    SUDO=()
    [[ $(id -u) -eq 0 ]] || SUDO=(sudo)
    export DEBIAN_FRONTEND=noninteractive
    "${SUDO[@]}" apt-get update -qq
    "${SUDO[@]}" apt-get install -y -qq --no-install-recommends \
        dpkg-dev debhelper fakeroot lintian
    # Build-Depends straight from debian/control, so they are listed once.
    cd "$repo" && "${SUDO[@]}" apt-get build-dep -y -qq ./
    exit 0
fi

out="${1:-$repo/build-deb}"
for tool in dpkg-buildpackage dh dpkg-checkbuilddeps; do
    command -v "$tool" >/dev/null || { say "SKIP: $tool missing; run 'make deb-deps'"; exit 77; }
done
if ! (cd "$repo" && dpkg-checkbuilddeps) 2>/dev/null; then
    say "SKIP: $(cd "$repo" && dpkg-checkbuilddeps 2>&1 | sed 's/^dpkg-checkbuilddeps: //'); run 'make deb-deps'"
    exit 77
fi

work="$(mktemp -d /tmp/ferryfs-deb.XXXXXX)"
trap 'rm -rf "$work"' EXIT
mkdir "$work/ferryfs"
if git -C "$repo" rev-parse --git-dir >/dev/null 2>&1; then
    (cd "$repo" && git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do [[ -e "$f" ]] && printf '%s\0' "$f"; done |
        tar --null -T - -cf -) | tar -xf - -C "$work/ferryfs"
else
    tar -C "$repo" --exclude='./build*' --exclude=./.git -cf - . | tar -xf - -C "$work/ferryfs"
fi

say "dpkg-buildpackage -b -us -uc in $work/ferryfs"
if ! (cd "$work/ferryfs" && dpkg-buildpackage -b -us -uc) >"$work/build.log" 2>&1; then
    tail -40 "$work/build.log" >&2
    say "error: dpkg-buildpackage failed (last lines above)"
    exit 1
fi
mkdir -p "$out"
cp "$work"/*.deb "$work"/*.buildinfo "$work"/*.changes "$out"/
cp "$work/build.log" "$out/build.log"
changes="$(ls "$out"/ferryfs_*.changes | tail -1)"
say "built: $(cd "$out" && ls ./*.deb)"

if command -v lintian >/dev/null; then
    rc=0
    # --fail-on error here; deb-test fails on warnings too: one that stays needs an
    # override with its reason in debian/ferryfs.lintian-overrides.
    # It says "running with root privileges is not recommended!" under root:
    # that is about lintian, not the package.
    lintian --fail-on error --info --display-info "$changes" >"$work/lintian.raw" 2>&1 || rc=$?
    grep -v '^running with root privileges is not recommended!$' "$work/lintian.raw" \
        >"$out/lintian.txt" || true
    if [[ -s "$out/lintian.txt" ]]; then
        say "lintian:"; sed 's/^/    /' "$out/lintian.txt" >&2
    else
        say "lintian: clean"
    fi
    ((rc == 0)) || { say "error: lintian found errors"; exit 1; }
else
    say "lintian not installed: not checked ('make deb-deps' installs it)"
fi
