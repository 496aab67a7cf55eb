/* vhost-user control messages: the table that dispatches them, feature and protocol negotiation, device state. */
#include "transport/vhost_user_control.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include "common/log.h"

/* Never VIRTIO_F_IOMMU_PLATFORM: ring and buffer addresses would then be
 * I/O virtual addresses, and the dirty log needs guest-physical ones. */
static const uint64_t offered_features =
	BIT(VIRTIO_F_VERSION_1) | BIT(VIRTIO_RING_F_EVENT_IDX) |
	BIT(VIRTIO_RING_F_INDIRECT_DESC) | BIT(VIRTIO_F_RING_PACKED) |
	BIT(VU_F_PROTOCOL_FEATURES) | BIT(VU_F_LOG_ALL);

int vu_ctl_get_features(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	return vu_reply_u64(r, offered_features);
}

int vu_ctl_set_features(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	uint64_t features = m->p.u64;
	bool packed = features & BIT(VIRTIO_F_RING_PACKED);

	if (features & ~offered_features) {
		log_err("SET_FEATURES 0x%llx: not offered 0x%llx",
			(unsigned long long)features,
			(unsigned long long)(features & ~offered_features));
		return -EINVAL;
	}
	if (packed)
		log_info("vhost-user: packed virtqueues negotiated");
	/* A queue whose ring kind changes under it stops first: its
	 * deferred requests complete by the old kind's rules, and it
	 * restarts below on the new layout. QEMU never does this (it sets
	 * features with the rings stopped); a hostile frontend may. */
	for (unsigned i = 0; i < dev->nqueues; i++) {
		struct vu_queue *q = &dev->queues[i];

		q->kind_restart = q->vq.packed != packed && q->thread_running;
		if (q->kind_restart)
			vu_queue_stop_thread(q);
	}
	vu_lock_all_queues(dev);
	for (unsigned i = 0; i < dev->nqueues; i++) {
		struct vu_queue *q = &dev->queues[i];

		virtq_set_features(&q->vq, features & BIT(VIRTIO_RING_F_EVENT_IDX),
				   features & BIT(VIRTIO_RING_F_INDIRECT_DESC));
		/* The ring layout changes with the kind: map the rings again
		 * (a ring set up before SET_FEATURES is re-read as packed). */
		if (packed != q->vq.packed) {
			virtq_set_packed(&q->vq, packed);
			if (vu_queue_map_rings(q) < 0)
				log_warn("queue %u: rings unmapped after the ring kind changed",
					 q->index);
		}
		if (!(features & BIT(VU_F_PROTOCOL_FEATURES)))
			q->enabled = true;
	}
	if ((dev->features ^ features) & BIT(VU_F_LOG_ALL))
		log_info("vhost-user: dirty logging %s%s",
			 features & BIT(VU_F_LOG_ALL) ? "on" : "off",
			 features & BIT(VU_F_LOG_ALL) && !dev->log ? " (once a log is set)" : "");
	dev->features = features;
	vu_update_logging(dev);
	vu_unlock_all_queues(dev);
	for (unsigned i = 0; i < dev->nqueues; i++) {
		if (dev->queues[i].kind_restart)
			vu_queue_maybe_start(&dev->queues[i]);
		dev->queues[i].kind_restart = false;
	}
	return 0;
}

int vu_ctl_set_owner(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	return 0;
}

int vu_ctl_reset_owner(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	/* vhost-user.rst recommends reading this obsolete message as
	 * "disable all rings", not as a full reset. */
	for (unsigned i = 0; i < dev->nqueues; i++) {
		struct vu_queue *q = &dev->queues[i];

		vu_queue_stop_thread(q);
		pthread_mutex_lock(&q->lock);
		q->enabled = false;
		pthread_mutex_unlock(&q->lock);
	}
	return 0;
}

int vu_ctl_get_protocol_features(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	return vu_reply_u64(r, dev->offered_protocol_features);
}

int vu_ctl_set_protocol_features(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	if (m->p.u64 & ~dev->offered_protocol_features) {
		log_err("SET_PROTOCOL_FEATURES 0x%llx: not offered",
			(unsigned long long)m->p.u64);
		return -EINVAL;
	}
	dev->protocol_features = m->p.u64;
	return 0;
}

int vu_ctl_get_queue_num(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	return vu_reply_u64(r, dev->nqueues);
}

int vu_ctl_get_config(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	const struct vu_config *c = &m->p.config;

	/* On failure the dispatcher replies with an empty payload, which is
	 * how vhost-user.rst says GET_CONFIG reports errors. */
	if (m->hdr.size < VU_CONFIG_HDR_SIZE || c->size > VU_CONFIG_MAX ||
	    m->hdr.size != VU_CONFIG_HDR_SIZE + c->size ||
	    c->offset > sizeof(dev->config_space) ||
	    c->size > sizeof(dev->config_space) - c->offset) {
		log_err("GET_CONFIG offset %u size %u: outside the %zu-byte config space",
			c->offset, c->size, sizeof(dev->config_space));
		return -EINVAL;
	}
	r->p.config.offset = c->offset;
	r->p.config.size = c->size;
	r->p.config.flags = c->flags;
	memcpy(r->p.config.data, (const uint8_t *)&dev->config_space + c->offset, c->size);
	r->size = VU_CONFIG_HDR_SIZE + c->size;
	return 0;
}

int vu_ctl_set_config(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	/* virtio-fs config space is read-only for the driver. */
	log_warn("SET_CONFIG refused: virtio-fs config space is read-only");
	return -EPERM;
}

int vu_ctl_set_backend_req_fd(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	if (m->nfds != 1)
		return -EINVAL;
	/* Kept for DAX mapping requests; nothing is sent on it yet. */
	close_fd(&dev->backend_req_fd);
	dev->backend_req_fd = vu_msg_take_fd(m, 0);
	return 0;
}

int vu_ctl_set_device_state_fd(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	int fd = m->nfds == 1 ? vu_msg_take_fd(m, 0) : -1;
	int ret;

	if (!(dev->protocol_features & BIT(VU_PROTO_F_DEVICE_STATE))) {
		log_err("SET_DEVICE_STATE_FD without DEVICE_STATE negotiated");
		close_fd(&fd);
		return -ENOTSUP;
	}
	ret = vu_transfer_begin(dev, m->p.transfer.direction, m->p.transfer.phase, fd);
	if (ret < 0)
		return ret;
	/* We keep the fd and send none back. */
	r->p.u64 = VU_DEVICE_STATE_NOFD;
	return 0;
}

int vu_ctl_check_device_state(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	r->p.u64 = 0;
	return vu_transfer_check(dev);
}

enum { SIZE_VAR = -1 };

struct vu_handler {
	int (*fn)(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r);
	int size;               /* exact payload size, or SIZE_VAR */
	unsigned max_fds;
	bool has_reply;         /* a reply defined by the request itself */
	/* The reply is a u64 status, sent on failure too (0 or what the
	 * handler put in r on success); see status_reply_due. */
	bool status_reply;
	/* Runs once the successful reply went out. */
	void (*after_reply)(struct vu_dev *dev);
};

static const struct vu_handler handlers[] = {
	[VU_GET_FEATURES] = { .fn = vu_ctl_get_features, .size = 0, .has_reply = true },
	[VU_SET_FEATURES] = { .fn = vu_ctl_set_features, .size = 8 },
	[VU_SET_OWNER] = { .fn = vu_ctl_set_owner, .size = 0 },
	[VU_RESET_OWNER] = { .fn = vu_ctl_reset_owner, .size = 0 },
	[VU_SET_MEM_TABLE] = { .fn = vu_ctl_set_mem_table, .size = SIZE_VAR, .max_fds = VU_MAX_FDS },
	[VU_SET_LOG_BASE] = { .fn = vu_ctl_set_log_base, .size = sizeof(struct vu_log), .max_fds = 1,
			      .status_reply = true },
	[VU_SET_LOG_FD] = { .fn = vu_ctl_set_log_fd, .size = SIZE_VAR, .max_fds = 1 },
	[VU_SET_VRING_NUM] = { .fn = vu_ctl_set_vring_num, .size = sizeof(struct vu_vring_state) },
	[VU_SET_VRING_ADDR] = { .fn = vu_ctl_set_vring_addr, .size = sizeof(struct vu_vring_addr) },
	[VU_SET_VRING_BASE] = { .fn = vu_ctl_set_vring_base, .size = sizeof(struct vu_vring_state) },
	[VU_GET_VRING_BASE] = { .fn = vu_ctl_get_vring_base, .size = sizeof(struct vu_vring_state),
				.has_reply = true },
	[VU_SET_VRING_KICK] = { .fn = vu_ctl_set_vring_fd, .size = 8, .max_fds = 1 },
	[VU_SET_VRING_CALL] = { .fn = vu_ctl_set_vring_fd, .size = 8, .max_fds = 1 },
	[VU_SET_VRING_ERR] = { .fn = vu_ctl_set_vring_fd, .size = 8, .max_fds = 1 },
	[VU_GET_PROTOCOL_FEATURES] = { .fn = vu_ctl_get_protocol_features, .size = 0,
				       .has_reply = true },
	[VU_SET_PROTOCOL_FEATURES] = { .fn = vu_ctl_set_protocol_features, .size = 8 },
	[VU_GET_QUEUE_NUM] = { .fn = vu_ctl_get_queue_num, .size = 0, .has_reply = true },
	[VU_SET_VRING_ENABLE] = { .fn = vu_ctl_set_vring_enable, .size = sizeof(struct vu_vring_state) },
	[VU_SET_BACKEND_REQ_FD] = { .fn = vu_ctl_set_backend_req_fd, .size = 0, .max_fds = 1 },
	[VU_GET_CONFIG] = { .fn = vu_ctl_get_config, .size = SIZE_VAR, .has_reply = true },
	[VU_SET_CONFIG] = { .fn = vu_ctl_set_config, .size = SIZE_VAR },
	[VU_GET_MAX_MEM_SLOTS] = { .fn = vu_ctl_get_max_mem_slots, .size = 0, .has_reply = true },
	[VU_ADD_MEM_REG] = { .fn = vu_ctl_add_mem_reg, .size = sizeof(struct vu_mem_single), .max_fds = 1 },
	[VU_REM_MEM_REG] = { .fn = vu_ctl_rem_mem_reg, .size = sizeof(struct vu_mem_single), .max_fds = 1 },
	[VU_SET_DEVICE_STATE_FD] = { .fn = vu_ctl_set_device_state_fd,
				     .size = sizeof(struct vu_transfer_state), .max_fds = 1,
				     .status_reply = true, .after_reply = vu_transfer_start },
	[VU_CHECK_DEVICE_STATE] = { .fn = vu_ctl_check_device_state, .size = 0, .status_reply = true },
};

/* Whether req's u64 status reply is due. QEMU reads one after SET_LOG_BASE
 * only with LOG_SHMFD negotiated (as libvhost-user answers it); without,
 * SET_LOG_BASE is refused like any message. The device state messages
 * always have one. */
static bool status_reply_due(const struct vu_dev *dev, uint32_t req)
{
	return req != VU_SET_LOG_BASE || (dev->protocol_features & BIT(VU_PROTO_F_LOG_SHMFD));
}

/* The status a failed request's u64 reply carries: the errno in the low
 * byte, never 0; SET_DEVICE_STATE_FD also says that no fd comes back. */
static uint64_t failure_status(uint32_t req, int err)
{
	uint64_t status = (uint64_t)err & VU_DEVICE_STATE_ERR_MASK;

	if (status == 0)
		status = EIO;
	if (req == VU_SET_DEVICE_STATE_FD)
		status |= VU_DEVICE_STATE_NOFD;
	return status;
}

/*
 * Handles one message. Returns 0 to go on, -errno to drop the connection:
 * a failed request the frontend cannot learn about (no REPLY_ACK asked)
 * leaves it believing in state we do not have, so we disconnect rather
 * than run on with a wrong picture.
 */
int vu_dispatch(struct vu_dev *dev, struct vu_msg *m)
{
	uint32_t req = m->hdr.request;
	const struct vu_handler *h = NULL;
	struct vu_reply reply = { .size = 0 };
	int ret;

	if (req < sizeof(handlers) / sizeof(handlers[0]) && handlers[req].fn)
		h = &handlers[req];
	log_debug("vhost-user %s (%u), %u bytes, %u fds", vu_request_name(req), req,
		  m->hdr.size, m->nfds);
	if (!h) {
		log_err("vhost-user request %u not supported", req);
		ret = -ENOSYS;
	} else if ((h->size != SIZE_VAR && m->hdr.size != (uint32_t)h->size) ||
		   m->nfds > h->max_fds) {
		log_err("vhost-user %s: malformed (%u bytes, %u fds)",
			vu_request_name(req), m->hdr.size, m->nfds);
		ret = -EINVAL;
	} else {
		ret = h->fn(dev, m, &reply);
	}
	vu_msg_close_fds(m);

	if (h && h->status_reply && status_reply_due(dev, req)) {
		/* A refusal here is answered, not a reason to drop the
		 * connection: the frontend learns it from the status. */
		int sent;

		if (ret < 0)
			reply.p.u64 = failure_status(req, -ret);
		sent = vu_msg_send_reply(dev->conn_fd, req, &reply.p.u64, sizeof(reply.p.u64));
		if (sent == 0 && ret == 0 && h->after_reply)
			h->after_reply(dev);
		return sent;
	}
	if (h && h->has_reply) {
		/* GET_CONFIG signals failure with an empty payload; other
		 * replies have no way to say "error". */
		if (ret < 0 && req != VU_GET_CONFIG)
			return ret;
		if (ret < 0)
			reply.size = 0;
		return vu_msg_send_reply(dev->conn_fd, req, &reply.p, reply.size);
	}
	/* Judged after the handler: SET_PROTOCOL_FEATURES may just have
	 * negotiated (or dropped) REPLY_ACK, and it governs this reply too. */
	if ((dev->protocol_features & BIT(VU_PROTO_F_REPLY_ACK)) &&
	    (m->hdr.flags & VU_FLAG_NEED_REPLY)) {
		/* Zero is success; anything else failure. */
		uint64_t status = ret < 0 ? (uint64_t)-ret : 0;

		return vu_msg_send_reply(dev->conn_fd, req, &status, sizeof(status));
	}
	return ret;
}
