/* vhost-user frontend (the VMM's side) and driver-side split and packed virtqueues for ferryfs-load. */
#ifndef FERRY_LOAD_FRONTEND_H
#define FERRY_LOAD_FRONTEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/virtio_ring.h>

/* At most this many descriptors in one request's chain (the largest is CREATE:
 * in header, create_in, name, out header, entry_out, open_out). */
#define VU_MAX_SEGS 8

struct fe_seg {
	uint64_t gpa;
	uint32_t len;
	bool writable;
};

struct fe_queue {
	unsigned index;
	uint16_t num;           /* ring size */
	uint16_t nslots;        /* requests that can be in flight */
	struct vring_desc *desc;
	struct vring_avail *avail;
	struct vring_used *used;
	uint64_t desc_gpa, avail_gpa, used_gpa;
	/* One indirect table per slot when VIRTIO_RING_F_INDIRECT_DESC is on. */
	struct vring_desc *indirect;
	uint64_t indirect_gpa;
	int kickfd, callfd;
	uint16_t avail_idx;     /* next avail index we will publish */
	uint16_t kicked_idx;    /* avail index at the last notification decision */
	uint16_t last_used;
	bool event_idx, use_indirect;
	uint64_t kicks, calls_seen;
	/* Packed rings (VIRTIO_F_RING_PACKED): desc is then unused. */
	bool packed;
	struct vring_packed_desc *pdesc;
	struct vring_packed_desc_event *driver_event, *device_event;
	uint16_t next_avail;    /* slot the next descriptor goes in */
	bool avail_wrap;        /* Driver Ring Wrap Counter */
	uint16_t next_used;     /* slot the next used descriptor comes in */
	bool used_wrap;
	uint16_t added;         /* descriptors made available since the last kick */
	bool head_pending;      /* the first unpublished chain's head flags, */
	uint16_t head_pos;      /* written at the kick */
	uint16_t head_flags;
	uint16_t *slot_ndescs;  /* per slot (buffer id): ring descriptors in flight */
	/* A ring moved from another backend (ferryfs-load --migrate-to):
	 * fe_start sends base (GET_VRING_BASE's answer there) instead of 0. */
	bool base_set;
	uint32_t base;
};

struct fe_dev {
	int sock;
	bool want_packed;            /* set after fe_connect, before fe_negotiate */
	bool want_device_state;      /* likewise: ask for the DEVICE_STATE protocol feature */
	uint64_t dev_features;       /* offered by the backend */
	uint64_t features;           /* acked */
	uint64_t dev_protocol_features;
	uint64_t protocol_features;  /* acked */
	uint64_t queue_num_max;      /* from GET_QUEUE_NUM, 0 when MQ absent */
	int memfd;
	uint8_t *mem;
	uint64_t mem_size, mem_used;
	struct fe_queue *queues;
	unsigned nqueues;
};

/* Connects to the backend's socket; fills in nothing else. */
int fe_connect(struct fe_dev *d, const char *path);
/* Feature negotiation in QEMU's order: GET_FEATURES, protocol features,
 * GET_QUEUE_NUM, SET_OWNER. event_idx: 1 on (fails if the backend lacks it), 0
 * off, -1 on when offered. */
int fe_negotiate(struct fe_dev *d, int event_idx);
/* Creates the memfd-backed guest memory; allocations come from it. */
int fe_mem_create(struct fe_dev *d, uint64_t size);
/* Bump allocator in guest memory; returns NULL when it would overflow. */
void *fe_alloc(struct fe_dev *d, uint64_t len, uint64_t align, uint64_t *gpa);
/* Lays out nqueues rings with nslots[i] slots each, in guest memory. */
int fe_queues_create(struct fe_dev *d, unsigned nqueues, const uint16_t *nslots);
/* SET_FEATURES, SET_MEM_TABLE and every ring's NUM/BASE/ADDR/KICK/CALL, then
 * SET_VRING_ENABLE; after this the backend's queue workers run. */
int fe_start(struct fe_dev *d);
/* Bytes of guest memory fe_queues_create() will need for these rings. */
uint64_t fe_queue_mem_needed(uint16_t nslots, bool indirect);
bool fe_has_indirect(const struct fe_dev *d);
void fe_close(struct fe_dev *d);

/* Migration (vhost-user.rst, "Migrating back-end state"). Whether the
 * backend agreed to DEVICE_STATE (asked for with want_device_state). */
bool fe_has_device_state(const struct fe_dev *d);
/* Whether the backend can log dirty pages (VHOST_F_LOG_ALL and LOG_SHMFD). */
bool fe_can_log(const struct fe_dev *d);
/* The start of a migration as QEMU announces it: SET_LOG_BASE with logfd
 * (log_size bytes, one bit per 4 KiB page from guest physical address 0),
 * SET_FEATURES with VHOST_F_LOG_ALL, SET_VRING_ADDR with the log flag on
 * every ring. The rings keep running. */
int fe_log_start(struct fe_dev *d, int logfd, uint64_t log_size);
/* SET_VRING_ENABLE 0 then GET_VRING_BASE: the ring is stopped, *base is
 * where a new backend must go on. */
int fe_stop_queue(struct fe_dev *d, unsigned index, uint32_t *base);
/* SET_DEVICE_STATE_FD, phase "stopped": direction 0 save (the backend
 * writes into fd), 1 load (it reads fd). The caller closes its copy of fd
 * and then reads or writes the other end of the pipe. */
int fe_set_device_state_fd(struct fe_dev *d, uint32_t direction, int fd);
/* CHECK_DEVICE_STATE: 0 when the backend says the transfer succeeded. */
int fe_check_device_state(struct fe_dev *d);

/* Puts slot's chain in the avail ring without publishing it. */
int fe_queue_add(struct fe_queue *q, uint16_t slot, const struct fe_seg *seg,
		 unsigned nseg);
/* Publishes added chains and notifies the backend if it asked to be. */
int fe_queue_kick(struct fe_queue *q);
/* Takes one used element; returns 1 and the slot, 0 when the ring is empty,
 * -EPROTO if the backend returned an id we never made available. */
int fe_queue_get_used(struct fe_queue *q, uint16_t *slot, uint32_t *len);
/* Asks for a call on the next used element; returns true if elements are
 * already waiting (so the caller must not sleep). */
bool fe_queue_arm(struct fe_queue *q);
/* Asks the backend not to call while we are busy reaping anyway (what the
 * Linux driver does with virtqueue_disable_cb). */
void fe_queue_disarm(struct fe_queue *q);
/* Consumes the call eventfd's counter. */
void fe_queue_clear_call(struct fe_queue *q);

#endif
