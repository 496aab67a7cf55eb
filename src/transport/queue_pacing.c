/* The queues' tuned pacing, out-of-line part: the spin budget and the judgement of a shared CPU. */
#include "transport/queue_pacing.h"

#include <sched.h>
#include <sys/resource.h>

/* The smallest spin budget kept: halving below it turns spinning off, so
 * a worker whose driver went idle stops spinning after a few long sleeps
 * instead of halving forever. */
#define PACING_POLL_MIN_NS 2000u

/*
 * By KVM's halt-polling rule: a wait the largest budget would have covered
 * grows the budget, a longer one shrinks it, so a queue whose driver is
 * idle (or starved of CPU) soon stops spinning.
 */
uint64_t wait_pacing_budget_next(uint64_t budget, uint64_t waited_ns, uint64_t max_ns)
{
	if (waited_ns <= max_ns)
		budget = budget ? budget * 2 : PACING_POLL_MIN_NS;
	else
		budget /= 2;
	if (budget > max_ns)
		budget = max_ns;
	return budget < PACING_POLL_MIN_NS ? 0 : budget;
}

void wait_pacing_slept(struct wait_pacing *wp, uint64_t slept_ns, uint64_t max_ns)
{
	/* The wait began where the spin began. */
	wp->poll_ns = wait_pacing_budget_next(wp->poll_ns, slept_ns + wp->poll_ns, max_ns);
}

/*
 * Judged by how often the thread was preempted (involuntary context
 * switches) between its recent waits: a driver or another tenant waiting
 * for this CPU. Then spinning only delays the driver, and so does
 * publishing every few replies: the driver cannot run before we yield,
 * and each early call wakes it for a part of the batch.
 */
unsigned wait_pacing_judge_cpu(struct wait_pacing *wp)
{
	struct rusage ru;
	uint64_t switches;
	unsigned preempted;

	if (++wp->waits_unjudged < PACING_JUDGE_WAITS || getrusage(RUSAGE_THREAD, &ru) < 0)
		return 0;
	wp->waits_unjudged = 0;
	switches = (uint64_t)ru.ru_nivcsw - wp->nivcsw;
	/* The preemptions of the waits judged together count as that many
	 * preempted waits, at most one each. */
	preempted = switches < PACING_JUDGE_WAITS ? (unsigned)switches : PACING_JUDGE_WAITS;
	wp->nivcsw = (uint64_t)ru.ru_nivcsw;
	/* A moving average in 1/256ths, each wait weighing 1/16: one stray
	 * preemption does not flip it. */
	for (unsigned i = 0; i < PACING_JUDGE_WAITS; i++)
		wp->preempted_avg = wp->preempted_avg - wp->preempted_avg / 16u +
				    (i < preempted ? 16u : 0u);
	return wait_pacing_cpu_shared(wp) ? PACING_JUDGE_WAITS : 0;
}

/* The rest of the CPUs are left to the guest's vCPUs (or the load
 * generator) that make the requests. */
unsigned wait_pacing_worker_cpus(void)
{
	cpu_set_t set;
	int n;

	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return 1;
	n = CPU_COUNT(&set) / 2;
	return n > 0 ? (unsigned)n : 1;
}
