/* fsync and fdatasync: inline where they are quick, on an offload thread where they have been slow. */
#include "backend/sync.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "backend/dev_slots.h"
#include "backend/test_switch.h"
#include "common/clock.h"
#include "common/log.h"

/*
 * A sync that took longer than this marks its file system slow. Handing a
 * sync to an offload thread costs a wake-up and a reply through the queue
 * thread, more than a tmpfs or page-cache-only fsync costs in all; a
 * disk's journal commit waits for the device, far longer than that hand-
 * over, and every request queued behind it on the same virtqueue would
 * wait too. A millisecond lies well between the two.
 */
#define SLOW_SYNC_NS (1000u * 1000u)

struct sync_runner {
	struct open_file_table *open_files;
#ifdef FERRY_TEST_HOOKS
	test_switch defer_all;          /* see sync_runner_defer_all */
#endif
	struct dev_slots slow_devs;     /* file systems slow to sync */
	struct offload *offload;        /* the passthrough's, freed before us */
};

struct sync_job {
	struct offload_job job;         /* first: run() gets it */
	struct sync_runner *r;
	struct open_file *h;
	bool datasync;
	struct fuse_deferred *deferred;
};

#ifdef FERRY_TEST_HOOKS
void sync_runner_defer_all(struct sync_runner *r, bool on)
{
	test_switch_set(r->defer_all, on);
}
#endif

int sync_runner_new(struct sync_runner **out, struct open_file_table *handles,
		    struct offload *offload)
{
	struct sync_runner *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->open_files = handles;
	r->offload = offload;
	*out = r;
	return 0;
}

void sync_runner_free(struct sync_runner *r)
{
	free(r);
}

static bool dev_is_slow(struct sync_runner *r, uint64_t dev)
{
	return dev_slots_find(&r->slow_devs, dev) >= 0;
}

static void dev_mark_slow(struct sync_runner *r, uint64_t dev)
{
	if (dev_is_slow(r, dev))
		return;
	dev_slots_claim(&r->slow_devs, dev);
	log_debug("sync: file system %llu:%llu is slow to sync; its syncs run on offload threads",
		  (unsigned long long)(dev >> 32), (unsigned long long)(dev & 0xffffffffu));
}

static int do_sync(int fd, bool datasync)
{
	int ret = datasync ? fdatasync(fd) : fsync(fd);

	return ret < 0 ? -errno : 0;
}

static void job_done(struct sync_job *job, int ret)
{
	fuse_deferred_finish(job->deferred, ret);
	open_file_put(job->r->open_files, job->h);
	free(job);
}

static void sync_run(struct offload_job *oj)
{
	struct sync_job *job = (struct sync_job *)oj;

	job_done(job, do_sync(job->h->fd, job->datasync));
}

/* FERRY_DEFERRED once the request is deferred (answered even if
 * no thread starts); -errno when it cannot be, to sync inline instead. */
static int sync_defer(struct sync_runner *r, const struct fuse_request_ctx *ctx,
		      struct open_file *h, bool datasync)
{
	struct sync_job *job = calloc(1, sizeof(*job));
	int ret;

	if (!job)
		return -ENOMEM;
	job->job.run = sync_run;
	job->r = r;
	job->h = h;
	job->datasync = datasync;
	ret = offload_defer(r->offload, ctx, &job->job, &job->deferred);
	if (ret < 0)
		free(job);
	return ret;
}

int sync_handle(struct sync_runner *r, const struct fuse_request_ctx *ctx,
		struct open_file *h, bool datasync)
{
	uint64_t dev = h->inode->key.dev, start;
	int ret;

	/* A thread only pays when something waits behind the sync; alone on
	 * its queue, the sync is quicker done here (no thread to start, no
	 * reply to hand back). */
	if (test_switch_on(r->defer_all) || (ctx->queued_behind && dev_is_slow(r, dev))) {
		ret = sync_defer(r, ctx, h, datasync);
		if (ret == FERRY_DEFERRED)
			return ret;
	}
	start = ferry_monotonic_ns();
	ret = do_sync(h->fd, datasync);
	if (ferry_monotonic_ns() - start > SLOW_SYNC_NS)
		dev_mark_slow(r, dev);
	open_file_put(r->open_files, h);
	return ret;
}
