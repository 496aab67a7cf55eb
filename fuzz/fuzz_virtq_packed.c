/* libFuzzer target: the packed-virtqueue walker over a fuzzer-built ring, indirect tables and guest memory. */
#include <endian.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/log.h"
#include "fuzz_common.h"
#include "fuzz_guest_mem.h"
#include "transport/guest_mem.h"
#include "transport/virtq.h"

/*
 * Guest memory, one memfd (as fuzz_virtq):
 *   A  gpa 0x0000..0x4000  file 0x0000   ring at 0, event areas, then buffers
 *   B  gpa 0x4000..0x8000  file 0x4000   adjacent to A
 *      gap 0x8000..0x10000                unmapped
 *   C  gpa 0x10000..0x14000 file 0x8000
 *
 * Input: byte 0 the ring size minus one (1..256, any, not only powers of
 * two), byte 1 features (bit 0 EVENT_IDX, bit 1 INDIRECT_DESC, bit 2
 * complete in reverse order), bytes 2-3 the SET_VRING_BASE value (position
 * and wrap bit 15), bytes 4-5 the used length (bit 15: wr_len+1 to test the
 * clamp); the rest is copied over A, B and C in that order.
 */
#define REG 0x4000u
#define GPA_C 0x10000u
#define HDR 6u
#define RING_DESC 0x0000u
#define DRIVER_EV 0x1000u
#define DEVICE_EV 0x1004u
#define MAX_INFLIGHT 256u

static int memfd = -1;
static uint8_t *file_map;
static struct guest_mem *mem;
static struct virtq vq;

/* Popped chains not yet pushed, with their copies for the re-walk. */
static struct {
	uint16_t id;
	unsigned n;
	struct vring_packed_desc chain[8];
	bool kept;
} inflight[MAX_INFLIGHT];

static void check_elem(const struct virtq_elem *elem, unsigned num)
{
	uint64_t wr_total = 0;
	uint32_t sum = 0;

	FUZZ_ASSERT(elem->head < num, "buffer id %u out of range", elem->head);
	FUZZ_ASSERT(elem->req.rd_cnt + elem->req.wr_cnt <= VIRTQ_MAX_SEGS, "too many segments");
	for (unsigned i = 0; i < elem->req.rd_cnt; i++) {
		const struct iovec *v = &elem->req.rd[i];

		FUZZ_ASSERT(fuzz_iov_inside_one_region(mem, v),
			    "readable iovec outside guest memory");
		for (size_t j = 0; j < v->iov_len; j++)
			sum += ((const uint8_t *)v->iov_base)[j];
	}
	for (unsigned i = 0; i < elem->req.wr_cnt; i++) {
		const struct iovec *v = &elem->req.wr[i];

		FUZZ_ASSERT(fuzz_iov_inside_one_region(mem, v),
			    "writable iovec outside guest memory");
		memset(v->iov_base, (int)(sum & 0xff), v->iov_len);
		wr_total += v->iov_len;
	}
	FUZZ_ASSERT(wr_total == elem->wr_len, "wr_len %u, iovecs hold %llu", elem->wr_len,
		    (unsigned long long)wr_total);
}

static void write_seeds(const char *dir);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_init_log();
	memfd = memfd_create("fuzz-virtq-packed", MFD_CLOEXEC);
	if (memfd < 0 || ftruncate(memfd, 3 * REG) < 0)
		fuzz_fail("memfd");
	file_map = mmap(NULL, 3 * REG, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (file_map == MAP_FAILED || guest_mem_new(&mem) < 0)
		fuzz_fail("mmap");
	fuzz_guest_region_add(mem, memfd, 0, REG, 0);
	fuzz_guest_region_add(mem, memfd, REG, REG, REG);
	fuzz_guest_region_add(mem, memfd, GPA_C, REG, 2 * REG);
	if (fuzz_seed_dir()) {
		write_seeds(fuzz_seed_dir());
		exit(0);
	}
	return 0;
}

/* Pushes the popped chains, re-walking each from its copy first. */
static void complete_all(unsigned cnt, bool reverse, uint16_t used_len_spec, unsigned num)
{
	for (unsigned k = 0; k < cnt; k++) {
		unsigned i = reverse ? cnt - 1 - k : k;
		struct virtq_elem elem;
		uint32_t len;

		if (!inflight[i].kept || virtq_packed_rewalk(&vq, inflight[i].chain,
							     inflight[i].n, &elem) < 0) {
			FUZZ_ASSERT(vq.broken || !inflight[i].kept,
				    "re-walk failed without marking the queue broken");
			return;
		}
		FUZZ_ASSERT(elem.head == inflight[i].id, "re-walk gave id %u, popped %u",
			    elem.head, inflight[i].id);
		check_elem(&elem, num);
		len = used_len_spec & 0x8000 ? elem.wr_len + 1 : used_len_spec;
		virtq_packed_push(&vq, &elem, len);
		FUZZ_ASSERT(!vq.broken, "push of a popped id broke the queue");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned num, popped = 0, cnt = 0;
	uint16_t used_len_spec;
	uint8_t *base;
	size_t body;

	if (size < HDR)
		return 0;
	num = data[0] + 1u;
	used_len_spec = (uint16_t)(data[4] | data[5] << 8);
	body = size - HDR < 3 * REG ? size - HDR : 3 * REG;
	memset(file_map, 0, 3 * REG);
	memcpy(file_map, data + HDR, body);

	virtq_init(&vq, 1);
	virtq_set_mem(&vq, mem);
	virtq_set_features(&vq, data[1] & 1, data[1] & 2);
	virtq_set_packed(&vq, true);
	base = mem->regions[0].host;
	if (virtq_packed_set_rings(&vq, num, base + RING_DESC, base + DRIVER_EV,
				   base + DEVICE_EV) < 0)
		fuzz_fail("rings refused");
	virtq_packed_set_base(&vq, (uint16_t)(data[2] | data[3] << 8));
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
			check_elem(&elem, num);
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

struct seed {
	uint8_t hdr[HDR];
	uint8_t mem[REG];
};

static void put_desc(struct seed *s, uint64_t at, uint64_t addr, uint32_t len,
		     uint16_t id, uint16_t flags)
{
	struct vring_packed_desc d = {
		.addr = htole64(addr), .len = htole32(len),
		.id = htole16(id), .flags = htole16(flags),
	};

	memcpy(s->mem + at, &d, sizeof(d));
}

static void write_seed(const char *dir, const char *name, const struct seed *s)
{
	size_t len = sizeof(*s);

	while (len > HDR && ((const uint8_t *)s)[len - 1] == 0)
		len--;
	fuzz_write_seed(dir, name, s, len);
}

#define AV1 (1u << VRING_PACKED_DESC_F_AVAIL)   /* available in wrap 1 */
#define AV0 (1u << VRING_PACKED_DESC_F_USED)    /* available in wrap 0 */

static void write_seeds(const char *dir)
{
	struct seed s;

	/* Ring of 8, base 0 wrap 1: a chain of three, then one of one. */
	memset(&s, 0, sizeof(s));
	s.hdr[0] = 7;
	s.hdr[3] = 0x80;
	s.hdr[4] = 100;
	put_desc(&s, 0, 0x2000, 64, 0, VRING_DESC_F_NEXT | AV1);
	put_desc(&s, 16, 0x2100, 128, 0, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE | AV1);
	put_desc(&s, 32, 0x3f00, 0x200, 4, VRING_DESC_F_WRITE | AV1);
	put_desc(&s, 48, 0x2400, 16, 1, VRING_DESC_F_WRITE | AV1);
	write_seed(dir, "two-chains", &s);

	/* Indirect table of three, EVENT_IDX, completed in reverse. */
	memset(&s, 0, sizeof(s));
	s.hdr[0] = 3;
	s.hdr[1] = 7;
	s.hdr[3] = 0x80;
	put_desc(&s, 0, 0x1800, 48, 2, VRING_DESC_F_INDIRECT | AV1);
	put_desc(&s, 0x1800, 0x2000, 40, 0, 0);
	put_desc(&s, 0x1810, 0x2100, 16, 0, VRING_DESC_F_WRITE);
	put_desc(&s, 0x1820, 0x2200, 4096, 0, VRING_DESC_F_WRITE);
	put_desc(&s, 16, 0x2300, 8, 1, AV1);
	write_seed(dir, "indirect", &s);

	/* Ring of 3 (not a power of two), base position 2 wrap 1: a chain
	 * of two running over the end into wrap 0. */
	memset(&s, 0, sizeof(s));
	s.hdr[0] = 2;
	s.hdr[2] = 2;
	s.hdr[3] = 0x80;
	put_desc(&s, 32, 0x2000, 8, 0, VRING_DESC_F_NEXT | AV1);
	put_desc(&s, 0, 0x2100, 8, 1, VRING_DESC_F_WRITE | AV0);
	write_seed(dir, "wrap", &s);
}
