/* READ and FSYNC of an open file: inline on the queue thread where that is quick, on the offload executor where they would wait for the disk while requests queue behind them. */
#include "backend/io_offload.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "backend/dev_slots.h"
#include "backend/file_io.h"
#include "backend/read_split.h"
#include "backend/test_switch.h"
#include "common/clock.h"
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
 * network and FUSE file systems): reads there cannot be asked whether
 * they would wait, so whether they slept tells instead (below). */
#define NOWAIT_UNSUPPORTED INT32_MIN

/*
 * On a file system that refuses RWF_NOWAIT, one read in READ_SAMPLE is
 * watched: a read that put its thread to sleep (a voluntary context
 * switch) waited for something, a network file system's server or a FUSE
 * daemon; one answered from the page cache does not sleep, however long
 * a busy machine preempts it, and neither does one that only waited for
 * a CPU, which wall time alone could not tell from a wait (and reads
 * deferred side by side on few CPUs would then keep looking slow). Then
 * the next READ_SLOW_CREDIT reads there with requests behind them run on
 * offload threads, each watched the same way: one that slept renews the
 * credit, one that did not (the data is cached again) takes
 * READ_QUICK_DEBIT off it, so a file system that turned warm is read
 * inline again after a few.
 */
#define READ_SLOW_CREDIT 4096
#define READ_QUICK_DEBIT (READ_SLOW_CREDIT / 16)

/*
 * Reads larger than this on such a file system stay on the queue thread:
 * their time there is mostly copying (through the file system's client,
 * which splits them into its own smaller requests, and from the page
 * cache), which an offload thread would do once more into its own buffer
 * before the queue thread copies that into the guest's.
 */
#define READ_UNASKED_DEFER_MAX (128u << 10)

/*
 * A sync that took longer than this marks its file system slow. Handing a
 * sync to an offload thread costs a wake-up and a reply through the queue
 * thread, more than a tmpfs or page-cache-only fsync costs in all; a
 * disk's journal commit waits for the device, far longer than that hand-
 * over, and every request queued behind it on the same virtqueue would
 * wait too. A millisecond lies well between the two.
 */
#define SLOW_SYNC_NS (1000u * 1000u)

struct io_offload {
	struct open_file_table *open_files;
	struct offload *offload;        /* the passthrough's, freed before us */
	/* READ */
	struct read_split *split;       /* large inline reads on two threads */
	struct dev_slots cold_devs;     /* file systems with data not cached */
	/* Per slot of cold_devs; > 0: reads there try RWF_NOWAIT for this many
	 * more reads. */
	_Atomic int32_t credit[DEV_SLOTS];
	/* Per slot of a file system with credit NOWAIT_UNSUPPORTED; > 0: its
	 * reads have lately slept, and those that may go to offload threads. */
	_Atomic int32_t slow_credit[DEV_SLOTS];
	atomic_size_t deferred_bytes;   /* buffers of reads in flight */
	/* FSYNC */
	struct dev_slots slow_devs;     /* file systems slow to sync */
#ifdef FERRY_TEST_HOOKS
	struct io_offload_switches test;
#endif
};

/* A READ or FSYNC answered from an offload thread: holds the caller's ref
 * on h until it is answered. */
struct io_job {
	struct offload_job job;         /* first: run() gets it */
	struct io_offload *io;
	struct open_file *h;
	struct fuse_deferred *deferred;
};

struct read_job {
	struct io_job base;             /* first */
	void *buf;                      /* size bytes, page-aligned */
	size_t size;
	uint64_t off;
	/* A file system's slow_credit, for a read deferred because that file
	 * system's reads sleep; NULL for one that RWF_NOWAIT found not cached. */
	_Atomic int32_t *slow_credit;
};

struct sync_job {
	struct io_job base;             /* first */
	bool datasync;
};

/* Which of a queue thread's reads are sampled; per thread, so queues do
 * not share a counter's cache line. */
static __thread unsigned read_count;

int io_offload_new(struct io_offload **out, struct open_file_table *open_files,
		   struct offload *offload)
{
	struct io_offload *io = calloc(1, sizeof(*io));

	if (!io)
		return -ENOMEM;
	io->open_files = open_files;
	io->offload = offload;
	if (read_split_new(&io->split, true) < 0) {
		free(io);
		return -ENOMEM;
	}
	*out = io;
	return 0;
}

void io_offload_free(struct io_offload *io)
{
	if (!io)
		return;
	read_split_free(io->split);
	free(io);
}

#ifdef FERRY_TEST_HOOKS
struct io_offload_switches *io_offload_switches(struct io_offload *io)
{
	return &io->test;
}
#endif

/* What was learnt of the file system on dev, named by major:minor. */
static void log_dev(const char *what, uint64_t dev, const char *news)
{
	log_debug("%s: file system %llu:%llu %s", what, (unsigned long long)(dev >> 32),
		  (unsigned long long)(dev & 0xffffffffu), news);
}

/* Hands job (its run() and its request's own fields set) to offload with
 * h: FERRY_DEFERRED, or -errno when it cannot be deferred (the caller
 * then still owns job and h). */
static int io_job_defer(struct io_offload *io, const struct fuse_request_ctx *ctx,
			struct io_job *job, struct open_file *h)
{
	job->io = io;
	job->h = h;
	return offload_defer(io->offload, ctx, &job->job, &job->deferred);
}

/* The last step of a deferred READ or FSYNC: answers it (data, a malloc'd
 * buffer or NULL, goes with the reply) and lets go of h and job. */
static void io_job_finish(struct io_job *job, int rc, void *data, size_t len)
{
	fuse_deferred_finish_data(job->deferred, rc, data, len);
	open_file_put(job->io->open_files, job->h);
	free(job);
}

/* ---- READ ------------------------------------------------------------- */

/* The calling thread's voluntary context switches so far: times it
 * slept. -1 when unknown. */
static long thread_sleeps(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_THREAD, &ru) < 0 ? -1 : ru.ru_nvcsw;
}

/* Whether a read that began after sleeps_before slept waited. */
static bool read_slept(struct io_offload *io, long sleeps_before)
{
	return test_switch_on(io->test.pretend_slow_reads) ||
	       (sleeps_before >= 0 && thread_sleeps() > sleeps_before);
}

/* A watched read's verdict on its file system's slow_credit: one that
 * slept renews it; one that did not wears it down, if debit (a read made
 * while the credit lasts). Whether it slept. */
static bool read_judge(struct io_offload *io, _Atomic int32_t *slow_credit, long sleeps_before,
		       bool debit)
{
	bool slept = read_slept(io, sleeps_before);

	if (slept)
		atomic_store_explicit(slow_credit, READ_SLOW_CREDIT, memory_order_relaxed);
	else if (debit)
		atomic_fetch_sub_explicit(slow_credit, READ_QUICK_DEBIT, memory_order_relaxed);
	return slept;
}

static void read_run(struct offload_job *oj)
{
	struct read_job *job = (struct read_job *)oj;
	struct io_offload *io = job->base.io;
	struct iovec iov = { .iov_base = job->buf, .iov_len = job->size };
	long sleeps = -1;
	ssize_t n;

	if (job->slow_credit) {
		/* The buffer's pages are faulted in first: a fault may sleep on
		 * the process's memory map, which is no wait for the storage. */
		madvise(job->buf, job->size, MADV_POPULATE_WRITE);
		sleeps = thread_sleeps();
	}
	n = iov_transfer(false, job->base.h->fd, &iov, 1, job->size, job->off, 0);

	if (job->slow_credit && n >= 0)
		read_judge(io, job->slow_credit, sleeps, true);
	atomic_fetch_sub_explicit(&io->deferred_bytes, job->size, memory_order_relaxed);
	/* The buffer goes with the reply either way. */
	io_job_finish(&job->base, n < 0 ? (int)n : 0, job->buf, n < 0 ? 0 : (size_t)n);
}

/* FERRY_DEFERRED once the read is deferred; -errno when it cannot
 * be, to read inline instead. slow_credit: read_job's. */
static int read_defer(struct io_offload *io, const struct fuse_request_ctx *ctx,
		      struct open_file *h, size_t size, uint64_t off,
		      _Atomic int32_t *slow_credit)
{
	struct read_job *job;
	int ret = -ENOBUFS;

	if (atomic_fetch_add_explicit(&io->deferred_bytes, size, memory_order_relaxed) +
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
	job->base.job.run = read_run;
	job->size = size;
	job->off = off;
	job->slow_credit = slow_credit;
	ret = io_job_defer(io, ctx, &job->base, h);
	if (ret == FERRY_DEFERRED)
		return ret;
err:
	free(job->buf);
	free(job);
err_budget:
	atomic_fetch_sub_explicit(&io->deferred_bytes, size, memory_order_relaxed);
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

/*
 * read_handle on a file system that refuses RWF_NOWAIT (in cold_devs'
 * slot). While its reads have lately slept, a read of up to
 * READ_UNASKED_DEFER_MAX is deferred and a larger one is read here with
 * one call, not split: its halves would wait for the same file server,
 * and the split's helper spins meanwhile on a CPU the server could use.
 * Otherwise it is read as on any file system, one in READ_SAMPLE watched.
 * Consumes h.
 */
static ssize_t read_unaskable(struct io_offload *io, const struct fuse_request_ctx *ctx,
			      struct open_file *h, int slot, const struct iovec *dst,
			      unsigned dst_cnt, size_t size, uint64_t off)
{
	_Atomic int32_t *slow_credit = &io->slow_credit[slot];
	bool slow = atomic_load_explicit(slow_credit, memory_order_relaxed) > 0;
	bool watched = false;
	long sleeps = -1;
	ssize_t ret;

	if (slow && size <= READ_UNASKED_DEFER_MAX) {
		ret = read_defer(io, ctx, h, size, off, slow_credit);
		if (ret == FERRY_DEFERRED)
			return ret;   /* h goes with the job */
	} else if (slow || ++read_count % READ_SAMPLE == 0) {
		watched = true;
		sleeps = thread_sleeps();
	}
	if (slow)
		ret = iov_transfer(false, h->fd, dst, dst_cnt, size, off, 0);
	else
		ret = read_split_read(io->split, h->fd, dst, dst_cnt, size, off);
	if (watched && ret >= 0 && read_judge(io, slow_credit, sleeps, slow) && !slow)
		log_dev("read", h->inode->key.dev, "takes no RWF_NOWAIT and has been slow to read; "
			"reads with requests behind them run on offload threads while they stay slow");
	open_file_put(io->open_files, h);
	return ret;
}

ssize_t read_handle(struct io_offload *io, const struct fuse_request_ctx *ctx,
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
	slot = dev_slots_find(&io->cold_devs, dev);
	if (slot >= 0) {
		credit_slot = &io->credit[slot];
		credit = atomic_load_explicit(credit_slot, memory_order_relaxed);
	}
	if (credit == NOWAIT_UNSUPPORTED)
		return read_unaskable(io, ctx, h, slot, dst, dst_cnt, size, off);
	if (!test_switch_on(io->test.defer_every_read) && credit <= 0 && ++read_count % READ_SAMPLE != 0)
		goto inline_read;

	if (test_switch_on(io->test.pretend_uncached))
		ret = -EAGAIN;
	else
		ret = read_nowait(h->fd, dst, dst_cnt, size, off);
	if (ret >= 0) {
		if (credit > 0)
			atomic_fetch_sub_explicit(credit_slot, 1, memory_order_relaxed);
		goto done;
	}
	if (ret == -EOPNOTSUPP) {
		atomic_store_explicit(&io->credit[dev_slots_claim(&io->cold_devs, dev)],
				      NOWAIT_UNSUPPORTED, memory_order_relaxed);
		goto inline_read;
	}
	if (ret != -EAGAIN)
		goto done;
	if (credit <= 0)
		log_dev("read", dev, "has data that is not cached; reads that wait for it run on offload threads");
	atomic_store_explicit(&io->credit[dev_slots_claim(&io->cold_devs, dev)], READ_COLD_CREDIT,
			      memory_order_relaxed);
	ret = read_defer(io, ctx, h, size, off, NULL);
	if (ret == FERRY_DEFERRED)
		return ret;   /* h goes with the job */

inline_read:
	ret = read_split_read(io->split, h->fd, dst, dst_cnt, size, off);
done:
	open_file_put(io->open_files, h);
	return ret;
}

/* ---- FSYNC ------------------------------------------------------------ */

static bool dev_is_slow(struct io_offload *io, uint64_t dev)
{
	return dev_slots_find(&io->slow_devs, dev) >= 0;
}

static void dev_mark_slow(struct io_offload *io, uint64_t dev)
{
	if (dev_is_slow(io, dev))
		return;
	dev_slots_claim(&io->slow_devs, dev);
	log_dev("sync", dev, "is slow to sync; its syncs run on offload threads");
}

static int do_sync(int fd, bool datasync)
{
	int ret = datasync ? fdatasync(fd) : fsync(fd);

	return ret < 0 ? -errno : 0;
}

static void sync_run(struct offload_job *oj)
{
	struct sync_job *job = (struct sync_job *)oj;

	io_job_finish(&job->base, do_sync(job->base.h->fd, job->datasync), NULL, 0);
}

/* FERRY_DEFERRED once the request is deferred (answered even if
 * no thread starts); -errno when it cannot be, to sync inline instead. */
static int sync_defer(struct io_offload *io, const struct fuse_request_ctx *ctx,
		      struct open_file *h, bool datasync)
{
	struct sync_job *job = calloc(1, sizeof(*job));
	int ret;

	if (!job)
		return -ENOMEM;
	job->base.job.run = sync_run;
	job->datasync = datasync;
	ret = io_job_defer(io, ctx, &job->base, h);
	if (ret < 0)
		free(job);
	return ret;
}

int sync_handle(struct io_offload *io, const struct fuse_request_ctx *ctx,
		struct open_file *h, bool datasync)
{
	uint64_t dev = h->inode->key.dev, start;
	int ret;

	/* A thread only pays when something waits behind the sync; alone on
	 * its queue, the sync is quicker done here (no thread to start, no
	 * reply to hand back). */
	if (test_switch_on(io->test.defer_every_sync) || (ctx->queued_behind && dev_is_slow(io, dev))) {
		ret = sync_defer(io, ctx, h, datasync);
		if (ret == FERRY_DEFERRED)
			return ret;
	}
	start = ferry_monotonic_ns();
	ret = do_sync(h->fd, datasync);
	if (ferry_monotonic_ns() - start > SLOW_SYNC_NS)
		dev_mark_slow(io, dev);
	open_file_put(io->open_files, h);
	return ret;
}
