/* libFuzzer target: the packed-virtqueue walker over a fuzzer-built ring, indirect tables and guest memory. */
#include <endian.h>
#include <stdint.h>
#include <string.h>

#include "common/log.h"
#include "fuzz_common.h"
#include "fuzz_guest_mem.h"
#include "transport/guest_mem.h"
#include "transport/virtq.h"

/*
 * Guest memory: fuzz_guest_mem.h's A, B, gap, C; the ring at 0 in A, then
 * the event areas, then buffers.
 *
 * Input: byte 0 the ring size minus one (1..256, any, not only powers of
 * two), byte 1 features (bit 0 EVENT_IDX, bit 1 INDIRECT_DESC, bit 2
 * complete in reverse order), bytes 2-3 the SET_VRING_BASE value (position
 * and wrap bit 15), bytes 4-5 the used length (bit 15: wr_len+1 to test the
 * clamp); the rest is copied over A, B and C in that order.
 */
#define HDR FUZZ_HDR
#define RING_DESC 0x0000u
#define DRIVER_EV 0x1000u
#define DEVICE_EV 0x1004u
#define MAX_INFLIGHT 256u

static struct fuzz_guest guest;
static struct virtq vq;

/* Popped chains not yet pushed, with their copies for the re-walk. */
static struct {
	uint16_t id;
	unsigned n;
	struct vring_packed_desc chain[8];
	bool kept;
} inflight[MAX_INFLIGHT];

static void write_seeds(const char *dir);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_guest_init(&guest, "fuzz-virtq-packed", write_seeds);
	return 0;
}

/* Pushes the popped chains, re-walking each from its copy first. */
static void complete_all(unsigned cnt, bool reverse, uint16_t used_len_spec, unsigned num)
{
	for (unsigned k = 0; k < cnt; k++) {
		unsigned i = reverse ? cnt - 1 - k : k;
		struct virtq_elem elem;

		if (!inflight[i].kept || virtq_packed_rewalk(&vq, inflight[i].chain,
							     inflight[i].n, &elem) < 0) {
			FUZZ_ASSERT(vq.broken || !inflight[i].kept,
				    "re-walk failed without marking the queue broken");
			return;
		}
		FUZZ_ASSERT(elem.head == inflight[i].id, "re-walk gave id %u, popped %u",
			    elem.head, inflight[i].id);
		fuzz_check_elem(guest.mem, &elem, num);
		virtq_packed_push(&vq, &elem, fuzz_used_len(used_len_spec, &elem));
		FUZZ_ASSERT(!vq.broken, "push of a popped id broke the queue");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned num, popped = 0, cnt = 0;
	uint16_t used_len_spec;
	uint8_t *base;

	if (size < HDR)
		return 0;
	num = data[0] + 1u;
	used_len_spec = fuzz_hdr_u16(data, 4);
	base = fuzz_vq_begin(&vq, &guest, data, size);
	virtq_set_packed(&vq, true);
	if (virtq_packed_set_rings(&vq, num, base + RING_DESC, base + DRIVER_EV,
				   base + DEVICE_EV) < 0)
		fuzz_fail("rings refused");
	virtq_packed_set_base(&vq, fuzz_hdr_u16(data, 2));
	virtq_packed_start(&vq);
	virtq_packed_disable_notify(&vq);

	for (unsigned round = 0; round < 2; round++) {
		struct virtq_elem elem;
		int ret;

		cnt = 0;
		while ((ret = virtq_packed_pop(&vq, &elem)) == 1) {
			/* Each pop takes at least one slot; a full lap of the
			 * ring is all the driver can have made available. */
			FUZZ_ASSERT(++popped <= 2 * num, "popped %u chains from a ring of %u",
				    popped, num);
			FUZZ_ASSERT(vq.pk_chain_len >= 1 && vq.pk_chain_len <= num,
				    "chain of %u descriptors in a ring of %u", vq.pk_chain_len, num);
			fuzz_check_elem(guest.mem, &elem, num);
			if (cnt == MAX_INFLIGHT)
				break;
			inflight[cnt].id = elem.head;
			inflight[cnt].n = vq.pk_chain_len;
			inflight[cnt].kept = vq.pk_chain_len <= 8;
			if (inflight[cnt].kept)
				memcpy(inflight[cnt].chain, vq.pk_chain,
				       vq.pk_chain_len * sizeof(vq.pk_chain[0]));
			cnt++;
		}
		FUZZ_ASSERT(ret >= 0 || vq.broken, "pop failed without marking the queue broken");
		complete_all(cnt, data[1] & 4, used_len_spec, num);
		virtq_packed_flush(&vq);
		(void)virtq_packed_should_notify(&vq);
		FUZZ_ASSERT(vq.broken || (vq.pk_avail < num && vq.pk_used < num),
			    "positions beyond the ring");
		if (!virtq_packed_enable_notify(&vq))
			break;
	}
	return 0;
}

/* ---- Seeds: valid rings the fuzzer mutates from ---- */

#define AV1 (1u << VRING_PACKED_DESC_F_AVAIL)   /* available in wrap 1 */
#define AV0 (1u << VRING_PACKED_DESC_F_USED)    /* available in wrap 0 */

/* A seed as data: header bytes (see the input layout at the top) and
 * descriptors, each at its offset in A (the ring, or an indirect table). */
struct seed_desc {
	uint64_t at;
	uint64_t addr;
	uint32_t len;
	uint16_t id, flags;
};

static void put_desc(struct fuzz_seed *s, const struct seed_desc *sd)
{
	struct vring_packed_desc d = {
		.addr = htole64(sd->addr), .len = htole32(sd->len),
		.id = htole16(sd->id), .flags = htole16(sd->flags),
	};

	fuzz_seed_put(s, sd->at, &d, sizeof(d));
}

static const struct seed_spec {
	const char *name;
	uint8_t hdr[HDR];
	unsigned ndesc;
	struct seed_desc desc[5];
} seed_specs[] = {
	/* Ring of 8, base 0 wrap 1: a chain of three, then one of one. */
	{ "two-chains", { [0] = 7, [3] = 0x80, [4] = 100 }, 4, {
		{ 0, 0x2000, 64, 0, VRING_DESC_F_NEXT | AV1 },
		{ 16, 0x2100, 128, 0, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE | AV1 },
		{ 32, 0x3f00, 0x200, 4, VRING_DESC_F_WRITE | AV1 },
		{ 48, 0x2400, 16, 1, VRING_DESC_F_WRITE | AV1 },
	} },
	/* Indirect table of three, EVENT_IDX, completed in reverse. */
	{ "indirect", { [0] = 3, [1] = 7, [3] = 0x80 }, 5, {
		{ 0, 0x1800, 48, 2, VRING_DESC_F_INDIRECT | AV1 },
		{ 0x1800, 0x2000, 40, 0, 0 },
		{ 0x1810, 0x2100, 16, 0, VRING_DESC_F_WRITE },
		{ 0x1820, 0x2200, 4096, 0, VRING_DESC_F_WRITE },
		{ 16, 0x2300, 8, 1, AV1 },
	} },
	/* Ring of 3 (not a power of two), base position 2 wrap 1: a chain
	 * of two running over the end into wrap 0. */
	{ "wrap", { [0] = 2, [2] = 2, [3] = 0x80 }, 2, {
		{ 32, 0x2000, 8, 0, VRING_DESC_F_NEXT | AV1 },
		{ 0, 0x2100, 8, 1, VRING_DESC_F_WRITE | AV0 },
	} },
};

/* The n-th seed of the table; returns its name. */
static const char *build_seed(struct fuzz_seed *s, size_t n)
{
	const struct seed_spec *spec = &seed_specs[n];

	memcpy(s->hdr, spec->hdr, HDR);
	for (unsigned i = 0; i < spec->ndesc; i++)
		put_desc(s, &spec->desc[i]);
	return spec->name;
}

static void write_seeds(const char *dir)
{
	fuzz_write_seeds(dir, sizeof(seed_specs) / sizeof(seed_specs[0]), build_seed);
}
