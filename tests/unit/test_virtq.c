/* Unit test: guest memory validation and split-virtqueue parsing against hand-built rings. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/log.h"
#include "transport/guest_mem.h"
#include "transport/virtq.h"
#include "../common/check.h"
#include "../common/virtq_fixture.h"

/*
 * Guest layout, all from one memfd:
 *   A  gpa 0x10000..0x20000  file offset 0x00000   rings live here
 *   B  gpa 0x20000..0x30000  file offset 0x10000   adjacent to A
 *      gap 0x30000..0x40000                          unmapped
 *   C  gpa 0x40000..0x50000  file offset 0x20000
 */
#define REG_SIZE 0x10000ull
#define GPA_A 0x10000ull
#define GPA_B 0x20000ull
#define GPA_GAP 0x30000ull
#define GPA_C 0x40000ull
#define UVA_BASE 0x7f0000000000ull

#define RING_DESC GPA_A
#define RING_AVAIL (GPA_A + 0x1000)
#define RING_USED (GPA_A + 0x2000)
#define BUF (GPA_A + 0x4000)      /* scratch buffers */
#define TABLE (GPA_A + 0x8000)    /* indirect tables */

static int memfd = -1;
static struct guest_mem *mem;

static struct {
	struct virtq vq;
	unsigned num;
	struct vring_desc *desc;
	struct vring_avail *avail;
	struct vring_used *used;
	uint16_t avail_idx;
} t;

static void *host(uint64_t gpa)
{
	return vqf_host(mem, gpa);
}

/* Fresh queue of num entries over zeroed rings: region A zeroed, the used
 * ring in it, the descriptor table and avail ring at desc and avail
 * (zeroed by the caller if outside A). */
static void ring_setup_at(unsigned num, bool event_idx, bool indirect,
			  struct vring_desc *desc, struct vring_avail *avail)
{
	memset(host(GPA_A), 0, REG_SIZE);
	virtq_init(&t.vq, 7);
	virtq_set_mem(&t.vq, mem);
	virtq_set_features(&t.vq, event_idx, indirect);
	t.num = num;
	t.desc = desc;
	t.avail = avail;
	t.used = host(RING_USED);
	t.avail_idx = 0;
	if (virtq_set_rings(&t.vq, num, t.desc, t.avail, t.used) < 0) {
		fprintf(stderr, "test bug: virtq_set_rings\n");
		exit(1);
	}
	virtq_set_base(&t.vq, 0);
	virtq_start(&t.vq);
}

/* Fresh queue of num entries over zeroed rings in region A. */
static void ring_setup(unsigned num, bool event_idx, bool indirect)
{
	ring_setup_at(num, event_idx, indirect, host(RING_DESC), host(RING_AVAIL));
}

static void set_desc(struct vring_desc *table, unsigned i, uint64_t addr, uint32_t len,
		     uint16_t flags, uint16_t next)
{
	table[i].addr = addr;
	table[i].len = len;
	table[i].flags = flags;
	table[i].next = next;
}

static void publish(uint16_t head)
{
	t.avail->ring[t.avail_idx % t.num] = head;
	t.avail_idx++;
	__atomic_store_n(&t.avail->idx, t.avail_idx, __ATOMIC_RELEASE);
}

/* Pops once and checks that the queue broke for a reason containing want. */
static void expect_broken(const char *what, const char *want)
{
	struct virtq_elem e;
	int ret = virtq_pop(&t.vq, &e);

	CHECK_MSG(vqf_broke_with(&t.vq, ret, want), "%s -> broken (%s)", what, vqf_why(&t.vq));
}

static void test_guest_mem_validation(void)
{
	struct guest_mem *m;
	struct guest_region r;
	struct guest_region_desc d;
	struct guest_region removed;

	printf("-- guest memory validation\n");
	if (guest_mem_new(&m) < 0)
		exit(1);
	d = (struct guest_region_desc){ .gpa = 0, .size = 0, .uva = 0, .mmap_offset = 0 };
	CHECK_MSG(guest_region_map(&r, &d, memfd) == -EINVAL, "zero-size region refused");
	d = (struct guest_region_desc){ .gpa = UINT64_MAX - 0xfff, .size = 0x2000, .uva = 0 };
	CHECK_MSG(guest_region_map(&r, &d, memfd) == -EINVAL, "gpa + size wrapping refused");
	d = (struct guest_region_desc){ .gpa = 0, .size = 0x2000, .uva = UINT64_MAX - 0xfff };
	CHECK_MSG(guest_region_map(&r, &d, memfd) == -EINVAL, "uva + size wrapping refused");
	d = (struct guest_region_desc){ .gpa = 0, .size = 0x2000, .uva = 0,
					.mmap_offset = UINT64_MAX - 0xfff };
	CHECK_MSG(guest_region_map(&r, &d, memfd) == -EINVAL, "mmap_offset + size wrapping refused");
	d = (struct guest_region_desc){ .gpa = 0, .size = 4 * REG_SIZE, .uva = 0 };
	CHECK_MSG(guest_region_map(&r, &d, memfd) == -EINVAL,
	          "region larger than its file refused (would SIGBUS)");
	d = (struct guest_region_desc){ .gpa = 0, .size = 0x1000, .uva = 0 };
	CHECK_MSG(guest_region_map(&r, &d, -1) < 0, "bad fd refused");

	CHECK_MSG(vqf_add_region(m, memfd, 0x100000, REG_SIZE, 0x1000000, 0) == 0, "first region added");
	CHECK_MSG(vqf_add_region(m, memfd, 0x100000 + REG_SIZE - 0x1000, REG_SIZE, 0x2000000, 0) == -EEXIST,
	          "region overlapping in gpa refused");
	CHECK_MSG(vqf_add_region(m, memfd, 0x900000, REG_SIZE, 0x1000000 + 0x1000, 0) == -EEXIST,
	          "region overlapping in uva refused");
	CHECK_MSG(vqf_add_region(m, memfd, 0x100000 + REG_SIZE, REG_SIZE, 0x3000000, 0) == 0,
	          "adjacent region accepted");
	CHECK_MSG(vqf_add_region(m, memfd, UINT64_MAX - 0xfff, 0x1000, 0x4000000, 0) == 0,
	          "region ending exactly at 2^64 accepted");
	CHECK_MSG(guest_mem_gpa_to_ptr(m, UINT64_MAX, 1) != NULL, "last byte of address space translates");
	CHECK_MSG(guest_mem_gpa_to_ptr(m, UINT64_MAX, 2) == NULL, "range wrapping past 2^64 does not");
	CHECK_MSG(m->count == 3 && m->regions[0].desc.gpa == 0x100000 &&
	          m->regions[1].desc.gpa == 0x100000 + REG_SIZE, "table sorted by gpa");
	CHECK_MSG(guest_mem_uva_to_ptr(m, 0x1000000 + REG_SIZE - 8, 16) == NULL,
	          "uva range crossing a region end refused (rings must be in one region)");
	CHECK_MSG(guest_mem_uva_to_ptr(m, 0x1000000 + REG_SIZE - 16, 16) != NULL,
	          "uva range at a region end accepted");

	d = (struct guest_region_desc){ .gpa = 0x100000, .size = REG_SIZE, .uva = 0x9999 };
	CHECK_MSG(guest_mem_remove(m, &d, &removed) == -ENOENT, "remove with wrong uva refused");
	d.uva = 0x1000000;
	CHECK_MSG(guest_mem_remove(m, &d, &removed) == 0 && m->count == 2, "remove matching region");
	guest_region_unmap(&removed);
	CHECK_MSG(guest_mem_gpa_to_ptr(m, 0x100000, 1) == NULL, "removed region no longer translates");
	guest_mem_free(m);
}

static void test_translation(void)
{
	struct iovec iov[4];
	unsigned cnt = 0;

	printf("-- translation\n");
	CHECK_MSG(guest_mem_gpa_to_iov(mem, GPA_B - 10, 30, iov, 4, &cnt) == 0 && cnt == 2 &&
	          iov[0].iov_base == (uint8_t *)host(GPA_B - 10) && iov[0].iov_len == 10 &&
	          iov[1].iov_base == host(GPA_B) && iov[1].iov_len == 20,
	          "range straddling adjacent regions -> two iovecs");
	cnt = 0;
	CHECK_MSG(guest_mem_gpa_to_iov(mem, GPA_GAP - 10, 30, iov, 4, &cnt) == -EFAULT,
	          "range running into unmapped gap refused");
	cnt = 3;
	CHECK_MSG(guest_mem_gpa_to_iov(mem, GPA_B - 10, 30, iov, 4, &cnt) == -E2BIG,
	          "iovec limit enforced");
	cnt = 0;
	CHECK_MSG(guest_mem_gpa_to_ptr(mem, GPA_B - 10, 30) == NULL,
	          "contiguous pointer never spans two regions");
}

static void test_normal_chain(void)
{
	struct virtq_elem e;
	uint8_t *rd, *wr;
	int ret;

	printf("-- valid chains\n");
	ring_setup(8, false, true);
	rd = host(BUF);
	wr = host(BUF + 0x100);
	set_desc(t.desc, 3, BUF, 64, VRING_DESC_F_NEXT, 5);
	set_desc(t.desc, 5, BUF + 64, 36, VRING_DESC_F_NEXT, 1);
	set_desc(t.desc, 1, BUF + 0x100, 200, VRING_DESC_F_WRITE, 0);
	publish(3);
	ret = virtq_pop(&t.vq, &e);
	CHECK_MSG(ret == 1 && e.head == 3 && e.req.rd_cnt == 2 && e.req.wr_cnt == 1 &&
	          e.req.rd[0].iov_base == rd && e.req.rd[0].iov_len == 64 &&
	          e.req.rd[1].iov_base == rd + 64 && e.req.rd[1].iov_len == 36 &&
	          e.req.wr[0].iov_base == wr && e.req.wr[0].iov_len == 200 && e.wr_len == 200,
	          "readable+writable chain: 2 rd iovecs, 1 wr iovec, right pointers");
	CHECK_MSG(virtq_pop(&t.vq, &e) == 0, "ring then empty");
	virtq_push(&t.vq, &e, 500);
	CHECK_MSG(t.used->idx == 0, "used entry invisible before flush");
	virtq_flush(&t.vq);
	CHECK_MSG(t.used->idx == 1 && t.used->ring[0].id == 3 && t.used->ring[0].len == 200,
	          "flush publishes used idx; used len clamped to writable size");

	ring_setup(8, false, true);
	set_desc(t.desc, 0, BUF, 16, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 1);
	set_desc(t.desc, 1, GPA_B - 10, 30, VRING_DESC_F_WRITE, 0);
	publish(0);
	ret = virtq_pop(&t.vq, &e);
	CHECK_MSG(ret == 1 && e.req.rd_cnt == 0 && e.req.wr_cnt == 3 &&
	          e.req.wr[1].iov_len == 10 && e.req.wr[2].iov_base == host(GPA_B) &&
	          e.req.wr[2].iov_len == 20 && e.wr_len == 46,
	          "write-only chain, descriptor straddling A/B split into two iovecs");

	/* Indirect: a direct readable head, then a table of two. */
	ring_setup(8, false, true);
	{
		struct vring_desc *table = host(TABLE);

		set_desc(table, 0, BUF, 40, VRING_DESC_F_NEXT, 1);
		set_desc(table, 1, BUF + 0x100, 80, VRING_DESC_F_WRITE, 0);
		set_desc(t.desc, 2, TABLE, 32, VRING_DESC_F_INDIRECT, 0);
		publish(2);
		ret = virtq_pop(&t.vq, &e);
		CHECK_MSG(ret == 1 && e.head == 2 && e.req.rd_cnt == 1 && e.req.wr_cnt == 1 &&
		          e.req.rd[0].iov_len == 40 && e.req.wr[0].iov_len == 80,
		          "indirect table of two descriptors");
	}
	/* Indirect table straddling A/B: read through the copy. */
	ring_setup(8, false, true);
	{
		struct vring_desc tmp[2];
		uint8_t *a_end = host(GPA_B - 16), *b_start = host(GPA_B);

		set_desc(tmp, 0, BUF, 40, VRING_DESC_F_NEXT, 1);
		set_desc(tmp, 1, BUF + 0x100, 80, VRING_DESC_F_WRITE, 0);
		memcpy(a_end, &tmp[0], 16);
		memcpy(b_start, &tmp[1], 16);
		set_desc(t.desc, 0, GPA_B - 16, 32, VRING_DESC_F_INDIRECT, 0);
		publish(0);
		ret = virtq_pop(&t.vq, &e);
		CHECK_MSG(ret == 1 && e.req.rd_cnt == 1 && e.req.wr_cnt == 1 &&
		          e.req.wr[0].iov_len == 80, "indirect table straddling two regions");
	}
}

/* A chain at head of n one-byte readable segments (an indirect table in
 * region B) and one writable one. */
static void publish_long_chain(uint16_t head, unsigned n)
{
	struct vring_desc *table = host(GPA_B);

	for (unsigned i = 0; i < n; i++)
		set_desc(table, i, BUF + (i % 0x100), 1, VRING_DESC_F_NEXT, (uint16_t)(i + 1));
	set_desc(table, n, BUF + 0x100, 16, VRING_DESC_F_WRITE, 0);
	set_desc(t.desc, head, GPA_B, (n + 1) * 16, VRING_DESC_F_INDIRECT, 0);
	publish(head);
}

/* virtq_pop_more: a run's chains keep their iovecs until the next
 * virtq_pop, and one more is taken only while the longest chain fits. */
static void test_pop_more(void)
{
	struct virtq_elem a, b, c;
	int ret;

	printf("-- runs of chains\n");
	ring_setup(8, false, true);
	set_desc(t.desc, 0, BUF, 64, VRING_DESC_F_NEXT, 1);
	set_desc(t.desc, 1, BUF + 64, 36, VRING_DESC_F_NEXT, 2);
	set_desc(t.desc, 2, BUF + 0x100, 200, VRING_DESC_F_WRITE, 0);
	set_desc(t.desc, 3, BUF + 0x200, 40, VRING_DESC_F_NEXT, 4);
	set_desc(t.desc, 4, BUF + 0x300, 24, VRING_DESC_F_WRITE, 0);
	publish(0);
	publish(3);
	CHECK_MSG(virtq_pop(&t.vq, &a) == 1 && virtq_pop_more(&t.vq, &b) == 1, "two pops");
	CHECK_MSG(a.head == 0 && a.req.rd_cnt == 2 && a.req.wr_cnt == 1 &&
	          a.req.rd[0].iov_base == host(BUF) && a.req.rd[1].iov_len == 36 &&
	          a.req.wr[0].iov_base == host(BUF + 0x100) && a.req.wr[0].iov_len == 200,
	          "the first chain's iovecs survive the second pop");
	CHECK_MSG(b.head == 3 && b.req.rd_cnt == 1 && b.req.wr_cnt == 1 &&
	          b.req.rd[0].iov_base == host(BUF + 0x200) && b.req.wr[0].iov_len == 24 &&
	          b.req.rd != a.req.rd && b.req.rd >= a.req.wr + a.req.wr_cnt,
	          "the second chain's iovecs come after them");
	CHECK_MSG(virtq_pop_more(&t.vq, &c) == 0, "an empty ring: 0");

	/* A chain of 1000 segments, then one of 30: 1032 iovecs, past the
	 * first half, so the third waits for the next virtq_pop. */
	ring_setup(8, false, true);
	publish_long_chain(0, 1000);
	CHECK_MSG(virtq_pop(&t.vq, &a) == 1 && a.req.rd_cnt == 1000, "a chain of 1000 segments");
	publish_long_chain(5, 30);
	ret = virtq_pop_more(&t.vq, &b);
	CHECK_MSG(ret == 1 && b.head == 5 && b.req.rd_cnt == 30 && b.req.rd == a.req.rd + 1001,
	          "the next chain is appended (%d)", ret);
	set_desc(t.desc, 3, BUF, 8, VRING_DESC_F_NEXT, 4);
	set_desc(t.desc, 4, BUF + 0x100, 8, VRING_DESC_F_WRITE, 0);
	publish(3);
	CHECK_MSG(virtq_pop_more(&t.vq, &c) == 0 && !t.vq.broken,
	          "no room for a longest chain: 0, the queue not broken");
	CHECK_MSG(virtq_pop(&t.vq, &c) == 1 && c.head == 3 && c.req.rd == t.vq.iov,
	          "the chain left is the next virtq_pop's, at the start");

	/* Below the half, a longest chain still fits after the others. */
	ring_setup(8, false, true);
	publish_long_chain(0, 1000);
	CHECK_MSG(virtq_pop(&t.vq, &a) == 1, "1000 segments");
	set_desc(t.desc, 1, BUF, 8, VRING_DESC_F_NEXT, 2);
	set_desc(t.desc, 2, BUF + 0x100, 8, VRING_DESC_F_WRITE, 0);
	publish(1);
	CHECK_MSG(virtq_pop_more(&t.vq, &b) == 1, "then 2 more iovecs: 1003");
	publish_long_chain(3, 1023);
	ret = virtq_pop_more(&t.vq, &c);
	CHECK_MSG(ret == 1 && c.req.rd_cnt == 1023 && c.req.wr_cnt == 1 &&
	          c.req.rd == a.req.rd + 1003 && !t.vq.broken,
	          "a chain of 1024 segments after them, whole (%d)", ret);
}

/* A malformed chain on a fresh ring of 8, published at head: descriptors
 * in the ring and in the indirect table at TABLE, and the reason the queue
 * must give for breaking. */
struct bad_chain {
	const char *what, *want;
	bool indirect;          /* VIRTIO_F_INDIRECT_DESC negotiated */
	uint16_t head;
	unsigned nring, ntable;
	struct vring_desc ring[2], table[1];
};

#define DESC(a, l, f, n) { .addr = (a), .len = (l), .flags = (f), .next = (n) }

static const struct bad_chain bad_chains[] = {
	{ "head index == num", "head descriptor index", true, 8, 0, 0, { { 0 } }, { { 0 } } },
	{ "next index >= num", "next descriptor index", true, 0, 1, 0,
	  { DESC(BUF, 16, VRING_DESC_F_NEXT, 9) }, { { 0 } } },
	{ "descriptor loop 0->1->0", "loop", true, 0, 2, 0,
	  { DESC(BUF, 16, VRING_DESC_F_NEXT, 1), DESC(BUF, 16, VRING_DESC_F_NEXT, 0) }, { { 0 } } },
	{ "indirect table length 24", "multiple of 16", true, 0, 1, 0,
	  { DESC(TABLE, 24, VRING_DESC_F_INDIRECT, 0) }, { { 0 } } },
	{ "indirect table length 0", "multiple of 16", true, 0, 1, 0,
	  { DESC(TABLE, 0, VRING_DESC_F_INDIRECT, 0) }, { { 0 } } },
	{ "indirect inside indirect", "nested", true, 0, 1, 1,
	  { DESC(TABLE, 16, VRING_DESC_F_INDIRECT, 0) },
	  { DESC(TABLE + 0x100, 16, VRING_DESC_F_INDIRECT, 0) } },
	{ "indirect with NEXT", "NEXT", true, 0, 1, 0,
	  { DESC(TABLE, 16, VRING_DESC_F_INDIRECT | VRING_DESC_F_NEXT, 1) }, { { 0 } } },
	{ "indirect without the feature", "not negotiated", false, 0, 1, 1,
	  { DESC(TABLE, 16, VRING_DESC_F_INDIRECT, 0) }, { DESC(BUF, 16, 0, 0) } },
	{ "indirect table in unmapped gap", "indirect table outside", true, 0, 1, 0,
	  { DESC(GPA_GAP, 32, VRING_DESC_F_INDIRECT, 0) }, { { 0 } } },
	{ "indirect table running into the gap", "indirect table outside", true, 0, 1, 0,
	  { DESC(GPA_GAP - 16, 32, VRING_DESC_F_INDIRECT, 0) }, { { 0 } } },
	{ "next index beyond indirect table", "next descriptor index", true, 0, 1, 1,
	  { DESC(TABLE, 32, VRING_DESC_F_INDIRECT, 0) }, { DESC(BUF, 16, VRING_DESC_F_NEXT, 5) } },
	{ "buffer address outside memory", "outside guest memory", true, 0, 1, 0,
	  { DESC(0x900000, 16, 0, 0) }, { { 0 } } },
	{ "buffer straddling into unmapped gap", "outside guest memory", true, 0, 1, 0,
	  { DESC(GPA_GAP - 10, 30, 0, 0) }, { { 0 } } },
	{ "addr + len wraps", "outside guest memory", true, 0, 1, 0,
	  { DESC(UINT64_MAX - 0xf, 0x100, 0, 0) }, { { 0 } } },
	{ "readable after writable", "readable descriptor after", true, 0, 2, 0,
	  { DESC(BUF, 16, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 1), DESC(BUF, 16, 0, 0) },
	  { { 0 } } },
};

static void test_bad_chains(void)
{
	struct vring_desc *table;

	printf("-- malformed chains break the queue\n");
	for (size_t c = 0; c < sizeof(bad_chains) / sizeof(bad_chains[0]); c++) {
		const struct bad_chain *b = &bad_chains[c];

		ring_setup(8, false, b->indirect);
		table = host(TABLE);
		for (unsigned i = 0; i < b->ntable; i++)
			table[i] = b->table[i];
		for (unsigned i = 0; i < b->nring; i++)
			t.desc[i] = b->ring[i];
		publish(b->head);
		expect_broken(b->what, b->want);
	}

	ring_setup(8, false, true);
	t.avail->idx = 9;
	expect_broken("avail idx jumping by num + 1", "more than the ring size");

	ring_setup(8, false, true);
	t.avail->idx = (uint16_t)-1;
	expect_broken("avail idx moving backwards", "more than the ring size");

	/* 1024 indirect entries, each straddling A/B: 2048 segments. */
	ring_setup(8, false, true);
	table = host(TABLE);
	for (unsigned i = 0; i < VIRTQ_MAX_SEGS; i++)
		set_desc(table, i, GPA_B - 1, 2, VRING_DESC_F_NEXT, (uint16_t)(i + 1));
	table[VIRTQ_MAX_SEGS - 1].flags = 0;
	set_desc(t.desc, 0, TABLE, VIRTQ_MAX_SEGS * 16, VRING_DESC_F_INDIRECT, 0);
	publish(0);
	expect_broken("chain needing 2048 segments", "segments");

	ring_setup(8, false, true);
	set_desc(t.desc, 0, TABLE, (VIRTQ_MAX_SEGS + 1) * 16, VRING_DESC_F_INDIRECT, 0);
	publish(0);
	expect_broken("indirect table over the segment limit", "segment limit");
}

/* A chain totalling more than 4 GiB needs that much mapped guest memory:
 * a sparse 5 GiB memfd costs only address space. */
static void test_4gib(void)
{
	struct guest_mem *big;
	struct guest_mem *saved_mem = mem;
	int bigfd, ret;

	printf("-- chain length over 4 GiB\n");
	ret = vqf_guest_new(&bigfd, &big, 5ull << 30);
	if (ret < 0) {
		SKIP_CASE("chain over 4 GiB: no sparse 5 GiB memfd (%s)", strerror(-ret));
		return;
	}
	ret = vqf_add_region(big, bigfd, GPA_A, 5ull << 30, UVA_BASE, 0);
	if (ret < 0) {
		SKIP_CASE("chain over 4 GiB: cannot map 5 GiB (%s; a ulimit -v?)", strerror(-ret));
		goto out;
	}
	mem = big;
	ring_setup(8, false, true);
	set_desc(t.desc, 0, GPA_A + 0x100000, UINT32_MAX, 0, 1);
	t.desc[0].flags = VRING_DESC_F_NEXT;
	set_desc(t.desc, 1, GPA_A + 0x100000, 2, VRING_DESC_F_WRITE, 0);
	publish(0);
	expect_broken("4 GiB - 1 plus 2 bytes", "4 GiB");
	ring_setup(8, false, true);
	set_desc(t.desc, 0, GPA_A + 0x100000, UINT32_MAX, VRING_DESC_F_WRITE, 0);
	publish(0);
	{
		struct virtq_elem e;

		CHECK_MSG(virtq_pop(&t.vq, &e) == 1 && e.wr_len == UINT32_MAX,
		          "a chain of exactly 4 GiB - 1 is accepted");
	}
out:
	mem = saved_mem;
	guest_mem_free(big);
	close(bigfd);
}

static void test_notify(void)
{
	struct virtq_elem e;
	uint16_t *avail_event, *used_event;

	printf("-- notifications\n");
	ring_setup(8, true, true);
	avail_event = (uint16_t *)(void *)&t.used->ring[8];
	used_event = &t.avail->ring[8];
	set_desc(t.desc, 0, BUF, 16, VRING_DESC_F_WRITE, 0);

	publish(0);
	virtq_disable_notify(&t.vq);
	CHECK_MSG(virtq_pop(&t.vq, &e) == 1, "pop");
	virtq_push(&t.vq, &e, 0);
	virtq_flush(&t.vq);
	*used_event = 100;
	CHECK_MSG(virtq_should_notify(&t.vq), "EVENT_IDX: first decision after start notifies");
	CHECK_MSG(!virtq_enable_notify(&t.vq) && *avail_event == 1,
	          "EVENT_IDX: enable writes avail_event = last avail (1), nothing pending");

	*used_event = 1; /* driver: interrupt me once used idx passes 1 */
	publish(0);
	CHECK_MSG(virtq_pop(&t.vq, &e) == 1, "pop");
	virtq_push(&t.vq, &e, 0);
	virtq_flush(&t.vq);
	CHECK_MSG(virtq_would_notify(&t.vq) && virtq_would_notify(&t.vq),
	          "EVENT_IDX: the hint foresees the notify, and asking twice changes nothing");
	CHECK_MSG(virtq_should_notify(&t.vq), "EVENT_IDX: used 1->2 crosses used_event 1: notify");
	CHECK_MSG(!virtq_would_notify(&t.vq), "EVENT_IDX: nothing new since the notify: the hint says none");

	*used_event = 5;
	publish(0);
	CHECK_MSG(virtq_pop(&t.vq, &e) == 1, "pop");
	virtq_push(&t.vq, &e, 0);
	virtq_flush(&t.vq);
	CHECK_MSG(!virtq_would_notify(&t.vq), "EVENT_IDX: the hint foresees no notify short of used_event");
	CHECK_MSG(!virtq_should_notify(&t.vq), "EVENT_IDX: used 2->3 short of used_event 5: no notify");

	publish(0);
	CHECK_MSG(virtq_enable_notify(&t.vq), "enable_notify re-check sees a buffer added meanwhile");
	CHECK_MSG(virtq_need_event(0xffff, 0x0001, 0xfffe) && !virtq_need_event(0x0002, 0x0001, 0xfffe),
	          "vring_need_event across 16-bit wrap");

	ring_setup(8, false, true);
	set_desc(t.desc, 0, BUF, 16, VRING_DESC_F_WRITE, 0);
	virtq_disable_notify(&t.vq);
	CHECK_MSG(t.used->flags & VRING_USED_F_NO_NOTIFY, "no EVENT_IDX: disable sets NO_NOTIFY");
	CHECK_MSG(!virtq_enable_notify(&t.vq) && !(t.used->flags & VRING_USED_F_NO_NOTIFY),
	          "no EVENT_IDX: enable clears NO_NOTIFY");
	publish(0);
	CHECK_MSG(virtq_pop(&t.vq, &e) == 1, "pop");
	virtq_push(&t.vq, &e, 0);
	virtq_flush(&t.vq);
	t.avail->flags = VRING_AVAIL_F_NO_INTERRUPT;
	CHECK_MSG(!virtq_would_notify(&t.vq) && !virtq_should_notify(&t.vq),
	          "no EVENT_IDX: NO_INTERRUPT suppresses notify, and the hint says so");
	t.avail->flags = 0;
	CHECK_MSG(virtq_would_notify(&t.vq) && virtq_should_notify(&t.vq),
	          "no EVENT_IDX: without NO_INTERRUPT notify, and the hint says so");
}

/* What popping the published chains gives, one after another, with
 * virtq_prefetch_ahead() after each successful pop as the queue thread
 * runs it, or without. */
struct pop_trace {
	int ret[8];
	uint16_t head[8], last_avail_idx;
	unsigned rd_cnt[8], wr_cnt[8], pops;
	bool broken;
};

static struct pop_trace pop_all(bool prefetch)
{
	struct pop_trace tr = { 0 };
	struct virtq_elem e;

	for (tr.pops = 0; tr.pops < 8; tr.pops++) {
		int ret = virtq_pop(&t.vq, &e);

		tr.ret[tr.pops] = ret;
		if (ret != 1)
			break;
		tr.head[tr.pops] = e.head;
		tr.rd_cnt[tr.pops] = e.req.rd_cnt;
		tr.wr_cnt[tr.pops] = e.req.wr_cnt;
		if (prefetch)
			virtq_prefetch_ahead(&t.vq);
	}
	tr.last_avail_idx = t.vq.last_avail_idx;
	tr.broken = t.vq.broken;
	return tr;
}

/* size bytes that end where 2 MiB of PROT_NONE begin: a read past them by
 * any index a 16-bit ring entry can hold faults. */
static void *guarded(size_t size)
{
	long page = sysconf(_SC_PAGESIZE);
	uint8_t *p = mmap(NULL, (size_t)page + (2u << 20), PROT_NONE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED || mprotect(p, (size_t)page, PROT_READ | PROT_WRITE) < 0) {
		perror("test bug: guarded mapping");
		exit(1);
	}
	return p + page - size;
}

/* Rings whose chains ahead point anywhere: the prefetch reads only inside
 * the rings (they end at a guard: an unmasked index faults) and guest
 * memory, and the pops see exactly what they see without it. */
static void test_prefetch_ahead_hostile(void)
{
	struct vring_desc *ring_desc = guarded(8 * sizeof(struct vring_desc));
	struct vring_avail *ring_avail = guarded(sizeof(struct vring_avail) + 9 * sizeof(uint16_t));

	static const uint16_t orders[][6] = {
		{ 0, 4, 1, 2, 0xffff, 3 },
		{ 0, 0, 1, 2, 0xffff, 3 },
		{ 0, 0, 0, 0xffff, 2, 4 },
	};
	struct vring_desc *table, *wild;

	printf("-- prefetching ahead over hostile chains\n");
	for (size_t o = 0; o < sizeof(orders) / sizeof(orders[0]); o++) {
		struct pop_trace with, without;

		for (int pass = 0; pass < 2; pass++) {
			memset(ring_desc, 0, 8 * sizeof(*ring_desc));
			memset(ring_avail, 0, sizeof(*ring_avail) + 9 * sizeof(uint16_t));
			ring_setup_at(8, true, true, ring_desc, ring_avail);
			table = host(TABLE);
			wild = host(TABLE + 0x100);
			/* 0: a valid request, in-header then out-header. */
			set_desc(table, 0, BUF, 48, VRING_DESC_F_NEXT, 1);
			set_desc(table, 1, BUF + 0x100, 16, VRING_DESC_F_WRITE, 0);
			set_desc(t.desc, 0, TABLE, 32, VRING_DESC_F_INDIRECT, 0);
			/* 1: an indirect table in the unmapped gap. */
			set_desc(t.desc, 1, GPA_GAP, 64, VRING_DESC_F_INDIRECT, 0);
			/* 2: one whose last 16 bytes end guest memory. */
			set_desc(t.desc, 2, GPA_C + REG_SIZE - 16, 16, VRING_DESC_F_INDIRECT, 0);
			/* 3: a direct buffer at the top of the address space. */
			set_desc(t.desc, 3, UINT64_MAX - 15, 16, VRING_DESC_F_WRITE, 0);
			/* 4: a table whose entries point nowhere or wrap. */
			set_desc(wild, 0, UINT64_MAX, 16, VRING_DESC_F_NEXT, 1);
			set_desc(wild, 1, GPA_GAP + 8, 16, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 2);
			set_desc(wild, 2, UINT64_MAX - 1, 16, VRING_DESC_F_WRITE, 0);
			set_desc(t.desc, 4, TABLE + 0x100, 48, VRING_DESC_F_INDIRECT, 0);
			for (unsigned i = 0; i < 6; i++)
				publish(orders[o][i]);
			if (pass == 0)
				with = pop_all(true);
			else
				without = pop_all(false);
		}
		CHECK_MSG(with.pops >= 1 && with.pops == without.pops &&
			  memcmp(with.ret, without.ret, sizeof(with.ret)) == 0 &&
			  memcmp(with.head, without.head, sizeof(with.head)) == 0 &&
			  memcmp(with.rd_cnt, without.rd_cnt, sizeof(with.rd_cnt)) == 0 &&
			  memcmp(with.wr_cnt, without.wr_cnt, sizeof(with.wr_cnt)) == 0 &&
			  with.last_avail_idx == without.last_avail_idx &&
			  with.broken && without.broken,
			  "order %zu: %u pops, then broken, the same with and without prefetching",
			  o, with.pops);
	}
}

static void test_broken_stays_broken(void)
{
	struct virtq_elem e;
	char logbuf[4096];
	int logfd, saved_stderr;
	ssize_t n;
	unsigned lines = 0;

	printf("-- a broken queue stays broken and is logged once\n");
	logfd = memfd_create("ferry-log", MFD_CLOEXEC);
	saved_stderr = dup(2);
	if (logfd < 0 || saved_stderr < 0) {
		printf("FAIL  cannot capture stderr\n");
		failures++;
		return;
	}
	fflush(stderr);
	dup2(logfd, 2);

	ring_setup(8, false, true);
	publish(8);
	virtq_pop(&t.vq, &e);
	set_desc(t.desc, 0, BUF, 16, 0, 0);
	t.avail->ring[0] = 0; /* the driver "fixes" the entry */
	publish(0);
	n = virtq_pop(&t.vq, &e);
	virtq_mark_broken(&t.vq, "second reason");

	fflush(stderr);
	dup2(saved_stderr, 2);
	close(saved_stderr);
	CHECK_MSG(n == -EIO, "valid entry after breakage is not processed");
	n = pread(logfd, logbuf, sizeof(logbuf) - 1, 0);
	logbuf[n > 0 ? n : 0] = '\0';
	for (char *p = logbuf; (p = strstr(p, "broken")); p++)
		lines++;
	CHECK_MSG(lines == 1 && strstr(logbuf, "head descriptor index"),
	          "exactly one log line, with the first reason (%u lines)", lines);
	CHECK_MSG(t.vq.last_avail_idx == 0, "no avail entry consumed by a broken queue");
	virtq_set_base(&t.vq, 0);
	CHECK_MSG(!t.vq.broken, "SET_VRING_BASE (re-initialisation) clears broken");
	close(logfd);
}

int main(void)
{
	/* Not in gpa order: guest_mem_insert keeps its table sorted itself. */
	static const struct vqf_region regions[] = {
		{ GPA_B, REG_SIZE, UVA_BASE + 0x100000, REG_SIZE },
		{ GPA_A, REG_SIZE, UVA_BASE, 0 },
		{ GPA_C, REG_SIZE, UVA_BASE + 0x200000, 2 * REG_SIZE },
	};
	int ret;

	ferry_log_init(LOG_LVL_WARN, false);
	ret = vqf_guest_build(&memfd, &mem, 3 * REG_SIZE, regions, 3);
	if (ret)
		return ret;
	test_guest_mem_validation();
	test_translation();
	test_normal_chain();
	test_pop_more();
	test_bad_chains();
	test_4gib();
	test_notify();
	test_prefetch_ahead_hostile();
	test_broken_stays_broken();
	guest_mem_free(mem);
	close(memfd);
	return check_result();
}
