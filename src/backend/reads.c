/* READ: straight into the guest's buffers when the data is cached; on an offload thread when it must come from the disk while requests wait behind it. */
#include "backend/reads.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/dev_slots.h"
#include "backend/file_io.h"
#include "backend/read_split.h"
#include "backend/test_switch.h"
#include "common/log.h"

/*
 * A queue thread runs its requests one after the other, so a read that
 * waits for the disk (a device round trip, far longer than a copy from
 * the page cache) holds up every request behind it, and the disk sees one
 * read at a time however many the guest sent. preadv2 with RWF_NOWAIT
 * tells whether the data is cached without waiting; only then does the
 * read go to another thread.
 *
 * RWF_NOWAIT costs more than pread (the kernel imports an iovec array, a
 * visible part of a small cached read), so a file system is only asked
 * that way while it has lately had data that was not cached: once every
 * READ_SAMPLE reads, and on every read for READ_COLD_CREDIT reads after
 * one that would have waited. On a warm file system one read in
 * READ_SAMPLE pays the extra.
 */
#define READ_SAMPLE 64u
#define READ_COLD_CREDIT 4096

/*
 * Bytes of deferred reads in flight at most. Their buffers are the
 * daemon's own memory: up to 256 requests (FERRY_MAX_DEFERRED) of up to
 * max_write (1 MiB) each would be 256 MiB a guest could make us hold.
 * 32 MiB keeps 16 reads of 1 MiB or 8192 of 4 KiB going at once, more than
 * a disk gains from; past it, reads wait for the disk inline.
 */
#define READ_DEFER_BYTES_MAX (32u << 20)

/* credit of a file system where RWF_NOWAIT is refused (tmpfs, many
 * network and FUSE file systems): reads there always run inline. */
#define NOWAIT_UNSUPPORTED INT32_MIN

struct read_runner {
	struct open_file_table *open_files;
	struct offload *offload;        /* the passthrough's, freed before us */
	struct read_split *split;       /* large inline reads on two threads */
#ifdef FERRY_TEST_HOOKS
	test_switch defer_all;          /* see read_runner_defer_all */
	test_switch pretend_uncached;   /* see read_runner_pretend_uncached */
#endif
	struct dev_slots devs;
	/* Per slot of devs; > 0: reads there try RWF_NOWAIT for this many
	 * more reads. */
	_Atomic int32_t credit[DEV_SLOTS];
	atomic_size_t deferred_bytes;   /* buffers of reads in flight */
};

struct read_job {
	struct offload_job job;         /* first: run() gets it */
	struct read_runner *r;
	struct open_file *h;
	struct fuse_deferred *deferred;
	void *buf;                      /* size bytes, page-aligned */
	size_t size;
	uint64_t off;
};

/* Which of a queue thread's reads are sampled; per thread, so queues do
 * not share a counter's cache line. */
static __thread unsigned read_count;

#ifdef FERRY_TEST_HOOKS
void read_runner_defer_all(struct read_runner *r, bool on)
{
	test_switch_set(r->defer_all, on);
}

void read_runner_pretend_uncached(struct read_runner *r, bool on)
{
	test_switch_set(r->pretend_uncached, on);
}
#endif

int read_runner_new(struct read_runner **out, struct open_file_table *handles,
		    struct offload *offload)
{
	struct read_runner *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->open_files = handles;
	r->offload = offload;
	if (read_split_new(&r->split, true) < 0) {
		free(r);
		return -ENOMEM;
	}
	*out = r;
	return 0;
}

void read_runner_free(struct read_runner *r)
{
	if (!r)
		return;
	read_split_free(r->split);
	free(r);
}

static void read_run(struct offload_job *oj)
{
	struct read_job *job = (struct read_job *)oj;
	struct iovec iov = { .iov_base = job->buf, .iov_len = job->size };
	ssize_t n = iov_transfer(false, job->h->fd, &iov, 1, job->size, job->off, 0);

	/* The buffer goes with the reply either way. */
	fuse_deferred_finish_data(job->deferred, n < 0 ? (int)n : 0, job->buf,
			       n < 0 ? 0 : (size_t)n);
	atomic_fetch_sub_explicit(&job->r->deferred_bytes, job->size, memory_order_relaxed);
	open_file_put(job->r->open_files, job->h);
	free(job);
}

/* FERRY_DEFERRED once the read is deferred; -errno when it cannot
 * be, to read inline instead. */
static int read_defer(struct read_runner *r, const struct fuse_request_ctx *ctx,
		      struct open_file *h, size_t size, uint64_t off)
{
	struct read_job *job;
	int ret = -ENOBUFS;

	if (atomic_fetch_add_explicit(&r->deferred_bytes, size, memory_order_relaxed) +
	    size > READ_DEFER_BYTES_MAX)
		goto err_budget;
	ret = -ENOMEM;
	job = calloc(1, sizeof(*job));
	if (!job)
		goto err_budget;
	/* Allocated here, on the queue thread, so that a failure still leaves
	 * the inline read. Page-aligned, so that a file the guest opened
	 * O_DIRECT can be read into it. */
	if (posix_memalign(&job->buf, 4096, size) != 0)
		goto err;
	job->job.run = read_run;
	job->r = r;
	job->h = h;
	job->size = size;
	job->off = off;
	ret = offload_defer(r->offload, ctx, &job->job, &job->deferred);
	if (ret == FERRY_DEFERRED)
		return ret;
err:
	free(job->buf);
	free(job);
err_budget:
	atomic_fetch_sub_explicit(&r->deferred_bytes, size, memory_order_relaxed);
	return ret;
}

/*
 * Tries the read without waiting for the disk: the bytes read (all of
 * size, or fewer at EOF), -EAGAIN when some of the data is not cached, or
 * another -errno. A short RWF_NOWAIT read is either EOF or data that would
 * have waited; one more byte tells them apart.
 */
static ssize_t read_nowait(int fd, const struct iovec *dst, unsigned dst_cnt,
			   size_t size, uint64_t off)
{
	ssize_t n = iov_transfer(false, fd, dst, dst_cnt, size, off, RWF_NOWAIT);
	char probe;
	struct iovec one = { .iov_base = &probe, .iov_len = 1 };
	ssize_t more;

	if (n < 0 || (size_t)n == size)
		return n;
	more = preadv2(fd, &one, 1, (off_t)(off + (uint64_t)n), RWF_NOWAIT);
	if (more == 0)
		return n;
	return more < 0 && errno != EAGAIN ? -errno : -EAGAIN;
}

ssize_t read_handle(struct read_runner *r, const struct fuse_request_ctx *ctx,
		    struct open_file *h, const struct iovec *dst, unsigned dst_cnt,
		    size_t size, uint64_t off)
{
	uint64_t dev = h->inode->key.dev;
	_Atomic int32_t *credit_slot = NULL;
	int32_t credit = 0;
	ssize_t ret;
	int slot;

	/* Alone on its queue, a read waits for the disk here at no cost to
	 * anyone: no thread, no copy. */
	if (!ctx->queued_behind || !ctx->can_defer || size == 0)
		goto inline_read;
	slot = dev_slots_find(&r->devs, dev);
	if (slot >= 0) {
		credit_slot = &r->credit[slot];
		credit = atomic_load_explicit(credit_slot, memory_order_relaxed);
	}
	if (credit == NOWAIT_UNSUPPORTED)
		goto inline_read;
	if (!test_switch_on(r->defer_all) && credit <= 0 && ++read_count % READ_SAMPLE != 0)
		goto inline_read;

	if (test_switch_on(r->pretend_uncached))
		ret = -EAGAIN;
	else
		ret = read_nowait(h->fd, dst, dst_cnt, size, off);
	if (ret >= 0) {
		if (credit > 0)
			atomic_fetch_sub_explicit(credit_slot, 1, memory_order_relaxed);
		goto done;
	}
	if (ret == -EOPNOTSUPP) {
		atomic_store_explicit(&r->credit[dev_slots_claim(&r->devs, dev)],
				      NOWAIT_UNSUPPORTED, memory_order_relaxed);
		goto inline_read;
	}
	if (ret != -EAGAIN)
		goto done;
	if (credit <= 0)
		log_debug("read: file system %llu:%llu has data that is not cached; reads that wait for it run on offload threads",
			  (unsigned long long)(dev >> 32), (unsigned long long)(dev & 0xffffffffu));
	atomic_store_explicit(&r->credit[dev_slots_claim(&r->devs, dev)], READ_COLD_CREDIT,
			      memory_order_relaxed);
	ret = read_defer(r, ctx, h, size, off);
	if (ret == FERRY_DEFERRED)
		return ret;   /* h goes with the job */

inline_read:
	ret = read_split_read(r->split, h->fd, dst, dst_cnt, size, off);
done:
	open_file_put(r->open_files, h);
	return ret;
}
