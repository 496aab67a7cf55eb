/* Unit test: live migration in the vhost-user device: dirty-page log, suspend by GET_VRING_BASE, device state through a pipe. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include "common/log.h"
#include "transport/vhost_user.h"
#include "transport/vhost_user_wire.h"
#include "../common/fd_count.h"
#include "../common/vu_client.h"
#include "../common/vu_session.h"
#include "../common/check.h"

#define BIT(n) (1ull << (n))

#define MEM_SIZE 0x100000ull          /* 256 pages: a 32-byte log */
#define PAGES (MEM_SIZE / VU_LOG_PAGE_SIZE)
#define LOG_BYTES (PAGES / 8)
#define UVA 0x7f0000000000ull
#define DESC 0x1000ull
#define AVAIL 0x2000ull
#define USED 0x3000ull
#define INDIRECT 0x6000ull
#define REQ_BUF 0x8000ull
#define NUM 8u
/* The state the test service saves: more than a pipe holds, so a save
 * run before the reply would deadlock. */
#define STATE_LEN (200u * 1024u)

/* ---- The service: writes what a request asks, defers "wait", saves a pattern ---- */

static int started, resets, handled, deferred;
static void *held_token;
static struct ferry_chan *held_chan;
static bool save_fails;
static int loads_ok;

static void *t_start(void *opaque, unsigned idx)
{
	static int ctx;

	__atomic_add_fetch(&started, 1, __ATOMIC_SEQ_CST);
	return &ctx;
}

static void t_stop(void *opaque, unsigned idx, void *ctx)
{
}

/* "read N": N bytes of 0xab into the writable buffers, as a READ reply;
 * "wait": deferred, completed by the test from another thread. */
static uint32_t t_handle(void *ctx, const struct ferry_req *req)
{
	char text[32] = { 0 };
	unsigned long n;
	uint32_t done = 0;

	if (req->rd_cnt < 1)
		return 0;
	memcpy(text, req->rd[0].iov_base,
	       req->rd[0].iov_len < sizeof(text) - 1 ? req->rd[0].iov_len : sizeof(text) - 1);
	if (strcmp(text, "wait") == 0) {
		__atomic_store_n(&held_chan, req->chan, __ATOMIC_RELEASE);
		__atomic_store_n(&held_token, req->token, __ATOMIC_RELEASE);
		__atomic_add_fetch(&deferred, 1, __ATOMIC_SEQ_CST);
		return FERRY_DEFERRED;
	}
	n = strtoul(text + 5, NULL, 10);
	for (unsigned i = 0; i < req->wr_cnt && done < n; i++) {
		size_t c = req->wr[i].iov_len < n - done ? req->wr[i].iov_len : n - done;

		memset(req->wr[i].iov_base, 0xab, c);
		done += (uint32_t)c;
	}
	__atomic_add_fetch(&handled, 1, __ATOMIC_SEQ_CST);
	return done;
}

/* GET_VRING_BASE must wait for the held request whatever cancel does:
 * this one does nothing, the test's thread completes it later. */
static void t_cancel(void *ctx)
{
}

static void t_reset(void *opaque)
{
	__atomic_add_fetch(&resets, 1, __ATOMIC_SEQ_CST);
}

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 7 + 3);
}

static int t_save(void *opaque, int fd, char *reason, size_t reason_size)
{
	uint8_t buf[4096];

	if (save_fails) {
		snprintf(reason, reason_size, "test service told to fail");
		return -EIO;
	}
	for (size_t off = 0; off < STATE_LEN; off += sizeof(buf)) {
		for (size_t i = 0; i < sizeof(buf); i++)
			buf[i] = pattern(off + i);
		for (size_t w = 0; w < sizeof(buf);) {
			ssize_t r = write(fd, buf + w, sizeof(buf) - w);

			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0) {
				snprintf(reason, reason_size, "write: %s", strerror(errno));
				return -errno;
			}
			w += (size_t)r;
		}
	}
	return 0;
}

static int t_load(void *opaque, int fd, char *reason, size_t reason_size)
{
	uint8_t buf[4096];
	size_t total = 0;

	for (;;) {
		ssize_t r = read(fd, buf, sizeof(buf));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		for (ssize_t i = 0; i < r; i++) {
			if (buf[i] != pattern(total + (size_t)i)) {
				snprintf(reason, reason_size, "byte %zu wrong", total + (size_t)i);
				return -EBADMSG;
			}
		}
		total += (size_t)r;
	}
	if (total != STATE_LEN) {
		snprintf(reason, reason_size, "%zu bytes, want %u", total, STATE_LEN);
		return -EBADMSG;
	}
	__atomic_add_fetch(&loads_ok, 1, __ATOMIC_SEQ_CST);
	return 0;
}

static const struct ferry_service mig_ops = {
	.start = t_start, .stop = t_stop, .serve = t_handle, .cancel = t_cancel,
	.reset = t_reset, .save_state = t_save, .load_state = t_load,
};

/* ---- Guest memory, rings and the log, as a frontend sees them ---- */

struct guest {
	int memfd;
	uint8_t *base;
	int kick, call;
	uint16_t avail_idx;     /* split: next avail index; packed: next slot */
	bool packed;
	bool wrap;              /* packed: the driver's wrap counter */
};

static void guest_init(struct guest *g, bool packed)
{
	memset(g, 0, sizeof(*g));
	g->memfd = memfd_create("ferry-guest", MFD_CLOEXEC);
	g->kick = eventfd(0, EFD_CLOEXEC);
	g->call = eventfd(0, EFD_CLOEXEC);
	if (g->memfd < 0 || g->kick < 0 || g->call < 0 || ftruncate(g->memfd, MEM_SIZE) < 0)
		exit(1);
	g->base = mmap(NULL, MEM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, g->memfd, 0);
	if (g->base == MAP_FAILED)
		exit(1);
	g->packed = packed;
	g->wrap = true;
}

static void guest_free(struct guest *g)
{
	munmap(g->base, MEM_SIZE);
	close(g->memfd);
	close(g->kick);
	close(g->call);
}

static uint16_t used_idx(const struct guest *g)
{
	return __atomic_load_n(&((struct vring_used *)(g->base + USED))->idx, __ATOMIC_ACQUIRE);
}

/* Queues "text" with one writable buffer [wr_gpa, + wr_len); through an
 * indirect table if indirect (split only). */
static void guest_request(struct guest *g, const char *text, uint64_t wr_gpa, uint32_t wr_len,
			  bool indirect)
{
	uint16_t slot = (uint16_t)(g->avail_idx % NUM);
	uint64_t req = REQ_BUF + slot * 0x40ull;

	strcpy((char *)g->base + req, text);
	if (g->packed) {
		struct vring_packed_desc *d = (void *)(g->base + DESC);
		uint16_t avail = g->wrap ? (1u << VRING_PACKED_DESC_F_AVAIL) :
					   (1u << VRING_PACKED_DESC_F_USED);

		/* Two slots per request, NUM even: a chain never wraps. */
		d[slot + 1] = (struct vring_packed_desc){ wr_gpa, wr_len, slot,
							  (uint16_t)(avail | VRING_DESC_F_WRITE) };
		d[slot].addr = req;
		d[slot].len = (uint32_t)strlen(text);
		d[slot].id = slot;
		__atomic_store_n(&d[slot].flags, (uint16_t)(avail | VRING_DESC_F_NEXT),
				 __ATOMIC_RELEASE);
		g->avail_idx = (uint16_t)(g->avail_idx + 2);
		if (g->avail_idx % NUM == 0)
			g->wrap = !g->wrap;
	} else {
		struct vring_desc *d = (void *)(g->base + DESC);
		struct vring_avail *a = (void *)(g->base + AVAIL);
		uint16_t head = (uint16_t)((g->avail_idx * 2) % NUM);
		struct vring_desc chain[2] = {
			{ req, (uint32_t)strlen(text), VRING_DESC_F_NEXT, 1 },
			{ wr_gpa, wr_len, VRING_DESC_F_WRITE, 0 },
		};

		if (indirect) {
			memcpy(g->base + INDIRECT, chain, sizeof(chain));
			d[head] = (struct vring_desc){ INDIRECT, sizeof(chain), VRING_DESC_F_INDIRECT, 0 };
		} else {
			chain[0].next = (uint16_t)(head + 1);
			d[head] = chain[0];
			d[head + 1] = chain[1];
		}
		a->ring[g->avail_idx % NUM] = head;
		g->avail_idx++;
		__atomic_store_n(&a->idx, g->avail_idx, __ATOMIC_RELEASE);
	}
	eventfd_write(g->kick, 1);
}

/* Whether the request's reply arrived: split by used->idx, packed by the
 * used flags of its head slot. */
static bool guest_wait_reply(struct guest *g, uint16_t want_used)
{
	for (int i = 0; i < 200; i++) {
		if (g->packed) {
			uint16_t slot = (uint16_t)((g->avail_idx + NUM - 2) % NUM);
			struct vring_packed_desc *d = (void *)(g->base + DESC);
			uint16_t f = __atomic_load_n(&d[slot].flags, __ATOMIC_ACQUIRE);
			bool wrap = (g->avail_idx % NUM == 0) ? !g->wrap : g->wrap;
			bool used = !!(f & (1u << VRING_PACKED_DESC_F_USED)) == wrap &&
				    !!(f & (1u << VRING_PACKED_DESC_F_AVAIL)) == wrap;

			if (used)
				return true;
		} else if (used_idx(g) == want_used) {
			return true;
		}
		usleep(10000);
	}
	return false;
}

/* Features, memory table and queue 1 of g, up to its kick: the ring runs.
 * features beyond VERSION_1 and PROTOCOL_FEATURES as given. */
static bool queue1_setup(int fd, struct guest *g, uint64_t features, uint32_t base,
			 uint32_t addr_flags)
{
	struct vu_mem_table mt = { .nregions = 1 };
	struct vu_vring_state num = { 1, NUM }, st = { 1, base }, en = { 1, 1 };
	struct vu_vring_addr addr = { 1, addr_flags, UVA + DESC, UVA + USED, UVA + AVAIL, USED };
	uint64_t f = BIT(VIRTIO_F_VERSION_1) | BIT(VU_F_PROTOCOL_FEATURES) | features |
		     (g->packed ? BIT(VIRTIO_F_RING_PACKED) : 0);

	mt.regions[0] = (struct vu_mem_region){ 0, MEM_SIZE, UVA, 0 };
	return acked_ok(fd, VU_SET_FEATURES, &f, 8, NULL, 0) &&
	       acked_ok(fd, VU_SET_MEM_TABLE, &mt, VU_MEM_TABLE_HDR_SIZE + 32, &g->memfd, 1) &&
	       acked_ok(fd, VU_SET_VRING_NUM, &num, sizeof(num), NULL, 0) &&
	       acked_ok(fd, VU_SET_VRING_BASE, &st, sizeof(st), NULL, 0) &&
	       acked_ok(fd, VU_SET_VRING_ADDR, &addr, sizeof(addr), NULL, 0) &&
	       acked_ok(fd, VU_SET_VRING_CALL, &(uint64_t){ 1 }, 8, &g->call, 1) &&
	       acked_ok(fd, VU_SET_VRING_KICK, &(uint64_t){ 1 }, 8, &g->kick, 1) &&
	       acked_ok(fd, VU_SET_VRING_ENABLE, &en, sizeof(en), NULL, 0);
}

static bool set_features(int fd, const struct guest *g, uint64_t features)
{
	uint64_t f = BIT(VIRTIO_F_VERSION_1) | BIT(VU_F_PROTOCOL_FEATURES) | features |
		     (g->packed ? BIT(VIRTIO_F_RING_PACKED) : 0);

	return acked_ok(fd, VU_SET_FEATURES, &f, 8, NULL, 0);
}

/* GET_VRING_BASE of queue 1: its stop position, or -1. */
static long stop_queue1(int fd)
{
	struct vu_vring_state st = { 1, 0 };
	struct vu_msg_hdr h;

	if (vu_client_send(fd, VU_GET_VRING_BASE, 0, &st, sizeof(st), NULL, 0) < 0 ||
	    recv_reply(fd, &h, &st, sizeof(st)) < 0 || h.request != VU_GET_VRING_BASE ||
	    st.index != 1)
		return -1;
	return st.num;
}

/* A log memfd of 4 KiB, mapped for the test to read. */
struct log {
	int fd;
	uint8_t *bits;
};

static void log_init(struct log *l)
{
	l->fd = memfd_create("ferry-log", MFD_CLOEXEC);
	if (l->fd < 0 || ftruncate(l->fd, 4096) < 0)
		exit(1);
	l->bits = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, l->fd, 0);
	if (l->bits == MAP_FAILED)
		exit(1);
}

static void log_free(struct log *l)
{
	munmap(l->bits, 4096);
	close(l->fd);
}

/* SET_LOG_BASE: its u64 reply (UINT64_MAX if there was none). */
static uint64_t set_log_base(int fd, const struct log *l, uint64_t size, uint64_t offset)
{
	struct vu_log lb = { size, offset };
	uint64_t v = UINT64_MAX;

	if (request_u64(fd, VU_SET_LOG_BASE, &lb, sizeof(lb), &l->fd, 1, &v) < 0)
		return UINT64_MAX;
	return v;
}

/* The oracle: the bitmap a set of written ranges must give. */
struct expect {
	uint8_t bits[LOG_BYTES];
};

static void expect_range(struct expect *e, uint64_t gpa, uint64_t len)
{
	for (uint64_t p = gpa / VU_LOG_PAGE_SIZE; len && p <= (gpa + len - 1) / VU_LOG_PAGE_SIZE; p++)
		e->bits[p / 8] |= (uint8_t)(1u << (p % 8));
}

/* A fresh expectation for one reply: its data (len bytes at gpa) and the
 * ring part the device wrote for it (ring_len bytes at ring). */
static void expect_reply(struct expect *e, uint64_t gpa, uint64_t len, uint64_t ring,
			 uint64_t ring_len)
{
	memset(e, 0, sizeof(*e));
	expect_range(e, gpa, len);
	expect_range(e, ring, ring_len);
}

/* Compares the log at offset with e; prints the first difference. */
static bool log_matches(const struct log *l, uint64_t offset, const struct expect *e)
{
	for (unsigned i = 0; i < LOG_BYTES; i++) {
		uint8_t got = __atomic_load_n(&l->bits[offset + i], __ATOMIC_ACQUIRE);

		if (got != e->bits[i]) {
			printf("      log byte %u (pages %u-%u): 0x%02x, expected 0x%02x\n", i, i * 8,
			       i * 8 + 7, got, e->bits[i]);
			return false;
		}
	}
	return true;
}

static bool log_zero(const struct log *l)
{
	for (unsigned i = 0; i < 4096; i++)
		if (l->bits[i])
			return false;
	return true;
}

/* The device's threads see the log through their own mapping; clearing
 * it is what QEMU does after each sync. */
static void log_clear(struct log *l)
{
	memset(l->bits, 0, 4096);
}

static struct vu_dev *new_dev(void)
{
	struct vu_fs_config cfg = { .tag = "myfs", .num_request_queues = 1 };
	struct vu_dev *dev;

	if (vu_dev_new(&dev, &cfg, &mig_ops, NULL) < 0)
		exit(1);
	return dev;
}

static bool negotiate(int fd)
{
	uint64_t want = BIT(VU_PROTO_F_REPLY_ACK) | BIT(VU_PROTO_F_MQ) | BIT(VU_PROTO_F_LOG_SHMFD) |
			BIT(VU_PROTO_F_DEVICE_STATE);
	uint64_t offered = get_u64(fd, VU_GET_PROTOCOL_FEATURES);

	return offered != UINT64_MAX && (offered & want) == want &&
	       acked_ok(fd, VU_SET_PROTOCOL_FEATURES, &want, 8, NULL, 0);
}

/* ---- Device state through a pipe ---- */

/* SET_DEVICE_STATE_FD: its u64 reply, or UINT64_MAX if none came. */
static uint64_t set_state_fd(int fd, uint32_t direction, uint32_t phase, uint32_t size,
			     const int *fds, unsigned nfds)
{
	struct vu_transfer_state ts = { direction, phase };
	uint64_t v = UINT64_MAX;

	if (request_u64(fd, VU_SET_DEVICE_STATE_FD, &ts, size, fds, nfds, &v) < 0)
		return UINT64_MAX;
	return v;
}

static uint64_t check_state(int fd)
{
	uint64_t v = UINT64_MAX;

	if (request_u64(fd, VU_CHECK_DEVICE_STATE, NULL, 0, NULL, 0, &v) < 0)
		return UINT64_MAX;
	return v;
}

/* Starts a save into a new pipe; the read end in *rd, or -1. */
static uint64_t begin_save(int fd, int *rd)
{
	int p[2];
	uint64_t v;

	if (pipe2(p, O_CLOEXEC) < 0)
		exit(1);
	v = set_state_fd(fd, VU_TRANSFER_SAVE, VU_TRANSFER_PHASE_STOPPED, 8, &p[1], 1);
	close(p[1]);
	*rd = p[0];
	return v;
}

/* Reads the pipe to EOF: true if it held exactly the service's state. */
static bool read_state(int rd)
{
	uint8_t buf[4096];
	size_t total = 0;
	bool same = true;

	for (;;) {
		ssize_t r = read(rd, buf, sizeof(buf));

		if (r <= 0)
			break;
		for (ssize_t i = 0; i < r; i++)
			same = same && buf[i] == pattern(total + (size_t)i);
		total += (size_t)r;
	}
	close(rd);
	return same && total == STATE_LEN;
}

/* Loads len bytes of the service's state (a cut one if len is short). */
static uint64_t load_state(int fd, size_t len)
{
	int p[2];
	uint64_t v;
	uint8_t buf[4096];

	if (pipe2(p, O_CLOEXEC) < 0)
		exit(1);
	v = set_state_fd(fd, VU_TRANSFER_LOAD, VU_TRANSFER_PHASE_STOPPED, 8, &p[0], 1);
	close(p[0]);
	for (size_t off = 0; v == VU_DEVICE_STATE_NOFD && off < len; off += sizeof(buf)) {
		size_t n = len - off < sizeof(buf) ? len - off : sizeof(buf);

		for (size_t i = 0; i < n; i++)
			buf[i] = pattern(off + i);
		if (write(p[1], buf, n) != (ssize_t)n)
			break;
	}
	close(p[1]);
	return v;
}

static bool still_answers(int fd)
{
	return get_u64(fd, VU_GET_QUEUE_NUM) == 2;
}

/* ---- Tests ---- */

struct completer {
	pthread_t thread;
	bool completed;          /* atomic */
};

/* Completes the held request after 300 ms: a READ reply header and a
 * page and a half of data, as a deferred READ does. */
static void *complete_later(void *arg)
{
	struct completer *c = arg;
	struct ferry_chan *chan;
	void *token = NULL;
	uint8_t *data = malloc(6000);
	uint8_t hdr[16];

	for (int i = 0; i < 200 && !token; i++) {
		token = __atomic_exchange_n(&held_token, NULL, __ATOMIC_ACQ_REL);
		if (!token)
			usleep(10000);
	}
	chan = __atomic_load_n(&held_chan, __ATOMIC_ACQUIRE);
	usleep(300000);
	memset(hdr, 0xcd, sizeof(hdr));
	memset(data, 0xef, 6000);
	__atomic_store_n(&c->completed, true, __ATOMIC_SEQ_CST);
	if (token)
		chan->complete(chan, token, hdr, sizeof(hdr), data, 6000);
	else
		free(data);
	return NULL;
}

static void test_split_log_and_suspend(void)
{
	struct vu_dev *dev = new_dev();
	struct session s;
	struct guest g;
	struct log l1, l2;
	struct expect e;
	struct completer c = { 0 };
	uint64_t st;
	long stopped_at;
	int rd, started_before;

	printf("-- split ring: dirty log, live toggles, suspend, save, a cancelled migration\n");
	guest_init(&g, false);
	log_init(&l1);
	log_init(&l2);
	session_start(&s, dev);
	CHECK_MSG(negotiate(s.fd), "LOG_SHMFD and DEVICE_STATE offered (hooks set) and negotiated");
	CHECK_MSG(queue1_setup(s.fd, &g, BIT(VIRTIO_RING_F_INDIRECT_DESC), 0, 0), "queue 1 runs");
	guest_request(&g, "read 12288", 0x20000, 0x3000, false);
	CHECK_MSG(guest_wait_reply(&g, 1) && g.base[0x22fff] == 0xab, "a READ before migration");

	CHECK_MSG(set_log_base(s.fd, &l1, LOG_BYTES, 64) == 0,
	          "SET_LOG_BASE (offset 64): u64 0 reply without NEED_REPLY, as QEMU waits for");
	guest_request(&g, "read 100", 0x20000, 0x3000, false);
	CHECK_MSG(guest_wait_reply(&g, 2) && log_zero(&l1), "log mapped, LOG_ALL not acked: no bits");

	started_before = __atomic_load_n(&started, __ATOMIC_SEQ_CST);
	CHECK_MSG(set_features(s.fd, &g, BIT(VIRTIO_RING_F_INDIRECT_DESC) | BIT(VU_F_LOG_ALL)),
	          "SET_FEATURES +LOG_ALL on the live ring");
	{
		struct vu_vring_addr addr = { 1, VU_VRING_F_LOG, UVA + DESC, UVA + USED, UVA + AVAIL, USED };

		CHECK_MSG(acked_ok(s.fd, VU_SET_VRING_ADDR, &addr, sizeof(addr), NULL, 0),
		          "SET_VRING_ADDR with the log flag on the live ring");
		addr.flags = 0x2;
		CHECK_MSG(nacked(s.fd, VU_SET_VRING_ADDR, &addr, sizeof(addr), NULL, 0),
		          "SET_VRING_ADDR with an unknown flag refused");
		addr.flags = VU_VRING_F_LOG;
		CHECK_MSG(acked_ok(s.fd, VU_SET_VRING_ADDR, &addr, sizeof(addr), NULL, 0),
		          "SET_VRING_ADDR with the log flag again");
	}
	log_clear(&l1);
	guest_request(&g, "read 12288", 0x20000, 0x3000, false);
	/* The whole used ring (one page here) after the indices were kept. */
	expect_reply(&e, 0x20000, 0x3000, USED, 4 + 8 * NUM + 2);
	CHECK_MSG(guest_wait_reply(&g, 3) && log_matches(&l1, 64, &e),
	          "indices kept (used idx 3); READ data pages and the used ring page marked, no other");
	CHECK_MSG(__atomic_load_n(&started, __ATOMIC_SEQ_CST) == started_before &&
	          __atomic_load_n(&resets, __ATOMIC_SEQ_CST) == 0,
	          "the live toggles neither restarted the ring nor reset the session");

	log_clear(&l1);
	guest_request(&g, "read 5000", 0x24800, 0x2000, false);
	expect_reply(&e, 0x24800, 5000, USED, 1);
	CHECK_MSG(guest_wait_reply(&g, 4) && log_matches(&l1, 64, &e),
	          "by written length: 5000 of 8192 bytes mark pages 0x24-0x25, not 0x26");

	log_clear(&l1);
	guest_request(&g, "read 4096", 0x30000, 0x1000, true);
	expect_reply(&e, 0x30000, 0x1000, USED, 1);
	CHECK_MSG(guest_wait_reply(&g, 5) && log_matches(&l1, 64, &e),
	          "a buffer behind an indirect table is marked");

	CHECK_MSG(set_log_base(s.fd, &l2, LOG_BYTES, 0) == 0, "a second SET_LOG_BASE replaces the log");
	log_clear(&l1);
	log_clear(&l2);
	guest_request(&g, "read 4096", 0x40000, 0x1000, false);
	expect_reply(&e, 0x40000, 0x1000, USED, 1);
	CHECK_MSG(guest_wait_reply(&g, 6) && log_matches(&l2, 0, &e) && log_zero(&l1),
	          "marks go to the new log only");

	CHECK_MSG(set_log_base(s.fd, &l2, 2, 0) == 0, "a 2-byte log (pages 0-15) accepted");
	log_clear(&l2);
	guest_request(&g, "read 4096", 0x40000, 0x1000, false);
	CHECK_MSG(guest_wait_reply(&g, 7) && l2.bits[0] == 0x08 && l2.bits[1] == 0 &&
	          g.base[0x40fff] == 0xab,
	          "pages past a short log skipped (no crash), the used ring page 3 still marked");
	CHECK_MSG(set_log_base(s.fd, &l2, 32, 8192) != 0 && set_log_base(s.fd, &l2, 0, 0) != 0 &&
	          set_log_base(s.fd, &l2, 16, UINT64_MAX - 8) != 0 &&
	          set_log_base(s.fd, &l2, UINT64_MAX, 0) != 0 && still_answers(s.fd),
	          "SET_LOG_BASE past the fd's end, of size 0, wrapping or huge: refused in the reply");
	{
		struct vu_log lb = { 32, 0 };
		uint64_t v = 0;
		int two[2] = { l1.fd, l2.fd };

		CHECK_MSG(request_u64(s.fd, VU_SET_LOG_BASE, &lb, 8, &l1.fd, 1, &v) == 0 && v != 0 &&
		          request_u64(s.fd, VU_SET_LOG_BASE, &lb, sizeof(lb), NULL, 0, &v) == 0 && v != 0 &&
		          request_u64(s.fd, VU_SET_LOG_BASE, &lb, sizeof(lb), two, 2, &v) == 0 && v != 0 &&
		          still_answers(s.fd),
		          "SET_LOG_BASE short, without fd, with two fds: refused in the reply");
	}

	CHECK_MSG(set_log_base(s.fd, &l1, LOG_BYTES, 64) == 0 &&
	          set_features(s.fd, &g, BIT(VIRTIO_RING_F_INDIRECT_DESC)), "LOG_ALL cleared live");
	log_clear(&l1);
	guest_request(&g, "read 4096", 0x40000, 0x1000, false);
	CHECK_MSG(guest_wait_reply(&g, 8) && log_zero(&l1), "logging off: no bits");

	CHECK_MSG(set_features(s.fd, &g, BIT(VIRTIO_RING_F_INDIRECT_DESC) | BIT(VU_F_LOG_ALL)),
	          "LOG_ALL on again");
	st = begin_save(s.fd, &rd);
	CHECK_MSG((st & VU_DEVICE_STATE_ERR_MASK) != 0 && (st & VU_DEVICE_STATE_NOFD) &&
	          read_state(rd) == false && still_answers(s.fd),
	          "save while a ring runs: refused (0x%llx), the pipe closed", (unsigned long long)st);

	log_clear(&l1);
	guest_request(&g, "wait", 0x50000, 0x2000, false);
	CHECK(pthread_create(&c.thread, NULL, complete_later, &c) == 0);
	for (int i = 0; i < 200 && !__atomic_load_n(&deferred, __ATOMIC_ACQUIRE); i++)
		usleep(5000);
	stopped_at = stop_queue1(s.fd);
	expect_reply(&e, 0x50000, 16 + 6000, USED, 1);
	CHECK_MSG(stopped_at == 9 && __atomic_load_n(&c.completed, __ATOMIC_SEQ_CST) &&
	          used_idx(&g) == 9 && g.base[0x50000] == 0xcd && g.base[0x50000 + 16 + 5999] == 0xef,
	          "GET_VRING_BASE answered (at %ld) only after the deferred request completed", stopped_at);
	CHECK_MSG(log_matches(&l1, 64, &e), "the deferred reply (header and data) and its used entry marked");
	pthread_join(c.thread, NULL);

	st = begin_save(s.fd, &rd);
	CHECK_MSG(st == VU_DEVICE_STATE_NOFD, "save with every ring stopped: reply 0x100 first");
	CHECK_MSG(read_state(rd), "the pipe carries the service's %u-byte state to EOF", STATE_LEN);
	CHECK_MSG(check_state(s.fd) == 0, "CHECK_DEVICE_STATE: 0");

	/* The migration failed after all: the source goes on. */
	CHECK_MSG(set_features(s.fd, &g, BIT(VIRTIO_RING_F_INDIRECT_DESC)) &&
	          acked_ok(s.fd, VU_SET_VRING_BASE, &(struct vu_vring_state){ 1, 9 }, 8, NULL, 0) &&
	          acked_ok(s.fd, VU_SET_VRING_CALL, &(uint64_t){ 1 }, 8, &g.call, 1) &&
	          acked_ok(s.fd, VU_SET_VRING_KICK, &(uint64_t){ 1 }, 8, &g.kick, 1),
	          "cancelled: LOG_ALL off, ring restarted where it stopped");
	guest_request(&g, "read 10", 0x40000, 0x1000, false);
	CHECK_MSG(guest_wait_reply(&g, 10) && __atomic_load_n(&resets, __ATOMIC_SEQ_CST) == 0,
	          "the source serves on: no session reset across stop, save and resume");
	CHECK_MSG(session_end(&s) == 0 && __atomic_load_n(&resets, __ATOMIC_SEQ_CST) == 1,
	          "the frontend's end resets the session once");
	vu_dev_free(dev);
	log_free(&l1);
	log_free(&l2);
	guest_free(&g);
}

static void test_packed_log(void)
{
	struct vu_dev *dev = new_dev();
	struct session s;
	struct guest g;
	struct log l;
	struct expect e, allowed;
	int before = __atomic_load_n(&handled, __ATOMIC_SEQ_CST);

	printf("-- packed ring: data and written descriptors marked\n");
	guest_init(&g, true);
	log_init(&l);
	session_start(&s, dev);
	CHECK_MSG(negotiate(s.fd) && set_log_base(s.fd, &l, LOG_BYTES, 0) == 0 &&
	          queue1_setup(s.fd, &g, BIT(VU_F_LOG_ALL), 1u << 15, VU_VRING_F_LOG),
	          "packed queue 1 runs with LOG_ALL and a logged ring");
	for (int i = 0; i < 50 && !l.bits[0]; i++)
		usleep(10000);
	log_clear(&l);
	guest_request(&g, "read 8192", 0x20000, 0x2000, false);
	expect_reply(&e, 0x20000, 0x2000, DESC, 1);
	allowed = e;
	expect_range(&allowed, USED, 4);          /* the device event area, if re-armed */
	CHECK_MSG(guest_wait_reply(&g, 0) && wait_count(&handled, before + 1), "the request answered");
	{
		bool all = true, only = true;

		for (unsigned i = 0; i < LOG_BYTES; i++) {
			all = all && (l.bits[i] & e.bits[i]) == e.bits[i];
			only = only && (l.bits[i] & ~allowed.bits[i]) == 0;
		}
		CHECK_MSG(all && only, "data pages 0x20-0x21 and the descriptor ring page marked, "
		          "nothing but those and the event area");
	}
	CHECK_MSG(set_features(s.fd, &g, 0), "LOG_ALL off on the live packed ring");
	log_clear(&l);
	guest_request(&g, "read 8192", 0x20000, 0x2000, false);
	CHECK_MSG(guest_wait_reply(&g, 0) && wait_count(&handled, before + 2) && log_zero(&l),
	          "packed, logging off: no bits");
	CHECK_MSG(session_end(&s) == 0, "orderly end");
	vu_dev_free(dev);
	log_free(&l);
	guest_free(&g);
}

static void test_device_state_hostile(void)
{
	struct vu_dev *dev = new_dev();
	struct session s;
	struct guest g;
	int efd = eventfd(0, EFD_CLOEXEC);
	int p[2];
	int fds_before, rd, resets_before;
	uint64_t st;

	printf("-- device state: hostile requests, busy, load, disconnect mid-transfer\n");
	guest_init(&g, false);
	fds_before = fd_count();
	session_start(&s, dev);
	CHECK_MSG(negotiate(s.fd), "DEVICE_STATE negotiated");
	if (pipe2(p, O_CLOEXEC) < 0)
		exit(1);
	st = set_state_fd(s.fd, 2, 0, 8, &p[1], 1);
	CHECK_MSG((st & VU_DEVICE_STATE_ERR_MASK) && still_answers(s.fd), "direction 2 refused (0x%llx)",
	          (unsigned long long)st);
	st = set_state_fd(s.fd, VU_TRANSFER_SAVE, 1, 8, &p[1], 1);
	CHECK_MSG((st & VU_DEVICE_STATE_ERR_MASK) && still_answers(s.fd), "phase 1 refused");
	st = set_state_fd(s.fd, VU_TRANSFER_SAVE, 0, 4, &p[1], 1);
	CHECK_MSG((st & VU_DEVICE_STATE_ERR_MASK) && still_answers(s.fd), "a 4-byte payload refused");
	st = set_state_fd(s.fd, VU_TRANSFER_SAVE, 0, 8, NULL, 0);
	CHECK_MSG((st & VU_DEVICE_STATE_ERR_MASK) && still_answers(s.fd), "no fd refused");
	st = set_state_fd(s.fd, VU_TRANSFER_SAVE, 0, 8, p, 2);
	CHECK_MSG((st & VU_DEVICE_STATE_ERR_MASK) && still_answers(s.fd), "two fds refused");
	close(p[0]);
	close(p[1]);
	st = check_state(s.fd);
	CHECK_MSG(st != 0 && st != UINT64_MAX && still_answers(s.fd),
	          "CHECK_DEVICE_STATE without a transfer: nonzero");

	st = begin_save(s.fd, &rd);
	CHECK_MSG(st == VU_DEVICE_STATE_NOFD, "save begins; nobody reads yet, the hook blocks");
	{
		int q[2];

		if (pipe2(q, O_CLOEXEC) < 0)
			exit(1);
		st = set_state_fd(s.fd, VU_TRANSFER_LOAD, 0, 8, &q[0], 1);
		close(q[0]);
		close(q[1]);
	}
	CHECK_MSG((st & VU_DEVICE_STATE_ERR_MASK) && still_answers(s.fd),
	          "a second SET_DEVICE_STATE_FD while one runs: refused");
	CHECK_MSG(nacked(s.fd, VU_SET_VRING_BASE, &(struct vu_vring_state){ 1, 3 }, 8, NULL, 0),
	          "SET_VRING_BASE (a possible reset) while a hook runs: refused");
	CHECK_MSG(read_state(rd) && check_state(s.fd) == 0, "the running save completes; CHECK 0");

	save_fails = true;
	st = begin_save(s.fd, &rd);
	close(rd);
	CHECK_MSG(st == VU_DEVICE_STATE_NOFD && check_state(s.fd) != 0,
	          "a hook that fails: CHECK_DEVICE_STATE nonzero");
	save_fails = false;

	CHECK_MSG(load_state(s.fd, STATE_LEN / 2) == VU_DEVICE_STATE_NOFD && check_state(s.fd) != 0 &&
	          __atomic_load_n(&loads_ok, __ATOMIC_SEQ_CST) == 0, "a cut state: load fails in CHECK");
	resets_before = __atomic_load_n(&resets, __ATOMIC_SEQ_CST);
	CHECK_MSG(load_state(s.fd, STATE_LEN) == VU_DEVICE_STATE_NOFD && check_state(s.fd) == 0 &&
	          __atomic_load_n(&loads_ok, __ATOMIC_SEQ_CST) == 1,
	          "load before any memory table or ring: CHECK 0");
	/* The rings as the source left them in guest memory. */
	g.avail_idx = 9;
	((struct vring_avail *)(g.base + AVAIL))->idx = 9;
	((struct vring_used *)(g.base + USED))->idx = 9;
	CHECK_MSG(queue1_setup(s.fd, &g, 0, 9, 0), "the ring starts at the source's position 9");
	guest_request(&g, "read 10", 0x40000, 0x1000, false);
	CHECK_MSG(guest_wait_reply(&g, 10) && __atomic_load_n(&resets, __ATOMIC_SEQ_CST) == resets_before,
	          "a request served on the loaded session; the start did not reset it");
	CHECK_MSG(stop_queue1(s.fd) == 10, "ring stopped");
	CHECK_MSG(acked_ok(s.fd, VU_RESET_OWNER, NULL, 0, NULL, 0) &&
	          nacked(s.fd, 39 /* SET_STATUS: not offered */, &(uint64_t){ 0 }, 8, NULL, 0) &&
	          __atomic_load_n(&resets, __ATOMIC_SEQ_CST) == resets_before,
	          "RESET_OWNER and a SET_STATUS 0 do not reset the loaded session");

	st = begin_save(s.fd, &rd);
	CHECK_MSG(st == VU_DEVICE_STATE_NOFD, "another save begins and blocks on the full pipe");
	/* The frontend dies: its end of the pipe goes with it. */
	close(rd);
	CHECK_MSG(session_end(&s) == 0, "disconnect during a transfer: serve returns");
	CHECK_MSG(__atomic_load_n(&resets, __ATOMIC_SEQ_CST) == resets_before + 1,
	          "the loaded session is reset when its frontend goes");
	CHECK_MSG(fd_count() == fds_before, "no fd leaked (%d -> %d)", fds_before, fd_count());

	/* A frontend that hangs up but keeps the pipe open, never reading:
	 * the hook must not hold the device for ever. */
	session_start(&s, dev);
	CHECK_MSG(negotiate(s.fd) && begin_save(s.fd, &rd) == VU_DEVICE_STATE_NOFD,
	          "a save begins; its pipe is kept open and never read");
	{
		time_t t0 = time(NULL);

		CHECK_MSG(session_end(&s) == 0 && time(NULL) - t0 <= 2,
		          "disconnect with the pipe still open: serve returns at once");
	}
	close(rd);
	session_start(&s, dev);
	CHECK_MSG(negotiate(s.fd) && begin_save(s.fd, &rd) == VU_DEVICE_STATE_NOFD,
	          "a save begins; nobody reads");
	vu_client_send(s.fd, VU_CHECK_DEVICE_STATE, 0, NULL, 0, NULL, 0);
	usleep(100000);
	{
		time_t t0 = time(NULL);

		int ret = session_end(&s);

		/* Its reply cannot go out any more: an error end is right. */
		CHECK_MSG(ret <= 0 && time(NULL) - t0 <= 2,
		          "disconnect while CHECK_DEVICE_STATE waits on an unread pipe: serve returns (%d)",
		          ret);
	}
	close(rd);
	CHECK_MSG(fd_count() == fds_before, "no fd leaked (%d -> %d)", fds_before, fd_count());

	session_start(&s, dev);
	CHECK_MSG(negotiate(s.fd) && still_answers(s.fd), "the device serves a new frontend");
	CHECK_MSG(session_end(&s) == 0, "orderly end");
	vu_dev_free(dev);
	close(efd);
	guest_free(&g);
}

static void test_no_hooks(void)
{
	static const struct ferry_service plain = {
		.start = t_start, .stop = t_stop, .serve = t_handle, .save_state = t_save,
	};
	struct vu_fs_config cfg = { .num_request_queues = 1 };
	struct vu_dev *dev;
	uint64_t v;

	printf("-- DEVICE_STATE needs both hooks\n");
	if (vu_dev_new(&dev, &cfg, &plain, NULL) < 0)
		exit(1);
	v = offered_protocol_features(dev);
	CHECK_MSG(v != UINT64_MAX && !(v & BIT(VU_PROTO_F_DEVICE_STATE)) && (v & BIT(VU_PROTO_F_LOG_SHMFD)),
	          "save_state alone: DEVICE_STATE not offered, LOG_SHMFD is (session ended in order)");
	vu_dev_free(dev);
}

int main(void)
{
	ferry_log_init(getenv("T_DEBUG") ? LOG_LVL_DEBUG : LOG_LVL_ERROR, false);
	test_no_hooks();
	test_split_log_and_suspend();
	test_packed_log();
	test_device_state_hostile();
	return check_result();
}
