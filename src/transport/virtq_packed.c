/* Packed virtqueue (VIRTIO_F_RING_PACKED), device side: pops validated descriptor chains, writes used descriptors. */
#include "transport/virtq.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

#include "common/log.h"

/*
 * The rules are the split walker's (virtq.c): every guest value is read
 * once into a local, checked there and used from there; every buffer goes
 * through guest_mem; a chain may not be longer than the ring (a chain
 * that runs round the ring onto its own head is a loop); an indirect
 * table is a non-zero multiple of 16 bytes, at most VIRTQ_MAX_SEGS
 * entries, never nested and never chained. On top of that, what only a
 * packed ring has: every descriptor of a chain must carry the AVAIL/USED
 * bits of the wrap it is in (virtio 1.2, 2.8.6: "all flags ... must be
 * set/cleared correctly in all descriptors in the list"), and a buffer id
 * must be below the ring size and not already in flight.
 */
#define compiler_barrier() __asm__ __volatile__("" ::: "memory")

#define PDESC_SIZE 16u
#define F_AVAIL (1u << VRING_PACKED_DESC_F_AVAIL)
#define F_USED (1u << VRING_PACKED_DESC_F_USED)
#define WRAP_BIT 0x8000u
#define POS_MASK 0x7fffu

void virtq_set_packed(struct virtq *vq, bool packed)
{
	vq->packed = packed;
	virtq_clear_rings(vq);
	/* Both wrap counters start at 1 (2.8.1), for a frontend that sends
	 * no SET_VRING_BASE. */
	virtq_packed_set_base(vq, WRAP_BIT);
}

int virtq_packed_set_rings(struct virtq *vq, unsigned num, void *desc,
			   void *driver_event, void *device_event)
{
	int ret;

	/* virtio 1.2, 2.8.10.1: the alignments the driver must keep. desc,
	 * avail and used are set so that virtq_ready holds; they are never
	 * dereferenced as split rings. */
	ret = virtq_place_rings(vq, num, desc, driver_event, 4, device_event, 4);
	if (ret < 0)
		return ret;
	vq->pdesc = desc;
	vq->driver_event = driver_event;
	vq->device_event = device_event;
	return 0;
}

void virtq_packed_set_base(struct virtq *vq, uint32_t base)
{
	vq->pk_avail = (uint16_t)(base & POS_MASK);
	vq->pk_avail_wrap = base & WRAP_BIT;
	vq->pk_used = vq->pk_avail;
	vq->pk_used_wrap = vq->pk_avail_wrap;
	vq->pk_pending = false;
	memset(vq->pk_inflight, 0, sizeof(vq->pk_inflight));
	vq->broken = false;
	vq->broken_reason = NULL;
}

uint32_t virtq_packed_get_base(const struct virtq *vq)
{
	uint32_t avail = vq->pk_avail | (vq->pk_avail_wrap ? WRAP_BIT : 0);
	uint32_t used = vq->pk_used | (vq->pk_used_wrap ? WRAP_BIT : 0);

	return avail | used << 16;
}

void virtq_packed_start(struct virtq *vq)
{
	if (!virtq_ready(vq))
		return;
	vq->pk_used_since_signal = 0;
	vq->signalled_used_valid = false;
	vq->pk_pending = false;
	if (vq->pk_avail >= vq->num)
		virtq_mark_broken(vq, "packed ring base position beyond the ring");
	else if (vq->pk_used != vq->pk_avail || vq->pk_used_wrap != vq->pk_avail_wrap)
		log_warn("queue %u: used position %u != avail position %u at start",
			 vq->index, vq->pk_used, vq->pk_avail);
}

/* Is a descriptor with these flags available in the wrap the device is in? */
static inline bool flags_avail(uint16_t flags, bool wrap)
{
	return !!(flags & F_AVAIL) == wrap && !!(flags & F_USED) != wrap;
}

static bool desc_avail_at(const struct virtq *vq, uint16_t pos, bool wrap)
{
	/* Acquire: pairs with the driver's write barrier before it flips the
	 * head's flags, so the rest of the chain it wrote first is visible. */
	uint16_t flags = le16toh(__atomic_load_n(&vq->pdesc[pos].flags, __ATOMIC_ACQUIRE));

	return flags_avail(flags, wrap);
}

/* The entries of an indirect table, which come one after another. */
static const char *walk_indirect(struct virtq *vq, struct virtq_walk *w, uint64_t addr,
				 uint32_t len)
{
	const uint8_t *table;
	const char *why;
	unsigned n;

	if (!vq->indirect)
		return "indirect descriptor, feature not negotiated";
	why = virtq_find_indirect(vq, addr, len, &table);
	if (why)
		return why;
	n = len / PDESC_SIZE;
	for (unsigned i = 0; i < n; i++) {
		struct vring_packed_desc d;
		uint16_t flags;

		memcpy(&d, table + (size_t)i * PDESC_SIZE, sizeof(d));
		compiler_barrier();
		flags = le16toh(d.flags);
		/* WRITE is the only flag that counts here (2.8.8); NEXT
		 * and the id are ignored, INDIRECT would be nesting. */
		if (flags & VRING_DESC_F_INDIRECT)
			return "nested indirect descriptor";
		why = virtq_walk_buf(vq, w, le64toh(d.addr), le32toh(d.len), flags);
		if (why)
			return why;
	}
	return NULL;
}

/* Walks a chain already copied out of the ring. 0, or -EIO after marking
 * the queue broken. */
static int walk_chain(struct virtq *vq, const struct vring_packed_desc *chain,
		      unsigned n, struct virtq_elem *elem)
{
	struct virtq_walk w = { 0 };
	const char *why = NULL;
	uint16_t id = 0;

	vq->iov_base = 0;   /* one chain at a time: no virtq_pop_more here */
	for (unsigned i = 0; i < n && !why; i++) {
		uint16_t flags = le16toh(chain[i].flags);
		uint64_t addr = le64toh(chain[i].addr);
		uint32_t len = le32toh(chain[i].len);

		if (flags & VRING_DESC_F_INDIRECT) {
			/* The spec forbids INDIRECT with NEXT, and a list
			 * holds descriptors of one type only (2.8.7). */
			if (n != 1)
				why = "indirect descriptor in a chain";
			else
				why = walk_indirect(vq, &w, addr, len);
		} else {
			why = virtq_walk_buf(vq, &w, addr, len, flags);
		}
	}
	if (!why) {
		/* The buffer id is in the last descriptor of the list (2.8.6). */
		id = le16toh(chain[n - 1].id);
		if (id >= vq->num)
			why = "buffer id out of range";
	}
	return virtq_walk_end(vq, &w, id, why, elem);
}

int virtq_packed_pop(struct virtq *vq, struct virtq_elem *elem)
{
	uint16_t pos = vq->pk_avail;
	bool wrap = vq->pk_avail_wrap;
	const char *why;
	unsigned n = 0;
	int ret;

	if (vq->broken)
		return -EIO;
	if (!virtq_ready(vq))
		return 0;
	if (!desc_avail_at(vq, pos, wrap))
		return 0;
	/* Copy the list out of the ring, each descriptor read once. */
	for (;;) {
		struct vring_packed_desc *d = &vq->pk_chain[n];
		uint16_t flags;

		if (n == vq->num) {
			why = "descriptor chain longer than the ring (loop)";
			goto broken;
		}
		if (n == VIRTQ_MAX_SEGS) {
			why = "descriptor chain longer than 1024 descriptors";
			goto broken;
		}
		memcpy(d, &vq->pdesc[pos], sizeof(*d));
		compiler_barrier();
		flags = le16toh(d->flags);
		n++;
		if (!flags_avail(flags, wrap)) {
			why = "chained descriptor not marked available for its wrap";
			goto broken;
		}
		if (++pos == vq->num) {
			pos = 0;
			wrap = !wrap;
		}
		if (!(flags & VRING_DESC_F_NEXT))
			break;
		if (flags & VRING_DESC_F_INDIRECT) {
			why = "indirect descriptor with NEXT set";
			goto broken;
		}
	}
	ret = walk_chain(vq, vq->pk_chain, n, elem);
	if (ret < 0)
		return ret;
	if (vq->pk_inflight[elem->head]) {
		why = "buffer id already in flight";
		goto broken;
	}
	vq->pk_inflight[elem->head] = (uint16_t)n;
	vq->pk_chain_len = n;
	vq->pk_avail = pos;
	vq->pk_avail_wrap = wrap;
	return 1;

broken:
	virtq_mark_broken(vq, why);
	return -EIO;
}

int virtq_packed_rewalk(struct virtq *vq, const struct vring_packed_desc *chain,
			unsigned n, struct virtq_elem *elem)
{
	if (vq->broken)
		return -EIO;
	if (!virtq_ready(vq) || n == 0 || n > VIRTQ_MAX_SEGS)
		return -EIO;
	return walk_chain(vq, chain, n, elem);
}

void virtq_packed_push(struct virtq *vq, const struct virtq_elem *elem, uint32_t len)
{
	struct vring_packed_desc *d = &vq->pdesc[vq->pk_used];
	uint16_t ndescs = elem->head < vq->num ? vq->pk_inflight[elem->head] : 0;
	uint16_t flags;

	/* Only ids popped and not yet pushed: anything else is our bug, and
	 * a used entry for it would make the driver skip a wrong count. */
	if (ndescs == 0) {
		virtq_mark_broken(vq, "push of a buffer id not in flight");
		return;
	}
	vq->pk_inflight[elem->head] = 0;
	if (len > elem->wr_len)
		len = elem->wr_len;
	if (__builtin_expect(vq->log != NULL, 0))
		virtq_log_data(vq, elem, len);
	flags = (vq->pk_used_wrap ? F_AVAIL | F_USED : 0) |
		(len ? VRING_DESC_F_WRITE : 0);
	__atomic_store_n(&d->id, htole16(elem->head), __ATOMIC_RELAXED);
	__atomic_store_n(&d->len, htole32(len), __ATOMIC_RELAXED);
	if (!vq->pk_pending) {
		/* Flagged at the flush, after every later entry. */
		vq->pk_pending = true;
		vq->pk_pending_pos = vq->pk_used;
		vq->pk_pending_flags = flags;
	} else {
		/* Release: id and len before the flags that hand them over. */
		__atomic_store_n(&d->flags, htole16(flags), __ATOMIC_RELEASE);
	}
	/* The whole descriptor: id and len now, flags too if written. */
	if (__builtin_expect(vq->log != NULL, 0))
		virtq_log_ring(vq, (uint64_t)vq->pk_used * sizeof(*d), sizeof(*d));
	/* The driver skips as many slots as the chain had (2.8.6). */
	vq->pk_used = (uint16_t)(vq->pk_used + ndescs);
	if (vq->pk_used >= vq->num) {
		vq->pk_used = (uint16_t)(vq->pk_used - vq->num);
		vq->pk_used_wrap = !vq->pk_used_wrap;
	}
	vq->pk_used_since_signal = (uint16_t)(vq->pk_used_since_signal + ndescs);
}

void virtq_packed_flush(struct virtq *vq)
{
	if (!vq->pk_pending)
		return;
	/* Release: the replies and every entry of the batch before the first
	 * entry's flags, which the driver polls. */
	__atomic_store_n(&vq->pdesc[vq->pk_pending_pos].flags,
			 htole16(vq->pk_pending_flags), __ATOMIC_RELEASE);
	if (__builtin_expect(vq->log != NULL, 0))
		virtq_log_ring(vq, (uint64_t)vq->pk_pending_pos * sizeof(struct vring_packed_desc),
			       sizeof(struct vring_packed_desc));
	vq->pk_pending = false;
}

bool virtq_packed_should_notify(struct virtq *vq)
{
	uint32_t ev;
	uint16_t flags, off_wrap, new_pos, old_pos, off;
	bool valid = vq->signalled_used_valid;

	/* Full barrier, as for split rings: our used flags before we read the
	 * driver's suppression state. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	/* One 32-bit read: off_wrap and flags as one snapshot. */
	ev = le32toh(__atomic_load_n((uint32_t *)(void *)vq->driver_event, __ATOMIC_RELAXED));
	off_wrap = (uint16_t)ev;
	flags = (uint16_t)(ev >> 16) & 3;
	new_pos = vq->pk_used;
	/* Positions relative to this wrap: the old one may be "negative". */
	old_pos = (uint16_t)(new_pos - vq->pk_used_since_signal);
	vq->pk_used_since_signal = 0;
	vq->signalled_used_valid = true;
	if (flags == VRING_PACKED_EVENT_FLAG_DISABLE)
		return false;
	/* DESC is only valid with EVENT_IDX; reserved value 3 and DESC
	 * without it count as "enabled", so no interrupt is lost. */
	if (flags != VRING_PACKED_EVENT_FLAG_DESC || !vq->event_idx)
		return true;
	if (!valid)
		return true;
	off = off_wrap & POS_MASK;
	if (!!(off_wrap & WRAP_BIT) != vq->pk_used_wrap)
		off = (uint16_t)(off - vq->num);
	return virtq_need_event(off, new_pos, old_pos);
}

/* Writes our event suppression area as one 32-bit store. */
static void set_device_event(struct virtq *vq, uint16_t off_wrap, uint16_t flags)
{
	uint32_t v = (uint32_t)off_wrap | (uint32_t)flags << 16;

	__atomic_store_n((uint32_t *)(void *)vq->device_event, htole32(v), __ATOMIC_RELAXED);
	if (vq->log && vq->log_ring)
		dirty_log_mark(vq->log, vq->log_event_gpa, sizeof(v));
}

void virtq_packed_disable_notify(struct virtq *vq)
{
	/* As for split rings: with EVENT_IDX a stale DESC offset already
	 * suppresses kicks (the driver kicks only on crossing it), and
	 * virtq_packed_enable_notify moves it on. A store per batch would
	 * pull the line the driver reads at every kick away from it. */
	if (vq->event_idx || !virtq_ready(vq))
		return;
	set_device_event(vq, 0, VRING_PACKED_EVENT_FLAG_DISABLE);
}

bool virtq_packed_enable_notify(struct virtq *vq)
{
	if (vq->broken || !virtq_ready(vq))
		return false;
	if (vq->event_idx)
		set_device_event(vq, (uint16_t)(vq->pk_avail | (vq->pk_avail_wrap ? WRAP_BIT : 0)),
				 VRING_PACKED_EVENT_FLAG_DESC);
	else
		set_device_event(vq, 0, VRING_PACKED_EVENT_FLAG_ENABLE);
	/* Full barrier: re-armed before we look at the ring again; pairs
	 * with the driver's barrier between making a descriptor available
	 * and reading our event area. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return desc_avail_at(vq, vq->pk_avail, vq->pk_avail_wrap);
}

bool virtq_packed_avail_pending(struct virtq *vq)
{
	if (vq->broken || !virtq_ready(vq))
		return false;
	return desc_avail_at(vq, vq->pk_avail, vq->pk_avail_wrap);
}

unsigned virtq_packed_unpopped(const struct virtq *vq)
{
	if (vq->broken || !virtq_ready(vq))
		return 0;
	return desc_avail_at(vq, vq->pk_avail, vq->pk_avail_wrap);
}
