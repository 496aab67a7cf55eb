/* vhost-user control messages for the rings: size, addresses, position, notification fds, enable. */
#include "transport/vhost_user_control.h"

#include <errno.h>
#include <pthread.h>
#include <linux/virtio_config.h>

#include "common/log.h"

static struct vu_queue *msg_queue(struct vu_dev *dev, uint64_t index)
{
	if (index >= dev->nqueues) {
		log_err("vhost-user: vring index %llu out of range (%u queues)",
			(unsigned long long)index, dev->nqueues);
		return NULL;
	}
	return &dev->queues[index];
}

int vu_ctl_set_vring_num(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
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

int vu_ctl_set_vring_addr(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
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
 * was reset by its driver, so the session goes (see vu_ctl_set_vring_base). */
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

int vu_ctl_set_vring_base(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
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

int vu_ctl_get_vring_base(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
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

/* SET_VRING_KICK's fd: the queue's thread sleeps on it. */
static int set_kick_fd(struct vu_queue *q, int fd)
{
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

/* SET_VRING_KICK, SET_VRING_CALL and SET_VRING_ERR: a queue's fds. */
int vu_ctl_set_vring_fd(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	struct vu_queue *q;
	int fd, ret;

	ret = vring_fd_msg(dev, m, &q, &fd);
	if (ret < 0)
		return ret;
	if (m->hdr.request == VU_SET_VRING_KICK)
		return set_kick_fd(q, fd);
	/* The fds a queue signals are swapped on a running ring too: QEMU
	 * swaps call fds there (irqfd vs. masked). */
	swap_queue_fd(q, m->hdr.request == VU_SET_VRING_CALL ? &q->call_fd : &q->err_fd, fd);
	return 0;
}

int vu_ctl_set_vring_enable(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
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
