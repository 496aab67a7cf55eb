/* wake-cost: what do a kick/call eventfd round trip and its waiter's CPU cost, and what does one call that wakes a sleeper cost its writer, and how soon does the sleeper run? */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cpu_pin.h"
#include "cpu_time.h"

#define ROUND_TRIPS 200000
/* Calls timed by run_waker(); each waits WAKER_GAP_US first, so ~1.5 s. */
#define WAKER_CALLS 20000
#define WAKER_GAP_US 50.0

enum wait_kind { WAIT_POLL, WAIT_EPOLL, WAIT_READ };

static const char *const wait_names[] = {
	[WAIT_POLL] = "poll(kick, ctl) + read",
	[WAIT_EPOLL] = "epoll_wait + read",
	[WAIT_READ] = "blocking read",
};

struct pingpong {
	enum wait_kind kind;
	int kick, call, ctl, epfd;
	double device_cpu_us;    /* per round trip */
	int err;
};

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* The device side: waits for a kick the way a queue thread would, answers
 * with a call. */
static void *device(void *arg)
{
	struct pingpong *pp = arg;
	struct pollfd pfd[2] = { { .fd = pp->kick, .events = POLLIN },
				 { .fd = pp->ctl, .events = POLLIN } };
	struct epoll_event ev;
	double t0 = cpu_time_us(RUSAGE_THREAD);
	uint64_t v;

	for (int i = 0; i < ROUND_TRIPS; i++) {
		int r = 1;

		if (pp->kind == WAIT_POLL)
			r = poll(pfd, 2, -1);
		else if (pp->kind == WAIT_EPOLL)
			r = epoll_wait(pp->epfd, &ev, 1, -1);
		if (r < 1 || read(pp->kick, &v, sizeof(v)) != sizeof(v) ||
		    eventfd_write(pp->call, 1) < 0) {
			pp->err = errno ? errno : EIO;
			break;
		}
	}
	pp->device_cpu_us = (cpu_time_us(RUSAGE_THREAD) - t0) / ROUND_TRIPS;
	return NULL;
}

static void close_if_open(int fd)
{
	if (fd >= 0)
		close(fd);
}

static int run(enum wait_kind kind, double *round_trip_us, double *device_cpu_us)
{
	struct pingpong pp = { .kind = kind };
	struct epoll_event ev = { .events = EPOLLIN };
	pthread_t thread;
	eventfd_t v;
	double t0;
	int ret = 0;

	pp.kick = eventfd(0, EFD_CLOEXEC);
	pp.call = eventfd(0, EFD_CLOEXEC);
	pp.ctl = eventfd(0, EFD_CLOEXEC);
	pp.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (pp.kick < 0 || pp.call < 0 || pp.ctl < 0 || pp.epfd < 0 ||
	    epoll_ctl(pp.epfd, EPOLL_CTL_ADD, pp.kick, &ev) < 0 ||
	    epoll_ctl(pp.epfd, EPOLL_CTL_ADD, pp.ctl, &ev) < 0) {
		ret = -errno;
		goto out;
	}
	ret = -pthread_create(&thread, NULL, device, &pp);
	if (ret)
		goto out;
	t0 = now_us();
	for (int i = 0; i < ROUND_TRIPS && ret == 0; i++)
		if (eventfd_write(pp.kick, 1) < 0 || eventfd_read(pp.call, &v) < 0)
			ret = -errno;
	*round_trip_us = (now_us() - t0) / ROUND_TRIPS;
	if (ret)
		eventfd_write(pp.kick, 1);    /* let the device thread finish */
	pthread_join(thread, NULL);
	if (!ret && pp.err)
		ret = -pp.err;
	*device_cpu_us = pp.device_cpu_us;
out:
	close_if_open(pp.epfd);
	close_if_open(pp.ctl);
	close_if_open(pp.call);
	close_if_open(pp.kick);
	return ret;
}

struct sleeper {
	int fd;
	unsigned woken;    /* wake-ups seen; written by the sleeper, read by the writer */
	int err;
	double *woke_at;   /* [WAKER_CALLS]: when the sleeper ran again after each call */
};

/* Sleeps in poll() on its eventfd and then reads it, as a driver waiting
 * for its call does (ferryfs-load's wait_calls), notes when it ran again,
 * and counts each wake-up. */
static void *sleeper(void *arg)
{
	struct sleeper *s = arg;
	struct pollfd pfd = { .fd = s->fd, .events = POLLIN };
	eventfd_t v;

	for (int i = 0; i < WAKER_CALLS; i++) {
		if (poll(&pfd, 1, -1) < 1 || eventfd_read(s->fd, &v) < 0) {
			s->err = errno ? errno : EIO;
			break;
		}
		s->woke_at[i] = now_us();
		__atomic_store_n(&s->woken, i + 1u, __ATOMIC_RELEASE);
	}
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The writer's side of a call: the time of one eventfd write whose reader
 * is asleep on the other CPU (the write sends the wake-up), against one with
 * nobody waiting; and the latency of the wake-up, from the write's start to
 * the sleeper running again, the least a reply to a sleeping driver takes
 * beyond its work. The writer spins WAKER_GAP_US between calls so the
 * sleeper is surely back asleep, and stays on its CPU, as a busy daemon does. */
static int run_waker(double *wake_us, double *idle_us, double *latency_p50_us)
{
	struct sleeper s = { .fd = eventfd(0, EFD_CLOEXEC),
			     .woke_at = calloc(WAKER_CALLS, sizeof(double)) };
	double *wrote_at = calloc(WAKER_CALLS, sizeof(double));
	int lone = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	double sum_wake = 0, sum_idle = 0;
	pthread_t thread;
	int ret = 0;

	if (!s.woke_at || !wrote_at) {
		ret = -ENOMEM;
		goto out;
	}
	if (s.fd < 0 || lone < 0) {
		ret = -errno;
		goto out;
	}
	ret = -pthread_create(&thread, NULL, sleeper, &s);
	if (ret)
		goto out;
	/* A daemon and its driver run on different CPUs, and the wake-up
	 * that costs is the one that crosses to the other CPU. */
	pin_thread(pthread_self(), 0);
	pin_thread(thread, 1);
	for (unsigned i = 0; i < WAKER_CALLS && ret == 0; i++) {
		double t0, t1;

		while (__atomic_load_n(&s.woken, __ATOMIC_ACQUIRE) < i && !s.err)
			;
		for (t0 = now_us(); now_us() - t0 < WAKER_GAP_US;)
			;
		t0 = wrote_at[i] = now_us();
		if (eventfd_write(s.fd, 1) < 0)
			ret = -errno;
		t1 = now_us();
		sum_wake += t1 - t0;
		if (eventfd_write(lone, 1) < 0)
			ret = -errno;
		sum_idle += now_us() - t1;
	}
	if (ret)
		eventfd_write(s.fd, WAKER_CALLS);    /* let the sleeper finish */
	pthread_join(thread, NULL);
	if (!ret && s.err)
		ret = -s.err;
	*wake_us = sum_wake / WAKER_CALLS;
	*idle_us = sum_idle / WAKER_CALLS;
	if (!ret) {
		/* Reuse woke_at for the latencies; both clocks are CLOCK_MONOTONIC,
		 * one clock for every CPU. */
		for (unsigned i = 0; i < WAKER_CALLS; i++)
			s.woke_at[i] -= wrote_at[i];
		qsort(s.woke_at, WAKER_CALLS, sizeof(double), cmp_double);
		*latency_p50_us = s.woke_at[WAKER_CALLS / 2];
	}
out:
	free(wrote_at);
	free(s.woke_at);
	close_if_open(lone);
	close_if_open(s.fd);
	return ret;
}

int main(void)
{
	double wake = 0, idle = 0, latency = 0;
	int waker_ret;

	for (int pass = 0; pass < 2; pass++) {
		for (enum wait_kind k = WAIT_POLL; k <= WAIT_READ; k++) {
			double rt = 0, cpu = 0;
			int ret = run(k, &rt, &cpu);

			if (ret) {
				fprintf(stderr, "wake-cost: %s\n", strerror(-ret));
				return 1;
			}
			printf("%-24s round trip %6.2f us, waiter cpu %5.2f us\n",
			       wait_names[k], rt, cpu);
		}
	}
	waker_ret = run_waker(&wake, &idle, &latency);
	if (waker_ret) {
		fprintf(stderr, "wake-cost: %s\n", strerror(-waker_ret));
		return 1;
	}
	printf("one call, its writer's time: waking a reader asleep on the other CPU %5.2f us, "
	       "nobody waiting %5.2f us\n", wake, idle);
	printf("one call, its wake-up: the reader asleep on the other CPU runs %5.2f us (p50) "
	       "after the write starts\n", latency);
	return 0;
}
