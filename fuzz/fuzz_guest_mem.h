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

/* Both targets' input starts with this many header bytes (each target's
 * comment says what they mean): byte 1 bits 0 and 1 are EVENT_IDX and
 * INDIRECT_DESC in both; the rest of the input is copied over A, B, C. */
#define FUZZ_HDR 6u

struct fuzz_guest {
	int memfd;
	uint8_t *file_map;          /* our own view of the whole memfd */
	struct guest_mem *mem;      /* A, B and C as the walkers see them */
};

/* A target's LLVMFuzzerInitialize: quiet logs, the memfd (named name) with
 * A, B and C mapped, or with FERRY_FUZZ_WRITE_SEEDS set, write_seeds into
 * that directory and exit. Fails the run if it cannot. */
void fuzz_guest_init(struct fuzz_guest *g, const char *name, void (*write_seeds)(const char *dir));
/* Zeroes the guest memory and copies image over A, B and C in that order
 * (as much of it as fits). */
void fuzz_guest_load(struct fuzz_guest *g, const uint8_t *image, size_t len);

/* A fresh queue over g's memory for one input of size bytes (at least
 * FUZZ_HDR): what follows the header loaded as by fuzz_guest_load, the
 * features the header asks for; returns the host address of A, where the
 * rings are. */
uint8_t *fuzz_vq_begin(struct virtq *vq, struct fuzz_guest *g, const uint8_t *data, size_t size);

/* The little-endian 16 bits at data[at] of the header. */
static inline uint16_t fuzz_hdr_u16(const uint8_t *data, unsigned at)
{
	return (uint16_t)(data[at] | data[at + 1] << 8);
}

/* The used length to report for elem: spec (header bytes 4-5), or with its
 * bit 15 set wr_len + 1, one past what the walker must clamp to. */
static inline uint32_t fuzz_used_len(uint16_t spec, const struct virtq_elem *elem)
{
	return spec & 0x8000 ? elem->wr_len + 1 : spec;
}

/* What a walker must guarantee of every chain it pops from a ring of num:
 * an id below num, at most VIRTQ_MAX_SEGS segments, every iovec wholly
 * inside one region, wr_len the sum of the writable ones. Reads the
 * readable buffers and fills the writable ones, as a backend would. */
void fuzz_check_elem(const struct guest_mem *mem, const struct virtq_elem *elem, unsigned num);

/* A seed: an input as the targets read it, built from a table of the
 * target's (header bytes, then descriptors and rings placed in A). */
struct fuzz_seed {
	uint8_t hdr[FUZZ_HDR];
	uint8_t mem[FUZZ_REG + 0x200];
};

/* Places len bytes at offset at of s->mem. */
void fuzz_seed_put(struct fuzz_seed *s, uint64_t at, const void *p, size_t len);
/* Writes count seeds into dir, each without its trailing zeros (the
 * harness zero-fills): build fills the i-th into a zeroed seed and returns
 * its name. */
void fuzz_write_seeds(const char *dir, size_t count,
		      const char *(*build)(struct fuzz_seed *s, size_t i));

#endif
