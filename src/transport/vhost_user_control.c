/* vhost-user control messages: one handler per request, in a table indexed by request number. */
#include "transport/vhost_user_internal.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include "common/log.h"
#include "transport/guest_mem.h"
#include "transport/vhost_user_msg.h"
#include "transport/vhost_user_wire.h"

/* Never VIRTIO_F_IOMMU_PLATFORM: ring and buffer addresses would then be
 * I/O virtual addresses, and the dirty log needs guest-physical ones. */
static const uint64_t offered_features =
	BIT(VIRTIO_F_VERSION_1) | BIT(VIRTIO_RING_F_EVENT_IDX) |
	BIT(VIRTIO_RING_F_INDIRECT_DESC) | BIT(VIRTIO_F_RING_PACKED) |
	BIT(VU_F_PROTOCOL_FEATURES) | BIT(VU_F_LOG_ALL);

struct vu_reply {
	union vu_payload p;
	uint32_t size;
};

/* Excludes every queue thread from its batch, in index order. Queue
 * threads only ever take their own lock, so the order cannot deadlock. */
static void lock_all_queues(struct vu_dev *dev)
{
	for (unsigned i = 0; i < dev->nqueues; i++)
		pthread_mutex_lock(&dev->queues[i].lock);
}

static void unlock_all_queues(struct vu_dev *dev)
{
	for (unsigned i = dev->nqueues; i-- > 0;)
		pthread_mutex_unlock(&dev->queues[i].lock);
}

/* After the memory table changed, with all queue locks held: point the
 * queues at the new table and translate their rings again. A ring whose
 * memory went away is left unmapped until new addresses arrive. */
static void remap_all_queues(struct vu_dev *dev)
{
	for (unsigned i = 0; i < dev->nqueues; i++) {
		struct vu_queue *q = &dev->queues[i];

		virtq_set_mem(&q->vq, dev->mem);
		if (vu_queue_map_rings(q) < 0)
			log_warn("queue %u: rings unmapped after memory table change",
				 q->index);
	}
}

/* With all queue locks held: logging is on while LOG_ALL is acked and a
 * log is mapped. Only the log pointer changes: a live toggle resets
 * neither rings nor session. */
static void update_logging(struct vu_dev *dev)
{
	struct dirty_log *log = dev->features & BIT(VU_F_LOG_ALL) ? dev->log : NULL;

	for (unsigned i = 0; i < dev->nqueues; i++)
		virtq_set_log(&dev->queues[i].vq, log);
}

/* Puts val in dev->field while every queue thread is out of its batch and
 * lets refresh(dev) point the queues at it under the same locks. Yields
 * the old value: once this returns no batch can hold it, so the caller
 * frees it. */
#define SWAP_UNDER_QUEUE_LOCKS(dev, field, val, refresh) __extension__ ({ \
	__typeof__((dev)->field) old_;					\
									\
	lock_all_queues(dev);						\
	old_ = (dev)->field;						\
	(dev)->field = (val);						\
	refresh(dev);							\
	unlock_all_queues(dev);						\
	old_;								\
})

static struct vu_queue *msg_queue(struct vu_dev *dev, uint64_t index)
{
	if (index >= dev->nqueues) {
		log_err("vhost-user: vring index %llu out of range (%u queues)",
			(unsigned long long)index, dev->nqueues);
		return NULL;
	}
	return &dev->queues[index];
}

/* ---- Handlers: 0 or -errno; fds left in the message are closed after ---- */

static int h_get_features(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	r->p.u64 = offered_features;
	r->size = sizeof(r->p.u64);
	return 0;
}

static int h_set_features(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
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
	lock_all_queues(dev);
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
	update_logging(dev);
	unlock_all_queues(dev);
	for (unsigned i = 0; i < dev->nqueues; i++) {
		if (dev->queues[i].kind_restart)
			vu_queue_maybe_start(&dev->queues[i]);
		dev->queues[i].kind_restart = false;
	}
	return 0;
}

static int h_set_owner(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	return 0;
}

static int h_reset_owner(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
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

static int h_get_protocol_features(struct vu_dev *dev, struct vu_msg *m,
				   struct vu_reply *r)
{
	r->p.u64 = dev->offered_protocol_features;
	r->size = sizeof(r->p.u64);
	return 0;
}

static int h_set_protocol_features(struct vu_dev *dev, struct vu_msg *m,
				   struct vu_reply *r)
{
	if (m->p.u64 & ~dev->offered_protocol_features) {
		log_err("SET_PROTOCOL_FEATURES 0x%llx: not offered",
			(unsigned long long)m->p.u64);
		return -EINVAL;
	}
	dev->protocol_features = m->p.u64;
	return 0;
}

static int h_get_queue_num(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	r->p.u64 = dev->nqueues;
	r->size = sizeof(r->p.u64);
	return 0;
}

static int h_get_max_mem_slots(struct vu_dev *dev, struct vu_msg *m,
			       struct vu_reply *r)
{
	r->p.u64 = GUEST_MEM_MAX_REGIONS;
	r->size = sizeof(r->p.u64);
	return 0;
}

static void region_desc_from_wire(struct guest_region_desc *d,
				  const struct vu_mem_region *w)
{
	d->gpa = w->gpa;
	d->size = w->size;
	d->uva = w->uva;
	d->mmap_offset = w->mmap_offset;
}

static int h_set_mem_table(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	const struct vu_mem_table *t = &m->p.mem;
	struct guest_mem *mem;
	uint32_t nregions;
	int ret;

	if (m->hdr.size < VU_MEM_TABLE_HDR_SIZE)
		return -EINVAL;
	nregions = t->nregions;
	if (nregions > VU_MEM_TABLE_REGIONS ||
	    m->hdr.size != VU_MEM_TABLE_HDR_SIZE + nregions * sizeof(struct vu_mem_region) ||
	    m->nfds != nregions) {
		log_err("SET_MEM_TABLE: %u regions, %u bytes, %u fds", nregions,
			m->hdr.size, m->nfds);
		return -EINVAL;
	}
	ret = guest_mem_new(&mem);
	if (ret < 0)
		return ret;
	for (uint32_t i = 0; i < nregions; i++) {
		struct guest_region_desc d;
		struct guest_region region;

		region_desc_from_wire(&d, &t->regions[i]);
		ret = guest_region_map(&region, &d, m->fds[i]);
		if (ret < 0)
			goto err_mem;
		ret = guest_mem_insert(mem, &region);
		if (ret < 0) {
			guest_region_unmap(&region);
			goto err_mem;
		}
	}
	guest_mem_free(SWAP_UNDER_QUEUE_LOCKS(dev, mem, mem, remap_all_queues));
	for (unsigned i = 0; i < dev->nqueues; i++)
		vu_queue_maybe_start(&dev->queues[i]);
	log_debug("memory table: %u regions", nregions);
	return 0;

err_mem:
	guest_mem_free(mem);
	return ret;
}

static int h_add_mem_reg(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	struct guest_region_desc d;
	struct guest_region region;
	int ret;

	if (m->nfds != 1)
		return -EINVAL;
	region_desc_from_wire(&d, &m->p.mem_single.region);
	ret = guest_region_map(&region, &d, m->fds[0]);
	if (ret < 0)
		return ret;
	lock_all_queues(dev);
	ret = guest_mem_insert(dev->mem, &region);
	if (ret == 0)
		remap_all_queues(dev);
	unlock_all_queues(dev);
	if (ret < 0) {
		guest_region_unmap(&region);
		return ret;
	}
	for (unsigned i = 0; i < dev->nqueues; i++)
		vu_queue_maybe_start(&dev->queues[i]);
	return 0;
}

static int h_rem_mem_reg(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	struct guest_region_desc d;
	struct guest_region removed;
	int ret;

	/* Older QEMU sends an fd here; vhost-user.rst lets us ignore it. */
	if (m->nfds > 1)
		return -EINVAL;
	region_desc_from_wire(&d, &m->p.mem_single.region);
	lock_all_queues(dev);
	ret = guest_mem_remove(dev->mem, &d, &removed);
	if (ret == 0)
		remap_all_queues(dev);
	unlock_all_queues(dev);
	if (ret < 0) {
		log_err("REM_MEM_REG: no region gpa 0x%llx size 0x%llx uva 0x%llx",
			(unsigned long long)d.gpa, (unsigned long long)d.size,
			(unsigned long long)d.uva);
		return ret;
	}
	guest_region_unmap(&removed);
	return 0;
}

static int h_set_vring_num(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	struct vu_queue *q = msg_queue(dev, m->p.state.index);
	unsigned num = m->p.state.num;

	if (!q)
		return -EINVAL;
	if (q->thread_running)
		return -EBUSY;
	/* Split rings need a power of two: indices wrap modulo 2^16. Packed
	 * rings do not (virtio 1.2, 2.8.10.1). */
	if (num == 0 || num > VIRTQ_MAX_SIZE ||
	    (!(dev->features & BIT(VIRTIO_F_RING_PACKED)) && (num & (num - 1)) != 0)) {
		log_err("SET_VRING_NUM %u: not a power of two up to %u", num,
			VIRTQ_MAX_SIZE);
		return -EINVAL;
	}
	q->num = num;
	virtq_clear_rings(&q->vq);
	/* Addresses that came first are re-checked against the new size. */
	return vu_queue_map_rings(q);
}

static int h_set_vring_addr(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	const struct vu_vring_addr *a = &m->p.addr;
	struct vu_queue *q = msg_queue(dev, a->index);
	int ret;

	if (!q)
		return -EINVAL;
	if (a->flags & ~VU_VRING_F_LOG) {
		log_err("SET_VRING_ADDR: unknown flags 0x%x", a->flags);
		return -EINVAL;
	}
	/* Arrives again on a live ring when migration starts, with the log
	 * flag: only addresses change, never the ring's indices. */
	pthread_mutex_lock(&q->lock);
	q->desc_uva = a->desc;
	q->avail_uva = a->avail;
	q->used_uva = a->used;
	q->log_ring = a->flags & VU_VRING_F_LOG;
	q->log_addr = a->log;
	q->addr_set = true;
	ret = vu_queue_map_rings(q);
	pthread_mutex_unlock(&q->lock);
	if (ret < 0)
		return ret;
	return vu_queue_maybe_start(q);
}

/* SET_VRING_BASE of either ring kind, before the new position is set: a
 * ring stopped by GET_VRING_BASE that restarts elsewhere than it stopped
 * was reset by its driver, so the session goes (see h_set_vring_base). */
static void restart_at(struct vu_dev *dev, struct vu_queue *q, uint32_t pos,
		       uint32_t stopped)
{
	if (q->stop_pos_valid && pos != stopped) {
		log_debug("queue %u restarts at 0x%x, stopped at 0x%x", q->index,
			  pos, stopped);
		vu_dev_driver_gone(dev, "rings restart from a new position");
	}
	q->stop_pos_valid = false;
	q->err_signalled = false;
}

/*
 * SET_VRING_BASE of a packed ring: bits 0-14 the next avail position, bit
 * 15 the avail wrap counter (vhost-user.rst); QEMU adds its used position
 * and wrap in bits 16-31, which is the same position when nothing is in
 * flight. A position beyond the ring breaks the queue at its start.
 */
static int set_packed_base(struct vu_dev *dev, struct vu_queue *q, uint32_t base)
{
	uint16_t avail = (uint16_t)base;

	restart_at(dev, q, avail, (uint16_t)virtq_packed_get_base(&q->vq));
	if ((base >> 16) != 0 && (base >> 16) != avail)
		log_warn("queue %u: packed base 0x%x has used 0x%x != avail; "
			 "in-flight requests are not tracked, used restarts at avail",
			 q->index, avail, base >> 16);
	virtq_packed_set_base(&q->vq, avail);
	return 0;
}

static int h_set_vring_base(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	struct vu_queue *q = msg_queue(dev, m->p.state.index);

	if (!q)
		return -EINVAL;
	/* A new position may reset the session (vu_dev_driver_gone), which
	 * must not happen under a device state hook. */
	if (q->thread_running || vu_transfer_running(dev))
		return -EBUSY;
	if (q->vq.packed)
		return set_packed_base(dev, q, m->p.state.num);
	/* Split rings: a 16-bit index. Higher bits belong to packed rings. */
	if (m->p.state.num > UINT16_MAX)
		return -EINVAL;
	/*
	 * QEMU stops all rings (GET_VRING_BASE) both when the VM pauses and
	 * when the guest resets the device (reboot). Only the restart tells
	 * them apart: a resumed ring continues where it stopped, a reset one
	 * starts again at 0. A request ring that stopped exactly at a wrap to
	 * 0 (1 reboot in 65536) is taken for resumed: the new driver's INIT is
	 * then refused with EIO and its mount fails, the daemon goes on.
	 */
	restart_at(dev, q, m->p.state.num, q->vq.last_avail_idx);
	virtq_set_base(&q->vq, (uint16_t)m->p.state.num);
	return 0;
}

static int h_get_vring_base(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	struct vu_queue *q = msg_queue(dev, m->p.state.index);

	if (!q)
		return -EINVAL;
	/* Stops the ring: the thread finishes its batch, so every popped
	 * request is also pushed and last_avail_idx is exact. */
	vu_queue_stop_thread(q);
	close_fd(&q->kick_fd);
	close_call_fd(&q->call_fd);
	q->stop_pos_valid = true;
	r->p.state.index = q->index;
	r->p.state.num = q->vq.packed ? virtq_packed_get_base(&q->vq) : q->vq.last_avail_idx;
	r->size = sizeof(r->p.state);
	log_debug("queue %u stopped at %u", q->index, q->vq.last_avail_idx);
	return 0;
}

/* Decodes the u64 of SET_VRING_KICK/CALL/ERR: the queue and its fd (-1 if
 * the NOFD bit is set). */
static int vring_fd_msg(struct vu_dev *dev, struct vu_msg *m, struct vu_queue **q,
			int *fd)
{
	uint64_t v = m->p.u64;
	bool nofd = v & VU_VRING_NOFD_MASK;

	if (v & ~(VU_VRING_IDX_MASK | VU_VRING_NOFD_MASK))
		return -EINVAL;
	*q = msg_queue(dev, v & VU_VRING_IDX_MASK);
	if (!*q)
		return -EINVAL;
	if (m->nfds != (nofd ? 0u : 1u)) {
		log_err("%s: %u fds with NOFD %s", vu_request_name(m->hdr.request),
			m->nfds, nofd ? "set" : "clear");
		return -EINVAL;
	}
	*fd = nofd ? -1 : vu_msg_take_fd(m, 0);
	return 0;
}

static int h_set_vring_kick(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	struct vu_queue *q;
	int fd, ret;

	ret = vring_fd_msg(dev, m, &q, &fd);
	if (ret < 0)
		return ret;
	if (fd < 0) {
		/* Polling mode would mean a thread spinning on the ring. */
		log_err("SET_VRING_KICK without fd: polling is not supported");
		return -ENOTSUP;
	}
	/* The thread sleeps on the kick fd, so it cannot be swapped under it. */
	vu_queue_stop_thread(q);
	close_fd(&q->kick_fd);
	q->kick_fd = fd;
	return vu_queue_maybe_start(q);
}

/*
 * Replaces one of a running queue's notification fds under its lock, so
 * its thread never signals a closed fd. A new call fd on a ring that has
 * already told its driver of used entries gets one call of its own: the
 * kick reaches the queue thread through an eventfd while SET_VRING_CALL
 * waits on the control socket, so the thread can publish a reply before
 * the ring has any call fd (the guest's first request racing the
 * frontend's SET_VRING_CALL: the guest then waits forever for it), or
 * signal the fd the frontend is just replacing and has already checked.
 * A spurious call costs the driver one look at its used ring.
 */
static void swap_queue_fd(struct vu_queue *q, int *slot, int fd)
{
	int old;

	pthread_mutex_lock(&q->lock);
	old = *slot;
	*slot = fd;
	if (slot == &q->call_fd && q->driver_notified) {
		eventfd_signal(fd);
		ferry_count(&q->st.calls, 1);
	}
	pthread_mutex_unlock(&q->lock);
	if (slot == &q->call_fd)
		close_call_fd(&old);
	else
		close_fd(&old);
}

/* SET_VRING_CALL and SET_VRING_ERR: the fds a queue signals. Swapped on a
 * running ring too: QEMU swaps call fds there (irqfd vs. masked). */
static int h_set_vring_signal_fd(struct vu_dev *dev, struct vu_msg *m,
				 struct vu_reply *r)
{
	struct vu_queue *q;
	int fd, ret;

	ret = vring_fd_msg(dev, m, &q, &fd);
	if (ret < 0)
		return ret;
	swap_queue_fd(q, m->hdr.request == VU_SET_VRING_CALL ? &q->call_fd : &q->err_fd, fd);
	return 0;
}

static int h_set_vring_enable(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	struct vu_queue *q = msg_queue(dev, m->p.state.index);

	if (!q || m->p.state.num > 1)
		return -EINVAL;
	pthread_mutex_lock(&q->lock);
	q->enabled = m->p.state.num;
	pthread_mutex_unlock(&q->lock);
	/* Buffers may have been queued while disabled, with no kick to come. */
	if (q->enabled && q->thread_running)
		eventfd_signal(q->ctl_fd);
	return 0;
}

static int h_get_config(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
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

static int h_set_config(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	/* virtio-fs config space is read-only for the driver. */
	log_warn("SET_CONFIG refused: virtio-fs config space is read-only");
	return -EPERM;
}

static int h_set_backend_req_fd(struct vu_dev *dev, struct vu_msg *m,
				struct vu_reply *r)
{
	if (m->nfds != 1)
		return -EINVAL;
	/* Kept for DAX mapping requests; nothing is sent on it yet. */
	close_fd(&dev->backend_req_fd);
	dev->backend_req_fd = vu_msg_take_fd(m, 0);
	return 0;
}

/* SET_LOG_BASE: maps the log; a later one replaces the earlier (QEMU
 * sends the new one before it frees the old when memory grows). */
static int h_set_log_base(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	struct dirty_log *log;
	int ret;

	/* Without LOG_SHMFD the log would be in the frontend's memory, which
	 * we cannot reach. */
	if (!(dev->protocol_features & BIT(VU_PROTO_F_LOG_SHMFD))) {
		log_err("SET_LOG_BASE without LOG_SHMFD negotiated");
		return -ENOTSUP;
	}
	if (m->nfds != 1) {
		log_err("SET_LOG_BASE with %u fds", m->nfds);
		return -EINVAL;
	}
	ret = dirty_log_map(&log, m->fds[0], m->p.log.mmap_size, m->p.log.mmap_offset);
	if (ret < 0)
		return ret;
	dirty_log_free(SWAP_UNDER_QUEUE_LOCKS(dev, log, log, update_logging));
	log_info("vhost-user: dirty log of %llu bytes (%llu MiB of guest memory)",
		 (unsigned long long)log->size,
		 (unsigned long long)(log->size * 8 * VU_LOG_PAGE_SIZE >> 20));
	r->p.u64 = 0;
	return 0;
}

/* SET_LOG_FD: an eventfd kicked after marks; none if no fd. */
static int h_set_log_fd(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	int fd = m->nfds == 1 ? vu_msg_take_fd(m, 0) : -1;
	int old;

	lock_all_queues(dev);
	old = dev->log_call_fd;
	dev->log_call_fd = fd;
	unlock_all_queues(dev);
	close_fd(&old);
	return 0;
}

static int h_set_device_state_fd(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
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

static int h_check_device_state(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
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
	[VU_GET_FEATURES] = { .fn = h_get_features, .size = 0, .has_reply = true },
	[VU_SET_FEATURES] = { .fn = h_set_features, .size = 8 },
	[VU_SET_OWNER] = { .fn = h_set_owner, .size = 0 },
	[VU_RESET_OWNER] = { .fn = h_reset_owner, .size = 0 },
	[VU_SET_MEM_TABLE] = { .fn = h_set_mem_table, .size = SIZE_VAR, .max_fds = VU_MAX_FDS },
	[VU_SET_LOG_BASE] = { .fn = h_set_log_base, .size = sizeof(struct vu_log), .max_fds = 1,
			      .status_reply = true },
	[VU_SET_LOG_FD] = { .fn = h_set_log_fd, .size = SIZE_VAR, .max_fds = 1 },
	[VU_SET_VRING_NUM] = { .fn = h_set_vring_num, .size = sizeof(struct vu_vring_state) },
	[VU_SET_VRING_ADDR] = { .fn = h_set_vring_addr, .size = sizeof(struct vu_vring_addr) },
	[VU_SET_VRING_BASE] = { .fn = h_set_vring_base, .size = sizeof(struct vu_vring_state) },
	[VU_GET_VRING_BASE] = { .fn = h_get_vring_base, .size = sizeof(struct vu_vring_state),
				.has_reply = true },
	[VU_SET_VRING_KICK] = { .fn = h_set_vring_kick, .size = 8, .max_fds = 1 },
	[VU_SET_VRING_CALL] = { .fn = h_set_vring_signal_fd, .size = 8, .max_fds = 1 },
	[VU_SET_VRING_ERR] = { .fn = h_set_vring_signal_fd, .size = 8, .max_fds = 1 },
	[VU_GET_PROTOCOL_FEATURES] = { .fn = h_get_protocol_features, .size = 0,
				       .has_reply = true },
	[VU_SET_PROTOCOL_FEATURES] = { .fn = h_set_protocol_features, .size = 8 },
	[VU_GET_QUEUE_NUM] = { .fn = h_get_queue_num, .size = 0, .has_reply = true },
	[VU_SET_VRING_ENABLE] = { .fn = h_set_vring_enable, .size = sizeof(struct vu_vring_state) },
	[VU_SET_BACKEND_REQ_FD] = { .fn = h_set_backend_req_fd, .size = 0, .max_fds = 1 },
	[VU_GET_CONFIG] = { .fn = h_get_config, .size = SIZE_VAR, .has_reply = true },
	[VU_SET_CONFIG] = { .fn = h_set_config, .size = SIZE_VAR },
	[VU_GET_MAX_MEM_SLOTS] = { .fn = h_get_max_mem_slots, .size = 0, .has_reply = true },
	[VU_ADD_MEM_REG] = { .fn = h_add_mem_reg, .size = sizeof(struct vu_mem_single), .max_fds = 1 },
	[VU_REM_MEM_REG] = { .fn = h_rem_mem_reg, .size = sizeof(struct vu_mem_single), .max_fds = 1 },
	[VU_SET_DEVICE_STATE_FD] = { .fn = h_set_device_state_fd,
				     .size = sizeof(struct vu_transfer_state), .max_fds = 1,
				     .status_reply = true, .after_reply = vu_transfer_start },
	[VU_CHECK_DEVICE_STATE] = { .fn = h_check_device_state, .size = 0, .status_reply = true },
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
