/* Detached threads that answer requests later, counted so their owner can wait for the last one before it frees what they use. */
#ifndef FERRY_LATER_THREADS_H
#define FERRY_LATER_THREADS_H

#include <pthread.h>

struct later_threads {
	pthread_mutex_t lock;
	pthread_cond_t none_left;
	unsigned running;
};

/* pthread_create of a detached thread: 0 or -errno. */
int thread_start_detached(void *(*fn)(void *), void *arg);

void later_threads_init(struct later_threads *lt);
/* Waits until every thread started here has called later_threads_exit(). */
void later_threads_destroy(struct later_threads *lt);
/* Runs fn(arg) on a detached thread; 0, or -errno when no thread started
 * (then nothing is counted and arg is still the caller's). */
int later_threads_start(struct later_threads *lt, void *(*fn)(void *), void *arg);
/* A started thread's last step, once it no longer touches its owner. */
void later_threads_exit(struct later_threads *lt);

#endif
