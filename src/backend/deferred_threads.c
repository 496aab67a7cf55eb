/* Detached threads that answer deferred requests, counted so their owner can wait for the last one before it frees what they use. */
#include "backend/deferred_threads.h"

void deferred_threads_init(struct deferred_threads *lt)
{
	pthread_mutex_init(&lt->lock, NULL);
	pthread_cond_init(&lt->none_left, NULL);
	lt->running = 0;
}

void deferred_threads_destroy(struct deferred_threads *lt)
{
	pthread_mutex_lock(&lt->lock);
	thread_count_wait_none(&lt->running, &lt->none_left, &lt->lock);
	pthread_mutex_unlock(&lt->lock);
	pthread_cond_destroy(&lt->none_left);
	pthread_mutex_destroy(&lt->lock);
}

int thread_start_detached(void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	pthread_t thread;
	int ret;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	ret = -pthread_create(&thread, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return ret;
}

int deferred_threads_start(struct deferred_threads *lt, void *(*fn)(void *), void *arg)
{
	int ret;

	/* Counted before the thread exists: it may finish before
	 * pthread_create returns. */
	pthread_mutex_lock(&lt->lock);
	lt->running++;
	pthread_mutex_unlock(&lt->lock);
	ret = thread_start_detached(fn, arg);
	if (ret < 0)
		deferred_threads_exit(lt);
	return ret;
}

void deferred_threads_exit(struct deferred_threads *lt)
{
	pthread_mutex_lock(&lt->lock);
	thread_count_done(&lt->running, &lt->none_left);
	pthread_mutex_unlock(&lt->lock);
}
