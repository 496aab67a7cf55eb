/* The vhost-user dirty log: maps the frontend's bitmap and marks the guest pages the device wrote. */
#include "transport/dirty_log.h"

#include <errno.h>
#include <stdlib.h>

#include "common/log.h"
#include "transport/vhost_user_wire.h"

/* A log for 2^52 bytes of guest-physical memory (x86-64's limit); a larger
 * size is a confused or hostile frontend, not a bigger guest. */
#define DIRTY_LOG_MAX_SIZE (1ull << 37)

int dirty_log_map(struct dirty_log **out, int fd, uint64_t size, uint64_t offset)
{
	/* The guest region mapper has every check the log needs: no wrap,
	 * the file holds [offset, offset + size), a shared writable map. */
	struct guest_region_desc d = { .gpa = 0, .size = size, .uva = 0, .mmap_offset = offset };
	struct dirty_log *log;
	int ret;

	if (size == 0 || size > DIRTY_LOG_MAX_SIZE) {
		log_err("SET_LOG_BASE: log size %llu outside 1..%llu",
			(unsigned long long)size, DIRTY_LOG_MAX_SIZE);
		return -EINVAL;
	}
	log = calloc(1, sizeof(*log));
	if (!log)
		return -ENOMEM;
	ret = guest_region_map(&log->map, &d, fd);
	if (ret < 0) {
		free(log);
		return ret;
	}
	log->size = size;
	*out = log;
	return 0;
}

void dirty_log_free(struct dirty_log *log)
{
	if (!log)
		return;
	guest_region_unmap(&log->map);
	free(log);
}

void dirty_log_mark(struct dirty_log *log, uint64_t gpa, uint64_t len)
{
	uint64_t page, last;

	if (len == 0)
		return;
	page = gpa / VU_LOG_PAGE_SIZE;
	/* A range wrapping past 2^64 is marked up to the top. */
	last = (gpa + (len - 1) < gpa ? UINT64_MAX : gpa + (len - 1)) / VU_LOG_PAGE_SIZE;
	for (;; page++) {
		uint64_t byte = page / 8;

		if (byte >= log->size) {
			/* The frontend sized the log for less memory than it
			 * gave us: nothing to write, and nothing to crash on. */
			if (__atomic_fetch_add(&log->skipped, 1, __ATOMIC_RELAXED) == 0)
				log_warn("dirty log: page 0x%llx past the %llu-byte log; not marked",
					 (unsigned long long)page, (unsigned long long)log->size);
			return;
		}
		/*
		 * Release: the bytes this page received, written before the
		 * call, are visible before the bit. QEMU clears the bitmap a
		 * word at a time with an atomic exchange and then copies each
		 * marked page; with a relaxed OR it could see the bit, clear
		 * it, and copy the page before our data reached it, and the
		 * page would never be sent again. Callers publish the used
		 * index only after the marks, with a release store of its own,
		 * so a mark is never later than the index that hands the
		 * bytes to the guest.
		 */
		__atomic_fetch_or(&log->map.host[byte], (uint8_t)(1u << (page % 8)),
				  __ATOMIC_RELEASE);
		if (page == last)
			break;
	}
}

void dirty_log_mark_iov(struct dirty_log *log, const struct guest_mem *mem,
			const struct iovec *iov, unsigned cnt, uint64_t len)
{
	for (unsigned i = 0; i < cnt && len > 0; i++) {
		uint64_t n = iov[i].iov_len < len ? iov[i].iov_len : len;
		uint64_t gpa;

		/* Each iovec lies in one region: the chain walk split them. */
		if (n > 0 && guest_mem_host_to_gpa(mem, iov[i].iov_base, n, &gpa) == 0)
			dirty_log_mark(log, gpa, n);
		else if (n > 0)
			log_warn("dirty log: a written buffer is not in guest memory; not marked");
		len -= n;
	}
}
