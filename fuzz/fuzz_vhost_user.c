/* libFuzzer target: vhost-user message sequences over a socketpair into the real device, queue threads included. */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "../tests/common/fd_count.h"
#include "../tests/common/vu_client.h"
#include "fuzz_common.h"
#include "transport/vhost_user.h"
#include "transport/vhost_user_wire.h"

/*
 * Input: records of
 *   request, flags, fdspec, size (u16 le), payload
 * request 0xff is not sent: its payload (u16 offset, bytes) is written into
 * guest memory, a 64 KiB memfd. Otherwise the header carries request, the
 * flags (version 1 and bit 3 NEED_REPLY, or bit 7: the flags byte raw)
 * and size as given; the payload sent is at most what the input still
 * has, so a short one leaves the daemon waiting for bytes until EOF.
 * fdspec bits 0-2: that many fds ride along; bit 3 makes them eventfds,
 * else memfds (bit 4: a 4 KiB memfd instead of the guest memory one).
 * The fuzzer never passes any other fd. All records are sent, our end is
 * shut, and vu_dev_serve runs to the end of the stream.
 */
#define MEM_SIZE 0x10000u
#define SMALL_SIZE 0x1000u
#define MAX_RECORDS 64
#define MAX_FDS 7

static struct vu_dev *dev;
static int mem_fd, small_fd, kick_fd;
static uint8_t *guest;

static void *fz_queue_start(void *opaque, unsigned index)
{
	return opaque;
}

static void fz_queue_stop(void *opaque, unsigned index, void *ctx)
{
}

/* Touches every byte the transport handed over: a bad translation faults. */
static uint32_t fz_handle(void *ctx, const struct ferry_req *req)
{
	uint8_t sum = 0;
	uint32_t written = 0;

	for (unsigned i = 0; i < req->rd_cnt; i++)
		for (size_t j = 0; j < req->rd[i].iov_len; j++)
			sum += ((const uint8_t *)req->rd[i].iov_base)[j];
	for (unsigned i = 0; i < req->wr_cnt; i++) {
		memset(req->wr[i].iov_base, sum, req->wr[i].iov_len);
		written += (uint32_t)req->wr[i].iov_len;
	}
	/* One more than there is room for: the transport must clamp it. */
	return written + 1;
}

/* Device state hooks, on the transport's socketpair: the relay moves the
 * bytes to or from the fd the fuzzer passed (a memfd or an eventfd, never
 * a pipe). The first byte read decides whether a load succeeds, so
 * CHECK_DEVICE_STATE answers both ways. */
static int fz_save(void *opaque, int fd, char *reason, size_t reason_size)
{
	static const char state[] = "ferry";

	if (write(fd, state, sizeof(state)) != (ssize_t)sizeof(state)) {
		snprintf(reason, reason_size, "write: %s", strerror(errno));
		return -EIO;
	}
	return 0;
}

static int fz_load(void *opaque, int fd, char *reason, size_t reason_size)
{
	uint8_t b = 0;

	if (read(fd, &b, 1) != 1 || b != 'f') {
		snprintf(reason, reason_size, "not a state");
		return -EBADMSG;
	}
	return 0;
}

static const struct ferry_service fz_ops = {
	.start = fz_queue_start,
	.stop = fz_queue_stop,
	.serve = fz_handle,
	.save_state = fz_save,
	.load_state = fz_load,
};

static void write_seeds(const char *dir);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct vu_fs_config config = { .tag = "fuzz", .num_request_queues = 2 };
	static int ctx_token;

	fuzz_init_log();
	if (fuzz_seed_dir()) {
		write_seeds(fuzz_seed_dir());
		exit(0);
	}
	mem_fd = memfd_create("fuzz-guest", MFD_CLOEXEC);
	small_fd = memfd_create("fuzz-small", MFD_CLOEXEC);
	kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (mem_fd < 0 || small_fd < 0 || kick_fd < 0 ||
	    ftruncate(mem_fd, MEM_SIZE) < 0 || ftruncate(small_fd, SMALL_SIZE) < 0)
		fuzz_fail("fds: %s", strerror(errno));
	guest = mmap(NULL, MEM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, mem_fd, 0);
	if (guest == MAP_FAILED)
		fuzz_fail("mmap: %s", strerror(errno));
	if (vu_dev_new(&dev, &config, &fz_ops, &ctx_token) < 0)
		fuzz_fail("vu_dev_new");
	return 0;
}

/* Sends one message; a daemon that already hung up is fine. */
static void send_msg(int sock, const struct vu_msg_hdr *h, const uint8_t *payload,
		     size_t len, uint8_t fdspec)
{
	unsigned nfds = fdspec & 7;
	int src = fdspec & 8 ? kick_fd : (fdspec & 0x10 ? small_fd : mem_fd);
	int fds[MAX_FDS];

	for (unsigned i = 0; i < nfds; i++)
		fds[i] = src;
	if (vu_client_send_raw(sock, h, payload, len, fds, nfds, MSG_DONTWAIT) < 0 &&
	    errno != EPIPE && errno != ECONNRESET && errno != EAGAIN)
		fuzz_fail("sendmsg: %s", strerror(errno));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int sv[2];
	size_t at = 0;
	uint64_t one = 1;
	uint8_t drain[4096];
	int fds, fd_baseline;

	/* Counted per run: between runs libFuzzer opens fds of its own (the
	 * symbolizer's pipes). */
	fd_baseline = fd_count();
	memset(guest, 0, MEM_SIZE);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		fuzz_fail("socketpair: %s", strerror(errno));
	for (unsigned n = 0; n < MAX_RECORDS && at + 5 <= size; n++) {
		struct vu_msg_hdr h = {
			.request = data[at],
			.flags = data[at + 1] & 0x80 ? data[at + 1] :
				 VU_VERSION | (data[at + 1] & VU_FLAG_NEED_REPLY),
			.size = (uint32_t)(data[at + 3] | data[at + 4] << 8),
		};
		uint8_t fdspec = data[at + 2];
		size_t len = h.size;

		at += 5;
		if (len > size - at)
			len = size - at;
		if (data[at - 5] == 0xff) {
			if (len >= 2) {
				size_t off = (size_t)(data[at] | data[at + 1] << 8);
				size_t n_bytes = len - 2;

				if (off < MEM_SIZE) {
					if (n_bytes > MEM_SIZE - off)
						n_bytes = MEM_SIZE - off;
					memcpy(guest + off, data + at + 2, n_bytes);
				}
			}
		} else {
			send_msg(sv[0], &h, data + at, len, fdspec);
		}
		at += len;
	}
	shutdown(sv[0], SHUT_WR);
	/* A kick is waiting whenever a queue starts with our eventfd. */
	if (write(kick_fd, &one, sizeof(one)) != sizeof(one))
		fuzz_fail("eventfd write");

	(void)vu_dev_serve(dev, sv[1]);

	while (recv(sv[0], drain, sizeof(drain), MSG_DONTWAIT) > 0)
		;
	close(sv[0]);
	if (read(kick_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		fuzz_fail("eventfd read");
	fds = fd_count();
	FUZZ_ASSERT(fds == fd_baseline, "%d fds open after the connection, %d before",
		    fds, fd_baseline);
	return 0;
}

/* ---- Seeds: a QEMU-like start-up that serves one chain ---- */

struct seed_buf {
	uint8_t b[4096];
	size_t len;
};

static void rec(struct seed_buf *s, uint8_t request, uint8_t flags, uint8_t fdspec,
		const void *payload, uint16_t len)
{
	uint8_t h[5] = { request, flags, fdspec, (uint8_t)len, (uint8_t)(len >> 8) };

	if (s->len + sizeof(h) + len > sizeof(s->b))
		fuzz_fail("seed too long");
	memcpy(s->b + s->len, h, sizeof(h));
	if (len)
		memcpy(s->b + s->len + sizeof(h), payload, len);
	s->len += sizeof(h) + len;
}

static void rec_u64(struct seed_buf *s, uint8_t request, uint8_t fdspec, uint64_t v)
{
	rec(s, request, VU_FLAG_NEED_REPLY, fdspec, &v, sizeof(v));
}

static void rec_state(struct seed_buf *s, uint8_t request, uint32_t index, uint32_t num)
{
	struct vu_vring_state st = { index, num };

	rec(s, request, VU_FLAG_NEED_REPLY, 0, &st, sizeof(st));
}

static void mem_write(struct seed_buf *s, uint16_t off, const void *p, uint16_t len)
{
	uint8_t buf[512];

	memcpy(buf, &off, 2);
	memcpy(buf + 2, p, len);
	rec(s, 0xff, 0, 0, buf, (uint16_t)(len + 2));
}

#define UVA 0x7f0000000000ull
#define DESC 0x0000u
#define AVAIL 0x1000u
#define USED 0x2000u

static void start_queue(struct seed_buf *s, uint32_t q, uint16_t ring_off, uint32_t addr_flags)
{
	struct vu_vring_addr addr = { q, addr_flags, UVA + DESC + ring_off, UVA + USED + ring_off,
				      UVA + AVAIL + ring_off, USED + ring_off };

	rec_state(s, VU_SET_VRING_NUM, q, 8);
	rec_state(s, VU_SET_VRING_BASE, q, 0);
	rec(s, VU_SET_VRING_ADDR, VU_FLAG_NEED_REPLY, 0, &addr, sizeof(addr));
	/* fdspec 1 | 8: one eventfd, the kick fd the fuzzer writes. */
	rec_u64(s, VU_SET_VRING_KICK, 1 | 8, q);
	rec_u64(s, VU_SET_VRING_CALL, 1 | 8, q);
	rec_state(s, VU_SET_VRING_ENABLE, q, 1);
}

static void one_chain(struct seed_buf *s, uint16_t ring_off)
{
	struct vring_desc d[2] = {
		{ htole64(0x8000), htole32(64), htole16(VRING_DESC_F_NEXT), htole16(1) },
		{ htole64(0x9000), htole32(256), htole16(VRING_DESC_F_WRITE), 0 },
	};
	uint16_t avail[3] = { 0, htole16(1), 0 };

	mem_write(s, DESC + ring_off, d, sizeof(d));
	mem_write(s, AVAIL + ring_off, avail, sizeof(avail));
}

static void write_seeds(const char *dir)
{
	const uint64_t features = (1ull << VIRTIO_F_VERSION_1) | (1ull << VU_F_PROTOCOL_FEATURES) |
		(1ull << VIRTIO_RING_F_EVENT_IDX) | (1ull << VIRTIO_RING_F_INDIRECT_DESC);
	const uint64_t protocol_features = (1ull << VU_PROTO_F_MQ) |
		(1ull << VU_PROTO_F_REPLY_ACK) | (1ull << VU_PROTO_F_CONFIG) |
		(1ull << VU_PROTO_F_CONFIGURE_MEM_SLOTS) | (1ull << VU_PROTO_F_LOG_SHMFD) |
		(1ull << VU_PROTO_F_DEVICE_STATE);
	struct vu_log log = { SMALL_SIZE, 0 };
	struct vu_transfer_state save = { VU_TRANSFER_SAVE, VU_TRANSFER_PHASE_STOPPED };
	struct vu_transfer_state load = { VU_TRANSFER_LOAD, VU_TRANSFER_PHASE_STOPPED };
	struct vu_mem_table table = { 1, 0, { { 0, MEM_SIZE, UVA, 0 } } };
	struct vu_mem_single region = { 0, { 0, MEM_SIZE, UVA, 0 } };
	struct vu_config config = { 0, 40, 0, { 0 } };
	struct seed_buf s;

	/* QEMU's order, then one request on queue 1 and GET_VRING_BASE. */
	memset(&s, 0, sizeof(s));
	one_chain(&s, 0);
	rec(&s, VU_GET_FEATURES, 0, 0, NULL, 0);
	rec(&s, VU_GET_PROTOCOL_FEATURES, 0, 0, NULL, 0);
	rec_u64(&s, VU_SET_PROTOCOL_FEATURES, 0, protocol_features);
	rec(&s, VU_GET_QUEUE_NUM, 0, 0, NULL, 0);
	rec(&s, VU_SET_OWNER, VU_FLAG_NEED_REPLY, 0, NULL, 0);
	rec_u64(&s, VU_SET_FEATURES, 0, features);
	/* One region, and its memfd (fdspec 1). */
	rec(&s, VU_SET_MEM_TABLE, VU_FLAG_NEED_REPLY, 1, &table,
	    VU_MEM_TABLE_HDR_SIZE + sizeof(table.regions[0]));
	start_queue(&s, 1, 0, 0);
	rec_state(&s, VU_GET_VRING_BASE, 1, 0);
	fuzz_write_seed(dir, "qemu-startup", s.b, s.len);

	/* Memory slots: ADD_MEM_REG, two queues, GET_CONFIG, REM_MEM_REG. */
	memset(&s, 0, sizeof(s));
	one_chain(&s, 0);
	one_chain(&s, 0x4000);
	rec_u64(&s, VU_SET_PROTOCOL_FEATURES, 0, protocol_features);
	rec_u64(&s, VU_SET_FEATURES, 0, features);
	rec(&s, VU_ADD_MEM_REG, VU_FLAG_NEED_REPLY, 1, &region, sizeof(region));
	start_queue(&s, 0, 0, 0);
	start_queue(&s, 2, 0x4000, 0);
	rec(&s, VU_GET_CONFIG, 0, 0, &config, VU_CONFIG_HDR_SIZE + 40);
	rec(&s, VU_REM_MEM_REG, VU_FLAG_NEED_REPLY, 0, &region, sizeof(region));
	fuzz_write_seed(dir, "mem-slots", s.b, s.len);

	/* A migration as QEMU runs it: the log (the 4 KiB memfd, fdspec
	 * 1 | 0x10), LOG_ALL and the ring's log flag on a live ring, a chain
	 * served and logged, the stop, a save and its check; then the
	 * destination's load (of what the save wrote) before any memory table. */
	memset(&s, 0, sizeof(s));
	one_chain(&s, 0);
	rec_u64(&s, VU_SET_PROTOCOL_FEATURES, 0, protocol_features);
	rec_u64(&s, VU_SET_FEATURES, 0, features);
	rec(&s, VU_SET_MEM_TABLE, VU_FLAG_NEED_REPLY, 1, &table,
	    VU_MEM_TABLE_HDR_SIZE + sizeof(table.regions[0]));
	start_queue(&s, 1, 0, 0);
	rec(&s, VU_SET_LOG_BASE, 0, 1 | 0x10, &log, sizeof(log));
	rec(&s, VU_SET_LOG_FD, VU_FLAG_NEED_REPLY, 1 | 8, NULL, 0);
	rec_u64(&s, VU_SET_FEATURES, 0, features | (1ull << VU_F_LOG_ALL));
	start_queue(&s, 1, 0, VU_VRING_F_LOG);
	rec_state(&s, VU_GET_VRING_BASE, 1, 0);
	rec(&s, VU_SET_DEVICE_STATE_FD, 0, 1 | 0x10, &save, sizeof(save));
	rec(&s, VU_CHECK_DEVICE_STATE, 0, 0, NULL, 0);
	rec(&s, VU_SET_DEVICE_STATE_FD, 0, 1 | 0x10, &load, sizeof(load));
	rec(&s, VU_CHECK_DEVICE_STATE, 0, 0, NULL, 0);
	fuzz_write_seed(dir, "migration", s.b, s.len);
}
