/* Fixtures of the virtqueue and vhost-user unit tests: guest memory from one memfd, host addresses of guest ones, and why a queue broke. */
#include "virtq_fixture.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* A zeroed memfd of size bytes, or -errno. */
static int guest_memfd_new(uint64_t size)
{
	int fd = memfd_create("ferry-guest", MFD_CLOEXEC);
	int ret;

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size) < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	return fd;
}

int vqf_guest_new(int *memfd, struct guest_mem **mem, uint64_t size)
{
	int ret;

	*memfd = guest_memfd_new(size);
	if (*memfd < 0)
		return *memfd;
	ret = guest_mem_new(mem);
	if (ret < 0)
		close(*memfd);
	return ret;
}

int vqf_frontend_mem_new(struct vqf_frontend_mem *m, uint64_t size)
{
	void *base;
	int ret;

	m->memfd = guest_memfd_new(size);
	if (m->memfd < 0)
		return m->memfd;
	base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, m->memfd, 0);
	if (base == MAP_FAILED) {
		ret = -errno;
		close(m->memfd);
		return ret;
	}
	m->base = base;
	m->size = size;
	return 0;
}

void vqf_frontend_mem_free(struct vqf_frontend_mem *m)
{
	munmap(m->base, m->size);
	close(m->memfd);
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

int vqf_guest_build(int *memfd, struct guest_mem **mem, uint64_t size,
		    const struct vqf_region *regions, unsigned n)
{
	const int test_skip = 77;    /* check.h's TEST_SKIP */
	int ret = vqf_guest_new(memfd, mem, size);

	if (ret < 0) {
		printf("SKIP  no memfd for guest memory (%s)\n", strerror(-ret));
		return test_skip;
	}
	for (unsigned i = 0; i < n; i++) {
		const struct vqf_region *r = &regions[i];

		if (vqf_add_region(*mem, *memfd, r->gpa, r->size, r->uva, r->off) < 0) {
			fprintf(stderr, "cannot build guest memory\n");
			return 1;
		}
	}
	return 0;
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
