/* Unit test: the packed-virtqueue walker against hand-built rings, good chains and every hostile case. */
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
 * Guest layout, one memfd:
 *   A  gpa 0x10000..0x20000  file 0x00000   ring, event areas, buffers, tables
 *   B  gpa 0x20000..0x30000  file 0x10000   adjacent to A
 *      gap 0x30000..0x40000                  unmapped
 */
#define REG_SIZE 0x10000ull
#define GPA_A 0x10000ull
#define GPA_B 0x20000ull
#define GPA_GAP 0x30000ull
#define UVA_BASE 0x7f0000000000ull

#define RING_DESC GPA_A
#define DRIVER_EV (GPA_A + 0x1000)
#define DEVICE_EV (GPA_A + 0x1010)
#define BUF (GPA_A + 0x4000)
#define TABLE (GPA_A + 0x8000)

#define F_AVAIL (1u << VRING_PACKED_DESC_F_AVAIL)
#define F_USED (1u << VRING_PACKED_DESC_F_USED)

static int memfd = -1;
static struct guest_mem *mem;

/* The driver's side of the ring, as the Linux driver keeps it. */
static struct {
	struct virtq vq;
	unsigned num;
	struct vring_packed_desc *desc;
	struct vring_packed_desc_event *drv, *dev;
	uint16_t next;          /* next slot the driver fills */
	bool wrap;              /* Driver Ring Wrap Counter */
	uint16_t used;          /* next slot the driver reads used entries at */
	bool used_wrap;
} t;

static void *host(uint64_t gpa)
{
	return vqf_host(mem, gpa);
}

static void ring_setup(unsigned num, bool event_idx, bool indirect, uint32_t base)
{
	memset(host(GPA_A), 0, REG_SIZE);
	virtq_init(&t.vq, 9);
	virtq_set_mem(&t.vq, mem);
	virtq_set_features(&t.vq, event_idx, indirect);
	virtq_set_packed(&t.vq, true);
	t.num = num;
	t.desc = host(RING_DESC);
	t.drv = host(DRIVER_EV);
	t.dev = host(DEVICE_EV);
	t.next = t.used = (uint16_t)(base & 0x7fff);
	t.wrap = t.used_wrap = base & 0x8000;
	if (virtq_packed_set_rings(&t.vq, num, t.desc, t.drv, t.dev) < 0) {
		fprintf(stderr, "test bug: virtq_packed_set_rings\n");
		exit(1);
	}
	virtq_packed_set_base(&t.vq, base);
	virtq_packed_start(&t.vq);
}

struct seg {
	uint64_t addr;
	uint32_t len;
	uint16_t flags;         /* NEXT is added; WRITE, INDIRECT as given */
};

static uint16_t avail_flags(bool wrap)
{
	return wrap ? F_AVAIL : F_USED;
}

/* Makes a list of n descriptors available with buffer id; the head's
 * flags are written last, as the spec asks of the driver. */
static void add_chain(const struct seg *s, unsigned n, uint16_t id)
{
	uint16_t head = t.next, head_flags = 0;

	for (unsigned i = 0; i < n; i++) {
		struct vring_packed_desc *d = &t.desc[t.next];
		uint16_t f = (uint16_t)(s[i].flags | (i + 1 < n ? VRING_DESC_F_NEXT : 0) |
					avail_flags(t.wrap));

		d->addr = s[i].addr;
		d->len = s[i].len;
		d->id = id;
		if (i == 0)
			head_flags = f;
		else
			d->flags = f;
		if (++t.next == t.num) {
			t.next = 0;
			t.wrap = !t.wrap;
		}
	}
	__atomic_store_n(&t.desc[head].flags, head_flags, __ATOMIC_RELEASE);
}

/* Reads one used entry as the driver would; skips n slots. */
static bool get_used(uint16_t *id, uint32_t *len, unsigned n)
{
	struct vring_packed_desc *d = &t.desc[t.used];
	uint16_t f = __atomic_load_n(&d->flags, __ATOMIC_ACQUIRE);

	if (!!(f & F_AVAIL) != t.used_wrap || !!(f & F_USED) != t.used_wrap)
		return false;
	*id = d->id;
	*len = d->len;
	t.used = (uint16_t)(t.used + n);
	if (t.used >= t.num) {
		t.used = (uint16_t)(t.used - t.num);
		t.used_wrap = !t.used_wrap;
	}
	return true;
}

static void expect_broken(const char *what, const char *want)
{
	struct virtq_elem e;
	int ret = virtq_packed_pop(&t.vq, &e);

	CHECK_MSG(vqf_broke_with(&t.vq, ret, want), "%s -> broken (%s)", what, vqf_why(&t.vq));
}

/*
 * virtq_init leaves the arrays at the end of struct virtq alone, so a
 * queue the driver never starts costs no resident memory for them; what
 * they held before (a previous connection's buffer ids in flight, stale
 * chains) must then never matter once a packed ring is set up.
 */
static void test_init_keeps_arrays(void)
{
	struct virtq_elem e;
	uint16_t id = 0xffff;
	uint32_t len = 0;
	const struct seg s[] = { { BUF, 16, 0 }, { BUF + 0x100, 32, VRING_DESC_F_WRITE } };

	printf("-- packed: virtq_init on a used struct\n");
	memset(&t.vq, 0xa5, sizeof(t.vq));
	virtq_init(&t.vq, 9);
	CHECK_MSG(t.vq.num == 0 && !t.vq.packed && !t.vq.broken && t.vq.log == NULL &&
		  t.vq.pk_chain_len == 0 && t.vq.index == 9, "the fields above the arrays are cleared");
	CHECK_MSG(t.vq.pk_inflight[3] == 0xa5a5 && t.vq.iov[0].iov_len == (size_t)0xa5a5a5a5a5a5a5a5ull &&
		  t.vq.pk_chain[VIRTQ_MAX_SEGS - 1].id == 0xa5a5 &&
		  t.vq.indirect_copy[0].len == 0xa5a5a5a5u, "the arrays are left untouched");
	ring_setup(8, false, true, 0x8000);   /* virtq_init again, then packed */
	add_chain(s, 2, 3);
	CHECK_MSG(virtq_packed_pop(&t.vq, &e) == 1 && e.head == 3 && e.req.rd_cnt == 1 &&
		  e.req.wr_cnt == 1, "id 3, stale as in flight before, pops");
	virtq_packed_push(&t.vq, &e, 32);
	virtq_packed_flush(&t.vq);
	CHECK_MSG(get_used(&id, &len, 2) && id == 3 && len == 32 && t.vq.pk_used == 2,
		  "its used entry skips its own two slots, not a stale count");
}

static void test_good_chains(void)
{
	struct virtq_elem e;
	uint16_t id = 0xffff;
	uint32_t len = 0;
	int ret;

	printf("-- packed: valid chains\n");
	ring_setup(8, false, true, 0x8000);
	{
		const struct seg s[] = { { BUF, 64, 0 }, { BUF + 64, 36, 0 },
					 { BUF + 0x100, 200, VRING_DESC_F_WRITE } };

		add_chain(s, 3, 5);
	}
	ret = virtq_packed_pop(&t.vq, &e);
	CHECK_MSG(ret == 1 && e.head == 5 && e.req.rd_cnt == 2 && e.req.wr_cnt == 1 &&
	          e.req.rd[0].iov_base == host(BUF) && e.req.rd[1].iov_len == 36 &&
	          e.req.wr[0].iov_base == host(BUF + 0x100) && e.wr_len == 200 &&
	          e.rd_len == 100, "chain of three: 2 rd, 1 wr iovec, id from the list");
	CHECK_MSG(virtq_packed_pop(&t.vq, &e) == 0, "ring then empty");
	virtq_packed_push(&t.vq, &e, 500);
	CHECK_MSG(!get_used(&id, &len, 3), "used entry invisible before flush");
	virtq_packed_flush(&t.vq);
	CHECK_MSG(get_used(&id, &len, 3) && id == 5 && len == 200,
	          "flush publishes it; id 5, length clamped to the writable size");
	CHECK_MSG(t.vq.pk_used == 3 && t.vq.pk_avail == 3, "used skips the three slots");

	/* Indirect, straddling A/B. */
	ring_setup(8, false, true, 0x8000);
	{
		struct vring_packed_desc tmp[2] = {
			{ .addr = BUF, .len = 40 },
			{ .addr = BUF + 0x100, .len = 80, .flags = VRING_DESC_F_WRITE },
		};
		const struct seg s[] = { { GPA_B - 16, 32, VRING_DESC_F_INDIRECT } };

		memcpy(host(GPA_B - 16), &tmp[0], 16);
		memcpy(host(GPA_B), &tmp[1], 16);
		add_chain(s, 1, 2);
	}
	ret = virtq_packed_pop(&t.vq, &e);
	CHECK_MSG(ret == 1 && e.head == 2 && e.req.rd_cnt == 1 && e.req.wr_cnt == 1 &&
	          e.req.wr[0].iov_len == 80 && t.vq.pk_chain_len == 1,
	          "indirect table straddling two regions, one ring slot");

	/* Wrap-around: a chain that runs over the end of the ring flips the
	 * wrap counter in its middle; used entries wrap too. */
	printf("-- packed: wrap-around\n");
	ring_setup(4, false, false, 0x8000 | 2);
	for (unsigned round = 0; round < 6; round++) {
		const struct seg s[] = { { BUF, 16, 0 }, { BUF + 0x100, 16, VRING_DESC_F_WRITE },
					 { BUF + 0x200, 16, VRING_DESC_F_WRITE } };
		bool ok;

		add_chain(s, 3, (uint16_t)(round % 4));
		ret = virtq_packed_pop(&t.vq, &e);
		ok = ret == 1 && e.head == round % 4 && e.wr_len == 32;
		virtq_packed_push(&t.vq, &e, 7);
		virtq_packed_flush(&t.vq);
		ok = ok && get_used(&id, &len, 3) && id == round % 4 && len == 7;
		if (!ok || round == 5)
			CHECK_MSG(ok, "6 chains of 3 on a ring of 4: every wrap right (round %u)",
			          round);
		if (!ok)
			break;
	}
	CHECK_MSG(virtq_packed_get_base(&t.vq) == (uint32_t)(t.vq.pk_avail |
		  (t.vq.pk_avail_wrap ? 0x8000 : 0)) * 0x10001u,
	          "GET_VRING_BASE: position and wrap bit 15, used in the high half");

	/* Out of order: two in flight, the second completes first. */
	ring_setup(8, false, false, 0x8000);
	{
		const struct seg a[] = { { BUF, 16, 0 }, { BUF + 0x100, 16, VRING_DESC_F_WRITE } };
		const struct seg b[] = { { BUF + 0x200, 16, VRING_DESC_F_WRITE } };
		struct virtq_elem ea, eb;
		struct vring_packed_desc saved[2];

		add_chain(a, 2, 0);
		add_chain(b, 1, 1);
		ret = virtq_packed_pop(&t.vq, &ea);
		memcpy(saved, t.vq.pk_chain, sizeof(saved));
		ret += virtq_packed_pop(&t.vq, &eb);
		virtq_packed_push(&t.vq, &eb, 16);
		virtq_packed_flush(&t.vq);
		CHECK_MSG(ret == 2 && get_used(&id, &len, 1) && id == 1,
		          "second chain completed first: its id in slot 0");
		CHECK_MSG(virtq_packed_rewalk(&t.vq, saved, 2, &ea) == 0 && ea.head == 0 &&
		          ea.req.wr[0].iov_base == host(BUF + 0x100),
		          "re-walk of the first from its copy, its ring slot overwritten");
		virtq_packed_push(&t.vq, &ea, 16);
		virtq_packed_flush(&t.vq);
		CHECK_MSG(get_used(&id, &len, 2) && id == 0 && t.vq.pk_used == 3,
		          "then the first; used position 3");
	}
}

/* One chain made available on a fresh ring of 8 (base 0, wrap 1), which
 * the walker must refuse, breaking the queue for the reason given. */
static const struct bad_chain {
	const char *what, *want;
	bool indirect;          /* INDIRECT_DESC negotiated */
	uint16_t id;
	unsigned n;
	struct seg s[2];
} bad_chains[] = {
	{ "buffer in the gap", "outside guest memory", true, 0, 1, { { GPA_GAP, 16, 0 } } },
	{ "buffer running off the end of B", "outside guest memory", true, 0, 1,
	  { { GPA_B + REG_SIZE - 8, 16, 0 } } },
	{ "buffer id == ring size", "buffer id out of range", true, 8, 1, { { BUF, 16, 0 } } },
	{ "readable after writable", "readable descriptor after a writable", true, 0, 2,
	  { { BUF + 0x100, 16, VRING_DESC_F_WRITE }, { BUF, 16, 0 } } },
	{ "indirect without the feature", "not negotiated", false, 0, 1,
	  { { TABLE, 16, VRING_DESC_F_INDIRECT } } },
	{ "indirect length 24", "multiple of 16", true, 0, 1,
	  { { TABLE, 24, VRING_DESC_F_INDIRECT } } },
	{ "indirect length 0", "multiple of 16", true, 0, 1,
	  { { TABLE, 0, VRING_DESC_F_INDIRECT } } },
	{ "indirect table over the segment limit", "segment limit", true, 0, 1,
	  { { TABLE, 16u * (VIRTQ_MAX_SEGS + 1), VRING_DESC_F_INDIRECT } } },
	{ "indirect table in the gap", "outside guest memory", true, 0, 1,
	  { { GPA_GAP, 32, VRING_DESC_F_INDIRECT } } },
	{ "indirect descriptor as the end of a chain", "indirect descriptor in a chain", true, 0, 2,
	  { { BUF, 16, 0 }, { TABLE, 16, VRING_DESC_F_INDIRECT } } },
	{ "indirect with NEXT", "indirect descriptor with NEXT", true, 0, 2,
	  { { TABLE, 16, VRING_DESC_F_INDIRECT }, { BUF, 16, 0 } } },
};

static void test_hostile(void)
{
	struct virtq_elem e;

	printf("-- packed: hostile rings\n");
	for (size_t i = 0; i < sizeof(bad_chains) / sizeof(bad_chains[0]); i++) {
		const struct bad_chain *c = &bad_chains[i];

		ring_setup(8, false, c->indirect, 0x8000);
		add_chain(c->s, c->n, c->id);
		expect_broken(c->what, c->want);
	}
	ring_setup(8, false, true, 0x8000);
	{
		const struct seg s[] = { { BUF, 16, 0 } };

		add_chain(s, 1, 3);
		add_chain(s, 1, 3);
		CHECK(virtq_packed_pop(&t.vq, &e) == 1);
		expect_broken("id reused while in flight", "already in flight");
	}
	/* A chain that never ends: NEXT on every slot of the ring. */
	ring_setup(4, false, true, 0x8000);
	for (unsigned i = 0; i < 4; i++)
		t.desc[i] = (struct vring_packed_desc){ .addr = BUF, .len = 8,
			.flags = VRING_DESC_F_NEXT | F_AVAIL };
	expect_broken("NEXT on every slot of the ring", "longer than the ring");
	/* The same with the wrap bits forged to match in the second lap. */
	ring_setup(4, false, true, 0x8000 | 1);
	for (unsigned i = 0; i < 4; i++)
		t.desc[i] = (struct vring_packed_desc){ .addr = BUF, .len = 8,
			.flags = (uint16_t)(VRING_DESC_F_NEXT | (i == 0 ? F_USED : F_AVAIL)) };
	expect_broken("chain running round the ring onto its head", "longer than the ring");
	/* A later descriptor of the list with the wrong wrap bits. */
	ring_setup(8, false, true, 0x8000);
	{
		const struct seg s[] = { { BUF, 16, 0 }, { BUF + 16, 16, 0 } };

		add_chain(s, 2, 0);
		t.desc[1].flags = (uint16_t)(t.desc[1].flags ^ (F_AVAIL | F_USED));
		expect_broken("second descriptor not available", "not marked available");
	}
	ring_setup(8, false, true, 0x8000);
	{
		struct vring_packed_desc *table = host(TABLE);
		const struct seg s[] = { { TABLE, 16, VRING_DESC_F_INDIRECT } };

		table[0] = (struct vring_packed_desc){ .addr = TABLE, .len = 16,
						       .flags = VRING_DESC_F_INDIRECT };
		add_chain(s, 1, 0);
		expect_broken("indirect table pointing at itself", "nested indirect");
	}
	/* A base beyond the ring breaks the queue at its start. */
	ring_setup(8, false, true, 0x8000 | 9);
	CHECK_MSG(t.vq.broken && strstr(t.vq.broken_reason, "beyond the ring"),
	          "SET_VRING_BASE position 9 on a ring of 8 -> broken");
	/* Broken stays broken until SET_VRING_BASE. */
	ring_setup(8, false, true, 0x8000);
	{
		const struct seg bad[] = { { GPA_GAP, 16, 0 } };
		const struct seg good[] = { { BUF, 16, 0 } };

		add_chain(bad, 1, 0);
		add_chain(good, 1, 1);
		CHECK(virtq_packed_pop(&t.vq, &e) == -EIO);
		CHECK_MSG(virtq_packed_pop(&t.vq, &e) == -EIO && !virtq_packed_avail_pending(&t.vq),
		          "a broken queue pops nothing, even a good chain behind");
		virtq_packed_set_base(&t.vq, 0x8000 | 1);
		CHECK_MSG(virtq_packed_pop(&t.vq, &e) == 1 && e.head == 1,
		          "SET_VRING_BASE clears it; the good chain pops");
	}
}

static void test_notify(void)
{
	struct virtq_elem e;
	const struct seg s[] = { { BUF, 16, VRING_DESC_F_WRITE } };

	printf("-- packed: event suppression\n");
	ring_setup(8, false, false, 0x8000);
	virtq_packed_disable_notify(&t.vq);
	CHECK_MSG(t.dev->flags == VRING_PACKED_EVENT_FLAG_DISABLE, "disable: device area DISABLE");
	CHECK_MSG(!virtq_packed_enable_notify(&t.vq) &&
	          t.dev->flags == VRING_PACKED_EVENT_FLAG_ENABLE,
	          "enable without EVENT_IDX: ENABLE, nothing pending");
	add_chain(s, 1, 0);
	CHECK_MSG(virtq_packed_enable_notify(&t.vq), "enable sees a chain made available");
	CHECK(virtq_packed_pop(&t.vq, &e) == 1);
	virtq_packed_push(&t.vq, &e, 1);
	virtq_packed_flush(&t.vq);
	t.drv->flags = VRING_PACKED_EVENT_FLAG_DISABLE;
	CHECK_MSG(!virtq_packed_should_notify(&t.vq), "driver DISABLE: no call");
	t.drv->flags = VRING_PACKED_EVENT_FLAG_ENABLE;
	CHECK_MSG(virtq_packed_should_notify(&t.vq), "driver ENABLE: call");

	ring_setup(8, true, false, 0x8000);
	virtq_packed_disable_notify(&t.vq);
	CHECK_MSG(t.dev->flags == VRING_PACKED_EVENT_FLAG_ENABLE,
	          "EVENT_IDX: disable leaves the area alone (a stale offset suppresses)");
	CHECK_MSG(!virtq_packed_enable_notify(&t.vq) &&
	          t.dev->flags == VRING_PACKED_EVENT_FLAG_DESC && t.dev->off_wrap == 0x8000,
	          "EVENT_IDX: DESC at position 0, wrap 1");
	t.drv->flags = VRING_PACKED_EVENT_FLAG_DESC;
	t.drv->off_wrap = 0x8000 | 2;     /* call once slot 2 is used */
	for (unsigned i = 0; i < 4; i++) {
		bool want = i == 0 || i == 2, got;

		add_chain(s, 1, (uint16_t)i);
		CHECK(virtq_packed_pop(&t.vq, &e) == 1);
		virtq_packed_push(&t.vq, &e, 1);
		virtq_packed_flush(&t.vq);
		got = virtq_packed_should_notify(&t.vq);
		/* The first decision always calls: what the driver saw is unknown. */
		CHECK_MSG(got == want, "DESC off 2: used slot %u -> %s", i, got ? "call" : "no call");
	}
	/* An event offset in the previous wrap lies behind: no call. */
	t.drv->off_wrap = 7;
	add_chain(s, 1, 4);
	CHECK(virtq_packed_pop(&t.vq, &e) == 1);
	virtq_packed_push(&t.vq, &e, 1);
	virtq_packed_flush(&t.vq);
	CHECK_MSG(!virtq_packed_should_notify(&t.vq), "DESC offset in the other wrap: no call");
}

int main(void)
{
	static const struct vqf_region regions[] = {
		{ GPA_A, REG_SIZE, UVA_BASE, 0 },
		{ GPA_B, REG_SIZE, UVA_BASE + 0x100000, REG_SIZE },
	};
	int ret;

	ferry_log_init(LOG_LVL_WARN, false);
	ret = vqf_guest_build(&memfd, &mem, 2 * REG_SIZE, regions, 2);
	if (ret)
		return ret;
	test_init_keeps_arrays();
	test_good_chains();
	test_hostile();
	test_notify();
	guest_mem_free(mem);
	close(memfd);
	return check_result();
}
