/* Detached threads that answer deferred requests, counted so their owner can wait for the last one before it frees what they use. */
#ifndef FERRY_DEFERRED_THREADS_H
#define FERRY_DEFERRED_THREADS_H

#include <pthread.h>

struct deferred_threads {
	pthread_mutex_t lock;
	pthread_cond_t none_left;
	unsigned running;
};

/* pthread_create of a detached thread: 0 or -errno. */
int thread_start_detached(void *(*fn)(void *), void *arg);

void deferred_threads_init(struct deferred_threads *lt);
/* Waits until every thread started here has called deferred_threads_exit(). */
void deferred_threads_destroy(struct deferred_threads *lt);
/* Runs fn(arg) on a detached thread; 0, or -errno when no thread started
 * (then nothing is counted and arg is still the caller's). */
int deferred_threads_start(struct deferred_threads *lt, void *(*fn)(void *), void *arg);
/* A started thread's last step, once it no longer touches its owner. */
void deferred_threads_exit(struct deferred_threads *lt);

#endif
