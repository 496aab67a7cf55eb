/* Host FUSE transport: serves FUSE requests the host kernel sends over /dev/fuse. */
#ifndef FERRY_DEVFUSE_H
#define FERRY_DEVFUSE_H

#include <stdint.h>
#include <sys/uio.h>

#include "common/stats.h"

struct devfuse_ops {
	/* Called on each reader thread as it starts; the result is handed to
	 * every handle() call on that thread. NULL means failure: the thread
	 * does not serve. */
	void *(*thread_start)(void *opaque, unsigned thread_index);
	void (*thread_stop)(void *opaque, unsigned thread_index, void *thread_ctx);
	/* Handles one request inline; rd is the request exactly as the kernel
	 * sent it, wr the room for the reply. Returns the reply length, 0 for
	 * none (FORGET, BATCH_FORGET, INTERRUPT), or DEVFUSE_DEFERRED: the
	 * reply comes later through devfuse_request_complete(token). */
	uint32_t (*handle)(void *thread_ctx, const struct iovec *rd, unsigned rd_cnt,
			   const struct iovec *wr, unsigned wr_cnt, void *token);
	/* Called on the reader thread when it stops with requests deferred:
	 * each must then complete soon (the thread waits for that before
	 * thread_stop). May be NULL if handle() never defers. */
	void (*thread_cancel)(void *thread_ctx, unsigned thread_index);
};

#define DEVFUSE_DEFERRED UINT32_MAX

/* Sends the reply of a deferred request: reply, then data_len bytes of data
 * (out.len counts both). data (may be NULL) is malloc'd and freed here.
 * Callable from any thread, exactly once per deferred request. */
void devfuse_request_complete(void *token, const void *reply, uint32_t len,
			      void *data, uint32_t data_len);

struct devfuse_config {
	const char *mountpoint;
	const char *source;      /* shown as the mount's source in /proc/mounts */
	unsigned threads;        /* reader threads; 0: one per CPU, 2 to 4 */
	uint32_t max_write;      /* what the protocol announces in INIT */
};

#define DEVFUSE_MAX_THREADS 4

struct devfuse;

int devfuse_new(struct devfuse **out, const struct devfuse_config *config,
		const struct devfuse_ops *ops, void *opaque);
/* Opens /dev/fuse and mounts it on the mountpoint (fuse.ferryfs, with
 * allow_other and default_permissions, as root's). */
int devfuse_mount(struct devfuse *df);
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
