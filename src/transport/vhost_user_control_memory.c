/* vhost-user control messages for guest memory: the memory table, its regions, and the dirty log. */
#include "transport/vhost_user_control.h"

#include <errno.h>

#include "common/log.h"
#include "transport/guest_mem.h"

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

/* Puts val in dev->field while every queue thread is out of its batch and
 * lets refresh(dev) point the queues at it under the same locks. Yields
 * the old value: once this returns no batch can hold it, so the caller
 * frees it. */
#define SWAP_UNDER_QUEUE_LOCKS(dev, field, val, refresh) __extension__ ({ \
	__typeof__((dev)->field) old_;					\
									\
	vu_lock_all_queues(dev);					\
	old_ = (dev)->field;						\
	(dev)->field = (val);						\
	refresh(dev);							\
	vu_unlock_all_queues(dev);					\
	old_;								\
})

int vu_ctl_get_max_mem_slots(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	return vu_reply_u64(r, GUEST_MEM_MAX_REGIONS);
}

static void region_desc_from_wire(struct guest_region_desc *d,
				  const struct vu_mem_region *w)
{
	d->gpa = w->gpa;
	d->size = w->size;
	d->uva = w->uva;
	d->mmap_offset = w->mmap_offset;
}

int vu_ctl_set_mem_table(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
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

int vu_ctl_add_mem_reg(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
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
	vu_lock_all_queues(dev);
	ret = guest_mem_insert(dev->mem, &region);
	if (ret == 0)
		remap_all_queues(dev);
	vu_unlock_all_queues(dev);
	if (ret < 0) {
		guest_region_unmap(&region);
		return ret;
	}
	for (unsigned i = 0; i < dev->nqueues; i++)
		vu_queue_maybe_start(&dev->queues[i]);
	return 0;
}

int vu_ctl_rem_mem_reg(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	struct guest_region_desc d;
	struct guest_region removed;
	int ret;

	/* Older QEMU sends an fd here; vhost-user.rst lets us ignore it. */
	if (m->nfds > 1)
		return -EINVAL;
	region_desc_from_wire(&d, &m->p.mem_single.region);
	vu_lock_all_queues(dev);
	ret = guest_mem_remove(dev->mem, &d, &removed);
	if (ret == 0)
		remap_all_queues(dev);
	vu_unlock_all_queues(dev);
	if (ret < 0) {
		log_err("REM_MEM_REG: no region gpa 0x%llx size 0x%llx uva 0x%llx",
			(unsigned long long)d.gpa, (unsigned long long)d.size,
			(unsigned long long)d.uva);
		return ret;
	}
	guest_region_unmap(&removed);
	return 0;
}

/* SET_LOG_BASE: maps the log; a later one replaces the earlier (QEMU
 * sends the new one before it frees the old when memory grows). */
int vu_ctl_set_log_base(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
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
	dirty_log_free(SWAP_UNDER_QUEUE_LOCKS(dev, log, log, vu_update_logging));
	log_info("vhost-user: dirty log of %llu bytes (%llu MiB of guest memory)",
		 (unsigned long long)log->size,
		 (unsigned long long)(log->size * 8 * VU_LOG_PAGE_SIZE >> 20));
	r->p.u64 = 0;
	return 0;
}

/* SET_LOG_FD: an eventfd kicked after marks; none if no fd. */
int vu_ctl_set_log_fd(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	int fd = m->nfds == 1 ? vu_msg_take_fd(m, 0) : -1;
	int old;

	vu_lock_all_queues(dev);
	old = dev->log_call_fd;
	dev->log_call_fd = fd;
	vu_unlock_all_queues(dev);
	close_fd(&old);
	return 0;
}
