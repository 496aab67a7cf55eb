/* The one executor for the backend's deferred requests: a pool for work that ends on its own (cold reads, slow syncs), a thread each for waits that may not (blocking locks). */
#include "backend/offload.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/test_switch.h"
#include "common/cpu_list.h"
#include "common/log.h"

/*
 * Up to this many jobs run at once. Cold reads gain from parallel disk
 * requests up to the device's own queue depth (a virtio or NVMe disk
 * takes 16-64 at once before its latency grows), and each waiting thread
 * costs only its stack; QEMU's virtiofsd runs a pool of 64 for every
 * request. Further jobs wait in order for a free thread.
 */
#define OFFLOAD_MAX_THREADS 64

/* A thread with no job for this long ends: a burst of cold reads leaves
 * no threads behind, and a steady stream reuses the same ones instead of
 * paying a thread start (a clone, a fresh stack and its page faults,
 * several times an idle thread's wake-up) per job. */
#define OFFLOAD_IDLE_S 5

struct offload {
	pthread_mutex_t lock;
	pthread_cond_t work;       /* a job was queued, or the pool stops */
	pthread_cond_t none_left;  /* threads and blocking reached 0 */
	struct offload_job *head, **tail;
	unsigned queued, threads, idle;
	unsigned blocking;         /* threads of offload_submit_blocking */
	bool stopping;
#ifdef FERRY_TEST_HOOKS
	test_switch held;          /* see offload_hold */
#endif
};

/* pthread_create of a detached thread: 0 or -errno. */
static int thread_start_detached(void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	pthread_t thread;
	int ret;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* On --queue-cpus's CPUs if given, not on the one of the queue
	 * thread that happens to start it. */
	ret = cpu_placement_helper_attr(&attr);
	if (ret == 0)
		ret = -pthread_create(&thread, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return ret;
}

/* With o->lock held, the last step of a thread of either kind: count is
 * its kind's. offload_free may free o once both are 0, but only after
 * the ending thread has let go of the lock. */
static void thread_ended(struct offload *o, unsigned *count)
{
	if (--*count == 0 && o->threads + o->blocking == 0)
		pthread_cond_broadcast(&o->none_left);
}

int offload_new(struct offload **out)
{
	struct offload *o = calloc(1, sizeof(*o));
	pthread_condattr_t attr;

	if (!o)
		return -ENOMEM;
	pthread_mutex_init(&o->lock, NULL);
	/* Monotonic, so that a clock step does not end or keep threads. */
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&o->work, &attr);
	pthread_condattr_destroy(&attr);
	pthread_cond_init(&o->none_left, NULL);
	o->tail = &o->head;
	*out = o;
	return 0;
}

void offload_free(struct offload *o)
{
	if (!o)
		return;
	pthread_mutex_lock(&o->lock);
	o->stopping = true;
	test_switch_set(o->held, false);
	pthread_cond_broadcast(&o->work);
	while (o->threads + o->blocking > 0)
		pthread_cond_wait(&o->none_left, &o->lock);
	pthread_mutex_unlock(&o->lock);
	pthread_cond_destroy(&o->none_left);
	pthread_cond_destroy(&o->work);
	pthread_mutex_destroy(&o->lock);
	free(o);
}

static void *offload_thread(void *arg)
{
	struct offload *o = arg;

	pthread_setname_np(pthread_self(), "ferry-offload");
	pthread_mutex_lock(&o->lock);
	for (;;) {
		struct offload_job *job = test_switch_on(o->held) ? NULL : o->head;
		struct timespec until;
		int rc;

		if (job) {
			o->head = job->next;
			if (!o->head)
				o->tail = &o->head;
			o->queued--;
			pthread_mutex_unlock(&o->lock);
			job->run(job);
			pthread_mutex_lock(&o->lock);
			continue;
		}
		if (o->stopping)
			break;
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += OFFLOAD_IDLE_S;
		o->idle++;
		rc = pthread_cond_timedwait(&o->work, &o->lock, &until);
		o->idle--;
		if (rc == ETIMEDOUT && !o->head && !test_switch_on(o->held))
			break;
	}
	thread_ended(o, &o->threads);
	pthread_mutex_unlock(&o->lock);
	return NULL;
}

int offload_submit(struct offload *o, struct offload_job *job)
{
	int ret = 0;

	pthread_mutex_lock(&o->lock);
	if (o->stopping) {
		ret = -ESHUTDOWN;
		goto out;
	}
	job->next = NULL;
	*o->tail = job;
	o->tail = &job->next;
	o->queued++;
	/* Idle threads take queued jobs in turn; only jobs beyond them need a
	 * new thread. */
	if (o->queued > o->idle && o->threads < OFFLOAD_MAX_THREADS) {
		/* Counted after it starts: it waits for the lock we hold. */
		ret = thread_start_detached(offload_thread, o);
		if (ret < 0 && o->threads == 0) {
			/* Nobody would ever run it: take it back. Threads only
			 * end with nothing queued, so it is the only job. */
			log_warn("offload: no thread for a job (%s)", strerror(-ret));
			o->queued--;
			o->head = NULL;
			o->tail = &o->head;
			goto out;
		}
		if (ret == 0)
			o->threads++;
		ret = 0;   /* a running thread will get to it */
	}
	if (o->idle > 0)
		pthread_cond_signal(&o->work);
out:
	pthread_mutex_unlock(&o->lock);
	return ret;
}

static void *blocking_thread(void *arg)
{
	struct offload_job *job = arg;
	struct offload *o = job->owner;    /* run() may free the job */

	pthread_setname_np(pthread_self(), "ferry-blocking");
	job->run(job);
	pthread_mutex_lock(&o->lock);
	thread_ended(o, &o->blocking);
	pthread_mutex_unlock(&o->lock);
	return NULL;
}

int offload_submit_blocking(struct offload *o, struct offload_job *job)
{
	int ret = -ESHUTDOWN;

	pthread_mutex_lock(&o->lock);
	if (o->stopping)
		goto out;
	job->owner = o;
	/* Counted after it starts: it waits for the lock we hold before it
	 * can end. */
	ret = thread_start_detached(blocking_thread, job);
	if (ret == 0)
		o->blocking++;
out:
	pthread_mutex_unlock(&o->lock);
	return ret;
}

/* Runs under the protocol's lock; see fuse_deferred_cancel_fn. A disk read
 * or a sync ends on its own soon, and the queue waits for it. */
static void pool_job_cancel(void *job)
{
	(void)job;
}

int offload_defer(struct offload *o, const struct fuse_request_ctx *ctx,
		  struct offload_job *job, struct fuse_deferred **deferred)
{
	int ret = fuse_deferred_begin(ctx, pool_job_cancel, job, deferred);

	if (ret < 0)
		return ret;
	/* Already deferred: with no thread for it (offload_submit logs a
	 * failed start), it is answered that way from here. */
	if (offload_submit(o, job) < 0)
		job->run(job);
	return FERRY_DEFERRED;
}

#ifdef FERRY_TEST_HOOKS
unsigned offload_threads(struct offload *o)
{
	unsigned n;

	pthread_mutex_lock(&o->lock);
	n = o->threads;
	pthread_mutex_unlock(&o->lock);
	return n;
}

void offload_hold(struct offload *o, bool hold)
{
	pthread_mutex_lock(&o->lock);
	test_switch_set(o->held, hold);
	pthread_cond_broadcast(&o->work);
	pthread_mutex_unlock(&o->lock);
}
#endif
