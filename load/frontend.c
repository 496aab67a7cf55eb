/* ferryfs-load's vhost-user frontend (the VMM's side): messages, connection, negotiation, ring setup. */
#include "frontend_wire.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <linux/virtio_config.h>

int fe_send_msg(struct fe_dev *d, uint32_t req, uint32_t flags, const void *payload,
		uint32_t size, int fd)
{
	struct vu_msg_hdr hdr = { .request = req,
				  .flags = VHOST_USER_VERSION | flags,
				  .size = size };
	struct iovec iov[2] = { { &hdr, sizeof(hdr) },
				{ (void *)payload, size } };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = size ? 2 : 1 };
	ssize_t n;

	if (fd >= 0) {
		struct cmsghdr *c;

		memset(&cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf.buf;
		mh.msg_controllen = sizeof(cbuf.buf);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	do {
		n = sendmsg(d->sock, &mh, MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if ((size_t)n != sizeof(hdr) + size)
		return -EIO;
	return 0;
}

int fe_recv_all(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = recv(fd, p, len, MSG_WAITALL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ECONNRESET;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Reads the reply to req; payload must be exactly size bytes, as every reply
 * we ask for has a fixed size (a u64). */
int fe_recv_reply(struct fe_dev *d, uint32_t req, void *payload, uint32_t size)
{
	struct vu_msg_hdr hdr;
	int ret;

	ret = fe_recv_all(d->sock, &hdr, sizeof(hdr));
	if (ret)
		return ret;
	if (hdr.request != req || !(hdr.flags & VHOST_USER_REPLY_MASK) ||
	    hdr.size != size) {
		fprintf(stderr, "vhost-user: bad reply to %u: request %u flags %#x size %u\n",
			req, hdr.request, hdr.flags, hdr.size);
		return -EPROTO;
	}
	return fe_recv_all(d->sock, payload, size);
}

bool fe_has_proto(const struct fe_dev *d, unsigned bit)
{
	return d->protocol_features & (1ull << bit);
}

/* Sends a message that has no reply of its own; with REPLY_ACK negotiated it
 * asks for the ack so that a backend rejecting it is caught here, at once,
 * rather than as a hang later. */
int fe_send_cmd(struct fe_dev *d, uint32_t req, const void *payload, uint32_t size, int fd)
{
	bool ack = fe_has_proto(d, PROTO_F_REPLY_ACK);
	uint64_t status;
	int ret;

	ret = fe_send_msg(d, req, ack ? VHOST_USER_NEED_REPLY : 0, payload, size, fd);
	if (ret || !ack)
		return ret;
	ret = fe_recv_reply(d, req, &status, sizeof(status));
	if (ret)
		return ret;
	if (status) {
		fprintf(stderr, "vhost-user: backend rejected request %u (status %llu)\n",
			req, (unsigned long long)status);
		return -EPROTO;
	}
	return 0;
}

int fe_get_u64(struct fe_dev *d, uint32_t req, uint64_t *val)
{
	int ret = fe_send_msg(d, req, 0, NULL, 0, -1);

	if (ret)
		return ret;
	return fe_recv_reply(d, req, val, sizeof(*val));
}

int fe_connect(struct fe_dev *d, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int ret;

	memset(d, 0, sizeof(*d));
	d->memfd = -1;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	d->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (d->sock < 0)
		return -errno;
	if (connect(d->sock, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		ret = -errno;
		goto err_close;
	}
	return 0;

err_close:
	close(d->sock);
	d->sock = -1;
	return ret;
}

int fe_negotiate(struct fe_dev *d, int event_idx)
{
	uint64_t want;
	int ret;

	ret = fe_get_u64(d, VHOST_USER_GET_FEATURES, &d->dev_features);
	if (ret)
		goto out;
	if (!(d->dev_features & (1ull << VIRTIO_F_VERSION_1))) {
		fprintf(stderr, "vhost-user: backend lacks VIRTIO_F_VERSION_1\n");
		ret = -ENOTSUP;
		goto out;
	}
	if (event_idx == 1 && !(d->dev_features & (1ull << VIRTIO_RING_F_EVENT_IDX))) {
		fprintf(stderr, "vhost-user: --event-idx on, but backend lacks VIRTIO_RING_F_EVENT_IDX\n");
		ret = -ENOTSUP;
		goto out;
	}
	/* What a Linux guest's virtio-fs driver acks: the ring features it
	 * implements, nothing device-specific (virtio-fs has none it uses). */
	want = (1ull << VIRTIO_F_VERSION_1) | (1ull << VIRTIO_RING_F_INDIRECT_DESC);
	if (event_idx)
		want |= 1ull << VIRTIO_RING_F_EVENT_IDX;
	if (d->want_packed) {
		if (!(d->dev_features & (1ull << VIRTIO_F_RING_PACKED))) {
			fprintf(stderr, "vhost-user: --packed, but backend lacks VIRTIO_F_RING_PACKED\n");
			ret = -ENOTSUP;
			goto out;
		}
		want |= 1ull << VIRTIO_F_RING_PACKED;
	}
	d->features = d->dev_features & want;

	if (d->dev_features & (1ull << VHOST_USER_F_PROTOCOL_FEATURES)) {
		d->features |= 1ull << VHOST_USER_F_PROTOCOL_FEATURES;
		ret = fe_get_u64(d, VHOST_USER_GET_PROTOCOL_FEATURES,
			      &d->dev_protocol_features);
		if (ret)
			goto out;
		want = (1ull << PROTO_F_MQ) | (1ull << PROTO_F_REPLY_ACK) |
		       (1ull << PROTO_F_CONFIG);
		if (d->want_device_state)
			want |= (1ull << PROTO_F_DEVICE_STATE) | (1ull << PROTO_F_LOG_SHMFD);
		d->protocol_features = d->dev_protocol_features & want;
		/* SET_PROTOCOL_FEATURES itself is sent without NEED_REPLY: the
		 * backend only knows about REPLY_ACK once it has read it. */
		ret = fe_send_msg(d, VHOST_USER_SET_PROTOCOL_FEATURES, 0,
			       &d->protocol_features, sizeof(uint64_t), -1);
		if (ret)
			goto out;
	}
	if (fe_has_proto(d, PROTO_F_MQ)) {
		ret = fe_get_u64(d, VHOST_USER_GET_QUEUE_NUM, &d->queue_num_max);
		if (ret)
			goto out;
	}
	ret = fe_send_cmd(d, VHOST_USER_SET_OWNER, NULL, 0, -1);
out:
	return ret;
}

bool fe_has_indirect(const struct fe_dev *d)
{
	return d->features & (1ull << VIRTIO_RING_F_INDIRECT_DESC);
}

static int start_queue(struct fe_dev *d, struct fe_queue *q)
{
	struct vu_vring_state st = { .index = q->index, .num = q->num };
	struct vu_vring_addr addr = {
		.index = q->index,
		/* Ring addresses are the frontend's virtual addresses; the backend
		 * translates them through the userspace_addr of the mem table. */
		.desc_user_addr = (uint64_t)(uintptr_t)q->desc,
		.used_user_addr = (uint64_t)(uintptr_t)q->used,
		.avail_user_addr = (uint64_t)(uintptr_t)q->avail,
	};
	uint64_t idx = q->index;
	int ret;

	ret = fe_send_cmd(d, VHOST_USER_SET_VRING_NUM, &st, sizeof(st), -1);
	if (ret)
		return ret;
	/* Packed: position 0, wrap counter 1 in bit 15, for avail and (as
	 * QEMU sends it) used in the high half. A ring that moved here from
	 * another backend goes on where GET_VRING_BASE left it there. */
	st.num = q->base_set ? q->base : q->packed ? 0x80008000u : 0;
	ret = fe_send_cmd(d, VHOST_USER_SET_VRING_BASE, &st, sizeof(st), -1);
	if (ret)
		return ret;
	ret = fe_send_cmd(d, VHOST_USER_SET_VRING_ADDR, &addr, sizeof(addr), -1);
	if (ret)
		return ret;
	ret = fe_send_cmd(d, VHOST_USER_SET_VRING_KICK, &idx, sizeof(idx), q->kickfd);
	if (ret)
		return ret;
	return fe_send_cmd(d, VHOST_USER_SET_VRING_CALL, &idx, sizeof(idx), q->callfd);
}

int fe_start(struct fe_dev *d)
{
	struct vu_mem_payload mem = { .nregions = 1 };
	unsigned i;
	int ret;

	ret = fe_send_cmd(d, VHOST_USER_SET_FEATURES, &d->features, sizeof(uint64_t), -1);
	if (ret)
		goto out;
	mem.regions[0].guest_phys_addr = 0;
	mem.regions[0].memory_size = d->mem_size;
	mem.regions[0].userspace_addr = (uint64_t)(uintptr_t)d->mem;
	mem.regions[0].mmap_offset = 0;
	ret = fe_send_cmd(d, VHOST_USER_SET_MEM_TABLE, &mem,
		       (uint32_t)(8 + sizeof(struct vu_mem_region)), d->memfd);
	if (ret)
		goto out;
	for (i = 0; i < d->nqueues; i++) {
		ret = start_queue(d, &d->queues[i]);
		if (ret)
			goto out;
	}
	/* With PROTOCOL_FEATURES rings start disabled (vhost-user.rst, "Ring
	 * states"); QEMU enables them after the whole setup, so do we. */
	if (d->features & (1ull << VHOST_USER_F_PROTOCOL_FEATURES)) {
		for (i = 0; i < d->nqueues; i++) {
			struct vu_vring_state st = { .index = i, .num = 1 };

			ret = fe_send_cmd(d, VHOST_USER_SET_VRING_ENABLE, &st, sizeof(st), -1);
			if (ret)
				goto out;
		}
	}
out:
	if (ret)
		fprintf(stderr, "vhost-user: setup failed: %s\n", strerror(-ret));
	return ret;
}

void fe_close(struct fe_dev *d)
{
	unsigned i;

	if (d->sock >= 0)
		close(d->sock);
	d->sock = -1;
	for (i = 0; d->queues && i < d->nqueues; i++) {
		if (d->queues[i].kickfd >= 0)
			close(d->queues[i].kickfd);
		if (d->queues[i].callfd >= 0)
			close(d->queues[i].callfd);
		free(d->queues[i].slot_ndescs);
	}
	free(d->queues);
	d->queues = NULL;
	if (d->mem)
		munmap(d->mem, d->mem_size);
	d->mem = NULL;
	if (d->memfd >= 0)
		close(d->memfd);
	d->memfd = -1;
}
