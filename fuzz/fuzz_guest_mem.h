/* The virtqueue fuzz targets' guest memory: mapping a region of their memfd, and whether an iovec lies inside one region. */
#ifndef FERRY_FUZZ_GUEST_MEM_H
#define FERRY_FUZZ_GUEST_MEM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "transport/guest_mem.h"

/* Maps size bytes of memfd at offset as guest physical gpa into mem (at a
 * fixed fake uva); fails the run if it cannot. */
void fuzz_guest_region_add(struct guest_mem *mem, int memfd, uint64_t gpa, uint64_t size,
			   uint64_t offset);
/* Whether v lies wholly inside one mapped region: what the walkers must
 * guarantee of every iovec they hand out. */
bool fuzz_iov_inside_one_region(const struct guest_mem *mem, const struct iovec *v);

#endif
