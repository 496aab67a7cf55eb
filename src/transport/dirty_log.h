/* The vhost-user dirty log: a bitmap shared with the frontend, one bit per guest page the device wrote while migrating. */
#ifndef FERRY_DIRTY_LOG_H
#define FERRY_DIRTY_LOG_H

#include <stdint.h>
#include <sys/uio.h>

#include "transport/guest_mem.h"

/*
 * QEMU copies guest memory to the destination while the guest runs and
 * learns which pages changed since it copied them from the log: KVM (or
 * TCG) marks the guest's own writes, the device marks its own here (SET_
 * LOG_BASE, VHOST_F_LOG_ALL). Bit (gpa / 4096) % 8 of byte gpa / 4096 / 8.
 */
struct dirty_log {
	struct guest_region map;      /* the memfd's bytes; map.host is the bitmap */
	uint64_t size;                /* bytes of bitmap */
	uint64_t skipped;             /* atomic: marks of pages past the bitmap */
};

/* Maps size bytes of fd from offset, shared and writable; checks that the
 * range does not wrap and that the file holds it. 0 or -errno. */
int dirty_log_map(struct dirty_log **out, int fd, uint64_t size, uint64_t offset);
void dirty_log_free(struct dirty_log *log);

/* Marks every page of [gpa, gpa + len) (len 0 marks nothing). Pages past
 * the bitmap are not written: counted, and logged the first time. Any
 * thread; call it after the bytes are written (see dirty_log.c). */
void dirty_log_mark(struct dirty_log *log, uint64_t gpa, uint64_t len);
/* Marks the first len bytes of the buffers iov[0..cnt), which point into
 * mem: what the device wrote into a device-writable chain. */
void dirty_log_mark_iov(struct dirty_log *log, const struct guest_mem *mem,
			const struct iovec *iov, unsigned cnt, uint64_t len);

#endif
