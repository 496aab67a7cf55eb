/* vhost-user-fs device: the control socket, and one thread per started queue. */
#ifndef FERRY_VHOST_USER_H
#define FERRY_VHOST_USER_H

#include <stdint.h>

#include "common/cpu_list.h"
#include "common/ferry_req.h"
#include "common/stats.h"

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
	/* --queue-cpus: request queue thread i on cpu[i % count], the hiprio
	 * queue's thread on all of them; NULL or count 0: no pinning. Copied. */
	const struct cpu_list *queue_cpus;
};

struct vu_dev;

/* Each started queue is a worker of service: start() and stop() get the
 * queue's index (0 is hiprio). A deferred reply is written into the
 * request's buffers by the queue's own thread, after the chain was walked
 * again against the memory table of that time. service->reset runs when
 * the driver is gone: the frontend disconnected, or reset the device (a
 * guest reboot) and now sets the rings up again from scratch. */
int vu_dev_new(struct vu_dev **out, const struct vu_fs_config *config,
	       const struct ferry_service *service, void *opaque);
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
	uint64_t calls;                 /* signals of its call fd (interrupts to the driver) */
};
/* Fills out[0..max) with the queues' counters, read racily while the
 * queues run; returns the number of queues the device has. */
unsigned vu_dev_stats_snapshot(const struct vu_dev *dev, struct vu_queue_stats *out,
			       unsigned max);

/* Which thread serves which queues on which CPUs. */
#define VU_PLACEMENT_MAX_QUEUES 64
struct vu_thread_placement {
	unsigned worker;        /* 0 serves hiprio; 1.. the request queues */
	int thread_id;          /* its kernel thread id; 0: not started yet */
	bool pinned;            /* its CPUs were set to cpus */
	char cpus[64];          /* "1", "0-1"; "" when not pinned */
	unsigned nqueues;       /* the queues it serves now */
	unsigned queue[VU_PLACEMENT_MAX_QUEUES];
};
/* Fills out[0..max) with the queue threads' placement; returns how many
 * there are. Takes each thread's lock briefly. */
unsigned vu_dev_placement_snapshot(struct vu_dev *dev, struct vu_thread_placement *out,
				   unsigned max);

#endif
