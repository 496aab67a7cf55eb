/* Fixtures of the virtqueue unit tests: guest memory from one memfd, host addresses of guest ones, and why a queue broke. */
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
/* Maps size bytes of memfd at file offset off as gpa, at uva; 0 or -errno
 * (what guest_mem_insert refuses is part of what the tests check). */
int vqf_add_region(struct guest_mem *mem, int memfd, uint64_t gpa, uint64_t size, uint64_t uva,
		   uint64_t off);
/* The host address of gpa; exits (a bug in the test) when it is unmapped. */
void *vqf_host(struct guest_mem *mem, uint64_t gpa);
/* Whether a pop that returned ret broke vq for a reason containing want. */
bool vqf_broke_with(const struct virtq *vq, int ret, const char *want);
/* vq's broken reason, for a message. */
const char *vqf_why(const struct virtq *vq);

#endif
