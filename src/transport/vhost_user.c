/* vhost-user-fs device: the control socket, and one thread per started queue. */
#include "transport/vhost_user.h"

#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/virtio_config.h>
#include <linux/virtio_fs.h>
#include <linux/virtio_ring.h>

#include "common/clock.h"
#include "common/iov.h"
#include "common/log.h"
#include "transport/guest_mem.h"
#include "transport/vhost_user_wire.h"
#include "transport/virtq.h"

/* ---- Limits of this device beyond the wire format ---- */

#define VU_MAX_FDS VU_MEM_TABLE_REGIONS
/* Larger than any message we accept; a bigger size is a broken frontend
 * and we would not know where the next header starts. */
#define VU_MAX_PAYLOAD 4096
/* The vring index travels in 8 bits. */
#define VU_MAX_QUEUES 256

#define BIT(n) (1ull << (n))

static const uint64_t offered_features =
	BIT(VIRTIO_F_VERSION_1) | BIT(VIRTIO_RING_F_EVENT_IDX) |
	BIT(VIRTIO_RING_F_INDIRECT_DESC) | BIT(VU_F_PROTOCOL_FEATURES);

/* LOG_SHMFD is not offered: no dirty logging, hence no migration. CONFIG
 * is added per device, only when it has a tag: QEMU's vhost-user-fs-pci
 * has its own tag and warns about a backend offering config space. */
static const uint64_t base_protocol_features =
	BIT(VU_PROTO_F_MQ) | BIT(VU_PROTO_F_REPLY_ACK) |
	BIT(VU_PROTO_F_BACKEND_REQ) | BIT(VU_PROTO_F_CONFIGURE_MEM_SLOTS);

union vu_payload {
	uint64_t u64;
	struct vu_vring_state state;
	struct vu_vring_addr addr;
	struct vu_mem_table mem;
	struct vu_mem_single mem_single;
	struct vu_config config;
	uint8_t raw[VU_MAX_PAYLOAD];
};

struct vu_msg {
	struct vu_msg_hdr hdr;
	union vu_payload p;
	int fds[VU_MAX_FDS];
	unsigned nfds;
};

struct vu_reply {
	union vu_payload p;
	uint32_t size;
};

/* ---- Device state ---- */

struct vu_later {
	struct vu_queue *q;
	struct vu_later *next;
	uint16_t head;
	uint32_t len;
	uint8_t reply[VU_DEFERRED_REPLY_MAX];
	void *data;                   /* malloc'd, data_len bytes after reply */
	uint32_t data_len;
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
	int err_fd;               /* under lock */
	bool err_signalled;       /* under lock */

	void *ctx;                /* queue thread only: from ops->queue_start */
	/* Queue thread only: see queue_judge_cpu. */
	uint64_t nivcsw;
	unsigned preempted_avg;

	/*
	 * Deferred requests, one slot per head (a head is in flight at most
	 * once): allocated before the thread starts, freed after it stops.
	 * Any thread may put a slot on done; only the queue thread takes
	 * them off, re-walks the chain and pushes the used entry.
	 */
	struct vu_later *later;
	unsigned later_outstanding;   /* queue thread only */
	pthread_mutex_t done_lock;
	struct vu_later *done;        /* under done_lock */

	/* Control thread only; fixed while the thread runs. */
	pthread_t thread;
	bool thread_running;
	int kick_fd;
	int ctl_fd;               /* wakes the thread: stop or re-check */
	bool stop_requested;      /* atomic */
	unsigned num;             /* from SET_VRING_NUM */
	/* GET_VRING_BASE stopped the ring at vq.last_avail_idx; the next
	 * SET_VRING_BASE tells a resume from a device reset. */
	bool stop_pos_valid;
	bool restart_after_reset;
	bool addr_set;
	uint64_t desc_uva, avail_uva, used_uva;

	/* Written by the queue thread alone, read racily by stats readers;
	 * on lines of their own so those reads do not touch the hot fields. */
	struct {
		uint64_t requests;
		uint64_t batches;
		struct ferry_hist batch_size;
		struct ferry_hist depth;
		uint64_t poll_hits;
		uint64_t sleeps;
		uint64_t shared_cpu_waits;
	} __attribute__((aligned(64))) st;
};

struct vu_dev {
	const struct vu_fs_ops *ops;
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
	/* A queue thread ran since the last device_reset: a driver may have
	 * state in the user. Control thread only. */
	bool driver_active;
	uint64_t poll_max_ns;     /* fixed after vu_dev_new */
	/* How many more request queue threads may busy-poll right now
	 * (atomic). Pollers beyond the CPUs there are would spin on a CPU
	 * the driver needs to make the very requests they wait for. */
	int poll_slots;
};

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void eventfd_signal(int fd)
{
	uint64_t one = 1;
	ssize_t r;

	if (fd < 0)
		return;
	/* Can only fail if the counter is about to overflow, and then the
	 * reader is already due to wake up. */
	r = write(fd, &one, sizeof(one));
	(void)r;
}

static void eventfd_drain(int fd)
{
	uint64_t v;
	ssize_t r = read(fd, &v, sizeof(v));

	(void)r;
}

/* ---- Queue threads ---- */

/*
 * Pushes the deferred requests completed since the last call, with q->lock
 * held; returns how many used entries it wrote. The chain is walked again
 * against the current memory table, so a table change while a request was
 * deferred cannot leave a stale pointer; a ring that went away or broke
 * meanwhile drops the reply (the driver is resetting the ring anyway).
 */
static unsigned queue_push_completions(struct vu_queue *q)
{
	struct vu_later *l, *next;
	unsigned pushed = 0;

	pthread_mutex_lock(&q->done_lock);
	l = q->done;
	__atomic_store_n(&q->done, NULL, __ATOMIC_RELAXED); /* see queue_poll */
	pthread_mutex_unlock(&q->done_lock);
	for (; l; l = next) {
		struct virtq_elem elem;
		uint32_t len;

		next = l->next;
		q->later_outstanding--;
		if (virtq_rewalk(&q->vq, l->head, &elem) >= 0) {
			/* Each copy returns at most its uint32_t length. */
			len = (uint32_t)iov_copy_to(elem.req.wr, elem.req.wr_cnt, 0,
						    l->reply, l->len);
			if (l->data_len)
				len += (uint32_t)iov_copy_to(elem.req.wr, elem.req.wr_cnt, len,
							     l->data, l->data_len);
			virtq_push(&q->vq, &elem, len);
			pushed++;
		}
		free(l->data);
		l->data = NULL;
		l->data_len = 0;
	}
	return pushed;
}

/* Makes pushed entries visible and interrupts the driver if it wants. */
static void queue_publish(struct vu_queue *q)
{
	virtq_flush(&q->vq);
	if (virtq_should_notify(&q->vq))
		eventfd_signal(q->call_fd);
}

/*
 * Requests after which a batch publishes its used entries and notifies the
 * driver if it asked to be. Publishing only at the end of a batch made the
 * driver wait for the whole batch, then the device for the driver: the two
 * took turns. Every request would wake the driver for each reply (a call
 * is the costliest syscall on the path, an IPI to the driver's CPU); every
 * 4 keeps both sides busy at queue depth 16 with a quarter of the calls.
 */
#define VU_PUBLISH_REQUESTS 4u

/* preempted_avg (in 1/256ths) above which a queue thread's CPU counts as
 * shared: ~30% of its recent waits; see queue_judge_cpu. */
#define VU_SHARED_CPU_AVG 77u

static bool queue_cpu_shared(const struct vu_queue *q)
{
	return q->preempted_avg > VU_SHARED_CPU_AVG;
}

/*
 * Bytes of request and reply data handled after which a batch publishes
 * what it has done so far instead of waiting for its end. One notification
 * per batch is right for small requests, but a batch of 16 1 MiB reads
 * kept the first reply from the driver for the whole ~3 ms the batch took,
 * so driver and device took turns instead of working at the same time.
 * 128 KiB is ~25 us of copying here; a batch of 4 KiB requests at queue
 * depth 16 stays below it and still publishes once.
 */
#define VU_PUBLISH_BYTES (128u * 1024u)

/* Runs one batch with q->lock held. Returns true if more work may be
 * waiting, so the caller should come back without sleeping. */
static bool queue_run_batch(struct vu_queue *q)
{
	struct vu_dev *dev = q->dev;
	struct virtq *vq = &q->vq;
	struct virtq_elem elem;
	unsigned done = 0, pushed;
	uint64_t unpublished_bytes = 0;
	bool more = false;

	pushed = queue_push_completions(q);
	if (!q->enabled || vq->broken || !virtq_ready(vq))
		goto publish;
	virtq_disable_notify(vq);
	for (;;) {
		uint32_t len;

		if (virtq_pop(vq, &elem) <= 0)
			break;
		if (done == 0)
			ferry_hist_add(&q->st.depth, virtq_unpopped(vq) + 1u);
		/* Set before handle(): the completion may come from another
		 * thread before handle() even returns. */
		q->later[elem.head].head = elem.head;
		elem.req.token = &q->later[elem.head];
		elem.req.queued_behind = virtq_unpopped(vq);
		len = dev->ops->handle(q->ctx, q->index, &elem.req);
		if (len == VU_DEFERRED) {
			q->later_outstanding++;
		} else {
			virtq_push(vq, &elem, len);
			pushed++;
			unpublished_bytes += (uint64_t)elem.rd_len + len;
			if ((pushed >= VU_PUBLISH_REQUESTS && !queue_cpu_shared(q)) ||
			    unpublished_bytes >= VU_PUBLISH_BYTES) {
				queue_publish(q);
				pushed = 0;
				unpublished_bytes = 0;
			}
		}
		/* Bounded batches keep the control thread's wait for this
		 * lock short even if the driver keeps the ring full. */
		if (++done == vq->num) {
			more = true;
			break;
		}
	}
	if (done > 0) {
		ferry_count(&q->st.requests, done);
		ferry_count(&q->st.batches, 1);
		ferry_hist_add(&q->st.batch_size, done);
	}
publish:
	if (pushed > 0 && virtq_ready(vq) && !vq->broken)
		queue_publish(q);
	if (vq->broken) {
		if (!q->err_signalled)
			eventfd_signal(q->err_fd);
		q->err_signalled = true;
		return false;
	}
	return more;
}

/* Asks the driver for kicks again before the thread sleeps; true if work
 * arrived meanwhile. Called with q->lock held. */
static bool queue_arm(struct vu_queue *q)
{
	if (!q->enabled || q->vq.broken || !virtq_ready(&q->vq))
		return false;
	return virtq_enable_notify(&q->vq);
}

/*
 * Before the queue stops: every deferred request is cancelled and its
 * completion pushed, so the index GET_VRING_BASE reports leaves nothing in
 * flight, and no completing thread outlives the queue's context.
 */
static void queue_finish_deferred(struct vu_queue *q)
{
	struct vu_dev *dev = q->dev;

	if (q->later_outstanding == 0)
		return;
	log_debug("queue %u: cancelling %u deferred requests", q->index,
		  q->later_outstanding);
	if (dev->ops->queue_cancel)
		dev->ops->queue_cancel(q->ctx, q->index);
	for (;;) {
		struct pollfd pfd = { .fd = q->ctl_fd, .events = POLLIN };

		pthread_mutex_lock(&q->lock);
		if (queue_push_completions(q) > 0 && virtq_ready(&q->vq) &&
		    !q->vq.broken)
			queue_publish(q);
		pthread_mutex_unlock(&q->lock);
		if (q->later_outstanding == 0)
			break;
		if (poll(&pfd, 1, -1) > 0)
			eventfd_drain(q->ctl_fd);
	}
}

void vu_request_complete(void *token, const void *reply, uint32_t len,
			 void *data, uint32_t data_len)
{
	struct vu_later *l = token;
	struct vu_queue *q = l->q;

	if (len > VU_DEFERRED_REPLY_MAX) {
		log_err("queue %u: deferred reply of %u bytes cut to %u", q->index,
			len, VU_DEFERRED_REPLY_MAX);
		len = VU_DEFERRED_REPLY_MAX;
	}
	memcpy(l->reply, reply, len);
	l->len = len;
	l->data = data;
	l->data_len = data ? data_len : 0;
	pthread_mutex_lock(&q->done_lock);
	l->next = q->done;
	/* Atomic: queue_poll peeks at it without the lock. */
	__atomic_store_n(&q->done, l, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&q->done_lock);
	eventfd_signal(q->ctl_fd);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

static bool poll_slot_take(struct vu_dev *dev)
{
	int n = __atomic_load_n(&dev->poll_slots, __ATOMIC_RELAXED);

	while (n > 0)
		if (__atomic_compare_exchange_n(&dev->poll_slots, &n, n - 1, false,
						__ATOMIC_RELAXED, __ATOMIC_RELAXED))
			return true;
	return false;
}

/*
 * Watches the avail ring, the completion list and the stop flag for up to
 * budget_ns with kicks still off; true if there is something to do. The
 * ring is looked at under q->lock, taken for that look alone, so the
 * control thread can still change the memory table while we spin.
 */
static bool queue_poll(struct vu_queue *q, uint64_t budget_ns)
{
	uint64_t end = ferry_monotonic_ns() + budget_ns;

	do {
		bool work;

		for (unsigned i = 0; i < 16; i++)
			cpu_relax();
		if (__atomic_load_n(&q->stop_requested, __ATOMIC_ACQUIRE) ||
		    __atomic_load_n(&q->done, __ATOMIC_ACQUIRE))
			return true;
		pthread_mutex_lock(&q->lock);
		work = q->enabled && virtq_avail_pending(&q->vq);
		pthread_mutex_unlock(&q->lock);
		if (work)
			return true;
	} while (ferry_monotonic_ns() < end);
	return false;
}

/*
 * The next poll budget after a wait of waited_ns that polling did not end,
 * by KVM's halt-polling rule: a wait the largest budget would have covered
 * grows the budget, a longer one shrinks it, so a queue whose driver is
 * idle (or starved of CPU) soon stops spinning.
 */
static uint64_t poll_budget_next(uint64_t budget, uint64_t waited_ns, uint64_t max)
{
	const uint64_t min = 2000;

	if (waited_ns <= max)
		budget = budget ? budget * 2 : min;
	else
		budget /= 2;
	if (budget > max)
		budget = max;
	return budget < min ? 0 : budget;
}

/*
 * Before sleeping a request queue spins for a while: waking a sleeping
 * thread costs more than the whole request (bench/wake-cost: a kick/call
 * round trip is 6-60 us here, a 4 KiB read 2 us), and while we spin
 * with kicks off the driver does not kick at all.
 */
static bool queue_wait_by_polling(struct vu_queue *q, uint64_t budget_ns)
{
	struct vu_dev *dev = q->dev;
	bool work;

	if (!budget_ns || q->index == 0 || queue_cpu_shared(q) || !poll_slot_take(dev))
		return false;
	work = queue_poll(q, budget_ns);
	__atomic_add_fetch(&dev->poll_slots, 1, __ATOMIC_RELAXED);
	if (work)
		ferry_count(&q->st.poll_hits, 1);
	return work;
}

/*
 * Whether this thread shares its CPU with something runnable, judged by how
 * often it was preempted (involuntary context switches) between its recent
 * waits: in more than ~30% of them, the driver or another tenant is
 * waiting for this CPU. Then spinning only delays the driver, and so does
 * publishing every few replies: the driver cannot run before we yield, and
 * each early call wakes it for a part of the batch (randread QD16 with
 * driver and daemon on one CPU: 263-302K ops/s publishing every 4, 401-479K
 * at the end of the batch). Request queues only, once per wait.
 */
static void queue_judge_cpu(struct vu_queue *q)
{
	struct rusage ru;
	bool preempted;

	if (q->index == 0 || getrusage(RUSAGE_THREAD, &ru) < 0)
		return;
	preempted = (uint64_t)ru.ru_nivcsw != q->nivcsw;
	q->nivcsw = (uint64_t)ru.ru_nivcsw;
	/* A moving average in 1/256ths, each wait weighing 1/16: one stray
	 * preemption (a kernel thread, a timer) does not flip it. */
	q->preempted_avg = q->preempted_avg - q->preempted_avg / 16u + (preempted ? 16u : 0u);
	if (queue_cpu_shared(q))
		ferry_count(&q->st.shared_cpu_waits, 1);
}

/*
 * Reads the kick eventfd; false when the fd the frontend gave is not one.
 * An eventfd that poll() calls readable always yields its 8-byte counter
 * (or EAGAIN if another reader was first). A regular file or a pipe whose
 * writer left stays readable with nothing (or junk) to read, and the
 * thread would spin on it at 100% of a CPU: the queue is marked broken and
 * its thread stops instead.
 */
static bool kick_drain(struct vu_queue *q)
{
	uint64_t v;
	ssize_t r = read(q->kick_fd, &v, sizeof(v));

	if (r == (ssize_t)sizeof(v) || (r < 0 && (errno == EAGAIN || errno == EINTR)))
		return true;
	pthread_mutex_lock(&q->lock);
	virtq_mark_broken(&q->vq, "the kick fd is not an eventfd");
	if (!q->err_signalled)
		eventfd_signal(q->err_fd);
	q->err_signalled = true;
	pthread_mutex_unlock(&q->lock);
	log_err("queue %u: reading the kick fd gave %zd (%s); it is not an eventfd, the queue stops",
		q->index, r, r < 0 ? strerror(errno) : "want 8 bytes");
	return false;
}

static void *queue_thread(void *arg)
{
	struct vu_queue *q = arg;
	struct vu_dev *dev = q->dev;
	bool more = true; /* requests may have arrived before we started */
	uint64_t poll_ns = 0;

	q->ctx = dev->ops->queue_start(dev->opaque, q->index);
	if (!q->ctx) {
		pthread_mutex_lock(&q->lock);
		virtq_mark_broken(&q->vq, "queue_start failed");
		eventfd_signal(q->err_fd);
		q->err_signalled = true;
		pthread_mutex_unlock(&q->lock);
		return NULL;
	}
	for (;;) {
		struct pollfd pfd[2] = {
			{ .fd = q->kick_fd, .events = POLLIN },
			{ .fd = q->ctl_fd, .events = POLLIN },
		};
		uint64_t slept_from = 0;
		int n;

		if (!more) {
			queue_judge_cpu(q);
			more = queue_wait_by_polling(q, poll_ns);
		}
		if (!more) {
			pthread_mutex_lock(&q->lock);
			more = queue_arm(q);
			pthread_mutex_unlock(&q->lock);
		}
		if (!more) {
			ferry_count(&q->st.sleeps, 1);
			if (dev->poll_max_ns && q->index > 0)
				slept_from = ferry_monotonic_ns();
		}
		n = poll(pfd, 2, more ? 0 : -1);
		if (slept_from)
			poll_ns = poll_budget_next(poll_ns, ferry_monotonic_ns() - slept_from + poll_ns,
						   dev->poll_max_ns);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			log_err("queue %u: poll: %s", q->index, strerror(errno));
			break;
		}
		/* Drain first, then look at the flag: queue_stop_thread sets
		 * the flag before it signals, so a stop whose signal this
		 * drain swallows is seen below. Looking first lost a stop that
		 * landed between the two, and the thread slept on while the
		 * control thread waited for it (found by fuzz_vhost_user). */
		if (pfd[1].revents & POLLIN)
			eventfd_drain(q->ctl_fd);
		if (__atomic_load_n(&q->stop_requested, __ATOMIC_ACQUIRE))
			break;
		/* Drained before the batch: a kick arriving during it is kept
		 * and costs at most one empty pass. */
		if (pfd[0].revents & POLLIN && !kick_drain(q))
			break;
		if (pfd[0].revents & (POLLERR | POLLNVAL)) {
			log_err("queue %u: kick fd error, queue stops", q->index);
			break;
		}
		pthread_mutex_lock(&q->lock);
		more = queue_run_batch(q);
		pthread_mutex_unlock(&q->lock);
	}
	queue_finish_deferred(q);
	dev->ops->queue_stop(dev->opaque, q->index, q->ctx);
	q->ctx = NULL;
	return NULL;
}

/* Stops the queue's thread after its current batch; control thread only. */
static void queue_stop_thread(struct vu_queue *q)
{
	if (!q->thread_running)
		return;
	__atomic_store_n(&q->stop_requested, true, __ATOMIC_RELEASE);
	eventfd_signal(q->ctl_fd);
	pthread_join(q->thread, NULL);
	q->thread_running = false;
	free(q->later);
	q->later = NULL;
	__atomic_store_n(&q->stop_requested, false, __ATOMIC_RELAXED);
}

/* Translates the ring addresses through the current memory table. Called
 * with q->lock held (or the thread stopped). */
static int queue_map_rings(struct vu_queue *q)
{
	const struct guest_mem *mem = q->dev->mem;
	uint64_t desc_len, avail_len, used_len;
	void *desc, *avail, *used;
	int ret;

	virtq_clear_rings(&q->vq);
	if (!q->addr_set || q->num == 0)
		return 0;
	virtq_ring_sizes(q->num, &desc_len, &avail_len, &used_len);
	desc = guest_mem_uva_to_ptr(mem, q->desc_uva, desc_len);
	avail = guest_mem_uva_to_ptr(mem, q->avail_uva, avail_len);
	used = guest_mem_uva_to_ptr(mem, q->used_uva, used_len);
	if (!desc || !avail || !used) {
		log_err("queue %u: ring desc 0x%llx avail 0x%llx used 0x%llx "
			"(num %u) not inside one memory region each", q->index,
			(unsigned long long)q->desc_uva, (unsigned long long)q->avail_uva,
			(unsigned long long)q->used_uva, q->num);
		return -EFAULT;
	}
	ret = virtq_set_rings(&q->vq, q->num, desc, avail, used);
	if (ret < 0)
		log_err("queue %u: misaligned ring addresses", q->index);
	return ret;
}

/* Starts the queue thread once the ring is complete: addresses mapped and
 * a kick fd. Control thread only. */
static int queue_maybe_start(struct vu_queue *q)
{
	struct vu_dev *dev = q->dev;
	sigset_t all, old;
	bool ready;
	int ret;

	if (q->thread_running || q->kick_fd < 0)
		return 0;
	pthread_mutex_lock(&q->lock);
	ready = virtq_ready(&q->vq);
	if (ready) {
		virtq_start(&q->vq);
		/* Without VHOST_USER_F_PROTOCOL_FEATURES there is no
		 * SET_VRING_ENABLE: rings start enabled. */
		if (!(dev->features & BIT(VU_F_PROTOCOL_FEATURES)))
			q->enabled = true;
	}
	pthread_mutex_unlock(&q->lock);
	if (!ready)
		return 0;

	q->later = calloc(q->num, sizeof(q->later[0]));
	if (!q->later)
		return -ENOMEM;
	for (unsigned i = 0; i < q->num; i++)
		q->later[i].q = q;
	q->later_outstanding = 0;
	eventfd_drain(q->ctl_fd);
	__atomic_store_n(&q->stop_requested, false, __ATOMIC_RELAXED);
	/* Queue threads inherit a full signal mask: signals go to the main
	 * thread, whose handlers may call vu_dev_stop(). */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = -pthread_create(&q->thread, NULL, queue_thread, q);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret < 0) {
		log_err("queue %u: cannot start thread: %s", q->index, strerror(-ret));
		free(q->later);
		q->later = NULL;
		return ret;
	}
	q->thread_running = true;
	dev->driver_active = true;
	log_debug("queue %u started (num %u)", q->index, q->num);
	return 0;
}

/* Excludes every queue thread from its batch, in index order. Queue
 * threads only ever take their own lock, so the order cannot deadlock. */
static void lock_all_queues(struct vu_dev *dev)
{
	for (unsigned i = 0; i < dev->nqueues; i++)
		pthread_mutex_lock(&dev->queues[i].lock);
}

static void unlock_all_queues(struct vu_dev *dev)
{
	for (unsigned i = dev->nqueues; i-- > 0;)
		pthread_mutex_unlock(&dev->queues[i].lock);
}

/* After the memory table changed, with all queue locks held: point the
 * queues at the new table and translate their rings again. A ring whose
 * memory went away is left unmapped until new addresses arrive. */
static void remap_all_queues(struct vu_dev *dev)
{
	for (unsigned i = 0; i < dev->nqueues; i++) {
		struct vu_queue *q = &dev->queues[i];

		virtq_set_mem(&q->vq, dev->mem);
		if (queue_map_rings(q) < 0)
			log_warn("queue %u: rings unmapped after memory table change",
				 q->index);
	}
}

/*
 * Tells the user that the driver which used the queues is gone, once per
 * driver. Queue threads the new driver already started are stopped around
 * the call, so the user never sees a request during it.
 */
static void dev_driver_gone(struct vu_dev *dev, const char *why)
{
	if (!dev->driver_active)
		return;
	for (unsigned i = 0; i < dev->nqueues; i++) {
		struct vu_queue *q = &dev->queues[i];

		q->restart_after_reset = q->thread_running;
		queue_stop_thread(q);
		/* Positions the old driver left say nothing about the new one. */
		q->stop_pos_valid = false;
	}
	dev->driver_active = false;
	log_info("vhost-user: device reset (%s)", why);
	if (dev->ops->device_reset)
		dev->ops->device_reset(dev->opaque);
	for (unsigned i = 0; i < dev->nqueues; i++) {
		struct vu_queue *q = &dev->queues[i];

		if (q->restart_after_reset)
			queue_maybe_start(q);
		q->restart_after_reset = false;
	}
}

/* Back to the state of a fresh connection: threads stopped, fds closed,
 * memory unmapped. */
static void dev_reset(struct vu_dev *dev)
{
	for (unsigned i = 0; i < dev->nqueues; i++) {
		struct vu_queue *q = &dev->queues[i];

		queue_stop_thread(q);
		close_fd(&q->kick_fd);
		close_fd(&q->call_fd);
		close_fd(&q->err_fd);
		q->enabled = false;
		q->err_signalled = false;
		q->num = 0;
		q->addr_set = false;
		q->stop_pos_valid = false;
		virtq_init(&q->vq, i);
		virtq_set_mem(&q->vq, dev->mem);
	}
	dev_driver_gone(dev, "frontend disconnected");
	guest_mem_clear(dev->mem);
	close_fd(&dev->backend_req_fd);
	dev->features = 0;
	dev->protocol_features = 0;
}

/* ---- Messages ---- */

static const char *request_name(uint32_t req)
{
	static const char *const names[] = {
		[VU_GET_FEATURES] = "GET_FEATURES",
		[VU_SET_FEATURES] = "SET_FEATURES",
		[VU_SET_OWNER] = "SET_OWNER",
		[VU_RESET_OWNER] = "RESET_OWNER",
		[VU_SET_MEM_TABLE] = "SET_MEM_TABLE",
		[VU_SET_LOG_BASE] = "SET_LOG_BASE",
		[VU_SET_LOG_FD] = "SET_LOG_FD",
		[VU_SET_VRING_NUM] = "SET_VRING_NUM",
		[VU_SET_VRING_ADDR] = "SET_VRING_ADDR",
		[VU_SET_VRING_BASE] = "SET_VRING_BASE",
		[VU_GET_VRING_BASE] = "GET_VRING_BASE",
		[VU_SET_VRING_KICK] = "SET_VRING_KICK",
		[VU_SET_VRING_CALL] = "SET_VRING_CALL",
		[VU_SET_VRING_ERR] = "SET_VRING_ERR",
		[VU_GET_PROTOCOL_FEATURES] = "GET_PROTOCOL_FEATURES",
		[VU_SET_PROTOCOL_FEATURES] = "SET_PROTOCOL_FEATURES",
		[VU_GET_QUEUE_NUM] = "GET_QUEUE_NUM",
		[VU_SET_VRING_ENABLE] = "SET_VRING_ENABLE",
		[VU_SET_BACKEND_REQ_FD] = "SET_BACKEND_REQ_FD",
		[VU_GET_CONFIG] = "GET_CONFIG",
		[VU_SET_CONFIG] = "SET_CONFIG",
		[VU_GET_MAX_MEM_SLOTS] = "GET_MAX_MEM_SLOTS",
		[VU_ADD_MEM_REG] = "ADD_MEM_REG",
		[VU_REM_MEM_REG] = "REM_MEM_REG",
	};

	if (req < sizeof(names) / sizeof(names[0]) && names[req])
		return names[req];
	return "unknown";
}

static void msg_close_fds(struct vu_msg *m)
{
	for (unsigned i = 0; i < m->nfds; i++)
		close_fd(&m->fds[i]);
	m->nfds = 0;
}

/* Reads exactly len bytes. 0, or -ECONNRESET at end of stream. */
static int read_full(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ECONNRESET;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * Receives one message with its fds. 1 on success, 0 when the frontend
 * went away between messages, -errno otherwise. On any failure no fd is
 * left open.
 */
static int msg_recv(int conn_fd, struct vu_msg *m)
{
	union {
		char buf[CMSG_SPACE(VU_MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} control;
	struct iovec iov = { .iov_base = &m->hdr, .iov_len = sizeof(m->hdr) };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = control.buf, .msg_controllen = sizeof(control.buf),
	};
	struct cmsghdr *cmsg;
	bool too_many_fds = false;
	ssize_t n;
	int ret;

	m->nfds = 0;
	do {
		n = recvmsg(conn_fd, &mh, MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == ECONNRESET ? 0 : -errno;
	if (n == 0)
		return 0;

	for (cmsg = CMSG_FIRSTHDR(&mh); cmsg; cmsg = CMSG_NXTHDR(&mh, cmsg)) {
		size_t cnt;

		if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS)
			continue;
		cnt = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < cnt; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
			if (m->nfds < VU_MAX_FDS) {
				m->fds[m->nfds++] = fd;
			} else {
				close(fd);
				too_many_fds = true;
			}
		}
	}
	/* The kernel drops fds that did not fit; the message is unusable. */
	if (too_many_fds || (mh.msg_flags & MSG_CTRUNC)) {
		log_err("vhost-user message with more than %d fds", VU_MAX_FDS);
		ret = -EPROTO;
		goto err_fds;
	}
	if ((size_t)n < sizeof(m->hdr)) {
		ret = read_full(conn_fd, (uint8_t *)&m->hdr + n, sizeof(m->hdr) - (size_t)n);
		if (ret < 0)
			goto err_fds;
	}
	if ((m->hdr.flags & VU_VERSION_MASK) != VU_VERSION) {
		log_err("vhost-user message with version %u",
			m->hdr.flags & VU_VERSION_MASK);
		ret = -EPROTO;
		goto err_fds;
	}
	if (m->hdr.size > sizeof(m->p)) {
		log_err("vhost-user %s with payload of %u bytes (max %zu)",
			request_name(m->hdr.request), m->hdr.size, sizeof(m->p));
		ret = -EPROTO;
		goto err_fds;
	}
	ret = read_full(conn_fd, &m->p, m->hdr.size);
	if (ret < 0)
		goto err_fds;
	return 1;

err_fds:
	msg_close_fds(m);
	return ret;
}

static int msg_send_reply(int conn_fd, uint32_t request, const void *payload,
			  uint32_t size)
{
	struct vu_msg_hdr hdr = {
		.request = request, .flags = VU_VERSION | VU_FLAG_REPLY, .size = size,
	};
	struct iovec iov[2] = {
		{ .iov_base = &hdr, .iov_len = sizeof(hdr) },
		{ .iov_base = (void *)payload, .iov_len = size },
	};
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = size ? 2 : 1 };
	size_t left = sizeof(hdr) + size;

	while (left > 0) {
		/* MSG_NOSIGNAL: a vanished frontend is an error, not SIGPIPE. */
		ssize_t n = sendmsg(conn_fd, &mh, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		left -= (size_t)n;
		while (n > 0 && mh.msg_iovlen > 0) {
			if ((size_t)n >= mh.msg_iov->iov_len) {
				n -= (ssize_t)mh.msg_iov->iov_len;
				mh.msg_iov++;
				mh.msg_iovlen--;
			} else {
				mh.msg_iov->iov_base = (uint8_t *)mh.msg_iov->iov_base + n;
				mh.msg_iov->iov_len -= (size_t)n;
				n = 0;
			}
		}
	}
	return 0;
}

static struct vu_queue *msg_queue(struct vu_dev *dev, uint64_t index)
{
	if (index >= dev->nqueues) {
		log_err("vhost-user: vring index %llu out of range (%u queues)",
			(unsigned long long)index, dev->nqueues);
		return NULL;
	}
	return &dev->queues[index];
}

/* Takes fd number i out of the message so the dispatcher does not close it. */
static int msg_take_fd(struct vu_msg *m, unsigned i)
{
	int fd = m->fds[i];

	m->fds[i] = -1;
	return fd;
}

/* ---- Handlers: 0 or -errno; fds left in the message are closed after ---- */

static int h_get_features(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	r->p.u64 = offered_features;
	r->size = sizeof(r->p.u64);
	return 0;
}

static int h_set_features(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	uint64_t features = m->p.u64;

	if (features & ~offered_features) {
		log_err("SET_FEATURES 0x%llx: not offered 0x%llx",
			(unsigned long long)features,
			(unsigned long long)(features & ~offered_features));
		return -EINVAL;
	}
	lock_all_queues(dev);
	dev->features = features;
	for (unsigned i = 0; i < dev->nqueues; i++) {
		struct vu_queue *q = &dev->queues[i];

		virtq_set_features(&q->vq, features & BIT(VIRTIO_RING_F_EVENT_IDX),
				   features & BIT(VIRTIO_RING_F_INDIRECT_DESC));
		if (!(features & BIT(VU_F_PROTOCOL_FEATURES)))
			q->enabled = true;
	}
	unlock_all_queues(dev);
	return 0;
}

static int h_set_owner(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	return 0;
}

static int h_reset_owner(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	/* vhost-user.rst recommends reading this obsolete message as
	 * "disable all rings", not as a full reset. */
	for (unsigned i = 0; i < dev->nqueues; i++) {
		struct vu_queue *q = &dev->queues[i];

		queue_stop_thread(q);
		pthread_mutex_lock(&q->lock);
		q->enabled = false;
		pthread_mutex_unlock(&q->lock);
	}
	return 0;
}

static int h_get_protocol_features(struct vu_dev *dev, struct vu_msg *m,
				   struct vu_reply *r)
{
	r->p.u64 = dev->offered_protocol_features;
	r->size = sizeof(r->p.u64);
	return 0;
}

static int h_set_protocol_features(struct vu_dev *dev, struct vu_msg *m,
				   struct vu_reply *r)
{
	if (m->p.u64 & ~dev->offered_protocol_features) {
		log_err("SET_PROTOCOL_FEATURES 0x%llx: not offered",
			(unsigned long long)m->p.u64);
		return -EINVAL;
	}
	dev->protocol_features = m->p.u64;
	return 0;
}

static int h_get_queue_num(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	r->p.u64 = dev->nqueues;
	r->size = sizeof(r->p.u64);
	return 0;
}

static int h_get_max_mem_slots(struct vu_dev *dev, struct vu_msg *m,
			       struct vu_reply *r)
{
	r->p.u64 = GUEST_MEM_MAX_REGIONS;
	r->size = sizeof(r->p.u64);
	return 0;
}

static void region_desc_from_wire(struct guest_region_desc *d,
				  const struct vu_mem_region *w)
{
	d->gpa = w->gpa;
	d->size = w->size;
	d->uva = w->uva;
	d->mmap_offset = w->mmap_offset;
}

static int h_set_mem_table(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	const struct vu_mem_table *t = &m->p.mem;
	struct guest_mem *mem, *old;
	uint32_t nregions;
	int ret;

	if (m->hdr.size < VU_MEM_TABLE_HDR_SIZE)
		return -EINVAL;
	nregions = t->nregions;
	if (nregions > VU_MEM_TABLE_REGIONS ||
	    m->hdr.size != VU_MEM_TABLE_HDR_SIZE + nregions * sizeof(struct vu_mem_region) ||
	    m->nfds != nregions) {
		log_err("SET_MEM_TABLE: %u regions, %u bytes, %u fds", nregions,
			m->hdr.size, m->nfds);
		return -EINVAL;
	}
	ret = guest_mem_new(&mem);
	if (ret < 0)
		return ret;
	for (uint32_t i = 0; i < nregions; i++) {
		struct guest_region_desc d;
		struct guest_region region;

		region_desc_from_wire(&d, &t->regions[i]);
		ret = guest_region_map(&region, &d, m->fds[i]);
		if (ret < 0)
			goto err_mem;
		ret = guest_mem_insert(mem, &region);
		if (ret < 0) {
			guest_region_unmap(&region);
			goto err_mem;
		}
	}
	lock_all_queues(dev);
	old = dev->mem;
	dev->mem = mem;
	remap_all_queues(dev);
	unlock_all_queues(dev);
	/* No batch can hold a pointer into the old regions any more. */
	guest_mem_free(old);
	for (unsigned i = 0; i < dev->nqueues; i++)
		queue_maybe_start(&dev->queues[i]);
	log_debug("memory table: %u regions", nregions);
	return 0;

err_mem:
	guest_mem_free(mem);
	return ret;
}

static int h_add_mem_reg(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	struct guest_region_desc d;
	struct guest_region region;
	int ret;

	if (m->nfds != 1)
		return -EINVAL;
	region_desc_from_wire(&d, &m->p.mem_single.region);
	ret = guest_region_map(&region, &d, m->fds[0]);
	if (ret < 0)
		return ret;
	lock_all_queues(dev);
	ret = guest_mem_insert(dev->mem, &region);
	if (ret == 0)
		remap_all_queues(dev);
	unlock_all_queues(dev);
	if (ret < 0) {
		guest_region_unmap(&region);
		return ret;
	}
	for (unsigned i = 0; i < dev->nqueues; i++)
		queue_maybe_start(&dev->queues[i]);
	return 0;
}

static int h_rem_mem_reg(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	struct guest_region_desc d;
	struct guest_region removed;
	int ret;

	/* Older QEMU sends an fd here; vhost-user.rst lets us ignore it. */
	if (m->nfds > 1)
		return -EINVAL;
	region_desc_from_wire(&d, &m->p.mem_single.region);
	lock_all_queues(dev);
	ret = guest_mem_remove(dev->mem, &d, &removed);
	if (ret == 0)
		remap_all_queues(dev);
	unlock_all_queues(dev);
	if (ret < 0) {
		log_err("REM_MEM_REG: no region gpa 0x%llx size 0x%llx uva 0x%llx",
			(unsigned long long)d.gpa, (unsigned long long)d.size,
			(unsigned long long)d.uva);
		return ret;
	}
	guest_region_unmap(&removed);
	return 0;
}

static int h_set_vring_num(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	struct vu_queue *q = msg_queue(dev, m->p.state.index);
	unsigned num = m->p.state.num;

	if (!q)
		return -EINVAL;
	if (q->thread_running)
		return -EBUSY;
	/* Split rings need a power of two: indices wrap modulo 2^16. */
	if (num == 0 || num > VIRTQ_MAX_SIZE || (num & (num - 1)) != 0) {
		log_err("SET_VRING_NUM %u: not a power of two up to %u", num,
			VIRTQ_MAX_SIZE);
		return -EINVAL;
	}
	q->num = num;
	virtq_clear_rings(&q->vq);
	/* Addresses that came first are re-checked against the new size. */
	return queue_map_rings(q);
}

static int h_set_vring_addr(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	const struct vu_vring_addr *a = &m->p.addr;
	struct vu_queue *q = msg_queue(dev, a->index);
	int ret;

	if (!q)
		return -EINVAL;
	/* a->flags may ask for used-ring logging; we never offered
	 * LOG_ALL, so there is nothing to log. */
	pthread_mutex_lock(&q->lock);
	q->desc_uva = a->desc;
	q->avail_uva = a->avail;
	q->used_uva = a->used;
	q->addr_set = true;
	ret = queue_map_rings(q);
	pthread_mutex_unlock(&q->lock);
	if (ret < 0)
		return ret;
	return queue_maybe_start(q);
}

static int h_set_vring_base(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	struct vu_queue *q = msg_queue(dev, m->p.state.index);

	if (!q)
		return -EINVAL;
	if (q->thread_running)
		return -EBUSY;
	/* Split rings: a 16-bit index. Higher bits belong to packed rings. */
	if (m->p.state.num > UINT16_MAX)
		return -EINVAL;
	/*
	 * QEMU stops all rings (GET_VRING_BASE) both when the VM pauses and
	 * when the guest resets the device (reboot). Only the restart tells
	 * them apart: a resumed ring continues where it stopped, a reset one
	 * starts again at 0. A request ring that stopped exactly at a wrap to
	 * 0 (1 reboot in 65536) is taken for resumed: the new driver's INIT is
	 * then refused with EIO and its mount fails, the daemon goes on.
	 */
	if (q->stop_pos_valid && m->p.state.num != q->vq.last_avail_idx) {
		log_debug("queue %u restarts at %u, stopped at %u", q->index,
			  m->p.state.num, q->vq.last_avail_idx);
		dev_driver_gone(dev, "rings restart from a new position");
	}
	q->stop_pos_valid = false;
	virtq_set_base(&q->vq, (uint16_t)m->p.state.num);
	q->err_signalled = false;
	return 0;
}

static int h_get_vring_base(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	struct vu_queue *q = msg_queue(dev, m->p.state.index);

	if (!q)
		return -EINVAL;
	/* Stops the ring: the thread finishes its batch, so every popped
	 * request is also pushed and last_avail_idx is exact. */
	queue_stop_thread(q);
	close_fd(&q->kick_fd);
	close_fd(&q->call_fd);
	q->stop_pos_valid = true;
	r->p.state.index = q->index;
	r->p.state.num = q->vq.last_avail_idx;
	r->size = sizeof(r->p.state);
	log_debug("queue %u stopped at %u", q->index, q->vq.last_avail_idx);
	return 0;
}

/* Decodes the u64 of SET_VRING_KICK/CALL/ERR: the queue and its fd (-1 if
 * the NOFD bit is set). */
static int vring_fd_msg(struct vu_dev *dev, struct vu_msg *m, struct vu_queue **q,
			int *fd)
{
	uint64_t v = m->p.u64;
	bool nofd = v & VU_VRING_NOFD_MASK;

	if (v & ~(VU_VRING_IDX_MASK | VU_VRING_NOFD_MASK))
		return -EINVAL;
	*q = msg_queue(dev, v & VU_VRING_IDX_MASK);
	if (!*q)
		return -EINVAL;
	if (m->nfds != (nofd ? 0u : 1u)) {
		log_err("%s: %u fds with NOFD %s", request_name(m->hdr.request),
			m->nfds, nofd ? "set" : "clear");
		return -EINVAL;
	}
	*fd = nofd ? -1 : msg_take_fd(m, 0);
	return 0;
}

static int h_set_vring_kick(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	struct vu_queue *q;
	int fd, ret;

	ret = vring_fd_msg(dev, m, &q, &fd);
	if (ret < 0)
		return ret;
	if (fd < 0) {
		/* Polling mode would mean a thread spinning on the ring. */
		log_err("SET_VRING_KICK without fd: polling is not supported");
		return -ENOTSUP;
	}
	/* The thread sleeps on the kick fd, so it cannot be swapped under it. */
	queue_stop_thread(q);
	close_fd(&q->kick_fd);
	q->kick_fd = fd;
	return queue_maybe_start(q);
}

/* Replaces one of a running queue's notification fds under its lock, so
 * its thread never signals a closed fd. */
static void swap_queue_fd(struct vu_queue *q, int *slot, int fd)
{
	int old;

	pthread_mutex_lock(&q->lock);
	old = *slot;
	*slot = fd;
	pthread_mutex_unlock(&q->lock);
	close_fd(&old);
}

static int h_set_vring_call(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	struct vu_queue *q;
	int fd, ret;

	ret = vring_fd_msg(dev, m, &q, &fd);
	if (ret < 0)
		return ret;
	/* QEMU swaps call fds on running rings (irqfd vs. masked). */
	swap_queue_fd(q, &q->call_fd, fd);
	return 0;
}

static int h_set_vring_err(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	struct vu_queue *q;
	int fd, ret;

	ret = vring_fd_msg(dev, m, &q, &fd);
	if (ret < 0)
		return ret;
	swap_queue_fd(q, &q->err_fd, fd);
	return 0;
}

static int h_set_vring_enable(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	struct vu_queue *q = msg_queue(dev, m->p.state.index);

	if (!q || m->p.state.num > 1)
		return -EINVAL;
	pthread_mutex_lock(&q->lock);
	q->enabled = m->p.state.num;
	pthread_mutex_unlock(&q->lock);
	/* Buffers may have been queued while disabled, with no kick to come. */
	if (q->enabled && q->thread_running)
		eventfd_signal(q->ctl_fd);
	return 0;
}

static int h_get_config(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	const struct vu_config *c = &m->p.config;

	/* On failure the dispatcher replies with an empty payload, which is
	 * how vhost-user.rst says GET_CONFIG reports errors. */
	if (m->hdr.size < VU_CONFIG_HDR_SIZE || c->size > VU_CONFIG_MAX ||
	    m->hdr.size != VU_CONFIG_HDR_SIZE + c->size ||
	    c->offset > sizeof(dev->config_space) ||
	    c->size > sizeof(dev->config_space) - c->offset) {
		log_err("GET_CONFIG offset %u size %u: outside the %zu-byte config space",
			c->offset, c->size, sizeof(dev->config_space));
		return -EINVAL;
	}
	r->p.config.offset = c->offset;
	r->p.config.size = c->size;
	r->p.config.flags = c->flags;
	memcpy(r->p.config.data, (const uint8_t *)&dev->config_space + c->offset, c->size);
	r->size = VU_CONFIG_HDR_SIZE + c->size;
	return 0;
}

static int h_set_config(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	/* virtio-fs config space is read-only for the driver. */
	log_warn("SET_CONFIG refused: virtio-fs config space is read-only");
	return -EPERM;
}

static int h_set_backend_req_fd(struct vu_dev *dev, struct vu_msg *m,
				struct vu_reply *r)
{
	if (m->nfds != 1)
		return -EINVAL;
	/* Kept for DAX mapping requests; nothing is sent on it yet. */
	close_fd(&dev->backend_req_fd);
	dev->backend_req_fd = msg_take_fd(m, 0);
	return 0;
}

static int h_set_log(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r)
{
	/* We offer neither VHOST_F_LOG_ALL nor LOG_SHMFD: a frontend asking
	 * for dirty logging is confused. The fd is closed by the dispatcher. */
	log_err("%s: dirty logging (migration) is not supported",
		request_name(m->hdr.request));
	return -ENOTSUP;
}

enum { SIZE_VAR = -1 };

struct vu_handler {
	int (*fn)(struct vu_dev *dev, struct vu_msg *m, struct vu_reply *r);
	int size;               /* exact payload size, or SIZE_VAR */
	unsigned max_fds;
	bool has_reply;         /* a reply defined by the request itself */
};

static const struct vu_handler handlers[] = {
	[VU_GET_FEATURES] = { h_get_features, 0, 0, true },
	[VU_SET_FEATURES] = { h_set_features, 8, 0, false },
	[VU_SET_OWNER] = { h_set_owner, 0, 0, false },
	[VU_RESET_OWNER] = { h_reset_owner, 0, 0, false },
	[VU_SET_MEM_TABLE] = { h_set_mem_table, SIZE_VAR, VU_MAX_FDS, false },
	[VU_SET_LOG_BASE] = { h_set_log, SIZE_VAR, 1, false },
	[VU_SET_LOG_FD] = { h_set_log, SIZE_VAR, 1, false },
	[VU_SET_VRING_NUM] = { h_set_vring_num, sizeof(struct vu_vring_state), 0, false },
	[VU_SET_VRING_ADDR] = { h_set_vring_addr, sizeof(struct vu_vring_addr), 0, false },
	[VU_SET_VRING_BASE] = { h_set_vring_base, sizeof(struct vu_vring_state), 0, false },
	[VU_GET_VRING_BASE] = { h_get_vring_base, sizeof(struct vu_vring_state), 0, true },
	[VU_SET_VRING_KICK] = { h_set_vring_kick, 8, 1, false },
	[VU_SET_VRING_CALL] = { h_set_vring_call, 8, 1, false },
	[VU_SET_VRING_ERR] = { h_set_vring_err, 8, 1, false },
	[VU_GET_PROTOCOL_FEATURES] = { h_get_protocol_features, 0, 0, true },
	[VU_SET_PROTOCOL_FEATURES] = { h_set_protocol_features, 8, 0, false },
	[VU_GET_QUEUE_NUM] = { h_get_queue_num, 0, 0, true },
	[VU_SET_VRING_ENABLE] = { h_set_vring_enable, sizeof(struct vu_vring_state), 0, false },
	[VU_SET_BACKEND_REQ_FD] = { h_set_backend_req_fd, 0, 1, false },
	[VU_GET_CONFIG] = { h_get_config, SIZE_VAR, 0, true },
	[VU_SET_CONFIG] = { h_set_config, SIZE_VAR, 0, false },
	[VU_GET_MAX_MEM_SLOTS] = { h_get_max_mem_slots, 0, 0, true },
	[VU_ADD_MEM_REG] = { h_add_mem_reg, sizeof(struct vu_mem_single), 1, false },
	[VU_REM_MEM_REG] = { h_rem_mem_reg, sizeof(struct vu_mem_single), 1, false },
};

/*
 * Handles one message. Returns 0 to go on, -errno to drop the connection:
 * a failed request the frontend cannot learn about (no REPLY_ACK asked)
 * leaves it believing in state we do not have, so we disconnect rather
 * than run on with a wrong picture.
 */
static int dispatch(struct vu_dev *dev, struct vu_msg *m)
{
	uint32_t req = m->hdr.request;
	const struct vu_handler *h = NULL;
	struct vu_reply reply = { .size = 0 };
	int ret;

	if (req < sizeof(handlers) / sizeof(handlers[0]) && handlers[req].fn)
		h = &handlers[req];
	log_debug("vhost-user %s (%u), %u bytes, %u fds", request_name(req), req,
		  m->hdr.size, m->nfds);
	if (!h) {
		log_err("vhost-user request %u not supported", req);
		ret = -ENOSYS;
	} else if ((h->size != SIZE_VAR && m->hdr.size != (uint32_t)h->size) ||
		   m->nfds > h->max_fds) {
		log_err("vhost-user %s: malformed (%u bytes, %u fds)",
			request_name(req), m->hdr.size, m->nfds);
		ret = -EINVAL;
	} else {
		ret = h->fn(dev, m, &reply);
	}
	msg_close_fds(m);

	if (h && h->has_reply) {
		/* GET_CONFIG signals failure with an empty payload; other
		 * replies have no way to say "error". */
		if (ret < 0 && req != VU_GET_CONFIG)
			return ret;
		if (ret < 0)
			reply.size = 0;
		return msg_send_reply(dev->conn_fd, req, &reply.p, reply.size);
	}
	/* Judged after the handler: SET_PROTOCOL_FEATURES may just have
	 * negotiated (or dropped) REPLY_ACK, and it governs this reply too. */
	if ((dev->protocol_features & BIT(VU_PROTO_F_REPLY_ACK)) &&
	    (m->hdr.flags & VU_FLAG_NEED_REPLY)) {
		/* Zero is success; anything else failure. */
		uint64_t status = ret < 0 ? (uint64_t)-ret : 0;

		return msg_send_reply(dev->conn_fd, req, &status, sizeof(status));
	}
	return ret;
}

/* ---- Public API ---- */

/* Half the CPUs we may run on, at least one: the rest are left to the
 * guest's vCPUs (or the load generator) that make the requests. */
static int poll_slots_for_cpus(void)
{
	cpu_set_t set;
	int n;

	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return 1;
	n = CPU_COUNT(&set) / 2;
	return n > 0 ? n : 1;
}

int vu_dev_new(struct vu_dev **out, const struct vu_fs_config *config,
	       const struct vu_fs_ops *ops, void *opaque)
{
	struct vu_dev *dev;
	unsigned max_request_queues;
	size_t tag_len;
	unsigned i = 0;
	int ret;

	if (!config || !ops || !ops->handle || !ops->queue_start || !ops->queue_stop)
		return -EINVAL;
	/* No tag is fine: QEMU's vhost-user-fs-pci has its own tag property
	 * and does not read ours. */
	tag_len = config->tag ? strlen(config->tag) : 0;
	max_request_queues = config->max_request_queues ?
		config->max_request_queues : config->num_request_queues;
	if (tag_len > sizeof(dev->config_space.tag) ||
	    config->num_request_queues == 0 ||
	    max_request_queues < config->num_request_queues ||
	    max_request_queues >= VU_MAX_QUEUES)
		return -EINVAL;

	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return -ENOMEM;
	dev->ops = ops;
	dev->opaque = opaque;
	dev->conn_fd = -1;
	dev->backend_req_fd = -1;
	if (tag_len)
		memcpy(dev->config_space.tag, config->tag, tag_len);
	dev->config_space.num_request_queues = htole32(config->num_request_queues);
	dev->nqueues = 1 + max_request_queues;
	dev->offered_protocol_features = base_protocol_features |
		(tag_len ? BIT(VU_PROTO_F_CONFIG) : 0);
	dev->poll_max_ns = (uint64_t)config->poll_max_us * 1000u;
	dev->poll_slots = poll_slots_for_cpus();

	dev->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (dev->stop_fd < 0) {
		ret = -errno;
		goto err_dev;
	}
	ret = guest_mem_new(&dev->mem);
	if (ret < 0)
		goto err_stop_fd;
	dev->queues = calloc(dev->nqueues, sizeof(dev->queues[0]));
	if (!dev->queues) {
		ret = -ENOMEM;
		goto err_mem;
	}
	for (i = 0; i < dev->nqueues; i++) {
		struct vu_queue *q = &dev->queues[i];

		q->dev = dev;
		q->index = i;
		q->kick_fd = q->call_fd = q->err_fd = -1;
		virtq_init(&q->vq, i);
		virtq_set_mem(&q->vq, dev->mem);
		q->ctl_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (q->ctl_fd < 0) {
			ret = -errno;
			goto err_queues;
		}
		pthread_mutex_init(&q->lock, NULL);
		pthread_mutex_init(&q->done_lock, NULL);
	}
	*out = dev;
	return 0;

err_queues:
	while (i-- > 0) {
		pthread_mutex_destroy(&dev->queues[i].lock);
		pthread_mutex_destroy(&dev->queues[i].done_lock);
		close(dev->queues[i].ctl_fd);
	}
	free(dev->queues);
err_mem:
	guest_mem_free(dev->mem);
err_stop_fd:
	close(dev->stop_fd);
err_dev:
	free(dev);
	return ret;
}

unsigned vu_dev_stats_snapshot(const struct vu_dev *dev, struct vu_queue_stats *out,
			       unsigned max)
{
	for (unsigned i = 0; i < dev->nqueues && i < max; i++) {
		const struct vu_queue *q = &dev->queues[i];

		memset(&out[i], 0, sizeof(out[i]));
		out[i].index = q->index;
		out[i].requests = ferry_count_read(&q->st.requests);
		out[i].batches = ferry_count_read(&q->st.batches);
		out[i].poll_hits = ferry_count_read(&q->st.poll_hits);
		out[i].sleeps = ferry_count_read(&q->st.sleeps);
		out[i].shared_cpu_waits = ferry_count_read(&q->st.shared_cpu_waits);
		ferry_hist_accumulate(&out[i].batch_size, &q->st.batch_size);
		ferry_hist_accumulate(&out[i].depth, &q->st.depth);
	}
	return dev->nqueues;
}

int vu_dev_serve(struct vu_dev *dev, int conn_fd)
{
	struct vu_msg *m;
	int ret = 0;

	/* The message buffer is 4 KiB plus; keep it off the stack. */
	m = malloc(sizeof(*m));
	if (!m) {
		close(conn_fd);
		return -ENOMEM;
	}
	dev->conn_fd = conn_fd;
	for (;;) {
		struct pollfd pfd[2] = {
			{ .fd = conn_fd, .events = POLLIN },
			{ .fd = dev->stop_fd, .events = POLLIN },
		};

		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			log_err("vhost-user: poll: %s", strerror(errno));
			break;
		}
		if (pfd[1].revents & POLLIN) {
			log_info("vhost-user: stop requested");
			break;
		}
		if (!pfd[0].revents)
			continue;
		ret = msg_recv(conn_fd, m);
		/* EOF inside a message is still the frontend going away
		 * (killed mid-write), not a protocol error. */
		if (ret == -ECONNRESET)
			ret = 0;
		if (ret == 0) {
			log_info("vhost-user: frontend disconnected");
			break;
		}
		if (ret < 0) {
			log_err("vhost-user: receive failed: %s", strerror(-ret));
			break;
		}
		ret = dispatch(dev, m);
		if (ret < 0) {
			log_err("vhost-user: dropping the connection after %s failed: %s",
				request_name(m->hdr.request), strerror(-ret));
			break;
		}
	}
	dev_reset(dev);
	close(conn_fd);
	dev->conn_fd = -1;
	free(m);
	return ret;
}

void vu_dev_stop(struct vu_dev *dev)
{
	/* write() on an eventfd is async-signal-safe; nothing else here. */
	eventfd_signal(dev->stop_fd);
}

void vu_dev_free(struct vu_dev *dev)
{
	if (!dev)
		return;
	dev_reset(dev);
	for (unsigned i = 0; i < dev->nqueues; i++) {
		pthread_mutex_destroy(&dev->queues[i].lock);
		pthread_mutex_destroy(&dev->queues[i].done_lock);
		close(dev->queues[i].ctl_fd);
	}
	free(dev->queues);
	guest_mem_free(dev->mem);
	close(dev->stop_fd);
	free(dev);
}
