/* Unit test: the vhost-user device over a socketpair, malformed messages and a live queue. */
#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include "common/log.h"
#include "transport/vhost_user.h"
#include "transport/vhost_user_wire.h"
#include "../common/virtq_fixture.h"
#include "../common/vu_client.h"
#include "../common/vu_session.h"
#include "../common/check.h"

#define BIT(n) (1ull << (n))

#define MEM_SIZE 0x100000ull
#define UVA 0x7f0000000000ull
#define GPA 0x0ull
#define DESC 0x1000ull
#define AVAIL 0x2000ull
#define USED 0x3000ull
#define BUF 0x8000ull

/* ---- The consumer side: counts calls, answers with a fixed reply ---- */

static int started_queues, stopped_queues, handled;
static unsigned last_queue_index;
static char last_request[64];
/* Each queue's context says its index, as serve() is not told it. */
static unsigned queue_ids[256];      /* vhost_user.c's VU_MAX_QUEUES */

static void *t_queue_start(void *opaque, unsigned idx)
{
	__atomic_add_fetch(&started_queues, 1, __ATOMIC_SEQ_CST);
	queue_ids[idx] = idx;
	return &queue_ids[idx];
}

static void t_queue_stop(void *opaque, unsigned idx, void *ctx)
{
	__atomic_add_fetch(&stopped_queues, 1, __ATOMIC_SEQ_CST);
}

static uint32_t t_handle(void *ctx, const struct ferry_req *req)
{
	static const char reply[] = "pong";
	size_t n = 0;

	for (unsigned i = 0; i < req->rd_cnt && n < sizeof(last_request) - 1; i++) {
		size_t c = req->rd[i].iov_len;

		if (c > sizeof(last_request) - 1 - n)
			c = sizeof(last_request) - 1 - n;
		memcpy(last_request + n, req->rd[i].iov_base, c);
		n += c;
	}
	last_request[n] = '\0';
	last_queue_index = *(const unsigned *)ctx;
	if (req->wr_cnt < 1 || req->wr[0].iov_len < sizeof(reply))
		return 0;
	memcpy(req->wr[0].iov_base, reply, sizeof(reply));
	__atomic_add_fetch(&handled, 1, __ATOMIC_SEQ_CST);
	return sizeof(reply);
}

static int device_resets;

static void t_device_reset(void *opaque)
{
	__atomic_add_fetch(&device_resets, 1, __ATOMIC_SEQ_CST);
}

static const struct ferry_service ops = {
	.start = t_queue_start, .stop = t_queue_stop, .serve = t_handle,
	.reset = t_device_reset,
};

/* ---- Frontend helpers ---- */

static unsigned count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	unsigned n = 0;

	if (!d)
		return 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* The frontend's guest memory, MEM_SIZE at gpa 0 and UVA; exits if it cannot be had. */
static void guest_new(struct vqf_frontend_mem *g)
{
	if (vqf_frontend_mem_new(g, MEM_SIZE) < 0)
		exit(1);
}

static void test_control_messages(struct vu_dev *dev)
{
	struct session s;
	struct vu_msg_hdr h;
	struct vu_config cfg = { 0 };
	struct vu_vring_state st;
	struct vu_mem_table mt = { 0 };
	uint64_t v;
	struct vqf_frontend_mem g;
	int efd = eventfd(0, EFD_CLOEXEC);
	int fds[2];
	int memfd;

	printf("-- control messages (REPLY_ACK negotiated)\n");
	guest_new(&g);
	memfd = g.memfd;
	if (efd < 0)
		exit(1);
	session_start(&s, dev);
	v = get_u64(s.fd, VU_GET_FEATURES);
	CHECK_MSG(v != UINT64_MAX && (v & BIT(VIRTIO_F_VERSION_1)) &&
	          (v & BIT(VIRTIO_RING_F_EVENT_IDX)) && (v & BIT(VIRTIO_RING_F_INDIRECT_DESC)) &&
	          (v & BIT(VU_F_PROTOCOL_FEATURES)) && (v & BIT(VU_F_LOG_ALL)) &&
	          !(v & BIT(VIRTIO_F_ACCESS_PLATFORM)),
	          "GET_FEATURES: VERSION_1, EVENT_IDX, INDIRECT_DESC, PROTOCOL_FEATURES, LOG_ALL; never IOMMU_PLATFORM");
	v = get_u64(s.fd, VU_GET_PROTOCOL_FEATURES);
	CHECK_MSG(v != UINT64_MAX && (v & BIT(VU_PROTO_F_REPLY_ACK)) && (v & BIT(VU_PROTO_F_MQ)) &&
	          (v & BIT(VU_PROTO_F_CONFIG)) && (v & BIT(VU_PROTO_F_CONFIGURE_MEM_SLOTS)) &&
	          (v & BIT(VU_PROTO_F_BACKEND_REQ)) && (v & BIT(VU_PROTO_F_LOG_SHMFD)) &&
	          !(v & BIT(VU_PROTO_F_DEVICE_STATE)),
	          "GET_PROTOCOL_FEATURES: MQ, REPLY_ACK, BACKEND_REQ, CONFIG, MEM_SLOTS, LOG_SHMFD; "
	          "no DEVICE_STATE without save/load hooks");
	v = BIT(VU_PROTO_F_REPLY_ACK) | BIT(VU_PROTO_F_MQ) | BIT(VU_PROTO_F_CONFIG) | BIT(VU_PROTO_F_CONFIGURE_MEM_SLOTS);
	CHECK_MSG(acked_ok(s.fd, VU_SET_PROTOCOL_FEATURES, &v, 8, NULL, 0), "SET_PROTOCOL_FEATURES acked");
	CHECK_MSG(get_u64(s.fd, VU_GET_QUEUE_NUM) == 5, "GET_QUEUE_NUM: hiprio + 4 request queues (the maximum)");
	CHECK_MSG(get_u64(s.fd, VU_GET_MAX_MEM_SLOTS) == 509, "GET_MAX_MEM_SLOTS: 509");

	cfg.offset = 0;
	cfg.size = 40;
	vu_client_send(s.fd, VU_GET_CONFIG, 0, &cfg, VU_CONFIG_HDR_SIZE + 40, NULL, 0);
	memset(&cfg, 0, sizeof(cfg));
	CHECK_MSG(recv_reply(s.fd, &h, &cfg, sizeof(cfg)) == 0 && h.size == 52 &&
	          memcmp(cfg.data, "myfs\0", 5) == 0 && cfg.data[36] == 2,
	          "GET_CONFIG: tag and num_request_queues");
	cfg.offset = 30;
	cfg.size = 20;
	vu_client_send(s.fd, VU_GET_CONFIG, 0, &cfg, VU_CONFIG_HDR_SIZE + 20, NULL, 0);
	CHECK_MSG(recv_reply(s.fd, &h, &cfg, sizeof(cfg)) == 0 && h.request == VU_GET_CONFIG && h.size == 0,
	          "GET_CONFIG past the config space: empty reply (error)");
	cfg.offset = 0;
	cfg.size = 4;
	CHECK_MSG(nacked(s.fd, VU_SET_CONFIG, &cfg, VU_CONFIG_HDR_SIZE + 4, NULL, 0), "SET_CONFIG refused");

	st = (struct vu_vring_state){ 5, 8 };
	CHECK_MSG(nacked(s.fd, VU_SET_VRING_NUM, &st, sizeof(st), NULL, 0), "SET_VRING_NUM index 5 of 5 queues refused");
	st = (struct vu_vring_state){ 1, 100 };
	CHECK_MSG(nacked(s.fd, VU_SET_VRING_NUM, &st, sizeof(st), NULL, 0), "SET_VRING_NUM 100 (not 2^n) refused");
	st = (struct vu_vring_state){ 1, 65536 };
	CHECK_MSG(nacked(s.fd, VU_SET_VRING_NUM, &st, sizeof(st), NULL, 0), "SET_VRING_NUM 65536 refused");
	v = 0;
	CHECK_MSG(nacked(s.fd, VU_SET_VRING_CALL, &v, 8, NULL, 0), "SET_VRING_CALL without fd and without NOFD refused");
	v = VU_VRING_NOFD_MASK | 0x200;
	CHECK_MSG(nacked(s.fd, VU_SET_VRING_CALL, &v, 8, NULL, 0), "SET_VRING_CALL with reserved bits refused");
	v = VU_VRING_NOFD_MASK;
	CHECK_MSG(nacked(s.fd, VU_SET_VRING_KICK, &v, 8, NULL, 0), "SET_VRING_KICK NOFD (polling) refused");
	v = 7;
	CHECK_MSG(nacked(s.fd, VU_SET_FEATURES, &v, 4, NULL, 0), "SET_FEATURES with 4-byte payload refused");
	v = BIT(VIRTIO_F_VERSION_1) | BIT(40);
	CHECK_MSG(nacked(s.fd, VU_SET_FEATURES, &v, 8, NULL, 0), "SET_FEATURES with a feature not offered refused");

	mt.nregions = 1;
	mt.regions[0] = (struct vu_mem_region){ GPA, MEM_SIZE, UVA, 0 };
	CHECK_MSG(nacked(s.fd, VU_SET_MEM_TABLE, &mt, VU_MEM_TABLE_HDR_SIZE + 32, NULL, 0), "SET_MEM_TABLE: 1 region, 0 fds refused");
	fds[0] = dup(memfd);
	fds[1] = dup(memfd);
	CHECK_MSG(nacked(s.fd, VU_SET_MEM_TABLE, &mt, VU_MEM_TABLE_HDR_SIZE + 32, fds, 2), "SET_MEM_TABLE: 1 region, 2 fds refused");
	close(fds[0]);
	close(fds[1]);
	mt.nregions = 2;
	mt.regions[1] = (struct vu_mem_region){ GPA + 0x1000, MEM_SIZE, UVA + MEM_SIZE * 4, 0 };
	fds[0] = fds[1] = memfd;
	CHECK_MSG(nacked(s.fd, VU_SET_MEM_TABLE, &mt, VU_MEM_TABLE_HDR_SIZE + 64, fds, 2), "SET_MEM_TABLE: overlapping regions refused");
	mt.nregions = 1;
	mt.regions[0].size = MEM_SIZE * 2;
	CHECK_MSG(nacked(s.fd, VU_SET_MEM_TABLE, &mt, VU_MEM_TABLE_HDR_SIZE + 32, fds, 1), "SET_MEM_TABLE: region larger than its fd refused");
	mt.regions[0].size = 0;
	CHECK_MSG(nacked(s.fd, VU_SET_MEM_TABLE, &mt, VU_MEM_TABLE_HDR_SIZE + 32, fds, 1), "SET_MEM_TABLE: zero-size region refused");
	mt.nregions = 9;
	CHECK_MSG(nacked(s.fd, VU_SET_MEM_TABLE, &mt, VU_MEM_TABLE_HDR_SIZE + 32, fds, 1), "SET_MEM_TABLE: 9 regions refused");
	CHECK_MSG(nacked(s.fd, 99, NULL, 0, NULL, 0), "unknown request 99 refused");
	CHECK_MSG(acked_ok(s.fd, VU_SET_LOG_FD, NULL, 0, &efd, 1), "SET_LOG_FD accepted");
	{
		struct vu_log lb = { 4096, 0 };

		CHECK_MSG(nacked(s.fd, VU_SET_LOG_BASE, &lb, sizeof(lb), &memfd, 1),
		          "SET_LOG_BASE without LOG_SHMFD negotiated refused");
		CHECK_MSG(nacked(s.fd, VU_SET_DEVICE_STATE_FD, &(struct vu_transfer_state){ 0, 0 }, 8,
		                 &efd, 1) &&
		          get_u64(s.fd, VU_GET_QUEUE_NUM) == 5,
		          "SET_DEVICE_STATE_FD without DEVICE_STATE: refused, the device answers on");
	}
	/* GET_FEATURES with a payload is malformed and its reply has no way
	 * to say error, REPLY_ACK or not: the device drops the connection. */
	vu_client_send(s.fd, VU_GET_FEATURES, VU_FLAG_NEED_REPLY, &v, 8, NULL, 0);
	CHECK_MSG(dropped(&s), "malformed GET_FEATURES: connection dropped");
	vqf_frontend_mem_free(&g);
	close(efd);
}

static void test_disconnects(struct vu_dev *dev)
{
	struct session s;
	struct vu_vring_state st = { 5, 0 };
	uint64_t v = 0;

	printf("-- malformed messages without REPLY_ACK drop the connection\n");
	session_start(&s, dev);
	vu_client_send(s.fd, VU_SET_FEATURES, 0, &v, 4, NULL, 0);
	CHECK_MSG(dropped(&s), "SET_FEATURES with 4-byte payload");

	session_start(&s, dev);
	{
		struct vu_msg_hdr h = { VU_SET_FEATURES, VU_VERSION, 100000 };

		if (send(s.fd, &h, sizeof(h), MSG_NOSIGNAL) != sizeof(h))
			{ printf("FAIL  send\n"); failures++; }
	}
	CHECK_MSG(dropped(&s), "payload size 100000 over the limit");

	session_start(&s, dev);
	{
		struct vu_msg_hdr h = { VU_GET_FEATURES, 0x2, 0 };

		if (send(s.fd, &h, sizeof(h), MSG_NOSIGNAL) != sizeof(h))
			{ printf("FAIL  send\n"); failures++; }
	}
	CHECK_MSG(dropped(&s), "header with protocol version 2");

	session_start(&s, dev);
	vu_client_send(s.fd, VU_GET_VRING_BASE, 0, &st, sizeof(st), NULL, 0);
	CHECK_MSG(dropped(&s), "GET_VRING_BASE index 5 of 3 (no way to reply an error)");

	session_start(&s, dev);
	vu_client_send(s.fd, 99, 0, NULL, 0, NULL, 0);
	CHECK_MSG(dropped(&s), "unknown request 99");

	session_start(&s, dev);
	{
		int fds[9];

		for (int i = 0; i < 9; i++)
			fds[i] = eventfd(0, EFD_CLOEXEC);
		vu_client_send(s.fd, VU_SET_OWNER, 0, NULL, 0, fds, 9);
		for (int i = 0; i < 9; i++)
			close(fds[i]);
	}
	CHECK_MSG(dropped(&s), "9 fds on one message");

	session_start(&s, dev);
	if (send(s.fd, "\x01\x00", 2, MSG_NOSIGNAL) != 2)
		{ printf("FAIL  send\n"); failures++; }
	CHECK_MSG(session_end(&s) == 0, "EOF in the middle of a header: orderly end");
}

struct ring {
	struct vring_desc *desc;
	struct vring_avail *avail;
	struct vring_used *used;
	uint8_t *base;     /* guest memory: gpa 0 */
	uint64_t buf;      /* gpa of this ring's request buffers */
	uint16_t avail_idx;
};

static void ring_request(struct ring *r, const char *text, uint64_t wr_gpa)
{
	uint16_t head = (uint16_t)((r->avail_idx * 2) % 8);

	strcpy((char *)r->base + r->buf + head * 0x100, text);
	r->desc[head] = (struct vring_desc){ r->buf + head * 0x100, (uint32_t)strlen(text),
					     VRING_DESC_F_NEXT, (uint16_t)(head + 1) };
	r->desc[head + 1] = (struct vring_desc){ wr_gpa, 64, VRING_DESC_F_WRITE, 0 };
	r->avail->ring[r->avail_idx % 8] = head;
	r->avail_idx++;
	__atomic_store_n(&r->avail->idx, r->avail_idx, __ATOMIC_RELEASE);
}

/* Points r at the rings of a queue at off in the guest memory at base (gpa 0):
 * DESC, AVAIL, USED and its request buffers at BUF, each past off. */
static void ring_at(struct ring *r, uint8_t *base, uint64_t off)
{
	*r = (struct ring){ (void *)(base + off + DESC), (void *)(base + off + AVAIL),
			    (void *)(base + off + USED), base, off + BUF, 0 };
}

static void test_live_queue(struct vu_dev *dev)
{
	struct session s;
	struct ring r = { 0 };
	struct vu_mem_table mt = { 0 };
	struct vu_mem_single ms;
	struct vu_vring_state st;
	struct vu_vring_addr addr;
	struct vu_msg_hdr h;
	uint64_t v;
	struct vqf_frontend_mem g, g2;    /* g2: the region added while the queue runs */
	int kick = eventfd(0, EFD_CLOEXEC), call = eventfd(0, EFD_CLOEXEC);
	int err = eventfd(0, EFD_CLOEXEC);
	int memfd, memfd2;

	printf("-- a live queue: threads, notification, memory changes, stop\n");
	guest_new(&g);
	guest_new(&g2);
	memfd = g.memfd;
	memfd2 = g2.memfd;
	if (kick < 0 || call < 0 || err < 0)
		exit(1);
	ring_at(&r, g.base, 0);

	session_start(&s, dev);
	v = BIT(VU_PROTO_F_REPLY_ACK) | BIT(VU_PROTO_F_MQ) | BIT(VU_PROTO_F_CONFIGURE_MEM_SLOTS);
	CHECK_MSG(acked_ok(s.fd, VU_SET_PROTOCOL_FEATURES, &v, 8, NULL, 0), "SET_PROTOCOL_FEATURES");
	v = BIT(VIRTIO_F_VERSION_1) | BIT(VIRTIO_RING_F_INDIRECT_DESC) | BIT(VU_F_PROTOCOL_FEATURES);
	CHECK_MSG(acked_ok(s.fd, VU_SET_FEATURES, &v, 8, NULL, 0), "SET_FEATURES");
	mt.nregions = 1;
	mt.regions[0] = (struct vu_mem_region){ GPA, MEM_SIZE, UVA, 0 };
	CHECK_MSG(acked_ok(s.fd, VU_SET_MEM_TABLE, &mt, VU_MEM_TABLE_HDR_SIZE + 32, &memfd, 1), "SET_MEM_TABLE");
	st = (struct vu_vring_state){ 1, 8 };
	CHECK_MSG(acked_ok(s.fd, VU_SET_VRING_NUM, &st, sizeof(st), NULL, 0), "SET_VRING_NUM 1 8");
	st = (struct vu_vring_state){ 1, 0 };
	CHECK_MSG(acked_ok(s.fd, VU_SET_VRING_BASE, &st, sizeof(st), NULL, 0), "SET_VRING_BASE 1 0");
	addr = (struct vu_vring_addr){ 1, 0, UVA + MEM_SIZE - 64, UVA + USED, UVA + AVAIL, 0 };
	CHECK_MSG(nacked(s.fd, VU_SET_VRING_ADDR, &addr, sizeof(addr), NULL, 0),
	          "SET_VRING_ADDR with desc table running past the region refused");
	addr.desc = UVA + DESC + 8;
	CHECK_MSG(nacked(s.fd, VU_SET_VRING_ADDR, &addr, sizeof(addr), NULL, 0), "SET_VRING_ADDR misaligned refused");
	addr.desc = UVA + DESC;
	CHECK_MSG(acked_ok(s.fd, VU_SET_VRING_ADDR, &addr, sizeof(addr), NULL, 0), "SET_VRING_ADDR");
	v = 1;
	CHECK_MSG(acked_ok(s.fd, VU_SET_VRING_CALL, &v, 8, &call, 1), "SET_VRING_CALL");
	CHECK_MSG(acked_ok(s.fd, VU_SET_VRING_ERR, &v, 8, &err, 1), "SET_VRING_ERR");
	CHECK_MSG(acked_ok(s.fd, VU_SET_VRING_KICK, &v, 8, &kick, 1), "SET_VRING_KICK starts the queue");

	ring_request(&r, "ping1", BUF + 0x1000);
	eventfd_write(kick, 1);
	CHECK_MSG(!wait_readable(call, 300) && r.used->idx == 0,
	          "ring disabled (PROTOCOL_FEATURES negotiated): request not processed");
	st = (struct vu_vring_state){ 1, 1 };
	CHECK_MSG(acked_ok(s.fd, VU_SET_VRING_ENABLE, &st, sizeof(st), NULL, 0), "SET_VRING_ENABLE 1 1");
	CHECK_MSG(wait_readable(call, 2000) && wait_count(&handled, 1) && r.used->idx == 1 &&
	          r.used->ring[0].len == 5 && strcmp(last_request, "ping1") == 0 && last_queue_index == 1 &&
	          strcmp((char *)r.base + BUF + 0x1000, "pong") == 0,
	          "enable processes the pending request; call fd signalled, used len 5");
	CHECK_MSG(__atomic_load_n(&started_queues, __ATOMIC_SEQ_CST) == 1,
	          "queue_start called once");
	/* The frontend's SET_VRING_CALL can arrive after the kick it follows (the
	 * kick comes through an eventfd), so a call sent meanwhile went to no fd
	 * or to the one being replaced: the new fd gets a call of its own. */
	{
		int call2 = eventfd(0, EFD_CLOEXEC);

		v = 1;
		CHECK_MSG(call2 >= 0 && acked_ok(s.fd, VU_SET_VRING_CALL, &v, 8, &call2, 1) &&
		          wait_readable(call2, 2000),
		          "a new call fd on a ring that has notified its driver gets one call");
		CHECK_MSG(acked_ok(s.fd, VU_SET_VRING_CALL, &v, 8, &call, 1) && wait_readable(call, 2000) &&
		          !wait_readable(call2, 100),
		          "the first fd back: a call to it, none more to the replaced one");
		close(call2);
	}

	/* Memory changes while the queue runs. */
	ms = (struct vu_mem_single){ 0, { 0x10000000, MEM_SIZE, UVA + 0x10000000, 0 } };
	CHECK_MSG(acked_ok(s.fd, VU_ADD_MEM_REG, &ms, sizeof(ms), &memfd2, 1), "ADD_MEM_REG while running");
	CHECK_MSG(nacked(s.fd, VU_ADD_MEM_REG, &ms, sizeof(ms), &memfd2, 1), "ADD_MEM_REG of the same range refused");
	ring_request(&r, "ping2", 0x10000000);
	eventfd_write(kick, 1);
	{
		const char *p2 = (const char *)g2.base;

		CHECK_MSG(wait_readable(call, 2000) && r.used->idx == 2 && strcmp(p2, "pong") == 0,
		          "reply written into the added region");
	}
	CHECK_MSG(acked_ok(s.fd, VU_REM_MEM_REG, &ms, sizeof(ms), NULL, 0), "REM_MEM_REG while running");
	CHECK_MSG(nacked(s.fd, VU_REM_MEM_REG, &ms, sizeof(ms), NULL, 0), "REM_MEM_REG of a removed region refused");
	ring_request(&r, "ping3", 0x10000000);
	eventfd_write(kick, 1);
	CHECK_MSG(wait_readable(err, 2000) && r.used->idx == 2,
	          "buffer in the removed region: queue broken, err fd signalled");

	vu_client_send(s.fd, VU_GET_VRING_BASE, 0, &(struct vu_vring_state){ 1, 0 }, 8, NULL, 0);
	CHECK_MSG(recv_reply(s.fd, &h, &st, sizeof(st)) == 0 && h.request == VU_GET_VRING_BASE && st.index == 1 &&
	          st.num == 2 && __atomic_load_n(&stopped_queues, __ATOMIC_SEQ_CST) == 1,
	          "GET_VRING_BASE stops the queue (queue_stop called), reports avail index 2");

	/* A VM pause: the ring resumes where it stopped; the driver is the same. */
	st = (struct vu_vring_state){ 1, 2 };
	CHECK_MSG(acked_ok(s.fd, VU_SET_VRING_BASE, &st, sizeof(st), NULL, 0) &&
	          __atomic_load_n(&device_resets, __ATOMIC_SEQ_CST) == 0,
	          "SET_VRING_BASE at the stop position (resume): no device reset");
	vu_client_send(s.fd, VU_GET_VRING_BASE, 0, &(struct vu_vring_state){ 1, 0 }, 8, NULL, 0);
	CHECK_MSG(recv_reply(s.fd, &h, &st, sizeof(st)) == 0 && st.num == 2,
	          "GET_VRING_BASE on the stopped ring reports 2 again");

	/* A guest reboot: the ring restarts at 0 for a new driver. */
	memset(r.base + DESC, 0, 0x3000);
	r.avail_idx = 0;
	st = (struct vu_vring_state){ 1, 0 };
	CHECK_MSG(acked_ok(s.fd, VU_SET_VRING_BASE, &st, sizeof(st), NULL, 0) &&
	          __atomic_load_n(&device_resets, __ATOMIC_SEQ_CST) == 1,
	          "SET_VRING_BASE at a new position after stop: reset called once");
	close(kick);
	kick = eventfd(0, EFD_CLOEXEC);
	v = 1;
	CHECK_MSG(acked_ok(s.fd, VU_SET_VRING_KICK, &v, 8, &kick, 1), "SET_VRING_KICK restarts the queue");
	ring_request(&r, "ping4", BUF + 0x1000);
	eventfd_write(kick, 1);
	CHECK_MSG(!wait_readable(call, 300), "call fd was closed by GET_VRING_BASE: no signal to the old one");
	CHECK_MSG(wait_count(&handled, 3) && r.used->idx == 1 && strcmp(last_request, "ping4") == 0,
	          "restarted queue (still enabled) processed the request");

	vu_dev_stop(dev);
	pthread_join(s.thread, NULL);
	CHECK_MSG(s.ret == 0 && __atomic_load_n(&stopped_queues, __ATOMIC_SEQ_CST) == 2,
	          "vu_dev_stop: serve returns 0 after the queue thread stopped");
	CHECK_MSG(__atomic_load_n(&device_resets, __ATOMIC_SEQ_CST) == 2,
	          "the end of the connection resets the device the new driver used");
	{
		char b;

		CHECK_MSG(read(s.fd, &b, 1) == 0, "connection closed by the device");
	}
	close(s.fd);
	vqf_frontend_mem_free(&g);
	vqf_frontend_mem_free(&g2);
	close(kick);
	close(call);
	close(err);
}

/* ---- Deferred completion: a consumer that answers "wait..." later ---- */

static void *deferred_token;          /* the one request held back */
static struct ferry_chan *deferred_chan;  /* its channel: the queue's */
static int deferred_cancels;

static uint32_t t_handle_deferring(void *ctx, const struct ferry_req *req)
{
	if (req->rd_cnt > 0 && req->rd[0].iov_len >= 4 &&
	    memcmp(req->rd[0].iov_base, "wait", 4) == 0) {
		__atomic_store_n(&deferred_chan, req->chan, __ATOMIC_RELEASE);
		__atomic_store_n(&deferred_token, req->token, __ATOMIC_RELEASE);
		return FERRY_DEFERRED;
	}
	return t_handle(ctx, req);
}

/* What a backend does on cancel: answers at once, here from this thread. */
static void t_queue_cancel(void *ctx)
{
	void *token = __atomic_exchange_n(&deferred_token, NULL, __ATOMIC_ACQ_REL);
	struct ferry_chan *chan = __atomic_load_n(&deferred_chan, __ATOMIC_ACQUIRE);

	__atomic_add_fetch(&deferred_cancels, 1, __ATOMIC_SEQ_CST);
	if (token)
		chan->complete(chan, token, "intr", 5, NULL, 0);
}

static const struct ferry_service deferring_ops = {
	.start = t_queue_start, .stop = t_queue_stop,
	.serve = t_handle_deferring, .cancel = t_queue_cancel,
};

/* As a deferred READ answers: a header, then data of its own (freed by
 * the transport) that lands right after it. */
static void *complete_from_thread(void *token)
{
	struct ferry_chan *chan = __atomic_load_n(&deferred_chan, __ATOMIC_ACQUIRE);

	chan->complete(chan, token, "do", 2, strdup("ne"), 3);
	return NULL;
}

/* Features, memory table, ring size, addresses and call fd for queue 1,
 * without protocol features (no acks); the kick fd, sent next, starts it. */
static bool queue1_prepare(int fd, int memfd, int call)
{
	struct vu_mem_table mt = { .nregions = 1 };
	struct vu_vring_state st = { 1, 8 };
	struct vu_vring_addr addr = { 1, 0, UVA + DESC, UVA + USED, UVA + AVAIL, 0 };
	uint64_t v = BIT(VIRTIO_F_VERSION_1);

	mt.regions[0] = (struct vu_mem_region){ GPA, MEM_SIZE, UVA, 0 };
	return vu_client_send(fd, VU_SET_FEATURES, 0, &v, 8, NULL, 0) == 0 &&
	       vu_client_send(fd, VU_SET_MEM_TABLE, 0, &mt, VU_MEM_TABLE_HDR_SIZE + 32, &memfd, 1) == 0 &&
	       vu_client_send(fd, VU_SET_VRING_NUM, 0, &st, sizeof(st), NULL, 0) == 0 &&
	       vu_client_send(fd, VU_SET_VRING_ADDR, 0, &addr, sizeof(addr), NULL, 0) == 0 &&
	       vu_client_send(fd, VU_SET_VRING_CALL, 0, &(uint64_t){ 1 }, 8, &call, 1) == 0;
}

/* Starts a test of one queue: a device with service h, guest memory
 * mapped as r, a session, and queue 1 set up without its kick fd, so
 * requests wait in the ring until the test sends it. */
static void single_queue_begin(const struct ferry_service *h, struct vu_fs_config *cfg,
			       struct vu_dev **dev, struct session *s, struct ring *r,
			       int *memfd, int *kick, int *call)
{
	struct vqf_frontend_mem g;

	guest_new(&g);
	*memfd = g.memfd;
	*kick = eventfd(0, EFD_CLOEXEC);
	*call = eventfd(0, EFD_CLOEXEC);
	if (*kick < 0 || *call < 0 || vu_dev_new(dev, cfg, h, cfg) < 0)
		exit(1);
	ring_at(r, g.base, 0);
	session_start(s, *dev);
	CHECK_MSG(queue1_prepare(s->fd, *memfd, *call),
	          "queue 1 set up, no kick fd yet: requests wait until all are in the ring");
}

/* Ends a test that single_queue_begin started: the frontend leaves in
 * order and everything is released. */
static void single_queue_end(struct session *s, struct vu_dev *dev, struct ring *r,
			     int memfd, int kick, int call)
{
	CHECK_MSG(session_end(s) == 0, "orderly end");
	vu_dev_free(dev);
	vqf_frontend_mem_free(&(struct vqf_frontend_mem){ memfd, r->base, MEM_SIZE });
	close(kick);
	close(call);
}

static void test_deferred(void)
{
	struct vu_fs_config cfg = { .tag = "myfs", .num_request_queues = 1 };
	struct vu_dev *dev;
	struct session s;
	struct ring r = { 0 };
	struct vu_vring_state st;
	struct vu_msg_hdr h;
	pthread_t completer;
	void *token;
	struct vqf_frontend_mem g;
	int kick = eventfd(0, EFD_CLOEXEC), call = eventfd(0, EFD_CLOEXEC);
	int handled_before = __atomic_load_n(&handled, __ATOMIC_SEQ_CST);
	int stopped_before = __atomic_load_n(&stopped_queues, __ATOMIC_SEQ_CST);
	int memfd;

	printf("-- deferred requests: no stall, completion from another thread, cancel at stop\n");
	guest_new(&g);
	memfd = g.memfd;
	if (kick < 0 || call < 0 || vu_dev_new(&dev, &cfg, &deferring_ops, &cfg) < 0)
		exit(1);
	ring_at(&r, g.base, 0);

	session_start(&s, dev);
	CHECK_MSG(queue1_prepare(s.fd, memfd, call) &&
	          vu_client_send(s.fd, VU_SET_VRING_KICK, 0, &(uint64_t){ 1 }, 8, &kick, 1) == 0,
	          "queue 1 set up without protocol features (enabled at start)");

	ring_request(&r, "wait1", BUF + 0x1000);       /* head 0 */
	ring_request(&r, "ping", BUF + 0x1100);        /* head 2 */
	eventfd_write(kick, 1);
	CHECK_MSG(wait_readable(call, 2000) && wait_count(&handled, handled_before + 1) &&
	          r.used->idx == 1 && r.used->ring[0].id == 2 &&
	          strcmp((char *)r.base + BUF + 0x1100, "pong") == 0,
	          "a deferred request does not hold back the one behind it");
	token = __atomic_load_n(&deferred_token, __ATOMIC_ACQUIRE);
	__atomic_store_n(&deferred_token, NULL, __ATOMIC_RELEASE);
	CHECK_MSG(token && pthread_create(&completer, NULL, complete_from_thread, token) == 0 &&
	          pthread_join(completer, NULL) == 0 && wait_readable(call, 2000) &&
	          r.used->idx == 2 && r.used->ring[1].id == 0 && r.used->ring[1].len == 5 &&
	          strcmp((char *)r.base + BUF + 0x1000, "done") == 0,
	          "completed from another thread: used entry for head 0, reply and data written");

	ring_request(&r, "wait2", BUF + 0x1200);       /* head 4 */
	eventfd_write(kick, 1);
	for (int i = 0; i < 200 && !__atomic_load_n(&deferred_token, __ATOMIC_ACQUIRE); i++)
		usleep(10000);
	CHECK_MSG(__atomic_load_n(&deferred_token, __ATOMIC_ACQUIRE) && r.used->idx == 2,
	          "second request deferred");
	vu_client_send(s.fd, VU_GET_VRING_BASE, 0, &(struct vu_vring_state){ 1, 0 }, 8, NULL, 0);
	CHECK_MSG(recv_reply(s.fd, &h, &st, sizeof(st)) == 0 && st.num == 3 &&
	          __atomic_load_n(&deferred_cancels, __ATOMIC_SEQ_CST) == 1 &&
	          r.used->idx == 3 && r.used->ring[2].id == 4 &&
	          strcmp((char *)r.base + BUF + 0x1200, "intr") == 0 &&
	          __atomic_load_n(&stopped_queues, __ATOMIC_SEQ_CST) == stopped_before + 1,
	          "GET_VRING_BASE cancels the deferred request and pushes its reply first");
	single_queue_end(&s, dev, &r, memfd, kick, call);
}

/* The used index as each serve() call saw it: a request handled after a
 * publish sees the earlier replies already in the ring. */
static struct vring_used *watched_used;
static int watch_base;
static uint16_t seen_used_idx[8];

static uint32_t t_handle_watching(void *ctx, const struct ferry_req *req)
{
	int n = __atomic_load_n(&handled, __ATOMIC_ACQUIRE) - watch_base;
	uint32_t len;

	if (n >= 0 && n < 8)
		seen_used_idx[n] = __atomic_load_n(&watched_used->idx, __ATOMIC_ACQUIRE);
	len = t_handle(ctx, req);
	/* "bigread" answers like a READ: its reply fills the buffer given. */
	if (len && !strcmp(last_request, "bigread"))
		len = (uint32_t)req->wr[0].iov_len;
	return len;
}

static const struct ferry_service watching_ops = {
	.start = t_queue_start, .stop = t_queue_stop,
	.serve = t_handle_watching,
};

enum mid_batch_case {
	BIG_WRITE_DRIVER_AWAKE, /* a 64 KiB WRITE, the driver polling (no interrupt wanted) */
	BIG_WRITE_DRIVER_ASLEEP, /* the same, the driver waiting for an interrupt */
	BIG_READ,               /* a reply of 128 KiB (a READ's data), the driver waiting */
};

/*
 * Head 0: a 64 KiB request (a WRITE's payload), or a small one whose reply
 * is 128 KiB (a READ's data); heads 2, 4 and 6: small ones behind it, all
 * popped in one batch: the driver has 4 in flight. A big reply goes out at
 * once; so does a big WRITE's to a driver that polls, while one that
 * sleeps is woken with one request left (a call per WRITE saved); small
 * replies go in twos.
 */
static void test_publish_mid_batch(enum mid_batch_case c)
{
	static const char *const what[] = {
		[BIG_WRITE_DRIVER_AWAKE] = "a 64 KiB WRITE's reply at low depth at once to a polling driver",
		[BIG_WRITE_DRIVER_ASLEEP] = "a 64 KiB WRITE's reply to a sleeping driver with one request left",
		[BIG_READ] = "a 128 KiB reply at once",
	};
	struct vu_fs_config cfg = { .tag = "myfs", .num_request_queues = 1 };
	struct vu_dev *dev;
	struct session s;
	struct ring r = { 0 };
	int memfd, kick, call;
	bool held = c == BIG_WRITE_DRIVER_ASLEEP;

	printf("-- a batch publishes %s, and every half of the driver's depth, not only at "
	       "its end\n", what[c]);
	watch_base = __atomic_load_n(&handled, __ATOMIC_SEQ_CST);
	single_queue_begin(&watching_ops, &cfg, &dev, &s, &r, &memfd, &kick, &call);
	watched_used = r.used;
	if (c == BIG_WRITE_DRIVER_AWAKE)
		r.avail->flags = VRING_AVAIL_F_NO_INTERRUPT;

	if (c == BIG_READ) {
		ring_request(&r, "bigread", 0x40000);
		r.desc[1].len = 128 * 1024;
	} else {
		ring_request(&r, "big", BUF + 0x1000);
		r.desc[0].addr = 0x40000;
		r.desc[0].len = 64 * 1024;
		memcpy(r.base + 0x40000, "big", 4);
	}
	ring_request(&r, "ping", BUF + 0x1100);
	ring_request(&r, "ping", BUF + 0x1200);
	ring_request(&r, "ping", BUF + 0x1300);
	/* A polling driver gets no call: it only sees the used index move. */
	CHECK_MSG(vu_client_send(s.fd, VU_SET_VRING_KICK, 0, &(uint64_t){ 1 }, 8, &kick, 1) == 0 &&
	          eventfd_write(kick, 1) == 0 &&
	          (c == BIG_WRITE_DRIVER_AWAKE || wait_readable(call, 2000)) &&
	          wait_count(&handled, watch_base + 4),
	          "four requests handled");
	/* The last reply is published after serve() counted it. */
	for (int i = 0; i < 200 && __atomic_load_n(&r.used->idx, __ATOMIC_ACQUIRE) != 4; i++)
		usleep(10000);
	CHECK_MSG(r.used->idx == 4, "four replies in the used ring");
	if (held)
		CHECK_MSG(seen_used_idx[0] == 0 && seen_used_idx[1] == 0 && seen_used_idx[2] == 0,
		          "the big WRITE's reply was held while more than one request was left "
		          "(used idx seen: %u %u %u)", seen_used_idx[0], seen_used_idx[1],
		          seen_used_idx[2]);
	else
		CHECK_MSG(seen_used_idx[0] == 0 && seen_used_idx[1] == 1 && seen_used_idx[2] == 1,
		          "the big request's reply was published before the next was handled, the "
		          "first small one's was not (used idx seen: %u %u %u)", seen_used_idx[0],
		          seen_used_idx[1], seen_used_idx[2]);
	CHECK_MSG(seen_used_idx[3] == 3,
	          "at depth 4 %s published before the last request was handled, not at the "
	          "end of the batch (used idx seen: %u)",
	          held ? "the first three replies were" : "the second small reply was",
	          seen_used_idx[3]);
	single_queue_end(&s, dev, &r, memfd, kick, call);
}

/* While it handles "big", the driver moves avail->idx past the ring. */
static struct vring_avail *moved_avail;

static uint32_t t_handle_moving(void *ctx, const struct ferry_req *req)
{
	uint32_t len = t_handle(ctx, req);

	if (!strcmp(last_request, "big"))
		__atomic_store_n(&moved_avail->idx, (uint16_t)(moved_avail->idx + 100),
				 __ATOMIC_RELEASE);
	return len;
}

static const struct ferry_service moving_ops = {
	.start = t_queue_start, .stop = t_queue_stop,
	.serve = t_handle_moving,
};

/* The second look at the ring before waking a sleeping driver for a large
 * WRITE is a read of guest data like any other: a driver that moved
 * avail->idx by more than the ring meanwhile breaks the queue there, and
 * nothing more is published on it. */
static void test_publish_look_breaks(void)
{
	struct vu_fs_config cfg = { .tag = "myfs", .num_request_queues = 1 };
	struct vu_dev *dev;
	struct session s;
	struct ring r = { 0 };
	int memfd, kick, call, err = eventfd(0, EFD_CLOEXEC);
	int base = __atomic_load_n(&handled, __ATOMIC_SEQ_CST);

	printf("-- a large WRITE's second look at the ring checks avail->idx\n");
	single_queue_begin(&moving_ops, &cfg, &dev, &s, &r, &memfd, &kick, &call);
	moved_avail = r.avail;
	ring_request(&r, "big", BUF + 0x1000);
	r.desc[0].addr = 0x40000;
	r.desc[0].len = 64 * 1024;
	memcpy(r.base + 0x40000, "big", 4);
	ring_request(&r, "ping", BUF + 0x1100);
	CHECK_MSG(err >= 0 && vu_client_send(s.fd, VU_SET_VRING_ERR, 0, &(uint64_t){ 1 }, 8, &err, 1) == 0 &&
	          vu_client_send(s.fd, VU_SET_VRING_KICK, 0, &(uint64_t){ 1 }, 8, &kick, 1) == 0 &&
	          eventfd_write(kick, 1) == 0 && wait_readable(err, 2000),
	          "avail->idx moved by 100 on an 8-entry ring while the WRITE was written: "
	          "queue broken, err fd signalled");
	CHECK_MSG(__atomic_load_n(&handled, __ATOMIC_SEQ_CST) == base + 1 && r.used->idx == 0,
	          "the WRITE was handled, the request behind it was not, and nothing was published "
	          "(%d handled, used idx %u)", __atomic_load_n(&handled, __ATOMIC_SEQ_CST) - base,
	          r.used->idx);
	single_queue_end(&s, dev, &r, memfd, kick, call);
	close(err);
}

/* What serve_run was offered, call by call: how many, and the first
 * one's text; it serves two at a time. */
static struct {
	unsigned calls, offered[8], singles;
	char first[8][16];
} runs_seen;

static unsigned t_handle_run(void *ctx, const struct ferry_req *const *reqs, unsigned n,
			     uint32_t *lens)
{
	unsigned c = runs_seen.calls++, serve = n < 2 ? n : 2;

	if (c < 8) {
		runs_seen.offered[c] = n;
		snprintf(runs_seen.first[c], sizeof(runs_seen.first[c]), "%.*s",
			 (int)(reqs[0]->rd[0].iov_len < 15 ? reqs[0]->rd[0].iov_len : 15),
			 (const char *)reqs[0]->rd[0].iov_base);
	}
	for (unsigned i = 0; i < serve; i++)
		lens[i] = t_handle(ctx, reqs[i]);
	return serve;
}

static uint32_t t_handle_single(void *ctx, const struct ferry_req *req)
{
	runs_seen.singles++;
	return t_handle(ctx, req);
}

static const struct ferry_service run_ops = {
	.start = t_queue_start, .stop = t_queue_stop,
	.serve = t_handle_single, .serve_run = t_handle_run,
};

/* A request whose readable part is 2 KiB (a small WRITE): text, then
 * zeros, at data_gpa. */
static void ring_data_request(struct ring *r, const char *text, uint64_t data_gpa,
			      uint64_t wr_gpa)
{
	uint16_t head = (uint16_t)((r->avail_idx * 2) % 8);

	ring_request(r, text, wr_gpa);
	memset(r->base + data_gpa, 0, 2048);
	strcpy((char *)r->base + data_gpa, text);
	r->desc[head].addr = data_gpa;
	r->desc[head].len = 2048;
}

/* Requests that carry data in, with others behind them, are offered to
 * handle_run together with those behind; what it does not serve is
 * offered again; a request with nothing behind it goes to handle. */
static void test_runs(void)
{
	struct vu_fs_config cfg = { .tag = "myfs", .num_request_queues = 1 };
	struct vu_dev *dev;
	struct session s;
	struct ring r = { 0 };
	int memfd, kick, call;
	unsigned base = __atomic_load_n(&handled, __ATOMIC_SEQ_CST);
	bool ids = true;

	printf("-- runs: requests with data and those behind them go to handle_run together\n");
	memset(&runs_seen, 0, sizeof(runs_seen));
	single_queue_begin(&run_ops, &cfg, &dev, &s, &r, &memfd, &kick, &call);
	ring_data_request(&r, "dataA", 0x40000, BUF + 0x1000);
	ring_data_request(&r, "dataB", 0x41000, BUF + 0x1100);
	ring_request(&r, "ping", BUF + 0x1200);
	ring_data_request(&r, "dataC", 0x42000, BUF + 0x1300);
	CHECK_MSG(vu_client_send(s.fd, VU_SET_VRING_KICK, 0, &(uint64_t){ 1 }, 8, &kick, 1) == 0 &&
	          eventfd_write(kick, 1) == 0 && wait_readable(call, 2000) &&
	          wait_count(&handled, base + 4),
	          "four requests handled");
	for (int i = 0; i < 200 && __atomic_load_n(&r.used->idx, __ATOMIC_ACQUIRE) != 4; i++)
		usleep(10000);
	for (unsigned i = 0; i < 4; i++)
		ids = ids && r.used->ring[i].id == i * 2 && r.used->ring[i].len == 5;
	CHECK_MSG(r.used->idx == 4 && ids, "four replies, in ring order, each with its length");
	CHECK_MSG(runs_seen.calls == 2 && runs_seen.offered[0] == 3 &&
	          !strcmp(runs_seen.first[0], "dataA") && runs_seen.offered[1] == 1 &&
	          !strcmp(runs_seen.first[1], "ping"),
	          "handle_run offered dataA with the two behind it (the run stops after the "
	          "first without data), then what it left (%u calls: %u from %s, %u from %s)",
	          runs_seen.calls, runs_seen.offered[0], runs_seen.first[0],
	          runs_seen.offered[1], runs_seen.first[1]);
	CHECK_MSG(runs_seen.singles == 1, "the last, with nothing behind it, went to handle (%u)",
	          runs_seen.singles);
	single_queue_end(&s, dev, &r, memfd, kick, call);
}

/* Sets queue q up on rings at off (gpa == offset into the memfd) and
 * enables it; true when every step was acked. */
static bool queue_setup(int fd, uint32_t q, uint64_t off, int kick, int call, int err)
{
	struct vu_vring_state st = { q, 8 };
	struct vu_vring_addr addr = { q, 0, UVA + off + DESC, UVA + off + USED,
				   UVA + off + AVAIL, 0 };
	uint64_t v = q;

	return acked_ok(fd, VU_SET_VRING_NUM, &st, sizeof(st), NULL, 0) &&
	       acked_ok(fd, VU_SET_VRING_BASE, &(struct vu_vring_state){ q, 0 }, sizeof(st), NULL, 0) &&
	       acked_ok(fd, VU_SET_VRING_ADDR, &addr, sizeof(addr), NULL, 0) &&
	       acked_ok(fd, VU_SET_VRING_CALL, &v, 8, &call, 1) && acked_ok(fd, VU_SET_VRING_ERR, &v, 8, &err, 1) &&
	       acked_ok(fd, VU_SET_VRING_KICK, &v, 8, &kick, 1) &&
	       acked_ok(fd, VU_SET_VRING_ENABLE, &(struct vu_vring_state){ q, 1 }, sizeof(st), NULL, 0);
}

/* A guest that breaks the rules on one queue loses that queue only: the
 * other keeps answering, and the connection stays up. */
static long long tv_us(const struct timeval *tv)
{
	return (long long)tv->tv_sec * 1000000 + tv->tv_usec;
}

static void test_broken_queue_isolated(void)
{
	struct vu_fs_config cfg = { .num_request_queues = 2 };
	struct vu_dev *dev;
	const uint64_t off2 = 0x40000;
	struct session s;
	struct ring r1 = { 0 }, r2 = { 0 };
	struct vu_mem_table mt = { 0 };
	uint64_t v;
	struct vqf_frontend_mem g;
	int kick1 = eventfd(0, EFD_CLOEXEC), call1 = eventfd(0, EFD_CLOEXEC);
	int err1 = eventfd(0, EFD_CLOEXEC), kick2 = eventfd(0, EFD_CLOEXEC);
	int call2 = eventfd(0, EFD_CLOEXEC), err2 = eventfd(0, EFD_CLOEXEC);
	int pipefd[2];
	int base_handled;
	uint8_t *base;
	int memfd;

	printf("-- a broken queue does not take the other queue down\n");
	guest_new(&g);
	memfd = g.memfd;
	base = g.base;
	if (pipe2(pipefd, O_CLOEXEC) < 0 || vu_dev_new(&dev, &cfg, &ops, &cfg) < 0)
		exit(1);
	ring_at(&r1, base, 0);
	ring_at(&r2, base, off2);

	session_start(&s, dev);
	v = BIT(VU_PROTO_F_REPLY_ACK) | BIT(VU_PROTO_F_MQ) | BIT(VU_PROTO_F_CONFIGURE_MEM_SLOTS);
	CHECK_MSG(acked_ok(s.fd, VU_SET_PROTOCOL_FEATURES, &v, 8, NULL, 0), "SET_PROTOCOL_FEATURES");
	v = BIT(VIRTIO_F_VERSION_1) | BIT(VU_F_PROTOCOL_FEATURES);
	CHECK_MSG(acked_ok(s.fd, VU_SET_FEATURES, &v, 8, NULL, 0), "SET_FEATURES");
	mt.nregions = 1;
	mt.regions[0] = (struct vu_mem_region){ GPA, MEM_SIZE, UVA, 0 };
	CHECK_MSG(nacked(s.fd, VU_SET_MEM_TABLE, &mt, VU_MEM_TABLE_HDR_SIZE + 32, &kick1, 1), "SET_MEM_TABLE with an eventfd as memory refused");
	CHECK_MSG(nacked(s.fd, VU_SET_MEM_TABLE, &mt, VU_MEM_TABLE_HDR_SIZE + 32, &pipefd[0], 1), "SET_MEM_TABLE with a pipe as memory refused");
	CHECK_MSG(nacked(s.fd, VU_ADD_MEM_REG, &(struct vu_mem_single){ 0, { 0x10000000, 0, UVA + 0x10000000, 0 } },
		         sizeof(struct vu_mem_single), &memfd, 1), "ADD_MEM_REG of zero size refused");
	CHECK_MSG(acked_ok(s.fd, VU_SET_MEM_TABLE, &mt, VU_MEM_TABLE_HDR_SIZE + 32, &memfd, 1), "SET_MEM_TABLE");
	v = 200;
	CHECK_MSG(nacked(s.fd, VU_SET_VRING_KICK, &v, 8, &kick1, 1), "SET_VRING_KICK for queue 200 of 3 refused");
	CHECK_MSG(nacked(s.fd, VU_SET_VRING_ENABLE, &(struct vu_vring_state){ 5, 1 }, sizeof(struct vu_vring_state), NULL, 0),
	          "SET_VRING_ENABLE for queue 5 of 3 refused");
	CHECK_MSG(queue_setup(s.fd, 1, 0, kick1, call1, err1), "queue 1 started");
	CHECK_MSG(queue_setup(s.fd, 2, off2, kick2, call2, err2), "queue 2 started");

	base_handled = __atomic_load_n(&handled, __ATOMIC_SEQ_CST);
	/* Queue 1: a chain whose buffer lies outside guest memory. */
	ring_request(&r1, "bad", MEM_SIZE + 0x1000);
	eventfd_write(kick1, 1);
	CHECK_MSG(wait_readable(err1, 2000) && r1.used->idx == 0,
	          "queue 1: buffer outside guest memory breaks it, err fd signalled, nothing used");
	/* Queue 2 still answers, twice. */
	ring_request(&r2, "still-here", off2 + BUF + 0x1000);
	eventfd_write(kick2, 1);
	CHECK_MSG(wait_readable(call2, 2000) && wait_count(&handled, base_handled + 1) && r2.used->idx == 1 &&
	          strcmp(last_request, "still-here") == 0 && last_queue_index == 2,
	          "queue 2 answers after queue 1 broke");
	/* Queue 1 next: a head index past the ring. */
	r1.avail->ring[r1.avail_idx % 8] = 99;
	r1.avail_idx++;
	__atomic_store_n(&r1.avail->idx, r1.avail_idx, __ATOMIC_RELEASE);
	eventfd_write(kick1, 1);
	ring_request(&r2, "again", off2 + BUF + 0x1000);
	eventfd_write(kick2, 1);
	CHECK_MSG(wait_readable(call2, 2000) && wait_count(&handled, base_handled + 2) && r2.used->idx == 2 &&
	          r1.used->idx == 0, "queue 2 answers again; broken queue 1 stays untouched");
	/* Queue 0 with a regular file for its kick: always readable, never
	 * an eventfd's 8 bytes. Its thread must stop, not spin. */
	{
		char kpath[] = "/tmp/ferry-kick-XXXXXX";
		int kfile = mkstemp(kpath);
		int call0 = eventfd(0, EFD_CLOEXEC), err0 = eventfd(0, EFD_CLOEXEC);
		struct rusage ru0, ru1;

		if (kfile >= 0)
			unlink(kpath);
		getrusage(RUSAGE_SELF, &ru0);
		CHECK_MSG(kfile >= 0 && call0 >= 0 && err0 >= 0 &&
		          queue_setup(s.fd, 0, 0x80000, kfile, call0, err0) &&
		          wait_readable(err0, 2000),
		          "queue 0 with a regular file as kick fd: broken, err fd signalled");
		usleep(300000);
		getrusage(RUSAGE_SELF, &ru1);
		CHECK_MSG(tv_us(&ru1.ru_utime) + tv_us(&ru1.ru_stime) -
		          tv_us(&ru0.ru_utime) - tv_us(&ru0.ru_stime) < 200000,
		          "and nothing spins on it (%lld us of CPU in ~0.3 s)",
		          (long long)(tv_us(&ru1.ru_utime) + tv_us(&ru1.ru_stime) -
				      tv_us(&ru0.ru_utime) - tv_us(&ru0.ru_stime)));
		ring_request(&r2, "after-kick0", off2 + BUF + 0x1000);
		eventfd_write(kick2, 1);
		CHECK_MSG(wait_readable(call2, 2000) && wait_count(&handled, base_handled + 3) &&
		          r2.used->idx == 3, "queue 2 still answers");
		close(kfile); close(call0); close(err0);
	}
	CHECK_MSG(get_u64(s.fd, VU_GET_FEATURES) & BIT(VIRTIO_F_VERSION_1), "the connection still answers (GET_FEATURES)");
	CHECK_MSG(session_end(&s) == 0, "frontend leaves: orderly end");
	vu_dev_free(dev);
	vqf_frontend_mem_free(&g);
	close(pipefd[0]);
	close(pipefd[1]);
	close(kick1); close(call1); close(err1);
	close(kick2); close(call2); close(err2);
}

/* Stopping a queue whose thread is busy with kicks and control wake-ups:
 * the stop signal must never be swallowed by the thread's own wake-up
 * handling, or GET_VRING_BASE waits for the thread forever. The loss
 * needs a preemption between two instructions of the queue thread, so
 * this stress only sometimes catches it; the deterministic witness is
 * fuzz/corpus/vhost_user/stop-lost, which hung fuzz_vhost_user within
 * seconds when replayed with -runs=20000 before the fix. */
static atomic_bool kicker_stop;

static void *kicker(void *arg)
{
	int fd = *(int *)arg;

	while (!atomic_load(&kicker_stop))
		eventfd_write(fd, 1);
	return NULL;
}

static void test_stop_while_kicked(void)
{
	struct vu_fs_config cfg = { .num_request_queues = 1 };
	struct vu_dev *dev;
	struct session s;
	struct vu_mem_table mt = { 0 };
	struct vu_vring_state st;
	struct vu_msg_hdr h;
	pthread_t kth;
	uint64_t v;
	struct vqf_frontend_mem g;
	int kick = eventfd(0, EFD_CLOEXEC), call = eventfd(0, EFD_CLOEXEC);
	int err = eventfd(0, EFD_CLOEXEC);
	int i, stopped = 0;
	int memfd;

	printf("-- stopping a queue while kicks keep its thread busy\n");
	guest_new(&g);
	memfd = g.memfd;
	if (kick < 0 || call < 0 || err < 0 || vu_dev_new(&dev, &cfg, &ops, &cfg) < 0)
		exit(1);
	session_start(&s, dev);
	v = BIT(VU_PROTO_F_REPLY_ACK) | BIT(VU_PROTO_F_MQ);
	mt.nregions = 1;
	mt.regions[0] = (struct vu_mem_region){ GPA, MEM_SIZE, UVA, 0 };
	CHECK_MSG(acked_ok(s.fd, VU_SET_PROTOCOL_FEATURES, &v, 8, NULL, 0) &&
	          acked_ok(s.fd, VU_SET_FEATURES, &(uint64_t){ BIT(VIRTIO_F_VERSION_1) | BIT(VU_F_PROTOCOL_FEATURES) }, 8, NULL, 0) &&
	          acked_ok(s.fd, VU_SET_MEM_TABLE, &mt, VU_MEM_TABLE_HDR_SIZE + 32, &memfd, 1) &&
	          queue_setup(s.fd, 1, 0, kick, call, err), "queue 1 started");
	atomic_store(&kicker_stop, false);
	pthread_create(&kth, NULL, kicker, &kick);
	for (i = 0; i < 3000; i++) {
		/* ENABLE wakes the thread through its control fd; the stop
		 * right behind it must not be lost in the same wake-up. */
		vu_client_send(s.fd, VU_SET_VRING_ENABLE, 0, &(struct vu_vring_state){ 1, 1 }, 8, NULL, 0);
		vu_client_send(s.fd, VU_GET_VRING_BASE, 0, &(struct vu_vring_state){ 1, 0 }, 8, NULL, 0);
		if (recv_reply(s.fd, &h, &st, sizeof(st)) != 0 || h.request != VU_GET_VRING_BASE)
			break;
		stopped++;
		v = 1;
		if (!acked_ok(s.fd, VU_SET_VRING_KICK, &v, 8, &kick, 1))
			break;
	}
	atomic_store(&kicker_stop, true);
	pthread_join(kth, NULL);
	CHECK_MSG(stopped == 3000, "3000 stops of a busy queue, each answered within 2 s (%d)",
	          stopped);
	if (stopped != 3000) {
		/* The device thread is stuck joining the queue thread. */
		printf("FAIL: stuck queue thread\n");
		exit(1);
	}
	CHECK_MSG(session_end(&s) == 0, "orderly end");
	vu_dev_free(dev);
	vqf_frontend_mem_free(&g);
	close(kick);
	close(call);
	close(err);
}

int main(void)
{
	struct vu_fs_config cfg = { .tag = "myfs", .num_request_queues = 2,
				    .max_request_queues = 4 };
	struct vu_dev *dev;
	unsigned fds_before, fds_after;
	int ctx_token;

	ferry_log_init(getenv("T_DEBUG") ? LOG_LVL_DEBUG : LOG_LVL_ERROR, false);
	{
		struct vu_fs_config bad = { .tag = "0123456789012345678901234567890123456",
					    .num_request_queues = 1 };

		CHECK_MSG(vu_dev_new(&dev, &bad, &ops, NULL) == -EINVAL, "37-byte tag refused");
		bad.tag = NULL;
		CHECK_MSG(vu_dev_new(&dev, &bad, &ops, NULL) == 0, "no tag accepted (QEMU has its own)");
		{
			uint64_t v = offered_protocol_features(dev);

			CHECK_MSG(v != UINT64_MAX && !(v & BIT(VU_PROTO_F_CONFIG)) && (v & BIT(VU_PROTO_F_MQ)),
			          "without a tag, PROTOCOL_F_CONFIG is not offered (session ended in order)");
		}
		vu_dev_free(dev);
		bad.num_request_queues = 0;
		CHECK_MSG(vu_dev_new(&dev, &bad, &ops, NULL) == -EINVAL, "zero request queues refused");
		bad.num_request_queues = 2;
		bad.max_request_queues = 1;
		CHECK_MSG(vu_dev_new(&dev, &bad, &ops, NULL) == -EINVAL,
		          "a maximum below the announced count refused");
	}
	if (vu_dev_new(&dev, &cfg, &ops, &ctx_token) < 0) {
		fprintf(stderr, "vu_dev_new failed\n");
		return 1;
	}
	fds_before = count_fds();
	test_control_messages(dev);
	test_disconnects(dev);
	fds_after = count_fds();
	CHECK_MSG(fds_after == fds_before, "no fd leaked by malformed messages (%u -> %u)",
	          fds_before, fds_after);
	test_live_queue(dev);
	fds_after = count_fds();
	CHECK_MSG(fds_after == fds_before, "no fd leaked by a live session (%u -> %u)",
	          fds_before, fds_after);
	vu_dev_free(dev);
	test_deferred();
	test_publish_mid_batch(BIG_WRITE_DRIVER_AWAKE);
	test_publish_mid_batch(BIG_WRITE_DRIVER_ASLEEP);
	test_publish_mid_batch(BIG_READ);
	test_publish_look_breaks();
	test_runs();
	fds_before = count_fds();
	test_broken_queue_isolated();
	test_stop_while_kicked();
	fds_after = count_fds();
	CHECK_MSG(fds_after == fds_before, "no fd leaked around a broken or busy queue (%u -> %u)",
	          fds_before, fds_after);
	return check_result();
}
