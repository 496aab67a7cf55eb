/* vhost-user workers: the threads that serve queues, one or several each, and their hand-over with the control thread. */
#include "transport/vhost_user_internal.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"

/* epoll keys: the worker's wake_fd, or a queue's slot in w->queues with
 * its lowest bit telling the ctl fd from the kick fd. */
#define KEY_WAKE UINT64_MAX
#define KEY_CTL 1u

/* Events taken per wait: a worker's queues have two fds each; more wait
 * for the next pass, which comes without sleeping. */
#define WORKER_EVENTS 32

static int watch(struct vu_worker *w, int fd, uint64_t key)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = key };

	return epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

/* A fd it no longer watches (or never did) is fine: ENOENT is ignored. */
static void unwatch(struct vu_worker *w, int fd)
{
	if (fd >= 0)
		epoll_ctl(w->epoll_fd, EPOLL_CTL_DEL, fd, NULL);
}

/* Worker thread: starts serving the queue in slot; false if it cannot
 * (the queue is then broken and not served). */
static bool queue_join(struct vu_worker *w, unsigned slot)
{
	struct vu_queue *q = w->queues[slot];
	int ret;

	/* epoll refuses a regular file as the kick fd: it could never
	 * tell us of a kick, so the queue cannot run. */
	ret = watch(w, q->kick_fd, (uint64_t)slot << 1);
	if (ret < 0) {
		log_err("queue %u: cannot wait on its kick fd: %s", q->index, strerror(-ret));
		vu_queue_break(q, "the kick fd cannot be waited on");
		return false;
	}
	ret = watch(w, q->ctl_fd, (uint64_t)slot << 1 | KEY_CTL);
	if (ret < 0) {
		log_err("queue %u: cannot wait on its control fd: %s", q->index, strerror(-ret));
		vu_queue_break(q, "out of resources to wait on the queue");
		unwatch(w, q->kick_fd);
		return false;
	}
	if (!vu_queue_begin(q)) {
		unwatch(w, q->kick_fd);
		unwatch(w, q->ctl_fd);
		return false;
	}
	if (w->want_cpus) {
		char cpus[64];

		log_info("queue %u: served by thread %d (queue thread %u) on CPU %s", q->index,
			 w->thread_id, w->index, __atomic_load_n(&w->pinned, __ATOMIC_RELAXED) ?
			 cpu_set_format(&w->cpus, cpus, sizeof(cpus)) : "(not pinned)");
	} else {
		log_debug("queue %u: served by thread %d (queue thread %u)", q->index,
			  w->thread_id, w->index);
	}
	return true;
}

/* Worker thread, with w->lock held: ends a served queue. The lock is
 * dropped meanwhile (ending waits for deferred requests); served stays
 * true until the end, so the control thread's wait goes on. */
static void queue_leave_locked(struct vu_worker *w, struct vu_queue *q, const char *broken_why)
{
	if (!q->served)
		return;
	pthread_mutex_unlock(&w->lock);
	if (broken_why)
		vu_queue_break(q, broken_why);
	vu_queue_end(q);
	unwatch(w, q->kick_fd);
	unwatch(w, q->ctl_fd);
	pthread_mutex_lock(&w->lock);
	q->served = false;
}

/*
 * Worker thread: takes the queues the control thread handed over and lets
 * go of those it asked back. A queue stays served (or join-requested)
 * until the worker is done with it, so the control thread's wait in
 * vu_worker_remove cannot end while a join or leave is under way.
 */
static void update_members(struct vu_worker *w)
{
	pthread_mutex_lock(&w->lock);
	for (unsigned i = 0; i < w->nqueues; i++) {
		struct vu_queue *q = w->queues[i];

		if (q->stop_requested) {
			queue_leave_locked(w, q, NULL);
			q->join_requested = false;
			pthread_cond_broadcast(&w->changed);
		} else if (q->join_requested && !q->served) {
			bool joined;

			pthread_mutex_unlock(&w->lock);
			joined = queue_join(w, i);
			pthread_mutex_lock(&w->lock);
			q->served = joined;
			q->join_requested = false;
			pthread_cond_broadcast(&w->changed);
		}
	}
	pthread_mutex_unlock(&w->lock);
}

/* One event from the wait: which fd woke us, and what it means. */
static void handle_event(struct vu_worker *w, const struct epoll_event *ev)
{
	struct vu_queue *q;

	if (ev->data.u64 == KEY_WAKE) {
		eventfd_drain(w->wake_fd);
		return;
	}
	if ((ev->data.u64 >> 1) >= w->nqueues)
		return;
	q = w->queues[ev->data.u64 >> 1];
	if (!q->served)
		return;
	if (ev->data.u64 & KEY_CTL) {
		eventfd_drain(q->ctl_fd);
		q->more = true;
		return;
	}
	/* Drained before the batch: a kick arriving during it is kept and
	 * costs at most one empty pass. */
	if (ev->events & EPOLLERR) {
		log_err("queue %u: kick fd error, queue stops", q->index);
		vu_queue_break(q, "kick fd error");
	} else if (vu_queue_kick_drain(q)) {
		q->more = true;
		return;
	}
	/* A broken kick fd stays ready: watched, it would wake us forever. */
	unwatch(w, q->kick_fd);
}

/* Whether every queue the worker serves has work waiting. */
static bool all_more(const struct vu_worker *w)
{
	bool any = false;

	for (unsigned i = 0; i < w->nqueues; i++) {
		const struct vu_queue *q = w->queues[i];

		if (!q->served)
			continue;
		if (!q->more)
			return false;
		any = true;
	}
	return any;
}

/* Whether a served queue wants a batch before the worker may sleep. */
static bool any_more(const struct vu_worker *w)
{
	for (unsigned i = 0; i < w->nqueues; i++)
		if (w->queues[i]->served && w->queues[i]->more)
			return true;
	return false;
}

/* Kicks on again for every served queue; true if one has work already. */
static bool arm_all(struct vu_worker *w)
{
	bool more = false;

	for (unsigned i = 0; i < w->nqueues; i++) {
		struct vu_queue *q = w->queues[i];

		if (q->served && vu_queue_arm(q)) {
			q->more = true;
			more = true;
		}
	}
	return more;
}

static void count_sleep(struct vu_worker *w)
{
	for (unsigned i = 0; i < w->nqueues; i++)
		if (w->queues[i]->served)
			ferry_count(&w->queues[i]->st.sleeps, 1);
}

/* The worker's end: every queue it serves is let go (broken too if the
 * worker failed, so the frontend hears of it), every waiter released. */
static void worker_end(struct vu_worker *w, bool failed)
{
	pthread_mutex_lock(&w->lock);
	for (unsigned i = 0; i < w->nqueues; i++) {
		struct vu_queue *q = w->queues[i];

		queue_leave_locked(w, q, failed ? "its worker thread failed" : NULL);
		q->join_requested = false;
	}
	w->failed = failed;
	pthread_cond_broadcast(&w->changed);
	pthread_mutex_unlock(&w->lock);
}

/* Worker thread, first thing: its name and id for ps and the stats, and
 * its CPUs when --queue-cpus gave them. A CPU it cannot go to (taken
 * offline since the start) leaves it where it is, said in the log. */
static void worker_place_self(struct vu_worker *w)
{
	char name[32], cpus[64];
	int ret;

	if (w->index == 0)
		snprintf(name, sizeof(name), "ferry-hiprio");
	else
		snprintf(name, sizeof(name), "ferry-queue%u", w->index);
	name[15] = '\0';   /* the kernel's limit for a thread's name */
	pthread_setname_np(pthread_self(), name);
	__atomic_store_n(&w->thread_id, (int)gettid(), __ATOMIC_RELEASE);
	if (!w->want_cpus)
		return;
	/* A thread started again (the next frontend) says afresh. */
	__atomic_store_n(&w->pinned, false, __ATOMIC_RELEASE);
	ret = sched_setaffinity(0, sizeof(w->cpus), &w->cpus) < 0 ? -errno : 0;
	cpu_set_format(&w->cpus, cpus, sizeof(cpus));
	if (ret < 0) {
		log_err("queue thread %u: cannot pin it to CPU %s: %s; it runs unpinned",
			w->index, cpus, strerror(-ret));
		return;
	}
	__atomic_store_n(&w->pinned, true, __ATOMIC_RELEASE);
	log_info("queue thread %u (thread %d, %s) pinned to CPU %s", w->index, w->thread_id,
		 w->index ? "request queues" : "hiprio queue", cpus);
}

static void *worker_thread(void *arg)
{
	struct vu_worker *w = arg;
	struct vu_dev *dev = w->dev;
	struct epoll_event ev[WORKER_EVENTS];
	bool failed = false;

	worker_place_self(w);
	for (;;) {
		uint64_t slept_from = 0;
		bool more;
		int n;

		/* Looked at after every wake_fd drain (the loop comes back
		 * here), and the control thread sets it before it signals:
		 * a request whose signal a drain swallowed is still seen. */
		if (__atomic_exchange_n(&w->members_changed, false, __ATOMIC_ACQ_REL))
			update_members(w);
		if (__atomic_load_n(&w->exit_requested, __ATOMIC_ACQUIRE))
			break;
		more = any_more(w);
		if (!more) {
			vu_worker_judge_cpu(w);
			more = vu_worker_wait_by_polling(w);
		}
		if (!more)
			more = arm_all(w);
		if (!more) {
			count_sleep(w);
			if (dev->poll_max_ns && w->index > 0)
				slept_from = ferry_monotonic_ns();
		}
		/* With every queue busy, the look at the fds finds nothing new:
		 * kicks and ctl events would only say "more", and
		 * members_changed is read at the top of every pass. The wait
		 * pacing says how often the look still comes. */
		if (more && !wait_pacing_look_due(&w->pacing) && all_more(w)) {
			wait_pacing_skipped_look(&w->pacing);
			n = 0;
		} else {
			wait_pacing_looked(&w->pacing);
			n = epoll_wait(w->epoll_fd, ev, WORKER_EVENTS, more ? 0 : -1);
		}
		if (slept_from)
			wait_pacing_slept(&w->pacing, ferry_monotonic_ns() - slept_from,
					  dev->poll_max_ns);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			log_err("worker %u: epoll_wait: %s; its queues stop", w->index,
				strerror(errno));
			failed = true;
			break;
		}
		for (int i = 0; i < n; i++)
			handle_event(w, &ev[i]);
		for (unsigned i = 0; i < w->nqueues; i++) {
			struct vu_queue *q = w->queues[i];

			if (q->served && q->more)
				q->more = vu_queue_serve(q);
		}
	}
	worker_end(w, failed);
	return NULL;
}

static void worker_wake(struct vu_worker *w)
{
	__atomic_store_n(&w->members_changed, true, __ATOMIC_RELEASE);
	eventfd_signal(w->wake_fd);
}

/* Control thread: the worker's thread, on its first queue. */
static int worker_start_thread(struct vu_worker *w)
{
	sigset_t all, old;
	int ret;

	if (w->thread_running)
		return 0;
	/* Worker threads inherit a full signal mask: signals go to the main
	 * thread, whose handlers may call vu_dev_stop(). */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = -pthread_create(&w->thread, NULL, worker_thread, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret < 0)
		return ret;
	w->thread_running = true;
	return 0;
}

int vu_worker_add(struct vu_queue *q)
{
	struct vu_worker *w = q->worker;
	int ret = worker_start_thread(w);

	if (ret < 0)
		return ret;
	pthread_mutex_lock(&w->lock);
	if (w->failed) {
		ret = -EIO;
	} else {
		q->stop_requested = false;
		q->join_requested = true;
	}
	pthread_mutex_unlock(&w->lock);
	if (ret == 0)
		worker_wake(w);
	return ret;
}

void vu_worker_remove(struct vu_queue *q)
{
	struct vu_worker *w = q->worker;

	pthread_mutex_lock(&w->lock);
	q->stop_requested = true;
	pthread_mutex_unlock(&w->lock);
	worker_wake(w);
	pthread_mutex_lock(&w->lock);
	while (q->join_requested || q->served)
		pthread_cond_wait(&w->changed, &w->lock);
	q->stop_requested = false;
	pthread_mutex_unlock(&w->lock);
}

static void worker_destroy(struct vu_worker *w)
{
	if (w->thread_running) {
		__atomic_store_n(&w->exit_requested, true, __ATOMIC_RELEASE);
		worker_wake(w);
		pthread_join(w->thread, NULL);
		w->thread_running = false;
	}
	close_fd(&w->epoll_fd);
	close_fd(&w->wake_fd);
	pthread_cond_destroy(&w->changed);
	pthread_mutex_destroy(&w->lock);
	free(w->queues);
	w->queues = NULL;
}

static int worker_init(struct vu_worker *w, struct vu_dev *dev, unsigned index)
{
	int ret;

	w->dev = dev;
	w->index = index;
	w->epoll_fd = w->wake_fd = -1;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->changed, NULL);
	w->queues = calloc(dev->nqueues, sizeof(w->queues[0]));
	w->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	w->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!w->queues)
		return -ENOMEM;
	if (w->epoll_fd < 0 || w->wake_fd < 0)
		return -errno;
	ret = watch(w, w->wake_fd, KEY_WAKE);
	return ret;
}

int vu_workers_new(struct vu_dev *dev)
{
	/* The request queues share half the CPUs' worth of threads, as many
	 * as may busy-poll; with more CPUs than queues, a thread each. */
	unsigned nrequest = dev->nqueues - 1, nreq_workers = wait_pacing_worker_cpus();
	int ret = 0;

	if (nreq_workers > nrequest)
		nreq_workers = nrequest;
	if (nreq_workers == 0)
		nreq_workers = 1;
	dev->workers = calloc(1 + nreq_workers, sizeof(dev->workers[0]));
	if (!dev->workers)
		return -ENOMEM;
	for (unsigned i = 0; i < 1 + nreq_workers; i++) {
		dev->nworkers = i + 1;
		ret = worker_init(&dev->workers[i], dev, i);
		if (ret < 0)
			goto err;
	}
	for (unsigned i = 0; i < dev->nqueues; i++) {
		struct vu_queue *q = &dev->queues[i];
		struct vu_worker *w = &dev->workers[i == 0 ? 0 : 1 + (i - 1) % nreq_workers];

		q->worker = w;
		w->queues[w->nqueues++] = q;
	}
	/* --queue-cpus: request thread k on the k-th CPU of the list, which
	 * wraps round; as thread k's first queue is request queue k, request
	 * queue i's thread is on the i-th CPU whenever each queue has a thread
	 * of its own. The hiprio thread (rarely busy) may use the whole list. */
	for (unsigned i = 0; dev->queue_cpus.count && i < dev->nworkers; i++) {
		struct vu_worker *w = &dev->workers[i];

		w->want_cpus = true;
		if (i == 0) {
			cpu_list_to_set(&dev->queue_cpus, &w->cpus);
		} else {
			CPU_ZERO(&w->cpus);
			CPU_SET(dev->queue_cpus.cpu[(i - 1) % dev->queue_cpus.count], &w->cpus);
		}
	}
	log_debug("vhost-user: %u request queue(s) on %u thread(s)", nrequest, nreq_workers);
	return 0;

err:
	vu_workers_free(dev);
	return ret;
}

unsigned vu_dev_placement_snapshot(struct vu_dev *dev, struct vu_thread_placement *out,
				   unsigned max)
{
	for (unsigned i = 0; i < dev->nworkers && i < max; i++) {
		struct vu_worker *w = &dev->workers[i];
		struct vu_thread_placement *p = &out[i];

		memset(p, 0, sizeof(*p));
		p->worker = w->index;
		p->thread_id = __atomic_load_n(&w->thread_id, __ATOMIC_ACQUIRE);
		p->pinned = __atomic_load_n(&w->pinned, __ATOMIC_ACQUIRE);
		if (p->pinned)
			cpu_set_format(&w->cpus, p->cpus, sizeof(p->cpus));
		pthread_mutex_lock(&w->lock);
		for (unsigned k = 0; k < w->nqueues && p->nqueues < VU_PLACEMENT_MAX_QUEUES; k++)
			if (w->queues[k]->served)
				p->queue[p->nqueues++] = w->queues[k]->index;
		pthread_mutex_unlock(&w->lock);
	}
	return dev->nworkers;
}

void vu_workers_free(struct vu_dev *dev)
{
	for (unsigned i = 0; i < dev->nworkers; i++)
		worker_destroy(&dev->workers[i]);
	free(dev->workers);
	dev->workers = NULL;
	dev->nworkers = 0;
}
