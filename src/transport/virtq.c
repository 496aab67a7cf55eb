/* Split virtqueue, device side: pops validated descriptor chains, pushes used entries. */
#include "transport/virtq.h"

#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "common/log.h"

/*
 * Everything in the rings is written by the guest at any moment. Each
 * guest value is read exactly once into a local and only the local is
 * checked and used: a compiler barrier after a memcpy from guest memory
 * stops the compiler from re-reading the source instead of the copy.
 */
#define compiler_barrier() __asm__ __volatile__("" ::: "memory")

#define VRING_DESC_SIZE 16u

void virtq_init(struct virtq *vq, unsigned index)
{
	/* Not the arrays at the end: see struct virtq. */
	memset(vq, 0, offsetof(struct virtq, iov));
	vq->index = index;
}

void virtq_ring_sizes(unsigned num, uint64_t *desc_len, uint64_t *avail_len,
		      uint64_t *used_len)
{
	/* flags + idx + ring[num] + used_event */
	*desc_len = (uint64_t)VRING_DESC_SIZE * num;
	*avail_len = 2 + 2 + 2 * (uint64_t)num + 2;
	/* flags + idx + ring[num] + avail_event */
	*used_len = 2 + 2 + 8 * (uint64_t)num + 2;
}

int virtq_place_rings(struct virtq *vq, unsigned num, void *desc, void *avail,
		      unsigned avail_align, void *used, unsigned used_align)
{
	if (num == 0 || num > VIRTQ_MAX_SIZE)
		return -EINVAL;
	if ((uintptr_t)desc % 16 != 0 || (uintptr_t)avail % avail_align != 0 ||
	    (uintptr_t)used % used_align != 0)
		return -EINVAL;
	vq->num = num;
	vq->desc = desc;
	vq->avail = avail;
	vq->used = used;
	return 0;
}

int virtq_set_rings(struct virtq *vq, unsigned num, void *desc, void *avail,
		    void *used)
{
	if ((num & (num - 1)) != 0)
		return -EINVAL;
	/* The alignments the virtio spec requires of the driver; we rely on
	 * them for the atomic accesses below. */
	return virtq_place_rings(vq, num, desc, avail, 2, used, 4);
}

void virtq_clear_rings(struct virtq *vq)
{
	vq->desc = NULL;
	vq->avail = NULL;
	vq->used = NULL;
	vq->pdesc = NULL;
	vq->driver_event = NULL;
	vq->device_event = NULL;
}

void virtq_set_mem(struct virtq *vq, const struct guest_mem *mem)
{
	vq->mem = mem;
}

void virtq_set_log(struct virtq *vq, struct dirty_log *log)
{
	vq->log = log;
}

void virtq_set_log_ring(struct virtq *vq, bool log_ring, uint64_t ring_gpa,
			uint64_t event_gpa)
{
	vq->log_ring = log_ring;
	vq->log_ring_gpa = ring_gpa;
	vq->log_event_gpa = event_gpa;
}

void virtq_log_data(struct virtq *vq, const struct virtq_elem *elem, uint32_t len)
{
	if (len > elem->wr_len)
		len = elem->wr_len;
	dirty_log_mark_iov(vq->log, vq->mem, elem->req.wr, elem->req.wr_cnt, len);
}

void virtq_set_features(struct virtq *vq, bool event_idx, bool indirect)
{
	vq->event_idx = event_idx;
	vq->indirect = indirect;
}

void virtq_set_base(struct virtq *vq, uint16_t last_avail_idx)
{
	vq->last_avail_idx = last_avail_idx;
	vq->shadow_avail_idx = last_avail_idx;
	vq->broken = false;
	vq->broken_reason = NULL;
}

void virtq_start(struct virtq *vq)
{
	if (!virtq_ready(vq))
		return;
	vq->used_idx = le16toh(__atomic_load_n(&vq->used->idx, __ATOMIC_RELAXED));
	vq->shadow_avail_idx = vq->last_avail_idx;
	vq->signalled_used_valid = false;
	if (vq->used_idx != vq->last_avail_idx)
		/* Requests popped by a previous backend and never completed:
		 * without inflight tracking they are lost to the driver. */
		log_warn("queue %u: used index %u != last avail index %u at start",
			 vq->index, vq->used_idx, vq->last_avail_idx);
}

bool virtq_ready(const struct virtq *vq)
{
	return vq->num != 0 && vq->desc && vq->avail && vq->used && vq->mem;
}

void virtq_mark_broken(struct virtq *vq, const char *reason)
{
	if (vq->broken)
		return;
	vq->broken = true;
	vq->broken_reason = reason;
	log_err("queue %u broken: %s; it is no longer processed", vq->index, reason);
}

/* Reads avail->idx afresh; returns the number of entries not yet popped,
 * or -EIO if the driver moved the index by more than the ring size. */
static int refresh_avail(struct virtq *vq)
{
	/* Acquire: pairs with the driver's write barrier before it publishes
	 * avail->idx, so the ring entries and descriptors it wrote first are
	 * visible to our loads below. */
	uint16_t idx = le16toh(__atomic_load_n(&vq->avail->idx, __ATOMIC_ACQUIRE));
	uint16_t pending = (uint16_t)(idx - vq->last_avail_idx);

	if (pending > vq->num) {
		virtq_mark_broken(vq, "avail index moved by more than the ring size");
		return -EIO;
	}
	vq->shadow_avail_idx = idx;
	vq->avail_window = pending;
	return pending;
}

/* Finds the indirect table [addr, addr + len): in place if it lies in one
 * region, else copied into vq->indirect_copy. len is already checked to be
 * at most sizeof(vq->indirect_copy). */
static const uint8_t *map_indirect(struct virtq *vq, uint64_t addr, uint32_t len)
{
	struct iovec parts[8];
	unsigned cnt = 0;
	uint8_t *dst = (uint8_t *)vq->indirect_copy;
	const uint8_t *table = guest_mem_gpa_to_ptr(vq->mem, addr, len);

	if (table)
		return table;
	if (guest_mem_gpa_to_iov(vq->mem, addr, len, parts, 8, &cnt) < 0)
		return NULL;
	for (unsigned i = 0; i < cnt; i++) {
		memcpy(dst, parts[i].iov_base, parts[i].iov_len);
		dst += parts[i].iov_len;
	}
	return (const uint8_t *)vq->indirect_copy;
}

/* Split and packed descriptors are both 16 bytes. */
const char *virtq_find_indirect(struct virtq *vq, uint64_t addr, uint32_t len,
				const uint8_t **table)
{
	if (len == 0 || len % VRING_DESC_SIZE != 0)
		return "indirect table length not a non-zero multiple of 16";
	if (len > sizeof(vq->indirect_copy))
		return "indirect table longer than the segment limit";
	*table = map_indirect(vq, addr, len);
	if (!*table)
		return "indirect table outside guest memory";
	return NULL;
}

const char *virtq_walk_buf(struct virtq *vq, struct virtq_walk *w, uint64_t addr,
			   uint32_t len, uint16_t flags)
{
	int ret;

	if (flags & VRING_DESC_F_WRITE) {
		w->writable = true;
		w->wr_total += len;
	} else if (w->writable) {
		return "device-readable descriptor after a writable one";
	}
	w->total += len;
	if (w->total > UINT32_MAX)
		return "chain length over 4 GiB";
	ret = guest_mem_gpa_to_iov(vq->mem, addr, len, vq->iov + vq->iov_base, VIRTQ_MAX_SEGS,
				   &w->cnt);
	if (ret == -E2BIG)
		return "chain needs more than 1024 segments";
	if (ret < 0)
		return "buffer outside guest memory";
	if (!w->writable)
		w->rd_cnt = w->cnt;
	return NULL;
}

int virtq_walk_end(struct virtq *vq, const struct virtq_walk *w, uint16_t head,
		   const char *why, struct virtq_elem *elem)
{
	if (why) {
		virtq_mark_broken(vq, why);
		return -EIO;
	}
	elem->head = head;
	elem->wr_len = (uint32_t)w->wr_total;
	elem->rd_len = (uint32_t)(w->total - w->wr_total);
	elem->req.rd = vq->iov + vq->iov_base;
	elem->req.rd_cnt = w->rd_cnt;
	elem->req.wr = vq->iov + vq->iov_base + w->rd_cnt;
	vq->iov_end = vq->iov_base + w->cnt;
	elem->req.wr_cnt = w->cnt - w->rd_cnt;
	return 0;
}

/* Walks the chain starting at head into vq->iov. Returns 0, or -EIO after
 * marking the queue broken. */
static int walk_chain(struct virtq *vq, uint16_t head, struct virtq_elem *elem)
{
	const uint8_t *table = (const uint8_t *)vq->desc;
	unsigned table_len = vq->num;
	unsigned i = head, visited = 0;
	bool in_indirect = false;
	struct virtq_walk w = { 0 };
	const char *why;

	for (;;) {
		struct vring_desc d;
		uint64_t addr;
		uint32_t len;
		uint16_t flags;

		/* A chain can use each descriptor of its table at most once;
		 * anything longer is a loop. */
		if (++visited > table_len) {
			why = "descriptor chain longer than its table (loop)";
			goto broken;
		}
		memcpy(&d, table + (size_t)i * VRING_DESC_SIZE, sizeof(d));
		compiler_barrier();
		addr = le64toh(d.addr);
		len = le32toh(d.len);
		flags = le16toh(d.flags);

		if (flags & VRING_DESC_F_INDIRECT) {
			if (!vq->indirect) {
				why = "indirect descriptor, feature not negotiated";
				goto broken;
			}
			if (in_indirect) {
				why = "nested indirect descriptor";
				goto broken;
			}
			/* The spec forbids INDIRECT with NEXT, so the table
			 * ends the chain. */
			if (flags & VRING_DESC_F_NEXT) {
				why = "indirect descriptor with NEXT set";
				goto broken;
			}
			why = virtq_find_indirect(vq, addr, len, &table);
			if (why)
				goto broken;
			table_len = len / VRING_DESC_SIZE;
			in_indirect = true;
			i = 0;
			visited = 0;
			continue;
		}

		why = virtq_walk_buf(vq, &w, addr, len, flags);
		if (why)
			goto broken;

		if (!(flags & VRING_DESC_F_NEXT))
			break;
		i = le16toh(d.next);
		if (i >= table_len) {
			why = "next descriptor index out of range";
			goto broken;
		}
	}

	/* why is NULL: the last buffer was added. */
broken:
	return virtq_walk_end(vq, &w, head, why, elem);
}

/* The head index the driver put at avail position pos, unchecked. */
static uint16_t avail_head(const struct virtq *vq, uint16_t pos)
{
	return le16toh(__atomic_load_n(&vq->avail->ring[pos & (vq->num - 1)], __ATOMIC_RELAXED));
}

/* Pops the next chain with its iovecs at vq->iov_base. */
static int pop_chain(struct virtq *vq, struct virtq_elem *elem)
{
	uint16_t head;
	int ret;

	if (vq->broken)
		return -EIO;
	if (!virtq_ready(vq))
		return 0;
	if (vq->shadow_avail_idx == vq->last_avail_idx) {
		ret = refresh_avail(vq);
		if (ret <= 0)
			return ret;
	}
	head = avail_head(vq, vq->last_avail_idx);
	if (head >= vq->num) {
		virtq_mark_broken(vq, "head descriptor index out of range");
		return -EIO;
	}
	ret = walk_chain(vq, head, elem);
	if (ret < 0)
		return ret;
	vq->last_avail_idx++;
	return 1;
}

int virtq_pop(struct virtq *vq, struct virtq_elem *elem)
{
	vq->iov_base = 0;
	return pop_chain(vq, elem);
}

int virtq_pop_more(struct virtq *vq, struct virtq_elem *elem)
{
	if (vq->iov_end > VIRTQ_MAX_SEGS)
		return 0;
	vq->iov_base = vq->iov_end;
	return pop_chain(vq, elem);
}

/* The descriptor in the ring's table for the chain at avail position pos,
 * as the driver wrote it: read only to choose what to prefetch, never
 * trusted (virtq_pop checks it again). */
static struct vring_desc peek_desc(const struct virtq *vq, uint16_t pos)
{
	struct vring_desc d;

	memcpy(&d, &vq->desc[avail_head(vq, pos) & (vq->num - 1)], sizeof(d));
	return d;
}

/* Prefetches where the chain at pos starts in guest memory, the FUSE
 * in-header, and where its reply starts, the out-header, for writing:
 * from its head descriptor, or from the first entries of its indirect
 * table. */
static void prefetch_buffers(const struct virtq *vq, uint16_t pos)
{
	struct vring_desc d = peek_desc(vq, pos), table[4];
	unsigned n = 1;

	if (le16toh(d.flags) & VRING_DESC_F_INDIRECT) {
		const void *t = guest_mem_gpa_to_ptr(vq->mem, le64toh(d.addr), sizeof(table));

		if (!t)
			return;
		/* One line: the in-header, the request's data or arguments,
		 * the out-header. */
		memcpy(table, t, sizeof(table));
		n = 4;
	} else {
		table[0] = d;
	}
	__builtin_prefetch(guest_mem_gpa_to_ptr(vq->mem, le64toh(table[0].addr), 1));
	for (unsigned i = 1; i < n; i++)
		if (le16toh(table[i].flags) & VRING_DESC_F_WRITE) {
			__builtin_prefetch(guest_mem_gpa_to_ptr(vq->mem, le64toh(table[i].addr), 1), 1);
			break;
		}
}

/* New chains one look at avail->idx must find before prefetching pays. */
#define VIRTQ_PREFETCH_BACKLOG 4u

void virtq_prefetch_ahead(const struct virtq *vq)
{
	unsigned pending = virtq_unpopped(vq);
	uint16_t next = vq->last_avail_idx;

	/* Only while the driver is ahead: the last look at avail->idx found
	 * a backlog. With fewer new each time, the daemon keeps up and the
	 * driver is still writing near these lines; taking them from it
	 * would slow the driver down for nothing. */
	if (pending == 0 || vq->avail_window < VIRTQ_PREFETCH_BACKLOG || !vq->mem)
		return;
	/* The next chain: its in-header and out-header. Its table was
	 * prefetched one request ago. */
	prefetch_buffers(vq, next);
	if (pending < 2)
		return;
	/* The one after: its indirect table. Its descriptor was prefetched
	 * one request ago. */
	{
		struct vring_desc d = peek_desc(vq, (uint16_t)(next + 1));

		if (le16toh(d.flags) & VRING_DESC_F_INDIRECT)
			__builtin_prefetch(guest_mem_gpa_to_ptr(vq->mem, le64toh(d.addr), 1));
	}
	if (pending < 3)
		return;
	/* Two after: its descriptor. */
	__builtin_prefetch(&vq->desc[avail_head(vq, (uint16_t)(next + 2)) & (vq->num - 1)]);
}

int virtq_rewalk(struct virtq *vq, uint16_t head, struct virtq_elem *elem)
{
	if (vq->broken)
		return -EIO;
	if (!virtq_ready(vq) || head >= vq->num)
		return -EIO;
	vq->iov_base = 0;
	return walk_chain(vq, head, elem);
}

void virtq_push(struct virtq *vq, const struct virtq_elem *elem, uint32_t len)
{
	unsigned slot = vq->used_idx & (vq->num - 1);
	struct vring_used_elem *ue = &vq->used->ring[slot];
	bool logging = __builtin_expect(vq->log != NULL, 0);

	/* Never claim more than the driver gave us room for. */
	if (len > elem->wr_len)
		len = elem->wr_len;
	if (logging)
		virtq_log_data(vq, elem, len);
	__atomic_store_n(&ue->id, htole32(elem->head), __ATOMIC_RELAXED);
	__atomic_store_n(&ue->len, htole32(len), __ATOMIC_RELAXED);
	if (logging)
		virtq_log_ring(vq, offsetof(struct vring_used, ring) + (uint64_t)slot * sizeof(*ue),
			       sizeof(*ue));
	vq->used_idx++;
}

void virtq_flush(struct virtq *vq)
{
	/* Release: the reply bytes written into the buffers and the used
	 * entries above become visible to the driver before the index that
	 * hands them over. Pairs with the driver's read barrier after it
	 * reads used->idx. */
	__atomic_store_n(&vq->used->idx, htole16(vq->used_idx), __ATOMIC_RELEASE);
	if (__builtin_expect(vq->log != NULL, 0))
		virtq_log_ring(vq, offsetof(struct vring_used, idx), sizeof(vq->used->idx));
}

bool virtq_would_notify(const struct virtq *vq)
{
	uint16_t event;

	/* Without the barrier this is a hint: a stale answer only moves the
	 * publish, and virtq_should_notify, which calls it after the barrier,
	 * still decides the call. */
	if (!vq->event_idx)
		return !(le16toh(__atomic_load_n(&vq->avail->flags, __ATOMIC_RELAXED)) &
			 VRING_AVAIL_F_NO_INTERRUPT);
	/* First decision since start: we do not know what the driver last
	 * saw, so notify rather than risk a lost interrupt. */
	if (!vq->signalled_used_valid)
		return true;
	event = le16toh(__atomic_load_n(&vq->avail->ring[vq->num], __ATOMIC_RELAXED));
	return virtq_need_event(event, vq->used_idx, vq->signalled_used);
}

bool virtq_should_notify(struct virtq *vq)
{
	bool notify;

	/* Full barrier: our used->idx store must be globally visible before
	 * we read the driver's suppression state (store->load ordering,
	 * which release/acquire does not give). Pairs with the driver's
	 * barrier between writing used_event/flags and re-reading used->idx;
	 * without it both sides can miss each other and the driver waits
	 * forever for an interrupt. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	notify = virtq_would_notify(vq);
	if (vq->event_idx) {
		vq->signalled_used = vq->used_idx;
		vq->signalled_used_valid = true;
	}
	return notify;
}

bool virtq_avail_pending(struct virtq *vq)
{
	if (vq->broken || !virtq_ready(vq))
		return false;
	if (vq->shadow_avail_idx != vq->last_avail_idx)
		return true;
	return refresh_avail(vq) != 0;
}

unsigned virtq_unpopped_now(struct virtq *vq)
{
	int pending;

	if (vq->broken || !virtq_ready(vq))
		return 0;
	/* What refresh_avail counts is what is not popped. */
	pending = refresh_avail(vq);
	return pending < 0 ? 0 : (unsigned)pending;
}

static uint16_t *avail_event_ptr(struct virtq *vq)
{
	/* used->ring[num], right after the used ring; 4-byte aligned. */
	return (uint16_t *)(void *)&vq->used->ring[vq->num];
}

void virtq_disable_notify(struct virtq *vq)
{
	uint16_t flags;

	/* With EVENT_IDX a stale avail_event already suppresses kicks: the
	 * driver only kicks when it crosses it, and we re-arm it in
	 * virtq_enable_notify. */
	if (vq->event_idx || !virtq_ready(vq))
		return;
	flags = le16toh(__atomic_load_n(&vq->used->flags, __ATOMIC_RELAXED));
	__atomic_store_n(&vq->used->flags, htole16(flags | VRING_USED_F_NO_NOTIFY),
			 __ATOMIC_RELAXED);
	if (vq->log)
		virtq_log_ring(vq, offsetof(struct vring_used, flags), sizeof(flags));
}

bool virtq_enable_notify(struct virtq *vq)
{
	if (vq->broken || !virtq_ready(vq))
		return false;
	if (vq->event_idx) {
		__atomic_store_n(avail_event_ptr(vq), htole16(vq->last_avail_idx),
				 __ATOMIC_RELAXED);
		if (vq->log)
			virtq_log_ring(vq, offsetof(struct vring_used, ring) +
				       (uint64_t)vq->num * sizeof(struct vring_used_elem), 2);
	} else {
		uint16_t flags = le16toh(__atomic_load_n(&vq->used->flags, __ATOMIC_RELAXED));

		__atomic_store_n(&vq->used->flags,
				 htole16(flags & ~VRING_USED_F_NO_NOTIFY), __ATOMIC_RELAXED);
		if (vq->log)
			virtq_log_ring(vq, offsetof(struct vring_used, flags), sizeof(flags));
	}
	/* Full barrier: the re-armed notification must be visible before we
	 * re-read avail->idx. Pairs with the driver's barrier between
	 * publishing avail->idx and reading avail_event/flags: either it
	 * sees notifications on and kicks, or we see its new entries here. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (vq->shadow_avail_idx != vq->last_avail_idx)
		return true;
	return refresh_avail(vq) > 0;
}
