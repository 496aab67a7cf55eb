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

/*
 * Makes pushed entries visible and signals the driver if the virtio rules
 * say it wants (EVENT_IDX or the ring's flag): the notification mechanism,
 * no choice in it. When to call it is queue_pacing's choice.
 */
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
	 * wakes the driver's CPU keeps its writer in the kernel for the
	 * wake-up, time this thread would rather spend on the next request. */
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

/* Tells the frontend, once, that the ring broke (its err fd). With q->lock
 * held. */
static void signal_broken(struct vu_queue *q)
{
	if (!q->err_signalled)
		eventfd_signal(q->err_fd);
	q->err_signalled = true;
}

/* Per request as it is popped: the pacing hears of it, and a deferred
 * reply learns where it goes. Returns how many requests are still in the
 * ring. */
RING_INLINE unsigned take_request(struct vu_queue *q, struct batch_pacing *pace,
				  struct virtq_elem *e, unsigned done, bool packed)
{
	/* Once: on a packed ring it is a look at the next descriptor. */
	unsigned behind = ring_unpopped(&q->vq, packed);

	if (done == 0)
		ferry_hist_add(&q->st.depth, behind + 1u);
	batch_pacing_taken(pace, behind, q->deferred_outstanding);
	/* Set before serve(): the completion may come from another thread
	 * before serve() even returns. */
	q->deferred[e->head].head = e->head;
	e->req.chan = &q->chan;
	e->req.token = &q->deferred[e->head];
	e->req.queued_behind = behind;
	return behind;
}

/*
 * Pops a request into run[0] and, if it may be served together with those
 * behind it, those too (split rings only: a packed ring keeps one popped
 * chain), at most room in all. Fills behind[] for each; returns how many
 * were popped, 0 if none.
 */
RING_INLINE unsigned pop_run(struct vu_queue *q, struct batch_pacing *pace,
			     struct virtq_elem *run, unsigned *behind, unsigned done,
			     unsigned room, bool runs, bool packed)
{
	unsigned n = 1;

	if (ring_pop(&q->vq, &run[0], packed) <= 0)
		return 0;
	behind[0] = take_request(q, pace, &run[0], done, packed);
	if (!runs || behind[0] == 0 || !batch_pacing_joins_run(run[0].rd_len))
		return 1;
	while (n < PACING_RUN_MAX && n < room && batch_pacing_joins_run(run[n - 1].rd_len) &&
	       behind[n - 1] > 0 && virtq_pop_more(&q->vq, &run[n]) > 0) {
		behind[n] = take_request(q, pace, &run[n], done + n, packed);
		n++;
	}
	return n;
}

/*
 * Serves request i of a run of n: alone if n is 1, else the service takes
 * as many from i on as it can together (*together counts down those it
 * already answered). Returns its reply's length or FERRY_DEFERRED.
 */
RING_INLINE uint32_t serve_in_run(struct vu_queue *q, const struct ferry_req **reqs,
				  uint32_t *lens, unsigned i, unsigned n, unsigned *together)
{
	const struct ferry_service *service = q->dev->service;

	if (*together == 0 && n == 1) {
		lens[i] = service->serve(q->ctx, reqs[i]);
		*together = 1;
	} else if (*together == 0) {
		*together = service->serve_run(q->ctx, reqs + i, n - i, lens + i);
	}
	(*together)--;
	return lens[i];
}

/*
 * A request the service deferred: its completion comes later, from any
 * thread (queue_complete). A packed ring's chain is kept for the re-walk:
 * without the copy the re-walk fails and the reply is dropped. Only this
 * thread re-walks, after this, so a completion already on the done list
 * waits for it. False if the ring broke.
 */
RING_INLINE bool defer_request(struct vu_queue *q, const struct virtq_elem *e, bool packed)
{
	q->deferred_outstanding++;
	if (packed && keep_packed_chain(&q->deferred[e->head], &q->vq) < 0) {
		virtq_mark_broken(&q->vq, "out of memory for a deferred request's chain");
		return false;
	}
	return true;
}

/* Runs one batch with q->lock held. Returns true if more work may be
 * waiting, so the caller should come back without sleeping. */
RING_INLINE bool run_batch(struct vu_queue *q, bool packed)
{
	struct vu_dev *dev = q->dev;
	struct virtq *vq = &q->vq;
	struct virtq_elem run[PACING_RUN_MAX];
	const struct ferry_req *reqs[PACING_RUN_MAX];
	uint32_t lens[PACING_RUN_MAX];
	unsigned behind[PACING_RUN_MAX];
	struct batch_pacing pace;
	unsigned done = 0;
	bool more = false;
	bool runs = !packed && dev->service->serve_run;

	batch_pacing_begin(&pace, vq, &q->worker->pacing, q->driver_depth,
			   push_completions(q, packed));
	if (!q->enabled || vq->broken || !virtq_ready(vq))
		goto publish;
	if (packed)
		virtq_packed_disable_notify(vq);
	else
		virtq_disable_notify(vq);
	while (done < vq->num) {
		/* Bounded like the batch: done + n stays within num. */
		unsigned n = pop_run(q, &pace, run, behind, done, vq->num - done, runs, packed);

		if (n == 0)
			break;
		if (!packed)
			virtq_prefetch_ahead(vq);
		for (unsigned i = 0; i < n; i++)
			reqs[i] = &run[i].req;
		/* The replies of each go out before the next is served. */
		for (unsigned i = 0, together = 0; i < n; i++) {
			struct virtq_elem *e = &run[i];
			uint32_t len = serve_in_run(q, reqs, lens, i, n, &together);
			struct pacing_reply reply = {
				.request_bytes = e->rd_len,
				.reply_bytes = len,
				.ring_behind = behind[i],
				.popped_behind = n - 1 - i,
			};

			if (len == FERRY_DEFERRED) {
				if (!defer_request(q, e, packed))
					break;
				continue;
			}
			ring_push(vq, e, len, packed);
			if (batch_pacing_pushed(&pace, &reply, packed) == PACING_PUBLISH) {
				publish(q, packed);
				batch_pacing_published(&pace);
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
		q->driver_depth = batch_pacing_end(&pace);
		ferry_count(&q->st.requests, done);
		ferry_count(&q->st.batches, 1);
		ferry_hist_add(&q->st.batch_size, done);
	}
publish:
	if (batch_pacing_unpublished(&pace) > 0 && virtq_ready(vq) && !vq->broken)
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
