/* Virtqueues, device side (split rings here, packed in virtq_packed.c): pop validated chains, push used entries. */
#ifndef FERRY_VIRTQ_H
#define FERRY_VIRTQ_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>
#include <linux/virtio_ring.h>

#include "transport/dirty_log.h"
#include "transport/guest_mem.h"
#include "common/ferry_req.h"

/* Largest split ring the virtio spec allows. */
#define VIRTQ_MAX_SIZE 32768
/* Segments of one request: FUSE max_pages (256) of data plus headers, with
 * room to spare. Longer chains are treated as a broken driver. */
#define VIRTQ_MAX_SEGS 1024

struct virtq_elem {
	uint16_t head;         /* descriptor index to report in the used ring */
	uint32_t wr_len;       /* total size of the writable part */
	uint32_t rd_len;       /* total size of the readable part */
	struct ferry_req req;  /* points into the queue's iovec array */
};

/*
 * Not thread-safe: one queue thread owns it, and whoever changes the
 * guest memory or ring addresses must exclude that thread first.
 */
struct virtq {
	unsigned index;                 /* for log messages */
	unsigned num;                   /* 0 until rings are set */
	struct vring_desc *desc;
	struct vring_avail *avail;
	struct vring_used *used;
	const struct guest_mem *mem;

	bool event_idx;                 /* VIRTIO_RING_F_EVENT_IDX negotiated */
	bool indirect;                  /* VIRTIO_RING_F_INDIRECT_DESC negotiated */

	uint16_t last_avail_idx;        /* next avail entry we will pop */
	uint16_t shadow_avail_idx;      /* avail->idx as last read */
	uint16_t avail_window;          /* chains that read found new */
	uint16_t used_idx;              /* next used entry we will write */
	uint16_t signalled_used;        /* used_idx at the last notify decision */
	bool signalled_used_valid;

	bool broken;
	const char *broken_reason;

	/*
	 * Dirty logging while migrating (dirty_log.c). log is NULL while
	 * it is off, so the data path pays one predictable branch per push
	 * and flush. Set by the control thread with the queue excluded.
	 */
	struct dirty_log *log;
	bool log_ring;          /* SET_VRING_ADDR asked for the ring's writes too */
	uint64_t log_ring_gpa;  /* split: the used ring; packed: the descriptor ring */
	uint64_t log_event_gpa; /* packed: the device event area */

	/*
	 * Packed rings (VIRTIO_F_RING_PACKED, virtq_packed.c). The split
	 * pointers above then hold the same three addresses, so virtq_ready
	 * answers for both kinds; the split functions are never called on a
	 * packed queue.
	 */
	bool packed;
	struct vring_packed_desc *pdesc;
	struct vring_packed_desc_event *driver_event; /* driver's: our calls */
	struct vring_packed_desc_event *device_event; /* ours: its kicks */
	uint16_t pk_avail;              /* ring position of the next chain to pop */
	bool pk_avail_wrap;             /* Driver Ring Wrap Counter we expect there */
	uint16_t pk_used;               /* ring position of the next used entry */
	bool pk_used_wrap;              /* Device Ring Wrap Counter */
	uint16_t pk_used_since_signal;  /* descriptors used since the last notify decision */
	/* The first used entry since the last flush has its flags written at
	 * the flush, so the driver sees the whole batch at once. */
	bool pk_pending;
	uint16_t pk_pending_pos;
	uint16_t pk_pending_flags;
	unsigned pk_chain_len;          /* entries of pk_chain */
	/* Where the chain being walked puts its iovecs in iov, and where
	 * the last popped chain's end: virtq_pop_more appends there. */
	unsigned iov_base;
	unsigned iov_end;

	/*
	 * The large arrays (~129 KiB) come last: virtq_init clears only what
	 * is above them, so a queue the driver never starts (ferryfsd offers
	 * 16 request queues) keeps them unpopulated. Each is written before
	 * it is read: iov and pk_chain by the pop that fills them,
	 * indirect_copy by the copy, pk_inflight by virtq_packed_set_base,
	 * which virtq_set_packed calls before a packed ring can be used.
	 */
	/* Twice the longest chain: virtq_pop_more appends a chain while
	 * the chains before it fill at most the first half. */
	struct iovec iov[2 * VIRTQ_MAX_SEGS];
	/* Indirect tables that straddle two regions are copied here. */
	struct vring_desc indirect_copy[VIRTQ_MAX_SEGS];
	/* The last popped chain, as read once from the ring: a deferred
	 * request keeps a copy, as the ring slots may be reused before it
	 * completes. */
	struct vring_packed_desc pk_chain[VIRTQ_MAX_SEGS];
	/* Per buffer id: ring descriptors of its chain while in flight, 0
	 * when not. A driver reusing an id in flight breaks the queue. */
	uint16_t pk_inflight[VIRTQ_MAX_SIZE];
};

/* A queue with no rings. Leaves the arrays at the end of struct virtq as
 * they are (see there), so it may be called on uninitialised memory. */
void virtq_init(struct virtq *vq, unsigned index);
/* Checks num (power of two, 1..VIRTQ_MAX_SIZE) and ring alignment. The
 * pointers must already be inside guest memory for their full length
 * (see virtq_ring_sizes). */
int virtq_set_rings(struct virtq *vq, unsigned num, void *desc, void *avail,
		    void *used);
/* Forgets the rings (after the memory under them went away). */
void virtq_clear_rings(struct virtq *vq);
/* Bytes of each ring part for num entries, event-index fields included. */
void virtq_ring_sizes(unsigned num, uint64_t *desc_len, uint64_t *avail_len,
		      uint64_t *used_len);
void virtq_set_mem(struct virtq *vq, const struct guest_mem *mem);
void virtq_set_features(struct virtq *vq, bool event_idx, bool indirect);
/* SET_VRING_BASE: where popping resumes. Also clears a broken state: the
 * frontend is re-initialising the ring. */
void virtq_set_base(struct virtq *vq, uint16_t last_avail_idx);
/* Called when the queue starts: picks up the used index from the ring. */
void virtq_start(struct virtq *vq);
bool virtq_ready(const struct virtq *vq);

/* Pops one chain: 1 with *elem filled, 0 if the ring is empty, -EIO if the
 * queue is (or just became) broken. elem's iovecs stay valid until the
 * next virtq_pop or virtq_rewalk. */
int virtq_pop(struct virtq *vq, struct virtq_elem *elem);
/* As virtq_pop, but the chains popped since the last virtq_pop keep their
 * iovecs, so a run of requests can be served together. Also 0 when
 * those chains leave no room for a chain of VIRTQ_MAX_SEGS segments. */
int virtq_pop_more(struct virtq *vq, struct virtq_elem *elem);
/* Split rings: asks the CPU to fetch, while the current request runs, the
 * lines the next three chains will need (the next one's FUSE in-header,
 * the one after's indirect table, the third's descriptor), which the
 * driver last wrote on its own CPU. Reads guest data only to choose
 * addresses; a wrong one costs a wasted prefetch. */
void virtq_prefetch_ahead(const struct virtq *vq);
/* Walks the chain at head again, for a request completed after later pops:
 * the descriptors still belong to the device, but everything is re-checked
 * against the current memory table. 0, or -EIO after marking the queue
 * broken. */
int virtq_rewalk(struct virtq *vq, uint16_t head, struct virtq_elem *elem);
/* Writes the used entry for elem; len is clamped to elem->wr_len. The
 * entry becomes visible to the driver at virtq_flush. */
void virtq_push(struct virtq *vq, const struct virtq_elem *elem, uint32_t len);
/* Publishes used entries pushed so far (release ordering). */
void virtq_flush(struct virtq *vq);
/* After a flush: does the driver want an interrupt for what was published?
 * EVENT_IDX: used_event crossed; otherwise: no VRING_AVAIL_F_NO_INTERRUPT. */
bool virtq_should_notify(struct virtq *vq);
/* Whether publishing the pushed entries now would notify the driver. */
bool virtq_would_notify(const struct virtq *vq);
/* While we are busy popping, kicks are useless. */
void virtq_disable_notify(struct virtq *vq);
/* Asks for kicks again, then re-reads avail: returns true if buffers
 * arrived meanwhile (the driver may have seen notifications off and not
 * kicked, so the caller must process them instead of sleeping). */
bool virtq_enable_notify(struct virtq *vq);
/* Re-reads avail->idx: true if the driver made buffers available that are
 * not popped yet (or moved the index so far that the queue broke, which
 * the next pop reports). For busy-polling with notifications off. */
bool virtq_avail_pending(struct virtq *vq);

/* Chains the driver had made available, as of the last look at avail->idx,
 * that are not popped yet. */
static inline unsigned virtq_unpopped(const struct virtq *vq)
{
	return (uint16_t)(vq->shadow_avail_idx - vq->last_avail_idx);
}
/* The same after a fresh look at avail->idx (a line the driver writes:
 * one transfer between CPUs); 0 on a ring that broke or is not ready. */
unsigned virtq_unpopped_now(struct virtq *vq);

/* ---- What both ring kinds share (virtq.c): ring placement, the descriptor walk ---- */

/* Checks num (1..VIRTQ_MAX_SIZE) and the alignments (desc 16, the others
 * as given) and sets num, desc, avail and used; 0 or -EINVAL. */
int virtq_place_rings(struct virtq *vq, unsigned num, void *desc, void *avail,
		      unsigned avail_align, void *used, unsigned used_align);
/* What a walk has collected so far into vq->iov. Start it zeroed. */
struct virtq_walk {
	unsigned cnt, rd_cnt;
	bool writable;
	uint64_t total, wr_total;
};

/* Checks an indirect table's length (a non-zero multiple of 16, at most
 * sizeof(vq->indirect_copy)) and finds it in guest memory, copying it into
 * vq->indirect_copy if it straddles regions. NULL with *table set, or why
 * the queue breaks. The caller has checked the INDIRECT feature. */
const char *virtq_find_indirect(struct virtq *vq, uint64_t addr, uint32_t len,
				const uint8_t **table);
/* Adds one buffer of a chain: device-readable ones first, 4 GiB and
 * VIRTQ_MAX_SEGS at the most, all inside guest memory. NULL, or why the
 * queue breaks. */
const char *virtq_walk_buf(struct virtq *vq, struct virtq_walk *w, uint64_t addr,
			   uint32_t len, uint16_t flags);
/* Ends a walk: if why is NULL, fills elem for the chain with buffer id
 * head and returns 0; else marks the queue broken for why, -EIO. */
int virtq_walk_end(struct virtq *vq, const struct virtq_walk *w, uint16_t head,
		   const char *why, struct virtq_elem *elem);

/* ---- Packed rings (virtq_packed.c): same contracts as the split calls ---- */

/* Switches the queue's kind (at SET_FEATURES); forgets the rings. */
void virtq_set_packed(struct virtq *vq, bool packed);
/* num 1..VIRTQ_MAX_SIZE (need not be a power of two); desc 16-aligned,
 * the event areas 4-aligned, all inside guest memory for their length. */
int virtq_packed_set_rings(struct virtq *vq, unsigned num, void *desc,
			   void *driver_event, void *device_event);
/* SET_VRING_BASE of a packed ring: bits 0-14 the next avail position,
 * bit 15 its wrap counter (bits 16-31, QEMU's used position, are implied:
 * nothing is in flight at a restart). Clears the broken state. */
void virtq_packed_set_base(struct virtq *vq, uint32_t base);
/* GET_VRING_BASE: avail position and wrap in bits 0-15, used in 16-31. */
uint32_t virtq_packed_get_base(const struct virtq *vq);
void virtq_packed_start(struct virtq *vq);
int virtq_packed_pop(struct virtq *vq, struct virtq_elem *elem);
/* Re-walks a deferred chain from the copy taken at pop (vq->pk_chain). */
int virtq_packed_rewalk(struct virtq *vq, const struct vring_packed_desc *chain,
			unsigned n, struct virtq_elem *elem);
void virtq_packed_push(struct virtq *vq, const struct virtq_elem *elem, uint32_t len);
void virtq_packed_flush(struct virtq *vq);
bool virtq_packed_should_notify(struct virtq *vq);
void virtq_packed_disable_notify(struct virtq *vq);
bool virtq_packed_enable_notify(struct virtq *vq);
bool virtq_packed_avail_pending(struct virtq *vq);
/* 1 if another chain is already available after the last pop, else 0: a
 * packed ring has no index telling how many. */
unsigned virtq_packed_unpopped(const struct virtq *vq);

/* Dirty logging: log (NULL: off) and, if log_ring, where the ring parts
 * the device writes are in guest-physical memory. */
void virtq_set_log(struct virtq *vq, struct dirty_log *log);
void virtq_set_log_ring(struct virtq *vq, bool log_ring, uint64_t ring_gpa,
			uint64_t event_gpa);
/* With logging on: marks the first len bytes of elem's writable buffers
 * (clamped to wr_len), the data a push hands over. Both ring kinds. */
void virtq_log_data(struct virtq *vq, const struct virtq_elem *elem, uint32_t len);
/* With logging on and a logged ring: marks [off, off + len) of the used
 * ring (split) or descriptor ring (packed) after the device wrote it. */
static inline void virtq_log_ring(struct virtq *vq, uint64_t off, uint64_t len)
{
	if (vq->log_ring)
		dirty_log_mark(vq->log, vq->log_ring_gpa + off, len);
}

/* Marks the queue broken, logging reason once. */
void virtq_mark_broken(struct virtq *vq, const char *reason);

/* The wrap-safe test from the virtio spec: has the index moved past
 * event_idx in the step from old_idx to new_idx? */
static inline bool virtq_need_event(uint16_t event_idx, uint16_t new_idx,
				    uint16_t old_idx)
{
	return (uint16_t)(new_idx - event_idx - 1) < (uint16_t)(new_idx - old_idx);
}

#endif
