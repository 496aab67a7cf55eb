#!/usr/bin/env bash
# Builds xfstests from the project's third-party tarball into the cache, once per tarball, and prints the built tree's parent dir.
#
# Usage: tests/xfstests/build.sh            prints DIR, where DIR/xfstests is the built tree
# Env:   FERRYFS_XFSTESTS_TARBALL  the source (default: the newest ../shared/third_party/xfstests-*.tar.gz
#                                  beside the repository)
#        FERRYFS_CACHE             default /var/cache/ferryfs; the tree goes to $FERRYFS_CACHE/xfstests/HASH
# Exit:  0 built or cached; 77 no tarball (the reason on stderr); 1 the build failed.
# Its build packages are in scripts/deps.sh. The tarball is never unpacked into the repository.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cache="${FERRYFS_CACHE:-/var/cache/ferryfs}"
log() { echo "xfstests-build: $*" >&2; }

tarball="${FERRYFS_XFSTESTS_TARBALL:-}"
if [[ -z "$tarball" ]]; then
    tarball="$(ls -1 "$repo"/../shared/third_party/xfstests-*.tar.gz 2>/dev/null | tail -1 || true)"
fi
if [[ -z "$tarball" || ! -f "$tarball" ]]; then
    log "no xfstests tarball (../shared/third_party/xfstests-*.tar.gz beside the repository, or FERRYFS_XFSTESTS_TARBALL)"
    exit 77
fi

# The build's inputs: the source and the compiler; the host's headers come with the compiler's packages.
key="$({ sha256sum <"$tarball"; gcc -dumpfullversion; sha256sum <"$here/build.sh"; } | sha256sum | cut -c1-16)"
dest="$cache/xfstests/$key"
mkdir -p "$cache/xfstests"
exec 9>"$cache/xfstests/.lock"
flock 9
if [[ -f "$dest/.built" ]]; then
    echo "$dest"
    exit 0
fi
log "building $(basename "$tarball") into $dest"
rm -rf "$dest.tmp"
mkdir -p "$dest.tmp"
tar -xzf "$tarball" -C "$dest.tmp"
[[ -d "$dest.tmp/xfstests" ]] || { log "the tarball has no xfstests/ directory"; exit 1; }
if ! make -C "$dest.tmp/xfstests" -j"$(nproc)" >"$dest.tmp/build.log" 2>&1; then
    tail -30 "$dest.tmp/build.log" >&2
    log "make failed (log: $dest.tmp/build.log)"
    exit 1
fi
[[ -x "$dest.tmp/xfstests/ltp/fsstress" && -f "$dest.tmp/xfstests/tests/generic/group.list" ]] ||
    { log "the build left no ltp/fsstress or group list"; exit 1; }
rm -rf "$dest"
mv "$dest.tmp" "$dest"
touch "$dest/.built"
log "built"
echo "$dest"
