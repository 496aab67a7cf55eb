/* vhost-user workers' waiting policy: busy-poll budgets, poll slots, and whether a CPU is shared. */
#include "transport/vhost_user_internal.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>

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

		for (unsigned i = 0; i < 16; i++)
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
 * The next poll budget after a wait of waited_ns that polling did not end,
 * by KVM's halt-polling rule: a wait the largest budget would have covered
 * grows the budget, a longer one shrinks it, so a queue whose driver is
 * idle (or starved of CPU) soon stops spinning.
 */
uint64_t vu_poll_budget_next(uint64_t budget, uint64_t waited_ns, uint64_t max)
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
 * Before sleeping a request worker spins for a while: waking a sleeping
 * thread costs more than the whole request (bench/wake-cost: a kick/call
 * round trip is 6-60 us here, a 4 KiB read 2 us), and while we spin
 * with kicks off the driver does not kick at all.
 */
bool vu_worker_wait_by_polling(struct vu_worker *w)
{
	struct vu_dev *dev = w->dev;
	bool work;

	if (!w->poll_ns || w->index == 0 || vu_worker_cpu_shared(w) ||
	    !poll_slot_take(dev))
		return false;
	work = worker_poll(w, w->poll_ns);
	__atomic_add_fetch(&dev->poll_slots, 1, __ATOMIC_RELAXED);
	for (unsigned i = 0; work && i < w->nqueues; i++)
		if (w->queues[i]->more)
			ferry_count(&w->queues[i]->st.poll_hits, 1);
	return work;
}

/* Waits judged by one getrusage: it is a system call, ~1.35 us on a PVM
 * host (as much as a getattr's statx; build/syscall-cost), and a wait
 * comes after every request at queue depth 1. The preemptions of those
 * waits together count as that many preempted waits, at most one each. */
#define JUDGE_WAITS 4u

/*
 * Whether this thread shares its CPU with something runnable, judged by how
 * often it was preempted (involuntary context switches) between its recent
 * waits: in more than ~30% of them, the driver or another tenant is
 * waiting for this CPU. Then spinning only delays the driver, and so does
 * publishing every few replies: the driver cannot run before we yield, and
 * each early call wakes it for a part of the batch (randread QD16 with
 * driver and daemon on one CPU: 263-302K ops/s publishing every 4, 401-479K
 * at the end of the batch). Request workers only, before each wait.
 */
void vu_worker_judge_cpu(struct vu_worker *w)
{
	struct rusage ru;
	uint64_t switches;
	unsigned preempted;
	bool shared;

	if (w->index == 0 || ++w->waits_unjudged < JUDGE_WAITS ||
	    getrusage(RUSAGE_THREAD, &ru) < 0)
		return;
	w->waits_unjudged = 0;
	switches = (uint64_t)ru.ru_nivcsw - w->nivcsw;
	preempted = switches < JUDGE_WAITS ? (unsigned)switches : JUDGE_WAITS;
	w->nivcsw = (uint64_t)ru.ru_nivcsw;
	/* A moving average in 1/256ths, each wait weighing 1/16: one stray
	 * preemption (a kernel thread, a timer) does not flip it. */
	for (unsigned i = 0; i < JUDGE_WAITS; i++)
		w->preempted_avg = w->preempted_avg - w->preempted_avg / 16u +
				   (i < preempted ? 16u : 0u);
	shared = vu_worker_cpu_shared(w);
	for (unsigned i = 0; shared && i < w->nqueues; i++)
		if (w->queues[i]->served)
			ferry_count(&w->queues[i]->st.shared_cpu_waits, JUDGE_WAITS);
}

/* Half the CPUs we may run on, at least one: the rest are left to the
 * guest's vCPUs (or the load generator) that make the requests. */
int vu_poll_slots_for_cpus(void)
{
	cpu_set_t set;
	int n;

	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return 1;
	n = CPU_COUNT(&set) / 2;
	return n > 0 ? n : 1;
}
