/* The virtqueue fuzz targets' shared harness: their guest memory, the checks every popped chain must pass, and trimmed seeds. */
#ifndef FERRY_FUZZ_GUEST_MEM_H
#define FERRY_FUZZ_GUEST_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "transport/guest_mem.h"
#include "transport/virtq.h"

/*
 * Guest memory, one memfd, the same for the split and the packed target:
 *   A  gpa 0x0000..0x4000   file 0x0000   the rings, then buffers
 *   B  gpa 0x4000..0x8000   file 0x4000   adjacent to A (chains cross over)
 *      gap 0x8000..0x10000                unmapped
 *   C  gpa 0x10000..0x14000 file 0x8000
 */
#define FUZZ_REG 0x4000u
#define FUZZ_GPA_C 0x10000u
#define FUZZ_MEM_SIZE (3 * FUZZ_REG)

struct fuzz_guest {
	int memfd;
	uint8_t *file_map;          /* our own view of the whole memfd */
	struct guest_mem *mem;      /* A, B and C as the walkers see them */
};

/* Creates the memfd (named name) and maps A, B and C; fails the run if it
 * cannot. */
void fuzz_guest_setup(struct fuzz_guest *g, const char *name);
/* Zeroes the guest memory and copies image over A, B and C in that order
 * (as much of it as fits). */
void fuzz_guest_load(struct fuzz_guest *g, const uint8_t *image, size_t len);

/* What a walker must guarantee of every chain it pops from a ring of num:
 * an id below num, at most VIRTQ_MAX_SEGS segments, every iovec wholly
 * inside one region, wr_len the sum of the writable ones. Reads the
 * readable buffers and fills the writable ones, as a backend would. */
void fuzz_check_elem(const struct guest_mem *mem, const struct virtq_elem *elem, unsigned num);

/* Writes a seed of len bytes without its trailing zeros (the harness
 * zero-fills), never shorter than its keep header bytes. */
void fuzz_write_seed_trimmed(const char *dir, const char *name, const void *seed, size_t len,
			     size_t keep);

#endif
