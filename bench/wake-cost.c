/* wake-cost: round trip and waiter CPU of a bare kick/call eventfd ping-pong, the floor under a QD1 request. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cpu_time.h"

#define ROUND_TRIPS 200000

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

int main(void)
{
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
	return 0;
}
