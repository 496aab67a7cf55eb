/* Between the vhost_user_control*.c files: the control messages' handlers, and the queue locks they share. */
#ifndef FERRY_VHOST_USER_CONTROL_H
#define FERRY_VHOST_USER_CONTROL_H

/*
 * vhost_user_control.c dispatches every message through its table to a
 * handler: feature and protocol negotiation and device state there,
 * memory table and dirty log in vhost_user_control_memory.c, rings in
 * vhost_user_control_vring.c. Handlers return 0 or -errno; fds left in
 * the message are closed after.
 */

#include "transport/vhost_user_internal.h"
#include "transport/vhost_user_msg.h"
#include "transport/vhost_user_wire.h"

struct vu_reply {
	union vu_payload p;
	uint32_t size;
};

/* The reply of a GET_* message that answers one u64. */
static inline int vu_reply_u64(struct vu_reply *r, uint64_t value)
{
	r->p.u64 = value;
	r->size = sizeof(r->p.u64);
	return 0;
}

/* Excludes every queue thread from its batch, in index order. Queue
 * threads only ever take their own lock, so the order cannot deadlock. */
static inline void vu_lock_all_queues(struct vu_dev *dev)
{
	for (unsigned i = 0; i < dev->nqueues; i++)
		pthread_mutex_lock(&dev->queues[i].lock);
}

static inline void vu_unlock_all_queues(struct vu_dev *dev)
{
	for (unsigned i = dev->nqueues; i-- > 0;)
		pthread_mutex_unlock(&dev->queues[i].lock);
}

/* With all queue locks held: logging is on while LOG_ALL is acked and a
 * log is mapped. Only the log pointer changes: a live toggle resets
 * neither rings nor session. */
static inline void vu_update_logging(struct vu_dev *dev)
{
	struct dirty_log *log = dev->features & BIT(VU_F_LOG_ALL) ? dev->log : NULL;

	for (unsigned i = 0; i < dev->nqueues; i++)
		virtq_set_log(&dev->queues[i].vq, log);
}

/* ---- feature and protocol negotiation, config, device state (vhost_user_control.c) ---- */

int vu_ctl_get_features(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r);
int vu_ctl_set_features(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r);
int vu_ctl_set_owner(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r);
int vu_ctl_reset_owner(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r);
int vu_ctl_get_protocol_features(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r);
int vu_ctl_set_protocol_features(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r);
int vu_ctl_get_queue_num(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r);
int vu_ctl_get_config(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r);
int vu_ctl_set_config(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r);
int vu_ctl_set_backend_req_fd(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r);
int vu_ctl_set_device_state_fd(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r);
int vu_ctl_check_device_state(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r);

/* ---- memory table and dirty log (vhost_user_control_memory.c) ---- */

int vu_ctl_get_max_mem_slots(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r);
int vu_ctl_set_mem_table(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r);
int vu_ctl_add_mem_reg(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r);
int vu_ctl_rem_mem_reg(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r);
int vu_ctl_set_log_base(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r);
int vu_ctl_set_log_fd(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r);

/* ---- rings (vhost_user_control_vring.c) ---- */

int vu_ctl_set_vring_num(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r);
int vu_ctl_set_vring_addr(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r);
int vu_ctl_set_vring_base(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r);
int vu_ctl_get_vring_base(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r);
int vu_ctl_set_vring_fd(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r);
int vu_ctl_set_vring_enable(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r);

#endif
