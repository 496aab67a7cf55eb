/* The queues' tuned pacing: when a batch publishes its replies, and how long a worker spins before it sleeps. */
#ifndef FERRY_QUEUE_PACING_H
#define FERRY_QUEUE_PACING_H

/*
 * Mechanism and policy. The virtio rules (virtq.c, virtq_packed.c) say
 * how used entries become visible (virtq_flush) and whether the driver
 * then wants a signal (virtq_should_notify: EVENT_IDX or the ring's flag);
 * they are not a choice, and vhost_user_queue.c's publish() follows them
 * the way libvhost-user's vu_queue_notify does. What IS a choice is when
 * to publish and when to spin instead of sleeping: every constant tuned
 * for that lives here, and only here.
 *
 * BATCH PACING (struct batch_pacing, one per batch, on its stack)
 *
 * Publishing after every reply gets each reply to the driver soonest but
 * signals it most, and a signal wakes a sleeping driver's CPU, the costliest
 * step on the path; publishing at the batch's end signals least but makes
 * the driver wait for the whole batch, so device and driver take turns
 * instead of working at the same time. The pacing sits between the two.
 *
 * What it is told, in this order:
 *   batch_pacing_begin     the batch starts: the depth the driver kept in
 *                          recent batches, and the deferred completions
 *                          already pushed (unpublished);
 *   batch_pacing_taken     a request was popped, and how many still wait in
 *                          the ring and how many deferred are outstanding;
 *   batch_pacing_pushed    a reply was pushed: its request's and its own
 *                          bytes, and how many requests wait behind it;
 *   batch_pacing_published the queue published what was pushed;
 *   batch_pacing_end       the batch ended.
 * What it answers:
 *   batch_pacing_pushed    PACING_PUBLISH (publish now) or PACING_HOLD
 *                          (keep the replies for a later publish). Holding
 *                          is always safe: the batch publishes what is left
 *                          at its end (batch_pacing_unpublished);
 *   batch_pacing_end       the driver's depth to carry into the next batch;
 *   batch_pacing_joins_run whether a request may be served together with
 *                          the ones behind it (PACING_RUN_MAX at most).
 * There is no "signal now" apart from "publish now": once entries are
 * published, whether the driver is signalled is the virtio rules' call,
 * and a publish without the signal they ask for would leave a driver
 * asleep (under EVENT_IDX its used_event is crossed once, not again).
 * What the pacing does decide is whether a publish that WOULD wake a
 * sleeping driver is held back; for that it asks the ring
 * (virtq_would_notify, virtq_unpopped_now) and never writes to it.
 *
 * WAIT PACING (struct wait_pacing, one per worker thread)
 *
 * Before sleeping, a request worker spins with kicks off for up to a
 * budget that follows how long its sleeps turn out (wait_pacing_slept),
 * unless its CPU is judged shared (wait_pacing_judge_cpu), when spinning
 * and early publishes only delay a driver that needs that very CPU.
 */

#include <stdbool.h>
#include <stdint.h>

#include "transport/virtq.h"

/* ---- Wait pacing: spinning before sleep, and whether the CPU is shared ---- */

struct wait_pacing {
	uint64_t poll_ns;          /* the spin budget; 0: sleep at once */
	unsigned passes_unlooked;  /* busy passes since the last look at the fds */
	/* The CPU judgement (wait_pacing_judge_cpu). */
	uint64_t nivcsw;           /* involuntary switches at the last judgement */
	unsigned preempted_avg;    /* share of recent waits preempted, in 1/256ths */
	unsigned waits_unjudged;
};

/* Waits judged together by one getrusage: it is a system call, and at
 * queue depth 1 a wait comes after every request. */
#define PACING_JUDGE_WAITS 4u

/* preempted_avg above which the CPU counts as shared: about a third of the
 * recent waits, so that a stray preemption (a timer, a kernel thread)
 * does not make it so, but a driver on our CPU does. */
#define PACING_SHARED_CPU_AVG 77u

/* Busy passes a worker may make without looking at its fds while every
 * queue it serves has work: the look (a system call) finds only "more"
 * then, but it must still come now and then to see an fd's error and to
 * drain the eventfd counters. */
#define PACING_PASSES_UNLOOKED 8u

/* CPU pauses between two looks at the rings while spinning: a look reads
 * lines the driver writes, and pausing lets it write them undisturbed (and
 * leaves a sibling hyperthread the core). */
#define PACING_PAUSES_PER_LOOK 16u

/* Whether the worker's CPU is judged shared with something runnable (the
 * driver or another tenant). Inline: a batch asks after its replies. */
static inline bool wait_pacing_cpu_shared(const struct wait_pacing *wp)
{
	return wp->preempted_avg > PACING_SHARED_CPU_AVG;
}

/* Whether the worker may spin before it sleeps: it has a budget and its
 * CPU is not shared (spinning there only delays the driver). */
static inline bool wait_pacing_may_spin(const struct wait_pacing *wp)
{
	return wp->poll_ns != 0 && !wait_pacing_cpu_shared(wp);
}

/* Whether the worker, whose queues all have work, must look at its fds
 * on this pass; if not, the pass is counted as one without a look. */
static inline bool wait_pacing_look_due(const struct wait_pacing *wp)
{
	return wp->passes_unlooked >= PACING_PASSES_UNLOOKED;
}

static inline void wait_pacing_skipped_look(struct wait_pacing *wp)
{
	wp->passes_unlooked++;
}

static inline void wait_pacing_looked(struct wait_pacing *wp)
{
	wp->passes_unlooked = 0;
}

/* Once per wait, before it: every PACING_JUDGE_WAITS waits, judges whether
 * the CPU is shared. Returns how many waits were just judged shared (0 or
 * PACING_JUDGE_WAITS), for the caller's statistics. */
unsigned wait_pacing_judge_cpu(struct wait_pacing *wp);
/* After a sleep that spinning did not prevent, slept_ns long: the next
 * spin budget, at most max_ns. */
void wait_pacing_slept(struct wait_pacing *wp, uint64_t slept_ns, uint64_t max_ns);
/* The next spin budget after a wait of waited_ns (spin included). */
uint64_t wait_pacing_budget_next(uint64_t budget, uint64_t waited_ns, uint64_t max_ns);
/* How many request workers the daemon runs, and how many may spin at
 * once: half the CPUs it may run on, at least one. */
unsigned wait_pacing_worker_cpus(void);

/* ---- Batch pacing: when a batch publishes its replies ---- */

/* Called per request on the batch path: always inlined there, as the
 * decisions were when they sat in the batch loop itself. */
#define PACING_INLINE static inline __attribute__((always_inline))

enum pacing_answer {
	PACING_HOLD,
	PACING_PUBLISH,
};

/* Replies per publish at most: every one would signal the driver for each
 * reply, while a batch that keeps several back still lets the driver work
 * on the first replies as the device works on the next. */
#define PACING_PUBLISH_REPLIES 4u

/* Bytes of request and reply data after which a batch publishes what it
 * has done so far: a batch of large requests would otherwise keep the
 * first reply from the driver for as long as copying all of them takes. */
#define PACING_PUBLISH_BYTES (128u * 1024u)

/* A request carrying at least this much (a large WRITE), from a driver
 * that keeps few in flight, has its reply published at once: the driver's
 * next WRITE data is its own work, so the slot back early lets it fill
 * the next while the device copies this one. */
#define PACING_PUBLISH_REQUEST_BYTES (64u * 1024u)

/* At most a page and the FUSE headers around it: requests and replies
 * below it (LOOKUP, GETATTR, page-sized READs and WRITEs) may have a
 * publish that would wake a sleeping driver held back. Larger replies are
 * never held: a guest's readahead waits for the first of its READs. */
#define PACING_HOLD_BYTES (4096u + 256u)

/* Requests still waiting above which a publish of small replies that
 * would wake a sleeping driver is held: woken with a few left, the driver
 * takes more replies at once and refills while the device answers those. */
#define PACING_WAKE_LEFT 4u

/* Requests served together at most (struct ferry_service's serve_run),
 * and the least data a request carries in to join them: only small
 * WRITEs already in the ring join, so a reply waits for at most a few
 * page writes, and adjacent ones become one system call. */
#define PACING_RUN_MAX 16u
#define PACING_RUN_MIN_BYTES 1024u

struct batch_pacing {
	struct virtq *vq;                  /* asked, never written */
	const struct wait_pacing *worker;  /* its CPU judgement */
	unsigned driver_depth;             /* as the batch began */
	unsigned depth;                    /* driver_depth, raised by this batch */
	unsigned batch_depth;              /* the most in flight this batch saw */
	unsigned requests;                 /* taken this batch */
	unsigned unpublished;              /* replies pushed since the last publish */
	uint64_t unpublished_bytes;        /* their requests' and their own bytes */
	bool data_waiting;                 /* among them, one of PACING_HOLD_BYTES */
	bool reply_data_waiting;           /* ... and it is the reply (a READ's) */
};

/* What the pacing is told of a reply just pushed. */
struct pacing_reply {
	uint32_t request_bytes;  /* what the request carried in */
	uint32_t reply_bytes;    /* what the reply carries out */
	unsigned ring_behind;    /* requests in the ring when it was popped */
	unsigned popped_behind;  /* of those, popped with it to be served together */
};

PACING_INLINE void batch_pacing_begin(struct batch_pacing *p, struct virtq *vq,
				      const struct wait_pacing *worker, unsigned driver_depth,
				      unsigned completions_pushed)
{
	*p = (struct batch_pacing){
		.vq = vq,
		.worker = worker,
		.driver_depth = driver_depth,
		.depth = driver_depth,
		.unpublished = completions_pushed,
	};
}

/* A request was popped with behind still waiting in the ring, and
 * deferred requests outstanding. */
PACING_INLINE void batch_pacing_taken(struct batch_pacing *p, unsigned behind,
				      unsigned deferred)
{
	/* In flight, as the driver sees it: waiting in the ring, this one,
	 * replies not yet published, and deferred ones. */
	unsigned in_flight = behind + 1u + p->unpublished + deferred;

	p->requests++;
	if (in_flight > p->batch_depth)
		p->batch_depth = in_flight;
	if (p->batch_depth > p->depth)
		p->depth = p->batch_depth;
}

/* Whether a request that carried request_bytes in may be served together
 * with the requests behind it. */
static inline bool batch_pacing_joins_run(uint32_t request_bytes)
{
	return request_bytes >= PACING_RUN_MIN_BYTES && request_bytes < PACING_HOLD_BYTES;
}

/* Replies per publish for a driver with depth requests in flight: half of
 * them, between 1 and PACING_PUBLISH_REPLIES. Every PACING_PUBLISH_REPLIES
 * for a shallow driver would be its whole depth, and the two would take
 * turns again. */
static inline unsigned batch_pacing_pace(unsigned depth)
{
	unsigned pace = depth / 2u;

	if (pace < 1u)
		return 1u;
	return pace > PACING_PUBLISH_REPLIES ? PACING_PUBLISH_REPLIES : pace;
}

/* Requests still in the ring at or below which replies to WRITEs of more
 * than a page wake a sleeping driver: a quarter of its depth, at least 1.
 * Nothing in the driver waits on those replies but the slot, so woken
 * with a quarter left it refills while the device writes those. */
static inline unsigned batch_pacing_write_wake_left(unsigned depth)
{
	return depth >= 8u ? depth / 4u : 1u;
}

/* Whether the batch publishes now, after a reply to a request that
 * carried request_bytes, with behind requests waiting behind it
 * (popped_behind of them popped with it). */
PACING_INLINE bool batch_pacing_publish_due(struct batch_pacing *p, uint32_t request_bytes,
					    unsigned behind, unsigned popped_behind,
					    bool packed)
{
	unsigned pace = batch_pacing_pace(p->depth);

	/* Large WRITEs to a sleeping driver wake it with a few left (split
	 * rings only: packed ones were not tuned for it), also on a shared
	 * CPU, where each early wake would also take our CPU. behind was
	 * counted when the request was popped: a driver that woke meanwhile
	 * may have refilled and gone back to sleep, so the ring is looked
	 * at again before a call. */
	if (!packed && p->data_waiting && !p->reply_data_waiting && virtq_would_notify(p->vq)) {
		unsigned left = batch_pacing_write_wake_left(p->depth);

		if (behind > left)
			return false;
		behind = virtq_unpopped_now(p->vq) + popped_behind;
		/* A ring that broke on that look publishes nothing more. */
		return !p->vq->broken && behind <= left;
	}
	if (p->unpublished_bytes >= PACING_PUBLISH_BYTES)
		return true;
	/* Below the full pace: the driver keeps few in flight. A sleeping
	 * driver's large WRITEs were decided above. */
	if (pace < PACING_PUBLISH_REPLIES && request_bytes >= PACING_PUBLISH_REQUEST_BYTES)
		return true;
	/* On a shared CPU the driver cannot run before we yield: an early
	 * publish would only wake it for a part of the batch. */
	if (p->unpublished < pace || wait_pacing_cpu_shared(p->worker))
		return false;
	/* Small replies to a sleeping driver with many requests still
	 * waiting (split rings only, as above). */
	if (!packed && !p->data_waiting && behind > PACING_WAKE_LEFT && virtq_would_notify(p->vq))
		return false;
	return true;
}

/* A reply was pushed: publish now, or hold it for later. */
PACING_INLINE enum pacing_answer batch_pacing_pushed(struct batch_pacing *p,
						     const struct pacing_reply *r, bool packed)
{
	p->unpublished++;
	p->unpublished_bytes += (uint64_t)r->request_bytes + r->reply_bytes;
	if (r->request_bytes >= PACING_HOLD_BYTES || r->reply_bytes >= PACING_HOLD_BYTES)
		p->data_waiting = true;
	if (r->reply_bytes >= PACING_HOLD_BYTES)
		p->reply_data_waiting = true;
	return batch_pacing_publish_due(p, r->request_bytes, r->ring_behind + r->popped_behind,
					r->popped_behind, packed)
		       ? PACING_PUBLISH
		       : PACING_HOLD;
}

/* The queue published everything pushed so far. */
PACING_INLINE void batch_pacing_published(struct batch_pacing *p)
{
	p->unpublished = 0;
	p->unpublished_bytes = 0;
	p->data_waiting = false;
	p->reply_data_waiting = false;
}

/* Replies pushed and not yet published. */
static inline unsigned batch_pacing_unpublished(const struct batch_pacing *p)
{
	return p->unpublished;
}

/* The batch ended: the driver's depth for the next batch. The deepest
 * this batch saw, or one less than before: a driver that lowers its depth
 * is followed within a few batches, and one batch that caught it in the
 * middle of a refill changes little. A batch that took nothing keeps it. */
static inline unsigned batch_pacing_end(const struct batch_pacing *p)
{
	if (p->requests == 0)
		return p->driver_depth;
	return p->batch_depth > p->driver_depth ? p->batch_depth
						: p->driver_depth - (p->driver_depth > 0);
}

#endif
