/* ferryfs-load's driver side of split and packed virtqueues: add, kick, reap, arm. */
#include "frontend.h"

#include <errno.h>
#include <unistd.h>

/* Location of used_event (after avail->ring) and avail_event (after used->ring). */
static volatile uint16_t *used_event_p(struct fe_queue *q)
{
	return (volatile uint16_t *)&q->avail->ring[q->num];
}

static volatile uint16_t *avail_event_p(struct fe_queue *q)
{
	return (volatile uint16_t *)&q->used->ring[q->num];
}

/* ---- Packed rings: the driver's side, as virtio 1.2 section 2.8 asks ---- */

#define PF_AVAIL (1u << VRING_PACKED_DESC_F_AVAIL)
#define PF_USED (1u << VRING_PACKED_DESC_F_USED)

/* One 32-bit store of an event suppression area: off_wrap, then flags. */
static void set_event(struct vring_packed_desc_event *ev, uint16_t off_wrap, uint16_t flags)
{
	__atomic_store_n((uint32_t *)(void *)ev, (uint32_t)off_wrap | (uint32_t)flags << 16,
			 __ATOMIC_RELAXED);
}

static uint32_t get_event(const struct vring_packed_desc_event *ev)
{
	return __atomic_load_n((const uint32_t *)(const void *)ev, __ATOMIC_RELAXED);
}

/*
 * Writes the chain into the next slots, buffer id = slot in every
 * descriptor (the device reads it from the last). The head's flags make
 * the chain available: the first unpublished chain's head is written at
 * the kick, so a batch appears at once, like split's avail->idx.
 */
static int packed_add(struct fe_queue *q, uint16_t slot, const struct fe_seg *seg,
		      unsigned nseg)
{
	uint16_t head = q->next_avail, head_flags = 0;
	unsigned n = q->use_indirect ? 1 : nseg;

	if (q->slot_ndescs[slot])
		return -EBUSY;
	for (unsigned i = 0; i < n; i++) {
		struct vring_packed_desc *d = &q->pdesc[q->next_avail];
		uint16_t f = q->avail_wrap ? PF_AVAIL : PF_USED;

		if (q->use_indirect) {
			struct vring_packed_desc *tbl =
				(struct vring_packed_desc *)(void *)q->indirect +
				(size_t)slot * VU_MAX_SEGS;

			for (unsigned j = 0; j < nseg; j++) {
				tbl[j].addr = seg[j].gpa;
				tbl[j].len = seg[j].len;
				tbl[j].id = 0;
				tbl[j].flags = seg[j].writable ? VRING_DESC_F_WRITE : 0;
			}
			d->addr = q->indirect_gpa +
				  (uint64_t)slot * VU_MAX_SEGS * sizeof(struct vring_packed_desc);
			d->len = nseg * (uint32_t)sizeof(struct vring_packed_desc);
			f |= VRING_DESC_F_INDIRECT;
		} else {
			d->addr = seg[i].gpa;
			d->len = seg[i].len;
			f |= (seg[i].writable ? VRING_DESC_F_WRITE : 0) |
			     (i + 1 < n ? VRING_DESC_F_NEXT : 0);
		}
		d->id = slot;
		if (i == 0)
			head_flags = f;
		else
			__atomic_store_n(&d->flags, f, __ATOMIC_RELAXED);
		if (++q->next_avail == q->num) {
			q->next_avail = 0;
			q->avail_wrap = !q->avail_wrap;
		}
	}
	if (!q->head_pending) {
		q->head_pending = true;
		q->head_pos = head;
		q->head_flags = head_flags;
	} else {
		/* Release: the descriptors before the flags that hand them over. */
		__atomic_store_n(&q->pdesc[head].flags, head_flags, __ATOMIC_RELEASE);
	}
	q->slot_ndescs[slot] = (uint16_t)n;
	q->added = (uint16_t)(q->added + n);
	return 0;
}

/* Signals the queue's kick eventfd, once the ring's suppression state
 * (split or packed) has said the backend wants to hear of new buffers. */
static int kick(struct fe_queue *q)
{
	uint64_t one = 1;

	q->kicks++;
	if (write(q->kickfd, &one, sizeof(one)) != sizeof(one))
		return -errno;
	return 0;
}

static int packed_kick(struct fe_queue *q)
{
	uint16_t new = q->next_avail, old = (uint16_t)(new - q->added);
	uint32_t ev;
	uint16_t flags, off;
	bool need;

	if (!q->head_pending)
		return 0;
	__atomic_store_n(&q->pdesc[q->head_pos].flags, q->head_flags, __ATOMIC_RELEASE);
	q->head_pending = false;
	q->added = 0;
	/* The flags store before we read the device's suppression state. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	ev = get_event(q->device_event);
	flags = (uint16_t)(ev >> 16) & 3;
	if (flags == VRING_PACKED_EVENT_FLAG_DISABLE) {
		need = false;
	} else if (flags != VRING_PACKED_EVENT_FLAG_DESC || !q->event_idx) {
		need = true;
	} else {
		/* Offsets in the other wrap are behind this one's start. */
		off = (uint16_t)ev & 0x7fff;
		if (!!(ev & 0x8000) != q->avail_wrap)
			off = (uint16_t)(off - q->num);
		need = vring_need_event(off, new, old);
	}
	return need ? kick(q) : 0;
}

static bool packed_used_at(const struct fe_queue *q)
{
	uint16_t f = __atomic_load_n(&q->pdesc[q->next_used].flags, __ATOMIC_ACQUIRE);

	return !!(f & PF_AVAIL) == q->used_wrap && !!(f & PF_USED) == q->used_wrap;
}

static int packed_get_used(struct fe_queue *q, uint16_t *slot, uint32_t *len)
{
	struct vring_packed_desc *d = &q->pdesc[q->next_used];
	uint16_t id, n;

	if (!packed_used_at(q))
		return 0;
	id = d->id;
	*len = d->len;
	if (id >= q->nslots || q->slot_ndescs[id] == 0)
		return -EPROTO;
	n = q->slot_ndescs[id];
	q->slot_ndescs[id] = 0;
	/* Skip the slots the chain took (2.8.6). */
	q->next_used = (uint16_t)(q->next_used + n);
	if (q->next_used >= q->num) {
		q->next_used = (uint16_t)(q->next_used - q->num);
		q->used_wrap = !q->used_wrap;
	}
	q->last_used++;
	*slot = id;
	return 1;
}

static bool packed_arm(struct fe_queue *q)
{
	if (q->event_idx)
		set_event(q->driver_event,
			  (uint16_t)(q->next_used | (q->used_wrap ? 0x8000 : 0)),
			  VRING_PACKED_EVENT_FLAG_DESC);
	else
		set_event(q->driver_event, 0, VRING_PACKED_EVENT_FLAG_ENABLE);
	/* The request for a call must be visible before we look again. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return packed_used_at(q);
}

static void packed_disarm(struct fe_queue *q)
{
	/* As split: with EVENT_IDX the stale DESC offset suppresses calls. */
	if (!q->event_idx)
		set_event(q->driver_event, 0, VRING_PACKED_EVENT_FLAG_DISABLE);
}

int fe_queue_add(struct fe_queue *q, uint16_t slot, const struct fe_seg *seg,
		 unsigned nseg)
{
	struct vring_desc *tbl;
	uint16_t head;
	unsigned i;

	if (slot >= q->nslots || nseg == 0 || nseg > VU_MAX_SEGS)
		return -EINVAL;
	if (q->packed)
		return packed_add(q, slot, seg, nseg);
	if (q->use_indirect) {
		tbl = q->indirect + (size_t)slot * VU_MAX_SEGS;
		head = slot;
	} else {
		head = (uint16_t)(slot * VU_MAX_SEGS);
		tbl = q->desc + head;
	}
	for (i = 0; i < nseg; i++) {
		tbl[i].addr = seg[i].gpa;
		tbl[i].len = seg[i].len;
		tbl[i].flags = (uint16_t)((seg[i].writable ? VRING_DESC_F_WRITE : 0) |
					  (i + 1 < nseg ? VRING_DESC_F_NEXT : 0));
		/* Direct chains use consecutive descriptors; next is relative to
		 * the ring's table, or to the indirect table. */
		tbl[i].next = (uint16_t)(q->use_indirect ? i + 1 : head + i + 1);
	}
	if (q->use_indirect) {
		q->desc[head].addr = q->indirect_gpa +
				     (uint64_t)slot * VU_MAX_SEGS * sizeof(struct vring_desc);
		q->desc[head].len = nseg * (uint32_t)sizeof(struct vring_desc);
		q->desc[head].flags = VRING_DESC_F_INDIRECT;
		q->desc[head].next = 0;
	}
	q->avail->ring[q->avail_idx % q->num] = head;
	q->avail_idx++;
	return 0;
}

int fe_queue_kick(struct fe_queue *q)
{
	uint16_t old = q->kicked_idx, new = q->avail_idx;
	bool need;

	if (q->packed)
		return packed_kick(q);
	if (old == new)
		return 0;
	/* Descriptors and ring entries before the index the backend reads. */
	__atomic_store_n(&q->avail->idx, new, __ATOMIC_RELEASE);
	/* The index store must be visible before we read the backend's
	 * suppression state, or both sides may decide not to notify. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	q->kicked_idx = new;
	if (q->event_idx)
		need = vring_need_event(*avail_event_p(q), new, old);
	else
		need = !(__atomic_load_n(&q->used->flags, __ATOMIC_ACQUIRE) &
			 VRING_USED_F_NO_NOTIFY);
	return need ? kick(q) : 0;
}

int fe_queue_get_used(struct fe_queue *q, uint16_t *slot, uint32_t *len)
{
	struct vring_used_elem *e;
	uint16_t idx;
	uint32_t id;

	if (q->packed)
		return packed_get_used(q, slot, len);
	idx = __atomic_load_n(&q->used->idx, __ATOMIC_ACQUIRE);
	if (idx == q->last_used)
		return 0;
	e = &q->used->ring[q->last_used % q->num];
	id = e->id;
	*len = e->len;
	q->last_used++;
	if (q->use_indirect) {
		if (id >= q->nslots)
			return -EPROTO;
		*slot = (uint16_t)id;
	} else {
		if (id % VU_MAX_SEGS || id / VU_MAX_SEGS >= q->nslots)
			return -EPROTO;
		*slot = (uint16_t)(id / VU_MAX_SEGS);
	}
	return 1;
}

bool fe_queue_arm(struct fe_queue *q)
{
	if (q->packed)
		return packed_arm(q);
	if (q->event_idx)
		*used_event_p(q) = q->last_used;
	else
		q->avail->flags = 0;
	/* The request for a call must be visible before we look again. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return __atomic_load_n(&q->used->idx, __ATOMIC_ACQUIRE) != q->last_used;
}

void fe_queue_disarm(struct fe_queue *q)
{
	/* With EVENT_IDX a stale used_event already suppresses calls: the
	 * backend signalled once when it crossed it and will not again. */
	if (q->packed)
		packed_disarm(q);
	else if (!q->event_idx)
		q->avail->flags = VRING_AVAIL_F_NO_INTERRUPT;
}

void fe_queue_clear_call(struct fe_queue *q)
{
	uint64_t v;

	if (read(q->callfd, &v, sizeof(v)) == sizeof(v))
		q->calls_seen += v;
}
