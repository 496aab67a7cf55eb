/* Fixtures of the virtqueue unit tests: guest memory from one memfd, host addresses of guest ones, and why a queue broke. */
#include "virtq_fixture.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int vqf_guest_new(int *memfd, struct guest_mem **mem, uint64_t size)
{
	int ret;

	*memfd = memfd_create("ferry-guest", MFD_CLOEXEC);
	if (*memfd < 0)
		return -errno;
	if (ftruncate(*memfd, (off_t)size) < 0) {
		ret = -errno;
		close(*memfd);
		return ret;
	}
	ret = guest_mem_new(mem);
	if (ret < 0)
		close(*memfd);
	return ret;
}

int vqf_add_region(struct guest_mem *mem, int memfd, uint64_t gpa, uint64_t size, uint64_t uva,
		   uint64_t off)
{
	struct guest_region_desc d = { .gpa = gpa, .size = size, .uva = uva, .mmap_offset = off };
	struct guest_region r;
	int ret = guest_region_map(&r, &d, memfd);

	if (ret < 0)
		return ret;
	ret = guest_mem_insert(mem, &r);
	if (ret < 0)
		guest_region_unmap(&r);
	return ret;
}

void *vqf_host(struct guest_mem *mem, uint64_t gpa)
{
	void *p = guest_mem_gpa_to_ptr(mem, gpa, 1);

	if (!p) {
		fprintf(stderr, "test bug: gpa 0x%llx unmapped\n", (unsigned long long)gpa);
		exit(1);
	}
	return p;
}

bool vqf_broke_with(const struct virtq *vq, int ret, const char *want)
{
	return ret == -EIO && vq->broken && vq->broken_reason && strstr(vq->broken_reason, want);
}

const char *vqf_why(const struct virtq *vq)
{
	return vq->broken_reason ? vq->broken_reason : "not broken";
}
