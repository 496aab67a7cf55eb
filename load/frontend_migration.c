/* ferryfs-load's vhost-user migration messages: dirty logging, stopping a ring, device state transfer. */
#include "frontend_wire.h"

#include <errno.h>
#include <stdio.h>

bool fe_has_device_state(const struct fe_dev *d)
{
	return fe_has_proto(d, PROTO_F_DEVICE_STATE);
}

bool fe_can_log(const struct fe_dev *d)
{
	return fe_has_proto(d, PROTO_F_LOG_SHMFD) && (d->dev_features & (1ull << F_LOG_ALL));
}

int fe_log_start(struct fe_dev *d, int logfd, uint64_t log_size)
{
	struct { uint64_t mmap_size, mmap_offset; } log = { log_size, 0 };
	struct vu_msg_hdr hdr;
	uint8_t reply[16];  /* libvhost-user: a u64 0; the Rust vhost crate: the request echoed */
	uint64_t features = d->features | (1ull << F_LOG_ALL);
	unsigned i;
	int ret;

	/* QEMU reads one reply to SET_LOG_BASE whatever REPLY_ACK says (a u64
	 * 0 from libvhost-user): take the header, then what it says follows. */
	ret = fe_send_msg(d, VHOST_USER_SET_LOG_BASE, 0, &log, sizeof(log), logfd);
	if (!ret)
		ret = fe_recv_all(d->sock, &hdr, sizeof(hdr));
	if (!ret && (hdr.request != VHOST_USER_SET_LOG_BASE || hdr.size > sizeof(reply))) {
		fprintf(stderr, "vhost-user: bad reply to SET_LOG_BASE: request %u flags %#x size %u\n",
			hdr.request, hdr.flags, hdr.size);
		ret = -EPROTO;
	}
	if (!ret && hdr.size)
		ret = fe_recv_all(d->sock, reply, hdr.size);
	if (!ret)
		ret = fe_send_cmd(d, VHOST_USER_SET_FEATURES, &features, sizeof(features), -1);
	for (i = 0; !ret && i < d->nqueues; i++) {
		struct fe_queue *q = &d->queues[i];
		struct vu_vring_addr addr = {
			.index = q->index,
			.flags = 1u << VRING_F_LOG,
			.desc_user_addr = (uint64_t)(uintptr_t)q->desc,
			.used_user_addr = (uint64_t)(uintptr_t)q->used,
			.avail_user_addr = (uint64_t)(uintptr_t)q->avail,
			/* The used ring's guest physical address, for its log bits. */
			.log_guest_addr = q->used_gpa,
		};

		ret = fe_send_cmd(d, VHOST_USER_SET_VRING_ADDR, &addr, sizeof(addr), -1);
	}
	return ret;
}

int fe_stop_queue(struct fe_dev *d, unsigned index, uint32_t *base)
{
	struct vu_vring_state st = { .index = index, .num = 0 };
	int ret = 0;

	/* QEMU disables a ring before it stops it; GET_VRING_BASE answers
	 * once the backend has finished what it took from the ring. */
	if (d->features & (1ull << VHOST_USER_F_PROTOCOL_FEATURES))
		ret = fe_send_cmd(d, VHOST_USER_SET_VRING_ENABLE, &st, sizeof(st), -1);
	if (!ret)
		ret = fe_send_msg(d, VHOST_USER_GET_VRING_BASE, 0, &st, sizeof(st), -1);
	if (!ret)
		ret = fe_recv_reply(d, VHOST_USER_GET_VRING_BASE, &st, sizeof(st));
	if (!ret && st.index != index)
		ret = -EPROTO;
	if (!ret)
		*base = st.num;
	return ret;
}

int fe_set_device_state_fd(struct fe_dev *d, uint32_t direction, int fd)
{
	struct { uint32_t direction, phase; } in = { direction, 0 };
	uint64_t reply;
	int ret;

	ret = fe_send_msg(d, VHOST_USER_SET_DEVICE_STATE_FD, 0, &in, sizeof(in), fd);
	if (!ret)
		ret = fe_recv_reply(d, VHOST_USER_SET_DEVICE_STATE_FD, &reply, sizeof(reply));
	if (ret)
		return ret;
	if (reply & DEVICE_STATE_ERR_MASK) {
		fprintf(stderr, "vhost-user: SET_DEVICE_STATE_FD refused (reply %#llx)\n",
			(unsigned long long)reply);
		return -EPROTO;
	}
	/* A backend may answer with a pipe of its own; ferryfs-load does not
	 * take one (QEMU would), so it is an error here, named as such. */
	if (!(reply & DEVICE_STATE_NO_FD)) {
		fprintf(stderr, "vhost-user: SET_DEVICE_STATE_FD: the backend returned its own fd (not supported by ferryfs-load)\n");
		return -ENOTSUP;
	}
	return 0;
}

int fe_check_device_state(struct fe_dev *d)
{
	uint64_t result;
	int ret = fe_get_u64(d, VHOST_USER_CHECK_DEVICE_STATE, &result);

	if (!ret && result) {
		fprintf(stderr, "vhost-user: CHECK_DEVICE_STATE: %llu\n", (unsigned long long)result);
		ret = -EIO;
	}
	return ret;
}
