/* Fixtures of the virtqueue and vhost-user unit tests: guest memory from one memfd, host addresses of guest ones, and why a queue broke. */
#ifndef FERRY_TEST_VIRTQ_FIXTURE_H
#define FERRY_TEST_VIRTQ_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/guest_mem.h"
#include "transport/virtq.h"

/* A memfd of size bytes and an empty guest memory: 0, or -errno (the test
 * cannot run here). */
int vqf_guest_new(int *memfd, struct guest_mem **mem, uint64_t size);
/* A region of a test's guest memory: size bytes of the memfd at file offset
 * off, as guest physical gpa at user address uva. */
struct vqf_region {
	uint64_t gpa, size, uva, off;
};
/* A test main's guest memory: vqf_guest_new, then the n regions in the order
 * given. 0; or, having said why, the status main returns: TEST_SKIP (77)
 * without a memfd, 1 when a region is refused. */
int vqf_guest_build(int *memfd, struct guest_mem **mem, uint64_t size,
		    const struct vqf_region *regions, unsigned n);
/* Maps size bytes of memfd at file offset off as gpa, at uva; 0 or -errno
 * (what guest_mem_insert refuses is part of what the tests check). */
int vqf_add_region(struct guest_mem *mem, int memfd, uint64_t gpa, uint64_t size, uint64_t uva,
		   uint64_t off);
/* Guest memory as a vhost-user frontend holds it: the memfd it hands the
 * device (SET_MEM_TABLE, ADD_MEM_REG) and its own view of all of it. */
struct vqf_frontend_mem {
	int memfd;
	uint8_t *base;
	uint64_t size;
};
/* A zeroed memfd of size bytes mapped shared: 0, or -errno (the test cannot
 * run here). */
int vqf_frontend_mem_new(struct vqf_frontend_mem *m, uint64_t size);
void vqf_frontend_mem_free(struct vqf_frontend_mem *m);
/* The host address of gpa; exits (a bug in the test) when it is unmapped. */
void *vqf_host(struct guest_mem *mem, uint64_t gpa);
/* Whether a pop that returned ret broke vq for a reason containing want. */
bool vqf_broke_with(const struct virtq *vq, int ret, const char *want);
/* vq's broken reason, for a message. */
const char *vqf_why(const struct virtq *vq);

#endif
