/* The one executor for the backend's deferred requests: a pool for work that ends on its own (cold reads, slow syncs), a thread each for waits that may not (blocking locks). */
#ifndef FERRY_OFFLOAD_H
#define FERRY_OFFLOAD_H

#include <stdbool.h>

#include "protocol/fuse_ops.h"

struct offload;

/* Embedded in the caller's job; run() owns the job from then on. */
struct offload_job {
	struct offload_job *next;   /* the pool's queue */
	struct offload *owner;      /* set by offload_submit_blocking */
	void (*run)(struct offload_job *job);
};

int offload_new(struct offload **out);
/* Runs the jobs still queued, waits for every thread to end (a blocking
 * job's too: its request must have been cancelled first), frees. */
void offload_free(struct offload *o);
/* Queues job for a pool thread: 0, or -errno when there is no thread to
 * run it (none could start); then the job is still the caller's. For
 * work that ends on its own: the pool is bounded, and a job may wait in
 * the queue for a free thread. */
int offload_submit(struct offload *o, struct offload_job *job);
/* Runs job on a thread of its own that ends with it: for work that may
 * wait without end (a SETLKW), which in the pool could take every thread
 * from the reads and syncs queued behind it. 0, or -errno when no thread
 * started; then the job is still the caller's. */
int offload_submit_blocking(struct offload *o, struct offload_job *job);

/*
 * A request answered from the pool (a cold read, a slow sync): defers it
 * (fuse_deferred_begin, *deferred set for job->run to finish it) and
 * queues job. FERRY_DEFERRED once deferred, even when no thread could take
 * the job: it then runs here. -errno when the request cannot be deferred;
 * the job is still the caller's, to do the work inline instead. Such work
 * cannot be cut short: a cancel lets it end on its own.
 */
int offload_defer(struct offload *o, const struct fuse_request_ctx *ctx,
		  struct offload_job *job, struct fuse_deferred **deferred);

#ifdef FERRY_TEST_HOOKS
/* Test builds only (passthrough_test_hooks.h): pool threads alive now; */
unsigned offload_threads(struct offload *o);
/* while held, queued jobs wait and no thread takes them (threads still
 * start), so a test can fill the queue deterministically. offload_free
 * lets go of a hold. */
void offload_hold(struct offload *o, bool hold);
#endif

#endif
