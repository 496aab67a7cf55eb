/* vhost-user queues: batches of requests, publishing replies, deferred completions, start and stop. */
#include "transport/vhost_user_internal.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/iov.h"
#include "common/log.h"
#include "transport/vhost_user_wire.h"

/*
 * The ring calls of the batch path, for either ring kind. Always inlined
 * with a constant kind: each caller branches on the kind once and runs a
 * copy of itself with direct calls, so a split ring's path is what it was.
 */
#define RING_INLINE static inline __attribute__((always_inline))

RING_INLINE int ring_pop(struct virtq *vq, struct virtq_elem *e, bool packed)
{
	return packed ? virtq_packed_pop(vq, e) : virtq_pop(vq, e);
}

RING_INLINE void ring_push(struct virtq *vq, const struct virtq_elem *e, uint32_t len,
			   bool packed)
{
	if (packed)
		virtq_packed_push(vq, e, len);
	else
		virtq_push(vq, e, len);
}

RING_INLINE unsigned ring_unpopped(const struct virtq *vq, bool packed)
{
	return packed ? virtq_packed_unpopped(vq) : virtq_unpopped(vq);
}

/*
 * Pushes the deferred requests completed since the last call, with q->lock
 * held; returns how many used entries it wrote. The chain is walked again
 * against the current memory table, so a table change while a request was
 * deferred cannot leave a stale pointer; a ring that went away or broke
 * meanwhile drops the reply (the driver is resetting the ring anyway).
 */
RING_INLINE unsigned push_completions(struct vu_queue *q, bool packed)
{
	struct vu_deferred *l, *next;
	unsigned pushed = 0;

	pthread_mutex_lock(&q->done_lock);
	l = q->done;
	__atomic_store_n(&q->done, NULL, __ATOMIC_RELAXED); /* see queue_has_work (vhost_user_poll.c) */
	pthread_mutex_unlock(&q->done_lock);
	for (; l; l = next) {
		struct virtq_elem elem;
		uint32_t len;

		next = l->next;
		q->deferred_outstanding--;
		if ((packed ? virtq_packed_rewalk(&q->vq, l->chain, l->chain_len, &elem)
			    : virtq_rewalk(&q->vq, l->head, &elem)) >= 0) {
			/* Each copy returns at most its uint32_t length. */
			len = (uint32_t)iov_copy_to(elem.req.wr, elem.req.wr_cnt, 0,
						    l->reply, l->len);
			if (l->data_len)
				len += (uint32_t)iov_copy_to(elem.req.wr, elem.req.wr_cnt, len,
							     l->data, l->data_len);
			ring_push(&q->vq, &elem, len, packed);
			pushed++;
		}
		free(l->data);
		l->data = NULL;
		l->data_len = 0;
		if (packed) {
			free(l->chain);
			l->chain = NULL;
			l->chain_len = 0;
		}
	}
	return pushed;
}

static unsigned queue_push_completions(struct vu_queue *q)
{
	return q->vq.packed ? push_completions(q, true) : push_completions(q, false);
}

/* Makes pushed entries visible and interrupts the driver if it wants. */
RING_INLINE void publish(struct vu_queue *q, bool packed)
{
	/* The log's eventfd, if the frontend gave one, learns of new marks. */
	if (__builtin_expect(q->vq.log != NULL, 0))
		eventfd_signal(q->dev->log_call_fd);
	if (packed) {
		virtq_packed_flush(&q->vq);
		if (!virtq_packed_should_notify(&q->vq))
			return;
	} else {
		virtq_flush(&q->vq);
		if (!virtq_should_notify(&q->vq))
			return;
	}
	q->driver_notified = true;
	ferry_count(&q->st.calls, 1);
	/* A thread that spins idle writes it, if there is one: a call that
	 * wakes the driver's CPU costs its writer up to ~12 us. */
	if (!signal_handoff_post(q->call_fd))
		eventfd_signal(q->call_fd);
}

static void queue_publish(struct vu_queue *q)
{
	if (q->vq.packed)
		publish(q, true);
	else
		publish(q, false);
}

/* Keeps a packed chain for the re-walk of a deferred request: its ring
 * slots may be reused before it completes. 0 or -ENOMEM. */
static int keep_packed_chain(struct vu_deferred *l, const struct virtq *vq)
{
	size_t size = vq->pk_chain_len * sizeof(vq->pk_chain[0]);

	l->chain = malloc(size);
	if (!l->chain)
		return -ENOMEM;
	memcpy(l->chain, vq->pk_chain, size);
	l->chain_len = (uint16_t)vq->pk_chain_len;
	return 0;
}

/*
 * Requests after which a batch publishes its used entries and notifies the
 * driver if it asked to be. Publishing only at the end of a batch made the
 * driver wait for the whole batch, then the device for the driver: the two
 * took turns. Every request would wake the driver for each reply (a call
 * is the costliest syscall on the path, an IPI to the driver's CPU); every
 * 4 keeps both sides busy at queue depth 16 with a quarter of the calls.
 * A driver that keeps fewer than 8 in flight gets them back every half of
 * its depth instead (publish_pace): every 4 at depth 4 was the whole queue,
 * so the two took turns again (32 KiB writes at depth 4: 1.26x, 4 KiB
 * reads 1.22x; docs/benchmarks.md, Round 11).
 */
#define VU_PUBLISH_REQUESTS 4u

/* Replies per publish for a driver with depth requests in flight: half
 * of them, between 1 and VU_PUBLISH_REQUESTS. */
static inline unsigned publish_pace(unsigned depth)
{
	unsigned pace = depth / 2u;

	if (pace < 1u)
		return 1u;
	return pace > VU_PUBLISH_REQUESTS ? VU_PUBLISH_REQUESTS : pace;
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

/*
 * A driver with fewer than 8 in flight, and awake, gets the reply to a
 * request that carried this much data (a large WRITE) at once. Its next
 * WRITE's data is the driver's own work, so the slot back early lets it fill
 * the next while the daemon copies this one: 64 KiB writes at depth 4
 * 1.12x (paired), p50 26 against 39 us, when ferryfs-load's fill took 0.7
 * of a CPU (docs/benchmarks.md, Round 12). A driver that sleeps is woken
 * by write_wake_left instead (Round 24). Replies that carry the data
 * (READs) gain nothing from it, the driver's part being a glance at the
 * data, and keep the pace above.
 */
#define VU_PUBLISH_REQUEST_DATA (64u * 1024u)

/*
 * Requests still waiting in the ring above which a due publish that would
 * wake a sleeping driver is held back, while the requests and replies
 * waiting carry at most one page of data each (LOOKUP, GETATTR, 4 KiB
 * READs and WRITEs: under VU_HOLD_BYTES each way). The driver sleeps with
 * all its requests in flight; each call is an IPI to its CPU, ~5 us of the
 * writer's time here (bench/daemon-profile lookup). Woken when 4 are left
 * it takes more replies at once and refills while we answer those: LOOKUP
 * at depth 16 1.098x ops/s paired, GETATTR 1.078x (Round 18); 4 KiB
 * randread 1.064x, write 1.158x, randwrite 1.143x (Round 20). Larger
 * replies are never held: a guest's readahead waits for the first of its
 * READs, and holding those cost sequential reads with cache=auto a fifth
 * in the guest matrix (docs/benchmarks.md, Round 18).
 */
#define VU_WAKE_LEFT 4u
#define VU_HOLD_BYTES (4096u + 256u) /* a page and the FUSE headers around it */

/*
 * A request that carries data in, at most a page of it (a 4 KiB WRITE),
 * and has requests behind it, is handed to the service with those behind
 * it that carry such data too, up to VU_RUN_MAX: the service then writes
 * adjacent ranges of one file with one system call, ~1 us each saved on a
 * machine whose system calls are dear (docs/benchmarks.md, Round 21).
 * Only requests already in the ring join, and only small ones, so a reply
 * waits for at most a few page writes; larger WRITEs and everything else
 * go one at a time, their replies published as before.
 */
#define VU_RUN_MIN_BYTES 1024u
#define VU_RUN_MAX 16u

static inline bool joins_run(const struct virtq_elem *e)
{
	return e->rd_len >= VU_RUN_MIN_BYTES && e->rd_len < VU_HOLD_BYTES;
}

/*
 * Requests still in the ring at or below which WRITEs of more than a page
 * wake a driver that sleeps: a quarter of its depth, at least 1. Their
 * replies carry no data, so nothing in the driver waits on the first of
 * them but the slot; a driver whose data costs it a copy (a guest's pages,
 * ferryfs-load since Round 24) sleeps with all of them in flight, and a
 * call per WRITE costs its writer ~6 us here. Woken with a quarter left,
 * it refills while we write those: paired, 64 KiB writes 1.17x at depth 4
 * (calls per WRITE 0.96 -> 0.60) and 1.22x at 16 (0.49 -> 0.13), 1 MiB
 * writes 1.03x (0.99 -> 0.23). Before a call the ring is looked at again:
 * the driver may have refilled since the count, and then sleeps with more
 * in flight: 64 KiB writes at depth 4 another 1.17x (0.60 -> 0.23), at 16
 * 1.09x, 1 MiB writes 0.99x (docs/benchmarks.md, Round 24). No cell of
 * the guest matrix moves more than a page per request, so none is held.
 */
static inline unsigned write_wake_left(unsigned depth)
{
	return depth >= 8u ? depth / 4u : 1u;
}

/* Whether a batch publishes now, after a reply to a request that carried
 * request_bytes: pushed replies, unpublished_bytes of data (headers
 * included) and, among them, a reply or request of VU_HOLD_BYTES or more
 * (data_waiting: more than a page; reply_data_waiting: such a reply, a
 * READ's) are waiting, behind requests are still in the ring
 * (popped_behind of them popped with this one, in a run), and the driver
 * keeps depth in flight. Holding back is always safe: the batch publishes
 * at its end. */
static inline bool publish_due(struct vu_queue *q, unsigned depth, unsigned pushed,
			       uint64_t unpublished_bytes, uint32_t request_bytes,
			       unsigned behind, unsigned popped_behind, bool data_waiting,
			       bool reply_data_waiting, bool packed)
{
	unsigned pace = publish_pace(depth);

	/* Split rings only, as below; on a CPU judged shared too, where a
	 * woken driver also takes our CPU (the judgement flips on a machine
	 * whose host preempts us: 1 MiB writes then had 0.35-0.52 calls per
	 * WRITE in some rounds, 0.05-0.07 with this). behind was counted when
	 * the request was popped: a driver that woke meanwhile may have
	 * refilled (and gone back to sleep), so the ring is looked at again
	 * before a call. */
	if (!packed && data_waiting && !reply_data_waiting && virtq_would_notify(&q->vq)) {
		unsigned left = write_wake_left(depth);

		if (behind > left)
			return false;
		behind = virtq_unpopped_now(&q->vq) + popped_behind;
		/* A ring that broke on that look publishes nothing more. */
		return !q->vq.broken && behind <= left;
	}
	if (unpublished_bytes >= VU_PUBLISH_BYTES)
		return true;
	/* Below the full pace: the driver keeps fewer than 8 in flight. A
	 * sleeping driver's large WRITEs were decided above. */
	if (pace < VU_PUBLISH_REQUESTS && request_bytes >= VU_PUBLISH_REQUEST_DATA)
		return true;
	if (pushed < pace || vu_queue_cpu_shared(q))
		return false;
	/* Split rings only: packed ones were not measured with it. */
	if (!packed && !data_waiting && behind > VU_WAKE_LEFT && virtq_would_notify(&q->vq))
		return false;
	return true;
}

/* Tells the frontend, once, that the ring broke (its err fd). With q->lock
 * held. */
static void signal_broken(struct vu_queue *q)
{
	if (!q->err_signalled)
		eventfd_signal(q->err_fd);
	q->err_signalled = true;
}

/* Per request as it is popped: the depth the driver keeps, and where a
 * deferred reply goes. Returns how many requests are still in the ring. */
RING_INLINE unsigned take_request(struct vu_queue *q, struct virtq_elem *e, unsigned done,
				  unsigned pushed, unsigned *batch_depth, unsigned *depth,
				  bool packed)
{
	struct virtq *vq = &q->vq;
	/* Once: on a packed ring it is a look at the next descriptor. */
	unsigned behind = ring_unpopped(vq, packed);
	/* In flight, as the driver sees it: waiting in the ring, this one,
	 * replies not yet published, and deferred ones. */
	unsigned in_flight = behind + 1u + pushed + q->deferred_outstanding;

	if (done == 0)
		ferry_hist_add(&q->st.depth, behind + 1u);
	if (in_flight > *batch_depth)
		*batch_depth = in_flight;
	if (*batch_depth > *depth)
		*depth = *batch_depth;
	/* Set before serve(): the completion may come from another thread
	 * before serve() even returns. */
	q->deferred[e->head].head = e->head;
	e->req.chan = &q->chan;
	e->req.token = &q->deferred[e->head];
	e->req.queued_behind = behind;
	return behind;
}

/* Runs one batch with q->lock held. Returns true if more work may be
 * waiting, so the caller should come back without sleeping. */
RING_INLINE bool run_batch(struct vu_queue *q, bool packed)
{
	struct vu_dev *dev = q->dev;
	struct virtq *vq = &q->vq;
	struct virtq_elem run[VU_RUN_MAX];
	const struct ferry_req *reqs[VU_RUN_MAX];
	uint32_t lens[VU_RUN_MAX];
	unsigned behind[VU_RUN_MAX];
	unsigned done = 0, pushed, depth = q->driver_depth, batch_depth = 0;
	uint64_t unpublished_bytes = 0;
	bool more = false, data_waiting = false, reply_data_waiting = false;
	/* Split rings only: a packed ring keeps one popped chain. */
	bool runs = !packed && dev->service->serve_run;

	pushed = push_completions(q, packed);
	if (!q->enabled || vq->broken || !virtq_ready(vq))
		goto publish;
	if (packed)
		virtq_packed_disable_notify(vq);
	else
		virtq_disable_notify(vq);
	while (done < vq->num) {
		unsigned n = 1;

		if (ring_pop(vq, &run[0], packed) <= 0)
			break;
		behind[0] = take_request(q, &run[0], done, pushed, &batch_depth, &depth, packed);
		if (runs && behind[0] > 0 && joins_run(&run[0])) {
			/* Bounded like the batch: done + n stays within num. */
			while (n < VU_RUN_MAX && done + n < vq->num && joins_run(&run[n - 1]) &&
			       behind[n - 1] > 0 && virtq_pop_more(vq, &run[n]) > 0) {
				behind[n] = take_request(q, &run[n], done + n, pushed, &batch_depth,
							 &depth, packed);
				n++;
			}
		}
		if (!packed)
			virtq_prefetch_ahead(vq);
		for (unsigned i = 0; i < n; i++)
			reqs[i] = &run[i].req;
		for (unsigned i = 0, served = 0; i < n; i++) {
			struct virtq_elem *e = &run[i];

			/* Served one at a time or several together; the
			 * replies of each go out before the next is served. */
			if (served == 0 && n == 1) {
				lens[i] = dev->service->serve(q->ctx, reqs[i]);
				served = 1;
			} else if (served == 0) {
				served = dev->service->serve_run(q->ctx, reqs + i, n - i, lens + i);
			}
			served--;

			if (lens[i] == FERRY_DEFERRED) {
				q->deferred_outstanding++;
				/* Only this thread re-walks, after this: a
				 * completion already on the done list waits for
				 * it. Without the copy the re-walk fails and the
				 * reply is dropped. */
				if (packed && keep_packed_chain(&q->deferred[e->head], vq) < 0) {
					virtq_mark_broken(vq, "out of memory for a deferred request's chain");
					break;
				}
				continue;
			}
			ring_push(vq, e, lens[i], packed);
			pushed++;
			unpublished_bytes += (uint64_t)e->rd_len + lens[i];
			if (e->rd_len >= VU_HOLD_BYTES || lens[i] >= VU_HOLD_BYTES)
				data_waiting = true;
			if (lens[i] >= VU_HOLD_BYTES)
				reply_data_waiting = true;
			/* Waiting behind it: those in the ring when it was
			 * popped, and those popped after it. */
			if (publish_due(q, depth, pushed, unpublished_bytes, e->rd_len,
					behind[i] + (n - 1 - i), n - 1 - i, data_waiting,
					reply_data_waiting, packed)) {
				publish(q, packed);
				pushed = 0;
				unpublished_bytes = 0;
				data_waiting = false;
				reply_data_waiting = false;
			}
		}
		done += n;
		if (vq->broken)
			break;
	}
	/* Bounded batches keep the control thread's wait for this lock short
	 * even if the driver keeps the ring full. */
	if (done == vq->num && vq->num > 0)
		more = true;
	if (done > 0) {
		/* The deepest this batch saw, or one less than before: a
		 * driver that lowers its depth is followed within a few
		 * batches, one batch that caught it mid-refill changes little. */
		q->driver_depth = batch_depth > q->driver_depth ? batch_depth
				  : q->driver_depth - (q->driver_depth > 0);
		ferry_count(&q->st.requests, done);
		ferry_count(&q->st.batches, 1);
		ferry_hist_add(&q->st.batch_size, done);
	}
publish:
	if (pushed > 0 && virtq_ready(vq) && !vq->broken)
		publish(q, packed);
	if (vq->broken) {
		signal_broken(q);
		return false;
	}
	return more;
}

bool vu_queue_serve(struct vu_queue *q)
{
	bool more;

	pthread_mutex_lock(&q->lock);
	more = q->vq.packed ? run_batch(q, true) : run_batch(q, false);
	pthread_mutex_unlock(&q->lock);
	return more;
}

/* Asks the driver for kicks again before the worker sleeps; true if work
 * arrived meanwhile. */
bool vu_queue_arm(struct vu_queue *q)
{
	bool more = false;

	pthread_mutex_lock(&q->lock);
	if (q->enabled && !q->vq.broken && virtq_ready(&q->vq))
		more = q->vq.packed ? virtq_packed_enable_notify(&q->vq)
				    : virtq_enable_notify(&q->vq);
	pthread_mutex_unlock(&q->lock);
	return more;
}

void vu_queue_break(struct vu_queue *q, const char *why)
{
	pthread_mutex_lock(&q->lock);
	virtq_mark_broken(&q->vq, why);
	signal_broken(q);
	pthread_mutex_unlock(&q->lock);
}

/*
 * Before the queue stops: every deferred request is cancelled and its
 * completion pushed, so the index GET_VRING_BASE reports leaves nothing in
 * flight, and no completing thread outlives the queue's context.
 */
static void queue_finish_deferred(struct vu_queue *q)
{
	struct vu_dev *dev = q->dev;

	if (q->deferred_outstanding == 0)
		return;
	log_debug("queue %u: cancelling %u deferred requests", q->index,
		  q->deferred_outstanding);
	if (dev->service->cancel)
		dev->service->cancel(q->ctx);
	for (;;) {
		struct pollfd pfd = { .fd = q->ctl_fd, .events = POLLIN };

		pthread_mutex_lock(&q->lock);
		if (queue_push_completions(q) > 0 && virtq_ready(&q->vq) &&
		    !q->vq.broken)
			queue_publish(q);
		pthread_mutex_unlock(&q->lock);
		if (q->deferred_outstanding == 0)
			break;
		if (poll(&pfd, 1, -1) > 0)
			eventfd_drain(q->ctl_fd);
	}
}

/* The queue's ferry_chan: leaves the reply for the queue's thread, which
 * alone may touch the ring (see queue_push_completions). */
static void queue_complete(struct ferry_chan *chan, void *token, const void *reply,
			   uint32_t len, void *data, uint32_t data_len)
{
	struct vu_queue *q = (struct vu_queue *)((char *)chan - offsetof(struct vu_queue, chan));
	struct vu_deferred *l = token;

	if (len > FERRY_DEFERRED_REPLY_MAX) {
		log_err("queue %u: deferred reply of %u bytes cut to %u", q->index,
			len, FERRY_DEFERRED_REPLY_MAX);
		len = FERRY_DEFERRED_REPLY_MAX;
	}
	memcpy(l->reply, reply, len);
	l->len = len;
	l->data = data;
	l->data_len = data ? data_len : 0;
	pthread_mutex_lock(&q->done_lock);
	l->next = q->done;
	/* Atomic: queue_has_work (vhost_user_poll.c) peeks at it without the lock. */
	__atomic_store_n(&q->done, l, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&q->done_lock);
	eventfd_signal(q->ctl_fd);
}

/*
 * Reads the kick eventfd; false when the fd the frontend gave is not one.
 * An eventfd that epoll calls readable always yields its 8-byte counter
 * (or EAGAIN if another reader was first). A pipe whose writer left stays
 * readable with nothing (or junk) to read, and the worker would spin on
 * it at 100% of a CPU: the queue is marked broken and its worker lets it
 * go instead.
 */
bool vu_queue_kick_drain(struct vu_queue *q)
{
	uint64_t v;
	ssize_t r = read(q->kick_fd, &v, sizeof(v));

	if (r == (ssize_t)sizeof(v) || (r < 0 && (errno == EAGAIN || errno == EINTR)))
		return true;
	vu_queue_break(q, "the kick fd is not an eventfd");
	log_err("queue %u: reading the kick fd gave %zd (%s); it is not an eventfd, the queue stops",
		q->index, r, r < 0 ? strerror(errno) : "want 8 bytes");
	return false;
}

/* On the worker's thread, as it takes the queue: each queue is a worker
 * of the service, with a context of its own. */
bool vu_queue_begin(struct vu_queue *q)
{
	struct vu_dev *dev = q->dev;

	q->ctx = dev->service->start(dev->opaque, q->index);
	if (!q->ctx) {
		vu_queue_break(q, "the service did not start");
		return false;
	}
	q->more = true; /* requests may have arrived before we started */
	return true;
}

/* On the worker's thread, as it lets the queue go. */
void vu_queue_end(struct vu_queue *q)
{
	struct vu_dev *dev = q->dev;

	q->more = false;
	if (!q->ctx)
		return;
	queue_finish_deferred(q);
	dev->service->stop(dev->opaque, q->index, q->ctx);
	q->ctx = NULL;
}

/* Stops the queue after its current batch; control thread only. */
void vu_queue_stop_thread(struct vu_queue *q)
{
	if (!q->thread_running)
		return;
	vu_worker_remove(q);
	q->thread_running = false;
	free(q->deferred);
	q->deferred = NULL;
}

/* Where the ring's own writes are marked while logging: a split ring's
 * used ring at the address the frontend gave for it (vhost-user.rst); a
 * packed ring has none of its own, so its descriptor ring and device event
 * area at the guest-physical addresses of their frontend addresses. */
static void map_ring_log(struct vu_queue *q)
{
	const struct guest_mem *mem = q->dev->mem;
	uint64_t ring_gpa = q->log_addr, event_gpa = 0;
	bool on = q->log_ring;

	if (on && q->vq.packed)
		on = guest_mem_uva_to_gpa(mem, q->desc_uva, &ring_gpa) == 0 &&
		     guest_mem_uva_to_gpa(mem, q->used_uva, &event_gpa) == 0;
	virtq_set_log_ring(&q->vq, on, ring_gpa, event_gpa);
}

/* Translates the ring addresses through the current memory table. Called
 * with q->lock held (or the thread stopped). */
int vu_queue_map_rings(struct vu_queue *q)
{
	const struct guest_mem *mem = q->dev->mem;
	uint64_t desc_len, avail_len, used_len;
	void *desc, *avail, *used;
	int ret;

	virtq_clear_rings(&q->vq);
	if (!q->addr_set || q->num == 0)
		return 0;
	if (q->vq.packed) {
		/* The descriptor ring and the driver's and device's event
		 * areas, in SET_VRING_ADDR's desc, avail and used fields. */
		desc_len = 16ull * q->num;
		avail_len = used_len = sizeof(struct vring_packed_desc_event);
	} else {
		virtq_ring_sizes(q->num, &desc_len, &avail_len, &used_len);
	}
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
	if (q->vq.packed)
		ret = virtq_packed_set_rings(&q->vq, q->num, desc, avail, used);
	else
		ret = virtq_set_rings(&q->vq, q->num, desc, avail, used);
	if (ret < 0) {
		log_err("queue %u: misaligned ring addresses", q->index);
		return ret;
	}
	map_ring_log(q);
	return 0;
}

/* Hands the queue to its worker once the ring is complete: addresses
 * mapped and a kick fd. Control thread only. */
int vu_queue_maybe_start(struct vu_queue *q)
{
	struct vu_dev *dev = q->dev;
	bool ready;
	int ret;

	/* A device state hook needs every worker stopped; the transfer's
	 * end starts the rings set up meanwhile. */
	if (q->thread_running || q->kick_fd < 0 || vu_transfer_running(dev))
		return 0;
	pthread_mutex_lock(&q->lock);
	ready = virtq_ready(&q->vq);
	if (ready) {
		if (q->vq.packed)
			virtq_packed_start(&q->vq);
		else
			virtq_start(&q->vq);
		q->driver_notified = false;
		/* Without VHOST_USER_F_PROTOCOL_FEATURES there is no
		 * SET_VRING_ENABLE: rings start enabled. */
		if (!(dev->features & BIT(VU_F_PROTOCOL_FEATURES)))
			q->enabled = true;
	}
	pthread_mutex_unlock(&q->lock);
	if (!ready)
		return 0;

	q->deferred = calloc(q->num, sizeof(q->deferred[0]));
	if (!q->deferred)
		return -ENOMEM;
	q->deferred_outstanding = 0;
	q->chan.complete = queue_complete;
	eventfd_drain(q->ctl_fd);
	ret = vu_worker_add(q);
	if (ret < 0) {
		log_err("queue %u: no thread to serve it: %s", q->index, strerror(-ret));
		free(q->deferred);
		q->deferred = NULL;
		return ret;
	}
	q->thread_running = true;
	dev->driver_active = true;
	log_debug("queue %u started (num %u)", q->index, q->num);
	return 0;
}
