/* The pool that runs deferred requests' work (cold reads, slow syncs) off their queue: threads started when needed, reused, ended when idle. */
#ifndef FERRY_OFFLOAD_H
#define FERRY_OFFLOAD_H

#include <stdbool.h>

/* Embedded in the caller's job; run() owns the job from then on. */
struct offload_job {
	struct offload_job *next;
	void (*run)(struct offload_job *job);
};

struct offload;

int offload_new(struct offload **out);
/* Runs the jobs still queued, waits for every thread to end, frees. */
void offload_free(struct offload *o);
/* Queues job for a pool thread: 0, or -errno when there is no thread to
 * run it (none could start); then the job is still the caller's. */
int offload_submit(struct offload *o, struct offload_job *job);

#ifdef FERRY_TEST_HOOKS
/* Test builds only (passthrough_test_hooks.h): threads alive now; */
unsigned offload_threads(struct offload *o);
/* while held, queued jobs wait and no thread takes them (threads still
 * start), so a test can fill the queue deterministically. offload_free
 * lets go of a hold. */
void offload_hold(struct offload *o, bool hold);
#endif

#endif
