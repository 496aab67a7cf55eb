/* --cold's evictor: keeps one file out of the host's page cache while a workload reads it. */
#ifndef FERRYFS_LOAD_EVICT_H
#define FERRYFS_LOAD_EVICT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

struct evictor {
	int fd;
	atomic_bool stop;
	pthread_t thread;
	bool running;
};

/* Drops path from the host's page cache now and every few milliseconds
 * until evict_stop. The file's dirty pages must have been synced: the
 * kernel cannot drop them. 0 or -errno (logged). */
int evict_start(struct evictor *e, const char *path);
/* Stops it; harmless on an evictor that never started. */
void evict_stop(struct evictor *e);

#endif
