/* Guest memory table: the frontend's shared-memory regions and address translation. */
#ifndef FERRY_GUEST_MEM_H
#define FERRY_GUEST_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* What we report for GET_MAX_MEM_SLOTS: QEMU's own limit for vhost-user. */
#define GUEST_MEM_MAX_REGIONS 509

/* One region as the frontend describes it on the wire. */
struct guest_region_desc {
	uint64_t gpa;          /* guest physical address */
	uint64_t size;
	uint64_t uva;          /* address in the frontend's process */
	uint64_t mmap_offset;  /* where the region starts inside the fd */
};

struct guest_region {
	struct guest_region_desc desc;
	uint8_t *host;         /* desc.gpa maps to host[0] */
	void *map_base;        /* what mmap returned, for munmap */
	size_t map_len;
};

/* Regions sorted by gpa, none overlapping (neither in gpa nor in uva). */
struct guest_mem {
	unsigned count;
	struct guest_region regions[GUEST_MEM_MAX_REGIONS];
};

/* Checks desc (non-zero size, no wrap-around of gpa/uva/offset ranges, the
 * fd is large enough) and maps it shared. The caller keeps ownership of fd
 * and may close it right away: the mapping holds its own reference. */
int guest_region_map(struct guest_region *r, const struct guest_region_desc *desc,
		     int fd);
void guest_region_unmap(struct guest_region *r);

int guest_mem_new(struct guest_mem **out);
/* Unmaps every region and frees the table. */
void guest_mem_free(struct guest_mem *mem);
/* Unmaps every region, leaving an empty table. */
void guest_mem_clear(struct guest_mem *mem);

/* Adds a mapped region; -EEXIST if it overlaps another one in guest or
 * frontend address space, -ENOSPC past GUEST_MEM_MAX_REGIONS. On success the
 * table owns the mapping. */
int guest_mem_insert(struct guest_mem *mem, const struct guest_region *r);
/* Takes out the region with this gpa, size and uva (mmap_offset is ignored,
 * as vhost-user.rst says) into *removed for the caller to unmap once nobody
 * can use it any more; -ENOENT if there is none. */
int guest_mem_remove(struct guest_mem *mem, const struct guest_region_desc *desc,
		     struct guest_region *removed);

/*
 * Appends iovecs for the guest-physical range [gpa, gpa + len) to
 * iov[*cnt..max). A range crossing from one region into an adjacent one
 * gets one iovec per region. -EFAULT if any byte is unmapped or the range
 * wraps, -E2BIG if more than max iovecs would be needed. len 0 adds nothing.
 */
int guest_mem_gpa_to_iov(const struct guest_mem *mem, uint64_t gpa, uint64_t len,
			 struct iovec *iov, unsigned max, unsigned *cnt);
/* Pointer to [gpa, gpa + len) if it lies inside a single region, else NULL. */
void *guest_mem_gpa_to_ptr(const struct guest_mem *mem, uint64_t gpa, uint64_t len);
/* Pointer to the frontend virtual range [uva, uva + len) if it lies inside a
 * single region, else NULL. Ring addresses are given this way. */
void *guest_mem_uva_to_ptr(const struct guest_mem *mem, uint64_t uva, uint64_t len);
/* The guest-physical address of the frontend virtual address uva, if a
 * region maps it; else -EFAULT. For the dirty log's ring addresses. */
int guest_mem_uva_to_gpa(const struct guest_mem *mem, uint64_t uva, uint64_t *gpa);
/* The guest-physical address of host pointer p, if a region maps [p, p +
 * len); else -EFAULT. Linear in the regions: only while dirty logging is
 * on, so that the data path keeps no guest address per segment. */
int guest_mem_host_to_gpa(const struct guest_mem *mem, const void *p, uint64_t len,
			  uint64_t *gpa);

#endif
