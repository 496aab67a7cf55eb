/* Inside the vhost-user device: queue and device state, and the calls between the vhost_user*.c files. */
#ifndef FERRY_VHOST_USER_INTERNAL_H
#define FERRY_VHOST_USER_INTERNAL_H

/*
 * Only the vhost_user*.c files include this; the rest of the daemon sees
 * vhost_user.h. Who may touch which field, and under which lock, is said
 * at the field: the control thread (vhost_user.c, vhost_user_control*.c)
 * and the workers, the threads that serve one or more queues each
 * (vhost_user_worker.c, vhost_user_queue.c, vhost_user_poll.c), share
 * these structs. "The queue thread" below is the worker serving it. When
 * a batch publishes and how long a worker spins is queue_pacing.h's.
 */

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>
#include <linux/virtio_fs.h>

#include "common/eventfd_signal.h"
#include "common/signal_handoff.h"
#include "common/stats.h"
#include "transport/dirty_log.h"
#include "transport/guest_mem.h"
#include "transport/queue_pacing.h"
#include "transport/vhost_user.h"
#include "transport/virtq.h"

#define BIT(n) (1ull << (n))

/* One deferred request's slot: the reply its completion left for the
 * queue's thread to write. */
struct vu_deferred {
	struct vu_deferred *next;
	uint16_t head;
	uint32_t len;
	uint8_t reply[FERRY_DEFERRED_REPLY_MAX];
	void *data;                   /* malloc'd, data_len bytes after reply */
	uint32_t data_len;
	/* Packed rings: the chain as popped (malloc'd), for the re-walk. */
	struct vring_packed_desc *chain;
	uint16_t chain_len;
};

struct vu_queue {
	struct vu_dev *dev;
	unsigned index;

	/*
	 * Held by the queue thread for a whole batch, and by the control
	 * thread whenever it changes anything the batch uses (guest memory,
	 * ring addresses, features, call fd, enabled). Never shared between
	 * queues, so queues do not contend with each other.
	 */
	pthread_mutex_t lock;
	struct virtq vq;          /* under lock */
	bool enabled;             /* under lock */
	int call_fd;              /* under lock */
	bool driver_notified;     /* under lock: a call was due since the ring started */
	int err_fd;               /* under lock */
	bool err_signalled;       /* under lock */

	void *ctx;                /* worker thread only: from service->start */
	/* The worker thread that serves this queue; fixed at vu_dev_new. */
	struct vu_worker *worker;
	bool more;                /* worker thread only: run a batch before sleeping */
	/* Worker thread only: how many requests the driver keeps in flight,
	 * as batch_pacing_end judged it after the last batch. */
	unsigned driver_depth;

	/*
	 * Deferred requests, one slot per head (a head is in flight at most
	 * once): allocated before the thread starts, freed after it stops.
	 * Any thread may put a slot on done; only the queue thread takes
	 * them off, re-walks the chain and pushes the used entry.
	 */
	struct vu_deferred *deferred;
	unsigned deferred_outstanding; /* queue thread only */
	/* Every deferred request's channel: its complete() puts the slot on
	 * done. Set before the thread starts. */
	struct ferry_chan chan;
	pthread_mutex_t done_lock;
	struct vu_deferred *done;     /* under done_lock */

	/* Control thread only; fixed while the queue runs. */
	bool thread_running;      /* handed to its worker (vu_worker_add) */
	int kick_fd;
	int ctl_fd;               /* wakes the worker: re-check this queue */
	/* The hand-over between control thread and worker, under the
	 * worker's lock (vhost_user_worker.c). */
	bool join_requested;
	bool stop_requested;
	bool served;              /* the worker started it and has not ended it */
	unsigned num;             /* from SET_VRING_NUM */
	/* GET_VRING_BASE stopped the ring at vq.last_avail_idx; the next
	 * SET_VRING_BASE tells a resume from a device reset. */
	bool stop_pos_valid;
	bool restart_after_reset;
	bool kind_restart;        /* SET_FEATURES stopped it to change ring kind */
	bool addr_set;
	uint64_t desc_uva, avail_uva, used_uva;
	/* SET_VRING_ADDR's VU_VRING_F_LOG and log address: the ring's own
	 * writes are marked too while logging. Under lock. */
	bool log_ring;
	uint64_t log_addr;

	/* Written by the queue thread alone (calls: by whoever holds the
	 * lock), read racily by stats readers; on lines of their own so
	 * those reads do not touch the hot fields. */
	struct {
		uint64_t requests;
		uint64_t batches;
		struct ferry_hist batch_size;
		struct ferry_hist depth;
		uint64_t poll_hits;
		uint64_t sleeps;
		uint64_t shared_cpu_waits;
		uint64_t calls;
	} __attribute__((aligned(64))) st;
};

/*
 * A thread serving one or more queues (vhost_user_worker.c). The hiprio
 * queue has a worker of its own; the request queues share half as many
 * workers as there are CPUs: a thread per queue on a host with fewer CPUs
 * than the guest has queues made two more runnable threads compete with
 * the guest's vCPUs, each woken by its own ring's kicks.
 */
struct vu_worker {
	struct vu_dev *dev;
	unsigned index;           /* 0: the hiprio queue's, never polls */
	struct vu_queue **queues; /* those it may serve; fixed at vu_dev_new */
	unsigned nqueues;
	int epoll_fd;             /* the kick and ctl fds of those it serves, and wake_fd */
	int wake_fd;              /* a queue joins or leaves, or the worker exits */
	pthread_mutex_t lock;     /* the queues' join/stop/served fields */
	pthread_cond_t changed;   /* a queue left */
	bool members_changed;     /* atomic: look at join/stop requests */
	bool exit_requested;      /* atomic */
	bool failed;              /* under lock: the thread ended on an error */
	/* Control thread only. */
	pthread_t thread;
	bool thread_running;
	/* Worker thread only: its spin budget and CPU judgement. */
	struct wait_pacing pacing;
	/* --queue-cpus: the CPUs the thread puts itself on (fixed at
	 * vu_dev_new; want_cpus false: it stays where it was started). */
	cpu_set_t cpus;
	bool want_cpus;
	int thread_id;            /* atomic: the kernel's id, once started */
	bool pinned;              /* atomic: cpus took effect */
};

struct vu_dev {
	const struct ferry_service *service;
	void *opaque;
	struct virtio_fs_config config_space;
	int stop_fd;
	int conn_fd;
	uint64_t features;
	uint64_t offered_protocol_features;
	uint64_t protocol_features;
	struct guest_mem *mem;
	int backend_req_fd;
	unsigned nqueues;
	struct vu_queue *queues;
	/* A queue thread ran since the last service->reset: a driver may have
	 * state in the user. Control thread only. */
	bool driver_active;
	/* The dirty log (SET_LOG_BASE) and the eventfd kicked after marks
	 * (SET_LOG_FD, -1 if none). Queue threads use them during a batch;
	 * the control thread replaces them with every queue lock held. */
	struct dirty_log *log;
	int log_call_fd;
	/* The device state transfer SET_DEVICE_STATE_FD began, until
	 * CHECK_DEVICE_STATE (vhost_user_migration.c). Control thread only. */
	struct vu_transfer *transfer;
	uint64_t poll_max_ns;     /* fixed after vu_dev_new */
	/* How many more request queue threads may busy-poll right now
	 * (atomic). Pollers beyond the CPUs there are would spin on a CPU
	 * the driver needs to make the very requests they wait for. */
	int poll_slots;
	/* The workers: [0] serves the hiprio queue, the rest the request
	 * queues round-robin. Threads start with their first queue and end
	 * in vu_dev_free. */
	struct vu_worker *workers;
	unsigned nworkers;
	struct cpu_list queue_cpus; /* --queue-cpus; count 0: none */
};

/* Fd helpers for both threads (eventfd_signal and eventfd_drain come from
 * common/eventfd_signal.h). */
static inline void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Closes a queue's call fd once a call handed to a spinning thread for it
 * is written (signal_handoff.h): that thread never writes to a closed or
 * reused fd. The queue thread must be stopped, or the fd swapped out
 * under the queue's lock, so that no new call is handed over for it. */
static inline void close_call_fd(int *fd)
{
	signal_handoff_forget(*fd);
	close_fd(fd);
}

/* ---- vhost_user_queue.c: a queue's batches; control-thread side ---- */

/* Stops the queue after its current batch; its worker lets it go. */
void vu_queue_stop_thread(struct vu_queue *q);
/* Translates the ring addresses through the current memory table. */
int vu_queue_map_rings(struct vu_queue *q);
/* Hands the queue to its worker if its ring is complete. */
int vu_queue_maybe_start(struct vu_queue *q);

/* ---- vhost_user_queue.c: a queue's batches; worker-thread side ---- */

/* The service's context for the queue; false (queue broken) if none. */
bool vu_queue_begin(struct vu_queue *q);
/* Completes what is deferred and ends the service's context. */
void vu_queue_end(struct vu_queue *q);
/* One batch under the queue's lock; true if more may be waiting. */
bool vu_queue_serve(struct vu_queue *q);
/* Asks the driver for kicks again; true if work arrived meanwhile. */
bool vu_queue_arm(struct vu_queue *q);
/* Reads the kick eventfd; false (queue broken) if it is not one. */
bool vu_queue_kick_drain(struct vu_queue *q);
/* Marks the queue broken and tells the frontend (err fd), once. */
void vu_queue_break(struct vu_queue *q, const char *why);

/* ---- vhost_user_worker.c: the threads that serve queues ---- */

/* The workers for dev->nqueues queues, threads not started. 0 or -errno. */
int vu_workers_new(struct vu_dev *dev);
/* Ends the worker threads (every queue stopped first) and frees them. */
void vu_workers_free(struct vu_dev *dev);
/* Control thread: the queue's worker starts serving it. 0 or -errno. */
int vu_worker_add(struct vu_queue *q);
/* Control thread: the worker ends the queue; returns once it has. */
void vu_worker_remove(struct vu_queue *q);

/* ---- vhost_user_poll.c: a worker spinning before it sleeps ---- */

/* Once per wait, on the worker's thread: is its CPU shared? */
void vu_worker_judge_cpu(struct vu_worker *w);
/* Spins for up to its budget if the wait pacing allows; true if work
 * arrived (the queues that have some get q->more). */
bool vu_worker_wait_by_polling(struct vu_worker *w);

/* ---- vhost_user_control.c: the control messages (handlers in vhost_user_control*.c) ---- */

struct vu_msg;
/* Handles one message; 0 to go on, -errno to drop the connection. */
int vu_dispatch(struct vu_dev *dev, struct vu_msg *m);

/* ---- vhost_user_migration.c: device state transfer ---- */

/* SET_DEVICE_STATE_FD: validates and takes the request (fd is taken over
 * and closed in every case); the hook runs from vu_transfer_start, after
 * the reply went out. 0 or -errno (nothing started). */
int vu_transfer_begin(struct vu_dev *dev, uint32_t direction, uint32_t phase, int fd);
/* Runs the begun transfer's hook on a thread of its own. */
void vu_transfer_start(struct vu_dev *dev);
/* CHECK_DEVICE_STATE: waits for the transfer to end; 0 if its hook
 * succeeded, else -errno (no transfer: -ENOENT). Ends the transfer. */
int vu_transfer_check(struct vu_dev *dev);
/* The frontend went away: waits for a running hook, frees the transfer. */
void vu_transfer_abort(struct vu_dev *dev);
/* A hook runs: no queue may start (hooks need every worker stopped). */
bool vu_transfer_running(const struct vu_dev *dev);

/* ---- vhost_user.c: the device ---- */

/* The driver that used the queues is gone: tells the user, once. */
void vu_dev_driver_gone(struct vu_dev *dev, const char *why);

#endif
