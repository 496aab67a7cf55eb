/* libFuzzer target: the split-virtqueue walker over a fuzzer-built ring, descriptor table and guest memory. */
#include <endian.h>
#include <stdint.h>
#include <string.h>

#include "common/log.h"
#include "fuzz_common.h"
#include "fuzz_guest_mem.h"
#include "transport/guest_mem.h"
#include "transport/virtq.h"

/*
 * Guest memory: fuzz_guest_mem.h's A, B, gap, C.
 *
 * Input: byte 0 log2 of the ring size (0..7), byte 1 features (bit 0
 * EVENT_IDX, bit 1 INDIRECT_DESC), bytes 2-3 the avail index popping starts
 * at, bytes 4-5 the used length reported per chain (bit 15: report wr_len+1
 * to test the clamp); the rest is copied over A, B and C in that order.
 */
#define HDR FUZZ_HDR
#define RING_DESC 0x0000u
#define RING_AVAIL 0x0800u
#define RING_USED 0x1000u

static struct fuzz_guest guest;
static struct virtq vq;

static void write_seeds(const char *dir);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_guest_init(&guest, "fuzz-virtq", write_seeds);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned num, pushed = 0;
	uint16_t used_len_spec;
	uint8_t *ring_base;

	if (size < HDR)
		return 0;
	num = 1u << (data[0] & 7);
	used_len_spec = fuzz_hdr_u16(data, 4);
	ring_base = fuzz_vq_begin(&vq, &guest, data, size);
	if (virtq_set_rings(&vq, num, ring_base + RING_DESC, ring_base + RING_AVAIL,
			    ring_base + RING_USED) < 0)
		fuzz_fail("rings refused");
	virtq_set_base(&vq, fuzz_hdr_u16(data, 2));
	virtq_start(&vq);
	virtq_disable_notify(&vq);

	/* A ring can hold at most num chains; popping more than that without
	 * the driver adding any would mean the walker invented work. */
	for (unsigned round = 0; round < 2; round++) {
		struct virtq_elem elem;
		int ret;

		while ((ret = virtq_pop(&vq, &elem)) == 1) {
			FUZZ_ASSERT(++pushed <= num, "popped %u chains from a ring of %u", pushed, num);
			fuzz_check_elem(guest.mem, &elem, num);
			/* As the queue thread does before handling each request:
			 * it must read only inside the rings and guest memory. */
			virtq_prefetch_ahead(&vq);
			virtq_push(&vq, &elem, fuzz_used_len(used_len_spec, &elem));
			{
				struct vring_used *used = (void *)(ring_base + RING_USED);
				uint32_t got = le32toh(used->ring[(vq.used_idx - 1) & (num - 1)].len);

				FUZZ_ASSERT(got <= elem.wr_len, "used length %u over wr_len %u",
					    got, elem.wr_len);
			}
		}
		FUZZ_ASSERT(ret == 0 || vq.broken, "pop failed without marking the queue broken");
		virtq_flush(&vq);
		(void)virtq_should_notify(&vq);
		if (!virtq_enable_notify(&vq))
			break;
	}
	return 0;
}

/* ---- Seeds: valid chains the fuzzer mutates from ---- */

/* A seed as data: header bytes (see the input layout at the top),
 * descriptors (each in the table at the given offset: the ring, or an
 * indirect table) and the avail ring. */
struct seed_desc {
	uint64_t table;
	unsigned i;
	uint64_t addr;
	uint32_t len;
	uint16_t flags, next;
};

static void put_desc(struct fuzz_seed *s, const struct seed_desc *sd)
{
	struct vring_desc d = {
		.addr = htole64(sd->addr), .len = htole32(sd->len),
		.flags = htole16(sd->flags), .next = htole16(sd->next),
	};

	fuzz_seed_put(s, sd->table + 16 * sd->i, &d, sizeof(d));
}

static void put_avail(struct fuzz_seed *s, uint16_t idx, const uint16_t *heads, unsigned n)
{
	uint16_t v = htole16(idx);

	fuzz_seed_put(s, RING_AVAIL + 2, &v, 2);
	for (unsigned i = 0; i < n; i++) {
		v = htole16(heads[i]);
		fuzz_seed_put(s, RING_AVAIL + 4 + 2 * i, &v, 2);
	}
}

static const struct seed_spec {
	const char *name;
	uint8_t hdr[HDR];
	unsigned ndesc;
	struct seed_desc desc[5];
	uint16_t avail_idx;
	unsigned nheads;
	uint16_t heads[2];
} seed_specs[] = {
	/* Two chains in a ring of 8: a readable+writable pair, and a chain
	 * whose buffer crosses from region A into B. */
	{ "two-chains", { [0] = 3, [4] = 100 }, 5, {
		{ RING_DESC, 0, 0x2000, 64, VRING_DESC_F_NEXT, 1 },
		{ RING_DESC, 1, 0x2100, 128, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 2 },
		{ RING_DESC, 2, 0x2200, 32, VRING_DESC_F_WRITE, 0 },
		{ RING_DESC, 3, 0x3f00, 0x200, VRING_DESC_F_NEXT, 4 },
		{ RING_DESC, 4, 0x2400, 16, VRING_DESC_F_WRITE, 0 },
	  }, 2, 2, { 0, 3 } },
	/* An indirect table of three descriptors, EVENT_IDX on. */
	{ "indirect", { [0] = 2, [1] = 3, [5] = 0x80 }, 4, {
		{ RING_DESC, 0, 0x1800, 48, VRING_DESC_F_INDIRECT, 0 },
		{ 0x1800, 0, 0x2000, 40, VRING_DESC_F_NEXT, 1 },
		{ 0x1800, 1, 0x2100, 16, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 2 },
		{ 0x1800, 2, 0x2200, 4096, VRING_DESC_F_WRITE, 0 },
	  }, 1, 1, { 0 } },
	/* Start near the 16-bit wrap of the avail index. */
	{ "wrap", { [2] = 0xff, [3] = 0xff }, 1, {
		{ RING_DESC, 0, 0x2000, 8, 0, 0 },
	  }, 0, 1, { 0 } },
};

/* The n-th seed of the table; returns its name. */
static const char *build_seed(struct fuzz_seed *s, size_t n)
{
	const struct seed_spec *spec = &seed_specs[n];

	memcpy(s->hdr, spec->hdr, HDR);
	for (unsigned i = 0; i < spec->ndesc; i++)
		put_desc(s, &spec->desc[i]);
	put_avail(s, spec->avail_idx, spec->heads, spec->nheads);
	return spec->name;
}

static void write_seeds(const char *dir)
{
	fuzz_write_seeds(dir, sizeof(seed_specs) / sizeof(seed_specs[0]), build_seed);
}
