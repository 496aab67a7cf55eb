/* Detached threads that answer deferred requests, counted so their owner can wait for the last one before it frees what they use. */
#ifndef FERRY_DEFERRED_THREADS_H
#define FERRY_DEFERRED_THREADS_H

#include <pthread.h>

struct deferred_threads {
	pthread_mutex_t lock;
	pthread_cond_t none_left;
	unsigned running;
};

/* A count of running threads kept under its owner's lock, and the
 * condition the owner waits on for the last one (deferred_threads below,
 * the offload pool). With that lock held: */
/* a counted thread is done; the last one wakes the waiter; */
static inline void thread_count_done(unsigned *count, pthread_cond_t *none_left)
{
	if (--*count == 0)
		pthread_cond_broadcast(none_left);
}

/* waits until no counted thread is left. */
static inline void thread_count_wait_none(unsigned *count, pthread_cond_t *none_left,
					  pthread_mutex_t *lock)
{
	while (*count > 0)
		pthread_cond_wait(none_left, lock);
}

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
