#!/usr/bin/env bash
# Guest e2e (make check): the guest's page and attribute cache under each cache mode while the host changes files behind its back, -o timeout, readdirplus on/off, --allow-mmap (shared mappings refused by 6.1, served to 6.6+ guests), and --writeback (data on the host after fsync, O_APPEND); one boot, six ferryfsd instances.
#
# Usage: cache-test.sh   Env: FERRYFSD (default build/ferryfsd), FERRYFS_GUEST_DIR
# Exit: 0 pass, 1 fail, 77 skipped (no QEMU or guest image).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sem_init cache-test

t="$sem_tmp"
modes=(auto never always metadata tmo)
for m in "${modes[@]}" wb; do
    mkdir -p "$t/$m"
    printf old-content-1 >"$t/$m/data"
    printf abc >"$t/$m/sized"
done
{ printf mapped; head -c 8186 /dev/zero; } >"$t/never/mapped"
printf 0123456789 >"$t/wb/app"

sem_daemon ferryfs "$t/auto" --cache=auto
sem_daemon never "$t/never" --cache=never --allow-mmap
sem_daemon always "$t/always" -o cache=always,no_readdirplus
sem_daemon metadata "$t/metadata" --cache=metadata
sem_daemon tmo "$t/tmo" -o cache=always,timeout=1
sem_daemon wb "$t/wb" --writeback

# The host half: change each share's files once its guest has cached them.
helpers=()
for m in "${modes[@]}"; do
    (
        for _ in $(seq 6000); do [[ -e "$t/$m/ready" ]] && break; sleep 0.1; done
        printf new-content-2 >"$t/$m/data"
        printf abcdef >"$t/$m/sized"
        : >"$t/$m/changed"
    ) &
    helpers+=($!)
done
(
    for _ in $(seq 6000); do [[ -e "$t/wb/wb-synced" ]] && break; sleep 0.1; done
    sem_host wb-on-host-after-fsync "$([[ "$(cat "$t/wb/wb")" == written-back ]] && echo 1)" \
        "host read '$(cat "$t/wb/wb")' while the guest still held the file" >"$t/wb.result"
    : >"$t/wb/wb-checked"
) &
helpers+=($!)

{
    echo '#!/bin/sh'
    sem_mount_line
    cat <<'GUEST'
/mnt/gsem cache /mnt auto
/mnt/gsem cache /never never
/mnt/gsem cache /always always
/mnt/gsem cache /metadata metadata
/mnt/gsem cache /tmo always-timeout1
/mnt/gsem mmap /never
/mnt/gsem writeback /wb
for d in /mnt /never /always; do
    if [ "$(ls $d | grep -c .)" -ge 3 ]; then echo "CHECK readdir-$d PASS"; else echo "CHECK readdir-$d FAIL"; fi
done
exit 0
GUEST
} >"$t/auto/guest.sh"
chmod 755 "$t/auto/guest.sh"

sem_boot 900
# Each helper the guest reached is done by now (the guest waited for its
# marker); one still waiting waits for a guest that is gone (QEMU died before
# the guest ran, say): end it instead of letting it poll for ten minutes.
kill "${helpers[@]}" 2>/dev/null || true
for p in "${helpers[@]}"; do wait "$p" 2>/dev/null || true; done

for m in auto never always metadata always-timeout1; do
    sem_expect "cache-$m-first-read" "cache-$m-first-stat" "cache-$m-host-changed"
done
sem_expect cache-never-open-sees-new cache-never-fd-sees-new cache-never-attr-sees-new \
    cache-never-later-sees-new cache-never-later-attr-sees-new \
    cache-metadata-open-sees-new cache-metadata-fd-sees-new cache-metadata-attr-keeps-old \
    cache-metadata-later-sees-new cache-metadata-later-attr-keeps-old \
    cache-always-open-keeps-old cache-always-fd-keeps-old cache-always-attr-keeps-old \
    cache-always-later-keeps-old cache-always-later-attr-keeps-old \
    cache-auto-open-sees-new cache-auto-later-sees-new cache-auto-later-attr-sees-new \
    cache-always-timeout1-later-sees-new cache-always-timeout1-later-attr-sees-new \
    mmap-private wb-write-fsync wb-host-checked wb-append \
    wb-append-read readdir-/mnt readdir-/never readdir-/always

flag() {  # TAG BIT -> 0/1
    local f
    f="$(sem_init_flags "$1")"
    echo $(( (16#${f#0x} >> $2) & 1 ))
}
{
    cat "$t/wb.result" 2>/dev/null || sem_host wb-result 0 "host half never ran"
    sem_host wb-append-on-host "$([[ "$(cat "$t/wb/app")" == 0123456789abcd ]] && echo 1)" "host has '$(cat "$t/wb/app")'"
    # FUSE_DO_READDIRPLUS is bit 13, FUSE_WRITEBACK_CACHE 16, FUSE_DIRECT_IO_ALLOW_MMAP 36.
    sem_host readdirplus-auto-on "$(flag ferryfs 13)" "INIT $(sem_init_flags ferryfs)"
    sem_host readdirplus-never-off "$(( 1 - $(flag never 13) ))" "INIT $(sem_init_flags never)"
    sem_host readdirplus-no_readdirplus-off "$(( 1 - $(flag always 13) ))" "INIT $(sem_init_flags always)"
    sem_host writeback-agreed "$(flag wb 16)" "INIT $(sem_init_flags wb)"
    sem_host writeback-off-by-default "$(( 1 - $(flag ferryfs 16) ))" "INIT $(sem_init_flags ferryfs)"
    # A shared writable mapping of a cache=never file (--allow-mmap) is judged by the guest's
    # kernel, not by what ferryfsd logs it agreed: FUSE_DIRECT_IO_ALLOW_MMAP came with Linux
    # 6.6, so a 6.1 guest refuses the mapping (ENODEV) and a newer one maps, writes through it
    # and msyncs, reads the bytes back, and the host's file holds them.
    shared="$(grep -a -m1 '^MMAP-SHARED ' <(tr -d '\r' <"$t/console.log") || echo 'MMAP-SHARED no-result')"
    kver="$(cat "$sem_guest_dir/kernel-version" 2>/dev/null)"
    on_host="$(dd if="$t/never/mapped" bs=1 skip=4096 count=32 2>/dev/null | tr -d '\0')"
    if [[ $kver =~ ^([0-9]+)\.([0-9]+) ]] && ((BASH_REMATCH[1] * 1000 + BASH_REMATCH[2] >= 6006)); then
        sem_host mmap-shared-works-guest-6.6-or-later "$([[ "$shared" == "MMAP-SHARED worked errno 0" ]] && echo 1)" \
            "guest $kver: $shared (INIT $(sem_init_flags never))"
        sem_host mmap-shared-write-on-host "$([[ $on_host == written-through-a-shared-mapping ]] && echo 1)" \
            "host file has '$on_host' at 4096"
    elif [[ -n $kver ]]; then
        sem_host mmap-shared-refused-guest-before-6.6 "$([[ "$shared" == "MMAP-SHARED refused errno 19" ]] && echo 1)" \
            "guest $kver: $shared (want ENODEV)"
        sem_host mmap-shared-nothing-on-host "$([[ -z $on_host ]] && echo 1)" "host file has '$on_host' at 4096"
    else
        sem_host guest-kernel-version-known 0 "no $sem_guest_dir/kernel-version"
    fi
    if [[ "$(cat "$sem_guest_dir/stack" 2>/dev/null)" == stable ]]; then
        sem_host allow-mmap-unknown-to-6.1 "$(( 1 - $(flag never 36) ))" "INIT $(sem_init_flags never)"
    fi
} >"$t/host.result" 2>&1
cat "$t/host.result"
grep -q ' FAIL' "$t/host.result" && sem_fail=1
sem_finish
