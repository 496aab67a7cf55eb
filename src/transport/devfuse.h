/* Host FUSE transport: serves FUSE requests the host kernel sends over /dev/fuse. */
#ifndef FERRY_DEVFUSE_H
#define FERRY_DEVFUSE_H

#include <stdint.h>

#include "common/ferry_req.h"
#include "common/stats.h"

struct devfuse_config {
	const char *mountpoint;
	const char *source;      /* shown as the mount's source in /proc/mounts */
	unsigned threads;        /* reader threads; 0: one per CPU, 2 to 4 */
	uint32_t max_write;      /* what the protocol announces in INIT */
};

#define DEVFUSE_MAX_THREADS 4

struct devfuse;

/* Each reader thread is a worker of service: start() and stop() get the
 * thread's index. A deferred reply is written to /dev/fuse by the thread
 * that completes it. service->reset is never called: the kernel's session
 * ends with the mount. */
int devfuse_new(struct devfuse **out, const struct devfuse_config *config,
		const struct ferry_service *service, void *opaque);
/* Opens /dev/fuse and mounts it on the mountpoint (fuse.ferryfs, with
 * allow_other and default_permissions, as root's). */
int devfuse_mount(struct devfuse *df);
/* Instead of devfuse_mount: serves a /dev/fuse fd someone else mounted
 * (fusermount3, for a daemon without root) and owns it from now on. Never
 * unmounts: the mount ends when its mounter unmounts it. */
int devfuse_adopt(struct devfuse *df, int fuse_fd);
/* Serves until the file system is unmounted (from outside, or by
 * devfuse_stop) and every reader thread has finished. Returns 0 then,
 * -errno if no reader could start. */
int devfuse_serve(struct devfuse *df);
/* Async-signal-safe: asks devfuse_serve() to unmount (lazily) and return. */
void devfuse_stop(struct devfuse *df);
/* Unmounts if still mounted, closes /dev/fuse, frees. */
void devfuse_free(struct devfuse *df);

/* Read-only view of the transport's counters, summed over reader threads. */
struct devfuse_stats {
	unsigned threads;
	uint64_t requests;
	uint64_t replies_lost;   /* the kernel had dropped the request (interrupted) */
	/* Other readers busy with a request when one started: how many
	 * requests the kernel had in flight with us at once. */
	struct ferry_hist in_flight;
};
void devfuse_stats_snapshot(const struct devfuse *df, struct devfuse_stats *out);

#endif
