/* ferryfs-load's guest memory: one memfd region at guest-physical 0, and the rings laid out in it. */
#include "frontend.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>
#include <linux/virtio_config.h>

int fe_mem_create(struct fe_dev *d, uint64_t size)
{
	int ret;

	size = (size + (2u << 20) - 1) & ~(uint64_t)((2u << 20) - 1);
	d->memfd = memfd_create("ferryfs-load-guest-ram", MFD_CLOEXEC);
	if (d->memfd < 0)
		return -errno;
	if (ftruncate(d->memfd, (off_t)size) < 0) {
		ret = -errno;
		goto err_close;
	}
	d->mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
		      d->memfd, 0);
	if (d->mem == MAP_FAILED) {
		ret = -errno;
		d->mem = NULL;
		goto err_close;
	}
	d->mem_size = size;
	d->mem_used = 0;
	return 0;

err_close:
	close(d->memfd);
	d->memfd = -1;
	return ret;
}

void *fe_alloc(struct fe_dev *d, uint64_t len, uint64_t align, uint64_t *gpa)
{
	uint64_t off = (d->mem_used + align - 1) & ~(align - 1);

	if (off + len > d->mem_size)
		return NULL;
	d->mem_used = off + len;
	/* Guest-physical addresses are offsets in the memfd: one region at 0. */
	*gpa = off;
	return d->mem + off;
}

static uint16_t ring_size(uint16_t nslots, bool indirect)
{
	unsigned want = indirect ? nslots : (unsigned)nslots * VU_MAX_SEGS;
	unsigned n = 64;

	while (n < want)
		n <<= 1;
	return (uint16_t)n;
}

uint64_t fe_queue_mem_needed(uint16_t nslots, bool indirect)
{
	uint64_t num = ring_size(nslots, indirect);
	uint64_t sz = 3 * 4096 + 16 * num + (6 + 2 * num) + (6 + 8 * num);

	if (indirect)
		sz += 4096 + (uint64_t)nslots * VU_MAX_SEGS * sizeof(struct vring_desc);
	return sz + 4096;
}

int fe_queues_create(struct fe_dev *d, unsigned nqueues, const uint16_t *nslots)
{
	bool indirect = fe_has_indirect(d);
	bool eidx = d->features & (1ull << VIRTIO_RING_F_EVENT_IDX);
	bool packed = d->features & (1ull << VIRTIO_F_RING_PACKED);
	unsigned i;
	int ret = 0;

	d->queues = calloc(nqueues, sizeof(*d->queues));
	if (!d->queues)
		return -ENOMEM;
	for (i = 0; i < nqueues; i++) {
		d->queues[i].kickfd = -1;
		d->queues[i].callfd = -1;
	}
	d->nqueues = nqueues;
	for (i = 0; i < nqueues; i++) {
		struct fe_queue *q = &d->queues[i];
		uint16_t num = ring_size(nslots[i], indirect);

		if (num > 1024 || (!indirect && nslots[i] > num / VU_MAX_SEGS)) {
			/* libvhost-user backends reject rings over 1024. */
			fprintf(stderr, "queue depth %u needs a ring over 1024 entries\n",
				nslots[i]);
			ret = -EINVAL;
			goto out;
		}
		q->index = i;
		q->num = num;
		q->nslots = nslots[i];
		q->event_idx = eidx;
		q->use_indirect = indirect;
		q->packed = packed;
		if (packed) {
			/* Descriptor ring, then the driver's and the device's
			 * event suppression areas; both wrap counters start at 1. */
			q->pdesc = fe_alloc(d, 16ull * num, 4096, &q->desc_gpa);
			q->driver_event = fe_alloc(d, 4, 64, &q->avail_gpa);
			q->device_event = fe_alloc(d, 4, 64, &q->used_gpa);
			q->slot_ndescs = calloc(nslots[i], sizeof(q->slot_ndescs[0]));
			q->avail_wrap = q->used_wrap = true;
			if (!q->pdesc || !q->driver_event || !q->device_event || !q->slot_ndescs) {
				ret = -ENOMEM;
				goto out;
			}
			/* Satisfies the checks below; never used as split. */
			q->desc = (void *)q->pdesc;
			q->avail = (void *)q->driver_event;
			q->used = (void *)q->device_event;
		} else {
			q->desc = fe_alloc(d, 16ull * num, 4096, &q->desc_gpa);
			q->avail = fe_alloc(d, 6 + 2ull * num, 4096, &q->avail_gpa);
			q->used = fe_alloc(d, 6 + 8ull * num, 4096, &q->used_gpa);
		}
		if (indirect)
			q->indirect = fe_alloc(d, (uint64_t)nslots[i] * VU_MAX_SEGS *
					       sizeof(struct vring_desc), 4096,
					       &q->indirect_gpa);
		if (!q->desc || !q->avail || !q->used || (indirect && !q->indirect)) {
			ret = -ENOMEM;
			goto out;
		}
		q->kickfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		q->callfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (q->kickfd < 0 || q->callfd < 0) {
			ret = -errno;
			goto out;
		}
	}
out:
	return ret;
}
