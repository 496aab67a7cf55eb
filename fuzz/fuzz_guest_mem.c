/* The virtqueue fuzz targets' guest memory: mapping a region of their memfd, and whether an iovec lies inside one region. */
#include "fuzz_guest_mem.h"

#include <stddef.h>

#include "fuzz_common.h"

void fuzz_guest_region_add(struct guest_mem *mem, int memfd, uint64_t gpa, uint64_t size,
			   uint64_t offset)
{
	struct guest_region_desc d = {
		.gpa = gpa, .size = size, .uva = 0x7f0000000000ull + gpa,
		.mmap_offset = offset,
	};
	struct guest_region r;

	if (guest_region_map(&r, &d, memfd) < 0 || guest_mem_insert(mem, &r) < 0)
		fuzz_fail("cannot map guest region at 0x%llx", (unsigned long long)gpa);
}

bool fuzz_iov_inside_one_region(const struct guest_mem *mem, const struct iovec *v)
{
	for (unsigned i = 0; i < mem->count; i++) {
		const struct guest_region *r = &mem->regions[i];
		const uint8_t *b = v->iov_base;

		if (b >= r->host && v->iov_len <= r->desc.size &&
		    b - r->host <= (ptrdiff_t)(r->desc.size - v->iov_len))
			return true;
	}
	return false;
}
