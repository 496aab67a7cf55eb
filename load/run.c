/* ferryfs-load's run: connect, INIT, set up, run the workload, tear down, report. */
#include "engine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/virtio_config.h>

#include "evict.h"
#include "fuse_requests.h"
#include "measure.h"
#include "workloads.h"

#define HIPRIO_SLOTS  16
#define HIPRIO_DATA   (LOAD_FORGET_BATCH * sizeof(struct fuse_forget_one))

int load_init(struct run *r)
{
	struct fuse_init_in in = {
		.major = FUSE_KERNEL_VERSION, .minor = 38, .max_readahead = 0,
		/* A cache=none guest: no writeback cache, no ACLs (they would
		 * change what the backend does), big requests, readdirplus. */
		.flags = FUSE_ASYNC_READ | FUSE_BIG_WRITES | FUSE_MAX_PAGES |
			 FUSE_DO_READDIRPLUS | FUSE_PARALLEL_DIROPS | FUSE_ASYNC_DIO,
	};
	struct fc_slot *s = load_sync_slot(r);
	const struct fuse_init_out *o;
	uint32_t olen;
	int ret;

	fc_begin(s, FUSE_INIT, 0, load_unique(r));
	ret = fc_arg(s, &in, sizeof(in));
	if (!ret)
		ret = fc_reply(s, sizeof(struct fuse_init_out));
	if (!ret)
		ret = load_sync_call(r, s);
	if (ret)
		return ret;
	o = fc_out_args(s);
	olen = fc_out_hdr(s)->len - (uint32_t)sizeof(struct fuse_out_header);
	if (olen < FUSE_COMPAT_22_INIT_OUT_SIZE || o->major != FUSE_KERNEL_VERSION ||
	    o->minor < 27) {
		fprintf(stderr, "ferryfs-load: INIT reply: %u bytes, version %u.%u\n",
			olen, o->major, o->minor);
		r->errors++;
		return -EPROTO;
	}
	r->proto_minor = o->minor;
	r->max_write = o->max_write;
	r->max_pages = (o->flags & FUSE_MAX_PAGES) && olen >= 34 ? o->max_pages : 32;
	if (r->wl->data_file &&
	    (r->cfg->block_size > r->max_write ||
	     r->cfg->block_size > r->max_pages * 4096u)) {
		fprintf(stderr, "ferryfs-load: block size %u over the backend's max_write %u / max_pages %u\n",
			r->cfg->block_size, r->max_write, r->max_pages);
		return -EINVAL;
	}
	return 0;
}

/* The work directory, then what the workload needs in it. */
static int setup(struct run *r)
{
	int ret;

	snprintf(r->workdir_name, sizeof(r->workdir_name), "ferryfs-load.%d.%llx",
		 (int)getpid(), (unsigned long long)(load_rnd(r) & 0xffffff));
	ret = load_sync_mkdir(r, FUSE_ROOT_ID, r->workdir_name, &r->workdir);
	if (ret)
		return ret;
	if (r->wl->data_file)
		return io_setup_data_file(r);
	return r->wl->setup ? r->wl->setup(r) : 0;
}

static int teardown(struct run *r)
{
	struct fc_slot *s = load_sync_slot(r);
	int ret = 0;

	if (r->wl->data_file)
		ret = io_teardown_data_file(r);
	else if (r->wl->teardown)
		ret = r->wl->teardown(r);
	if (!ret && r->workdir)
		ret = load_sync_remove(r, FUSE_RMDIR, FUSE_ROOT_ID, r->workdir_name, r->workdir, 1);
	if (!ret)
		ret = load_drain(r);
	if (ret)
		return ret;
	/* DESTROY, as the Linux driver sends at unmount; it is optional in the
	 * protocol, so ENOSYS is fine. The Rust virtiofsd (1.13) returns the
	 * buffer with nothing written: a known quirk, counted and reported
	 * rather than an error, since the Linux driver ignores the reply. */
	fc_begin(s, FUSE_DESTROY, 0, load_unique(r));
	ret = fc_reply(s, 0);
	s->expect_len = sizeof(struct fuse_out_header);
	s->allow_err = -ENOSYS;
	s->allow_empty = true;
	if (!ret)
		ret = load_sync_call(r, s);
	if (!ret && s->empty_reply)
		r->quirk_destroy_empty++;
	return ret;
}

int load_alloc_queues(struct run *r)
{
	const struct load_cfg *c = r->cfg;
	uint32_t dcap = c->block_size > FR_RDP_BUF ? c->block_size : FR_RDP_BUF;
	uint16_t *nslots = NULL;
	uint64_t need = 1 << 20;
	unsigned i, j;
	int ret;

	r->nq = 1 + c->queues;
	nslots = calloc(r->nq, sizeof(*nslots));
	r->q = calloc(r->nq, sizeof(*r->q));
	if (!nslots || !r->q) {
		ret = -ENOMEM;
		goto out;
	}
	for (i = 0; i < r->nq; i++) {
		uint32_t cap = i ? dcap : (uint32_t)HIPRIO_DATA;

		nslots[i] = (uint16_t)(i ? c->queue_depth : HIPRIO_SLOTS);
		need += fe_queue_mem_needed(nslots[i], fe_has_indirect(&r->dev));
		need += (uint64_t)nslots[i] * (FC_CTRL_SIZE + ((cap + 4095) & ~4095u));
	}
	ret = fe_mem_create(&r->dev, need);
	if (ret)
		goto out;
	ret = fe_queues_create(&r->dev, r->nq, nslots);
	if (ret)
		goto out;
	for (i = 0; i < r->nq; i++) {
		struct lq *q = &r->q[i];
		uint32_t cap = i ? dcap : (uint32_t)HIPRIO_DATA;

		q->vq = &r->dev.queues[i];
		q->hiprio = i == 0;
		q->slots = calloc(nslots[i], sizeof(*q->slots));
		q->pend = calloc(nslots[i], sizeof(*q->pend));
		if (!q->slots || !q->pend) {
			ret = -ENOMEM;
			goto out;
		}
		for (j = 0; j < nslots[i]; j++) {
			struct fc_slot *s = &q->slots[j].fc;

			s->index = (uint16_t)j;
			q->slots[j].w.seq = (uint64_t)i << 48;
			s->ctrl = fe_alloc(&r->dev, FC_CTRL_SIZE, 4096, &s->ctrl_gpa);
			s->data = fe_alloc(&r->dev, cap, 4096, &s->data_gpa);
			s->data_cap = cap;
			if (!s->ctrl || !s->data) {
				ret = -ENOMEM;
				goto out;
			}
		}
	}
out:
	free(nslots);
	return ret;
}

void load_free_run(struct run *r)
{
	unsigned i, j;

	for (i = 0; r->q && i < r->nq; i++) {
		/* readdirplus's bitmaps (meta_setup_dir); NULL otherwise. */
		for (j = 0; r->q[i].slots && j < r->q[i].vq->nslots; j++)
			free(r->q[i].slots[j].w.dir.seen);
		free(r->q[i].slots);
		free(r->q[i].pend);
	}
	free(r->q);
	free(r->lat.v);
	free(r->forgets);
	fe_close(&r->dev);
}

/* --cold: syncs the data file through the backend (dirty pages cannot be
 * dropped) and keeps it out of the host's page cache from then on. */
static int cold_start(struct run *r, struct evictor *e)
{
	struct fc_slot *s = load_sync_slot(r);
	char path[4096];
	int ret;

	ret = fr_fsync(s, load_unique(r), r->file_nodeid, r->file_fh);
	if (!ret)
		ret = load_sync_call(r, s);
	if (ret)
		return ret;
	snprintf(path, sizeof(path), "%s/%s/data", r->cfg->cold_dir, r->workdir_name);
	ret = evict_start(e, path);
	if (ret == -ENOENT)
		fprintf(stderr, "ferryfs-load: --cold %s: is it the directory the backend shares?\n",
			r->cfg->cold_dir);
	return ret;
}

int load_run(const struct load_cfg *cfg, struct load_result *res)
{
	struct run r = { .cfg = cfg, .rng = cfg->seed | 1 };
	struct evictor ev = { .fd = -1 };
	uint64_t t0, ws;
	int ret;

	memset(res, 0, sizeof(*res));
	res->fill_cpu_us = -1; /* the driver's fill is in load_cpu_us: --host only */
	res->idle_daemon_cpu_us = -1;
	r.dev.sock = -1;
	r.dev.memfd = -1;
	r.wl = load_workload_find(cfg->workload);
	if (!r.wl)
		return -EINVAL;
	r.nblocks = cfg->file_size / cfg->block_size;

	t0 = load_now_ns();
	ret = fe_connect(&r.dev, cfg->socket);
	if (ret) {
		fprintf(stderr, "ferryfs-load: connect %s: %s\n", cfg->socket, strerror(-ret));
		goto out;
	}
	r.dev.want_packed = cfg->packed;
	ret = fe_negotiate(&r.dev, cfg->event_idx);
	if (ret)
		goto out;
	if (r.dev.queue_num_max && 1 + cfg->queues > r.dev.queue_num_max) {
		fprintf(stderr, "ferryfs-load: --queues %u but the backend has %llu queues (hiprio included)\n",
			cfg->queues, (unsigned long long)r.dev.queue_num_max);
		ret = -EINVAL;
		goto out;
	}
	ret = load_alloc_queues(&r);
	if (ret)
		goto out;
	ret = fe_start(&r.dev);
	if (ret)
		goto out;
	ret = load_init(&r);
	if (ret)
		goto out;
	ret = setup(&r);
	if (ret)
		goto out;
	if (r.errors) {
		fprintf(stderr, "ferryfs-load: setup got wrong replies; not measuring\n");
		goto teardown;
	}
	if (cfg->cold_dir && r.file_nodeid) {
		ret = cold_start(&r, &ev);
		if (ret)
			goto out;
	}
	res->setup_s = (double)(load_now_ns() - t0) / 1e9;
	r.cursor = 0;
	ws = load_now_ns() + (uint64_t)(cfg->warmup * 1e9);
	/* With --ops the window has no end in time: the engine closes it. */
	ret = load_engine(&r, "workload", r.wl->next, r.wl->done, ws,
			  cfg->ops ? UINT64_MAX : ws + (uint64_t)(cfg->seconds * 1e9));
	evict_stop(&ev);
	if (ret)
		goto out;
	if (cfg->idle > 0) {
		/* A test that reads the daemon's state while it idles waits for
		 * this line, not for a guess at how long the run takes. */
		fprintf(stderr, "ferryfs-load: idle for %.1f s, rings set up, nothing in flight\n",
			cfg->idle);
		res->idle_daemon_cpu_us = load_idle_cpu_us(cfg->daemon_pid, cfg->idle);
	}
teardown:
	ret = teardown(&r);
out:
	res->errors = r.errors;
	res->quirk_destroy_empty = r.quirk_destroy_empty;
	res->elapsed_s = (double)(r.t_end - r.t_start) / 1e9;
	res->ops = r.ops;
	res->bytes = r.bytes;
	res->entries = r.entries;
	res->cycles = r.cycles;
	res->lat_backwards = r.lat_backwards;
	load_latency_summary(&r.lat, res);
	res->daemon_cpu_us = (cfg->daemon_pid > 0 && (int64_t)r.cpu0_us >= 0 &&
			      (int64_t)r.cpu1_us >= 0) ?
			     (double)r.cpu1_us - (double)r.cpu0_us : -1;
	res->load_cpu_us = r.self1_us - r.self0_us;
	res->watch_cpu_us = r.watch0_us >= 0 && r.watch1_us >= 0 ?
			    (double)(r.watch1_us - r.watch0_us) : -1;
	/* Those of the measured interval, like ops and CPU. */
	res->kicks = r.kicks1 - r.kicks0;
	res->calls = r.calls1 - r.calls0;
	res->proto_minor = r.proto_minor;
	res->max_write = r.max_write;
	res->max_pages = r.max_pages;
	res->event_idx = r.dev.features & (1ull << VIRTIO_RING_F_EVENT_IDX);
	res->indirect = fe_has_indirect(&r.dev);
	res->packed = r.dev.features & (1ull << VIRTIO_F_RING_PACKED);
	res->queue_num_max = r.dev.queue_num_max;
	load_free_run(&r);
	return ret;
}
