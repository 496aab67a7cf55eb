/* --cold's evictor: keeps one file out of the host's page cache while a workload reads it. */
#include "evict.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Often enough that a read seldom finds a block that an earlier read of
 * the run (or the kernel's readahead) brought in. */
#define EVICT_EVERY_NS (20 * 1000 * 1000)

static void *evict_loop(void *arg)
{
	struct evictor *e = arg;
	struct timespec ts = { 0, EVICT_EVERY_NS };

	while (!atomic_load(&e->stop)) {
		posix_fadvise(e->fd, 0, 0, POSIX_FADV_DONTNEED);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

int evict_start(struct evictor *e, const char *path)
{
	int ret;

	e->running = false;
	atomic_store(&e->stop, false);
	e->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (e->fd < 0) {
		ret = -errno;
		fprintf(stderr, "ferryfs-load: --cold: %s: %s\n", path, strerror(errno));
		return ret;
	}
	posix_fadvise(e->fd, 0, 0, POSIX_FADV_DONTNEED);
	ret = -pthread_create(&e->thread, NULL, evict_loop, e);
	if (ret) {
		close(e->fd);
		e->fd = -1;
		return ret;
	}
	e->running = true;
	return 0;
}

void evict_stop(struct evictor *e)
{
	if (!e->running)
		return;
	atomic_store(&e->stop, true);
	pthread_join(e->thread, NULL);
	close(e->fd);
	e->fd = -1;
	e->running = false;
}
