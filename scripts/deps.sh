#!/usr/bin/env bash
# Installs the Debian packages needed to build ferryfsd and run its QEMU end-to-end tests (idempotent).
set -euo pipefail

pkgs=(meson ninja-build pkg-config gcc libseccomp-dev libcap-ng-dev
      linux-libc-dev qemu-system-x86 qemu-system-common busybox-static cpio
      xz-utils zstd fio attr acl libcap2-bin jq gnuplot-nox python3 systemd help2man
      clang libclang-rt-14-dev strace
      libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients  # tests/e2e/libvirt-real-test.sh (no services: that is libvirt-daemon-system)
      fuse3   # fusermount3: --mount without root (tests/security/unprivileged-test.sh)
      uidmap  # newuidmap/newgidmap: --uid-map/--gid-map ranges without root (tests/security/unprivileged-test.sh)
      dpkg-dev debhelper fakeroot lintian  # make deb, tests/install/deb-test.sh (Build-Depends are above)
      debian-archive-keyring  # scripts/stack.sh checks bookworm-backports and trixie against it
      glusterfs-server glusterfs-client  # tests/dfs/: a GlusterFS volume in the test's own namespaces (tests/lib/gluster.sh)
      ceph-mon ceph-mgr ceph-osd ceph-mds ceph-fuse ceph-common  # tests/dfs/ceph-*: a one-node Ceph cluster in the test's own network namespace (tests/lib/ceph.sh)
      # tests/xfstests/: building xfstests (build.sh), and what its ./check runs in the guest, whose
      # userland is this host's root shared read-only
      make autoconf automake libtool-bin xfslibs-dev uuid-dev libacl1-dev libattr1-dev libaio-dev
      libcap-dev libgdbm-dev libssl-dev xfsprogs psmisc bc gawk e2fsprogs)

# One dpkg-query for all packages keeps the all-present case well under a second.
missing=()
while read -r name status; do
    [[ "$status" == "installed" ]] || missing+=("$name")
done < <(for p in "${pkgs[@]}"; do
            s=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
            echo "$p ${s:-absent}"
         done)

if ((${#missing[@]} == 0)); then
    exit 0
fi

echo "deps.sh: installing: ${missing[*]}" >&2
SUDO=()
if [[ $(id -u) -ne 0 ]]; then SUDO=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
