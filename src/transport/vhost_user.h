/* vhost-user-fs device: the control socket, and one thread per started queue. */
#ifndef FERRY_VHOST_USER_H
#define FERRY_VHOST_USER_H

#include <stdint.h>
#include <sys/uio.h>

#include "common/stats.h"
#include "transport/vu_request.h"

/* handle() returns this to answer the request later, through
 * vu_request_complete(). The iovecs of req are only valid during handle(). */
#define VU_DEFERRED UINT32_MAX
/* Largest reply a deferred request can carry (a FUSE header and a small
 * argument): it is copied, so the completing thread keeps no guest pointer. */
#define VU_DEFERRED_REPLY_MAX 64u

/*
 * Finishes a deferred request: copies reply (at most VU_DEFERRED_REPLY_MAX
 * bytes) and hands it to the queue's own thread, which writes it into the
 * request's writable buffers, data_len bytes of data after it, and
 * publishes the used entry. data (may be NULL) is a malloc'd buffer the
 * transport frees: a deferred READ's bytes, read on another thread into
 * memory of its own because the guest's memory table may change before the
 * queue thread writes them. Callable from any thread, exactly once per
 * deferred request, and must be called before the queue can stop (see
 * queue_cancel).
 */
void vu_request_complete(void *token, const void *reply, uint32_t len,
			 void *data, uint32_t data_len);

struct vu_fs_ops {
	/* Called on a queue's own thread when the queue starts; the result is
	 * handed back to every handle() call on that queue. NULL means failure:
	 * the queue is then marked broken. */
	void *(*queue_start)(void *opaque, unsigned queue_index);
	/* Called on the queue's thread when the queue stops. */
	void (*queue_stop)(void *opaque, unsigned queue_index, void *queue_ctx);
	/* Handles one request inline on the queue's thread; returns the number
	 * of bytes written into req->wr (the used length), or VU_DEFERRED. */
	uint32_t (*handle)(void *queue_ctx, unsigned queue_index,
			   const struct vu_request *req);
	/* Called on the queue's thread when the queue stops while requests
	 * are deferred: it must make each of them call vu_request_complete()
	 * soon (the thread waits for that before queue_stop). May be NULL if
	 * handle() never defers. */
	void (*queue_cancel)(void *queue_ctx, unsigned queue_index);
	/* Optional. The driver that used the device is gone: the frontend
	 * disconnected, or reset the device (a guest reboot) and now sets the
	 * rings up again from scratch. Called on the control thread while no
	 * queue thread runs, before any request of a new driver is handled;
	 * state the old driver built up (e.g. a FUSE session) must go. */
	void (*device_reset)(void *opaque);
};

struct vu_fs_config {
	const char *tag;                /* config space tag, at most 36 bytes;
					 * NULL leaves it empty */
	/* Request queues (besides hiprio, queue 0) the config space announces
	 * to the driver. */
	unsigned num_request_queues;
	/* Request queues the device can serve, reported by GET_QUEUE_NUM: a
	 * frontend with its own queue count (QEMU's num-request-queues) may
	 * start up to this many, each on its own thread. 0 means the same as
	 * num_request_queues; never less than it. */
	unsigned max_request_queues;
	/* Longest a request queue's thread busy-polls its ring before it
	 * sleeps on the kick fd, in microseconds; it adapts below this to how
	 * long the driver actually leaves it idle. 0: never poll. */
	unsigned poll_max_us;
};

struct vu_dev;

int vu_dev_new(struct vu_dev **out, const struct vu_fs_config *config,
	       const struct vu_fs_ops *ops, void *opaque);
/* Serves one frontend on conn_fd until it disconnects or vu_dev_stop() is
 * called; stops all queue threads before returning. Returns 0 when the
 * frontend went away in an orderly way (or on vu_dev_stop), -errno on a
 * fatal error: a malformed message that cannot be answered with an error
 * reply drops the connection. Takes ownership of conn_fd and closes it.
 * All guest memory is unmapped and all ring fds closed on return, so the
 * device can serve another connection; after vu_dev_stop it will not. */
int vu_dev_serve(struct vu_dev *dev, int conn_fd);
/* Async-signal-safe: asks vu_dev_serve() to drain and return. */
void vu_dev_stop(struct vu_dev *dev);
void vu_dev_free(struct vu_dev *dev);

/* Read-only view of one queue's counters; they live as long as the device,
 * across queue restarts and reconnections. */
struct vu_queue_stats {
	unsigned index;                 /* 0 is hiprio */
	uint64_t requests;
	uint64_t batches;               /* passes that handled at least one */
	struct ferry_hist batch_size;   /* requests handled per pass */
	struct ferry_hist depth;        /* requests queued when a pass began */
	uint64_t poll_hits;             /* waits that polling ended */
	uint64_t sleeps;                /* waits that slept on the kick fd */
	uint64_t shared_cpu_waits;      /* waits while its CPU was judged shared */
};
/* Fills out[0..max) with the queues' counters, read racily while the
 * queues run; returns the number of queues the device has. */
unsigned vu_dev_stats_snapshot(const struct vu_dev *dev, struct vu_queue_stats *out,
			       unsigned max);

#endif
