/* vhost-user workers spinning before they sleep: the poll loop and its slots (the budgets are queue_pacing's). */
#include "transport/vhost_user_internal.h"

#include <pthread.h>

#include "common/clock.h"

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

/* Whether one queue the worker serves has something to do; the ring is
 * looked at under q->lock, taken for that look alone, so the control
 * thread can still change the memory table while we spin. */
static bool queue_has_work(struct vu_queue *q)
{
	bool work;

	if (__atomic_load_n(&q->done, __ATOMIC_ACQUIRE))
		return true;
	pthread_mutex_lock(&q->lock);
	work = q->enabled && (q->vq.packed ? virtq_packed_avail_pending(&q->vq)
					   : virtq_avail_pending(&q->vq));
	pthread_mutex_unlock(&q->lock);
	return work;
}

/*
 * Watches the avail rings and completion lists of the queues the worker
 * serves, and its membership flag, for up to budget_ns with kicks still
 * off; true if there is something to do.
 */
static bool worker_poll(struct vu_worker *w, uint64_t budget_ns)
{
	uint64_t end = ferry_monotonic_ns() + budget_ns;

	do {
		bool work = false;

		for (unsigned i = 0; i < PACING_PAUSES_PER_LOOK; i++)
			cpu_relax();
		if (__atomic_load_n(&w->members_changed, __ATOMIC_ACQUIRE))
			return true;
		for (unsigned i = 0; i < w->nqueues; i++) {
			struct vu_queue *q = w->queues[i];

			if (q->served && queue_has_work(q)) {
				q->more = true;
				work = true;
			}
		}
		if (work)
			return true;
	} while (ferry_monotonic_ns() < end);
	return false;
}

/*
 * Before sleeping a request worker spins for a while: waking a sleeping
 * thread (a kick, then our call back) can cost more than a small request
 * itself, and while we spin with kicks off the driver does not kick at
 * all. The hiprio queue's worker never spins: its requests are rare.
 */
bool vu_worker_wait_by_polling(struct vu_worker *w)
{
	struct vu_dev *dev = w->dev;
	bool work;

	if (w->index == 0 || !wait_pacing_may_spin(&w->pacing) || !poll_slot_take(dev))
		return false;
	work = worker_poll(w, w->pacing.poll_ns);
	__atomic_add_fetch(&dev->poll_slots, 1, __ATOMIC_RELAXED);
	for (unsigned i = 0; work && i < w->nqueues; i++)
		if (w->queues[i]->more)
			ferry_count(&w->queues[i]->st.poll_hits, 1);
	return work;
}

/* Request workers only: the hiprio queue's never spins, so whether its
 * CPU is shared does not matter. */
void vu_worker_judge_cpu(struct vu_worker *w)
{
	unsigned shared_waits;

	if (w->index == 0)
		return;
	shared_waits = wait_pacing_judge_cpu(&w->pacing);
	for (unsigned i = 0; shared_waits && i < w->nqueues; i++)
		if (w->queues[i]->served)
			ferry_count(&w->queues[i]->st.shared_cpu_waits, shared_waits);
}
