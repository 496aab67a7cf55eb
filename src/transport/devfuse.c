/* Host FUSE transport: mounts /dev/fuse and runs reader threads that read requests and write replies. */
#include "transport/devfuse.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mount.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/wake_signal.h"

/* The kernel refuses reads into buffers smaller than this (fuse_i.h). */
#define DEVFUSE_MIN_READ_BUFFER 8192u
/* Room for the in-header and fuse_write_in in front of max_write bytes
 * of WRITE data, and for the out-header in front of a full READ. */
#define DEVFUSE_HEADER_ROOM 4096u

struct devfuse_reader {
	struct devfuse *df;
	unsigned index;
	pthread_t thread;
	bool started;
	bool exited;              /* set by the serve loop after joining */
	char *req_buf;
	char *reply_buf;
	/* Every deferred request's channel: complete() writes the reply. */
	struct ferry_chan chan;
	/* Deferred requests not yet completed; the lock and condition are
	 * only touched on that rare path. */
	pthread_mutex_t deferred_lock;
	pthread_cond_t deferred_done;
	unsigned deferred_outstanding;
	/* Counters this reader alone writes; on their own cache lines so the
	 * readers do not bounce each other's lines. */
	struct {
		uint64_t busy;        /* 1 while a request is being handled */
		uint64_t requests;
		uint64_t replies_lost;
		struct ferry_hist in_flight;
	} __attribute__((aligned(64))) st;
};

struct devfuse {
	const struct ferry_service *service;
	void *opaque;
	char *mountpoint;
	char *source;
	size_t buf_size;
	unsigned nthreads;
	int fuse_fd;
	bool mounted;
	/* Woken by devfuse_stop and by each reader that finishes. */
	int wake_fd;
	int stopping;             /* atomic */
	struct devfuse_reader readers[DEVFUSE_MAX_THREADS];
};

static unsigned default_threads(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	/* Two at least, so one request that blocks (a lock wait, a FIFO
	 * open) does not stop the whole mount. */
	if (cpus < 2)
		return 2;
	return cpus > DEVFUSE_MAX_THREADS ? DEVFUSE_MAX_THREADS : (unsigned)cpus;
}

/* The reader's ferry_chan: any thread may write a reply to /dev/fuse, and
 * the reply's unique names the request, so the token is not needed. */
static void reader_complete(struct ferry_chan *chan, void *token, const void *reply,
			    uint32_t len, void *data, uint32_t data_len)
{
	struct devfuse_reader *r = (struct devfuse_reader *)((char *)chan -
							      offsetof(struct devfuse_reader, chan));
	struct iovec iov[2] = {
		{ .iov_base = (void *)reply, .iov_len = len },
		{ .iov_base = data, .iov_len = data ? data_len : 0 },
	};

	/* The kernel may have dropped the request meanwhile (interrupted,
	 * unmounted): then there is nobody to tell. */
	if (writev(r->df->fuse_fd, iov, 2) < 0 && errno == ENOENT)
		ferry_count(&r->st.replies_lost, 1);
	(void)token;
	free(data);
	pthread_mutex_lock(&r->deferred_lock);
	r->deferred_outstanding--;
	pthread_cond_broadcast(&r->deferred_done);
	pthread_mutex_unlock(&r->deferred_lock);
}

int devfuse_new(struct devfuse **out, const struct devfuse_config *config,
		const struct ferry_service *service, void *opaque)
{
	struct devfuse *df;
	int ret = -ENOMEM;

	if (!ferry_service_valid(service) || !config->mountpoint ||
	    config->threads > DEVFUSE_MAX_THREADS)
		return -EINVAL;
	df = calloc(1, sizeof(*df));
	if (!df)
		return -ENOMEM;
	df->service = service;
	df->opaque = opaque;
	df->fuse_fd = -1;
	df->wake_fd = -1;
	df->nthreads = config->threads ? config->threads : default_threads();
	df->buf_size = (size_t)config->max_write + DEVFUSE_HEADER_ROOM;
	if (df->buf_size < DEVFUSE_MIN_READ_BUFFER)
		df->buf_size = DEVFUSE_MIN_READ_BUFFER;
	df->mountpoint = strdup(config->mountpoint);
	df->source = strdup(config->source ? config->source : "ferryfs");
	if (!df->mountpoint || !df->source)
		goto err;
	for (unsigned i = 0; i < df->nthreads; i++) {
		struct devfuse_reader *r = &df->readers[i];

		r->df = df;
		r->index = i;
		r->chan.complete = reader_complete;
		pthread_mutex_init(&r->deferred_lock, NULL);
		pthread_cond_init(&r->deferred_done, NULL);
		r->req_buf = malloc(df->buf_size);
		r->reply_buf = malloc(df->buf_size);
		if (!r->req_buf || !r->reply_buf)
			goto err;
	}
	df->wake_fd = eventfd(0, EFD_CLOEXEC);
	if (df->wake_fd < 0) {
		ret = -errno;
		goto err;
	}
	*out = df;
	return 0;

err:
	devfuse_free(df);
	return ret;
}

int devfuse_mount(struct devfuse *df)
{
	char opts[160];
	int ret;

	df->fuse_fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (df->fuse_fd < 0) {
		ret = -errno;
		log_err("cannot open /dev/fuse: %s", strerror(-ret));
		goto err;
	}
	/* allow_other: the share is for every host user, as it is for every
	 * guest user; default_permissions: the kernel checks modes as a
	 * virtio-fs guest does, before the backend's own checks. */
	snprintf(opts, sizeof(opts), "fd=%d,rootmode=40000,user_id=0,group_id=0,"
		 "allow_other,default_permissions", df->fuse_fd);
	/* nosuid, nodev: files a guest created must not become a way to
	 * gain privileges on the host. */
	if (mount(df->source, df->mountpoint, "fuse.ferryfs", MS_NOSUID | MS_NODEV, opts)) {
		ret = -errno;
		log_err("cannot mount on %s: %s", df->mountpoint, strerror(-ret));
		goto err_close;
	}
	df->mounted = true;
	return 0;

err_close:
	close(df->fuse_fd);
	df->fuse_fd = -1;
err:
	return ret;
}

int devfuse_adopt(struct devfuse *df, int fuse_fd)
{
	if (df->fuse_fd >= 0)
		return -EBUSY;
	df->fuse_fd = fuse_fd;
	df->mounted = false;
	return 0;
}

static void wake(struct devfuse *df)
{
	uint64_t one = 1;
	ssize_t r = write(df->wake_fd, &one, sizeof(one));

	(void)r;   /* only fails if the counter overflows: already awake */
}

static void reader_serve(struct devfuse_reader *r, void *ctx)
{
	struct devfuse *df = r->df;
	struct iovec wr = { .iov_base = r->reply_buf, .iov_len = df->buf_size };
	struct iovec rd = { .iov_base = r->req_buf };
	/* The kernel does not say how many requests wait: queued_behind 0. */
	const struct ferry_req req = {
		.rd = &rd, .rd_cnt = 1, .wr = &wr, .wr_cnt = 1,
		.chan = &r->chan,
	};

	for (;;) {
		unsigned others_busy = 0;
		ssize_t n = read(df->fuse_fd, r->req_buf, df->buf_size);
		uint32_t len;

		if (n < 0) {
			/* ENOENT: the request was interrupted before we read it. */
			if (errno == EINTR || errno == EAGAIN || errno == ENOENT) {
				if (__atomic_load_n(&df->stopping, __ATOMIC_ACQUIRE))
					return;
				continue;
			}
			if (errno == ENODEV)   /* unmounted: the connection is gone */
				return;
			log_err("devfuse reader %u: read: %s", r->index, strerror(errno));
			return;
		}
		rd.iov_len = (size_t)n;

		__atomic_store_n(&r->st.busy, 1, __ATOMIC_RELAXED);
		for (unsigned i = 0; i < df->nthreads; i++)
			if (i != r->index && __atomic_load_n(&df->readers[i].st.busy, __ATOMIC_RELAXED))
				others_busy++;
		ferry_hist_add(&r->st.in_flight, others_busy + 1);
		ferry_count(&r->st.requests, 1);
		len = df->service->serve(ctx, &req);
		__atomic_store_n(&r->st.busy, 0, __ATOMIC_RELAXED);
		if (len == FERRY_DEFERRED) {
			pthread_mutex_lock(&r->deferred_lock);
			r->deferred_outstanding++;
			pthread_mutex_unlock(&r->deferred_lock);
			continue;
		}
		if (len == 0)
			continue;
		/* The kernel wants exactly out.len bytes in one write. */
		if (write(df->fuse_fd, r->reply_buf, len) < 0) {
			/* ENOENT: the request was interrupted and is gone. */
			if (errno == ENOENT)
				ferry_count(&r->st.replies_lost, 1);
			else if (errno == ENODEV)
				return;
			else
				log_warn("devfuse reader %u: reply of %u bytes: %s",
					 r->index, len, strerror(errno));
		}
	}
}

/* Before the worker goes, its deferred requests must have completed. */
static void reader_drain_deferred(struct devfuse_reader *r, void *ctx)
{
	struct devfuse *df = r->df;

	pthread_mutex_lock(&r->deferred_lock);
	if (r->deferred_outstanding && df->service->cancel) {
		pthread_mutex_unlock(&r->deferred_lock);
		df->service->cancel(ctx);
		pthread_mutex_lock(&r->deferred_lock);
	}
	while (r->deferred_outstanding)
		pthread_cond_wait(&r->deferred_done, &r->deferred_lock);
	pthread_mutex_unlock(&r->deferred_lock);
}

static void *reader_thread(void *arg)
{
	struct devfuse_reader *r = arg;
	struct devfuse *df = r->df;
	void *ctx = df->service->start(df->opaque, r->index);

	if (ctx) {
		reader_serve(r, ctx);
		reader_drain_deferred(r, ctx);
		df->service->stop(df->opaque, r->index, ctx);
	} else {
		log_err("devfuse reader %u: could not start", r->index);
	}
	wake(df);
	return NULL;
}

/* Unmounts (lazily, so a busy mount goes too) and interrupts every reader
 * until all have finished. */
static void stop_readers(struct devfuse *df)
{
	__atomic_store_n(&df->stopping, 1, __ATOMIC_RELEASE);
	if (df->mounted && umount2(df->mountpoint, MNT_DETACH) && errno != EINVAL)
		log_warn("cannot unmount %s: %s", df->mountpoint, strerror(errno));
	df->mounted = false;
	for (unsigned i = 0; i < df->nthreads; i++) {
		struct devfuse_reader *r = &df->readers[i];

		while (r->started && !r->exited) {
			struct timespec deadline;

			/* A signal sent just before the reader blocks in read()
			 * is lost; sending again until the join succeeds covers
			 * that window. */
			pthread_kill(r->thread, wake_signal());
			clock_gettime(CLOCK_REALTIME, &deadline);
			deadline.tv_nsec += 50 * 1000 * 1000;
			if (deadline.tv_nsec >= 1000000000) {
				deadline.tv_sec++;
				deadline.tv_nsec -= 1000000000;
			}
			if (pthread_timedjoin_np(r->thread, NULL, &deadline) == 0)
				r->exited = true;
		}
	}
}

int devfuse_serve(struct devfuse *df)
{
	unsigned started = 0;
	int ret = 0;

	/* Readers in read() are woken by it at stop, and only then: their
	 * read() must return EINTR. It cannot fail for a valid signal. */
	wake_signal_install();
	for (unsigned i = 0; i < df->nthreads; i++) {
		struct devfuse_reader *r = &df->readers[i];

		ret = -pthread_create(&r->thread, NULL, reader_thread, r);
		if (ret) {
			log_err("devfuse: reader thread %u: %s", i, strerror(-ret));
			continue;
		}
		r->started = true;
		started++;
	}
	if (started == 0) {
		ret = -EAGAIN;
		goto out_stop;
	}
	ret = 0;
	log_info("serving %s with %u reader thread(s)", df->mountpoint, started);

	/* The first reader to finish means unmounted, a fatal error or a
	 * stop request: in every case the mount ends. */
	for (;;) {
		struct pollfd pfd = { .fd = df->wake_fd, .events = POLLIN };

		if (poll(&pfd, 1, -1) > 0)
			break;
		if (errno != EINTR)
			break;
	}
out_stop:
	stop_readers(df);
	return ret;
}

void devfuse_stop(struct devfuse *df)
{
	__atomic_store_n(&df->stopping, 1, __ATOMIC_RELEASE);
	wake(df);
}

void devfuse_free(struct devfuse *df)
{
	if (!df)
		return;
	if (df->mounted && umount2(df->mountpoint, MNT_DETACH) && errno != EINVAL)
		log_warn("cannot unmount %s: %s", df->mountpoint, strerror(errno));
	if (df->fuse_fd >= 0)
		close(df->fuse_fd);
	if (df->wake_fd >= 0)
		close(df->wake_fd);
	for (unsigned i = 0; i < df->nthreads; i++) {
		pthread_mutex_destroy(&df->readers[i].deferred_lock);
		pthread_cond_destroy(&df->readers[i].deferred_done);
	}
	for (unsigned i = 0; i < DEVFUSE_MAX_THREADS; i++) {
		free(df->readers[i].req_buf);
		free(df->readers[i].reply_buf);
	}
	free(df->mountpoint);
	free(df->source);
	free(df);
}

void devfuse_stats_snapshot(const struct devfuse *df, struct devfuse_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->threads = df->nthreads;
	for (unsigned i = 0; i < df->nthreads; i++) {
		const struct devfuse_reader *r = &df->readers[i];

		out->requests += ferry_count_read(&r->st.requests);
		out->replies_lost += ferry_count_read(&r->st.replies_lost);
		ferry_hist_accumulate(&out->in_flight, &r->st.in_flight);
	}
}
