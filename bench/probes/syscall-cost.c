/* syscall-cost: what does each system call around a daemon's request cost on this host, in a loop of one thread? */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CALLS 200000
#define REPEATS 3

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

enum call { C_GETPPID, C_GETRUSAGE, C_EPOLL, C_STATX, C_PREAD, C_EVENTFD, C_CLOCK, C_COUNT };

static const char *const names[C_COUNT] = {
	[C_GETPPID] = "getppid (the bare entry and exit)",
	[C_GETRUSAGE] = "getrusage(RUSAGE_THREAD)",
	[C_EPOLL] = "epoll_wait, 2 idle eventfds, no timeout",
	[C_STATX] = "statx of an O_PATH fd (GETATTR)",
	[C_PREAD] = "pread of 4 KiB from the page cache",
	[C_EVENTFD] = "eventfd write, nobody waiting",
	[C_CLOCK] = "clock_gettime (vDSO, no system call)",
};

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "/dev/shm";
	char path[4096], buf[4096];
	struct epoll_event ev = { .events = EPOLLIN };
	int ep = epoll_create1(0), e1 = eventfd(0, EFD_NONBLOCK), e2 = eventfd(0, EFD_NONBLOCK);
	int dfd, ffd;
	struct statx stx;
	struct rusage ru;
	struct timespec ts;

	if (argc > 2) {
		fprintf(stderr, "usage: syscall-cost [DIR]   (DIR: where a 4 KiB file is made, default /dev/shm)\n");
		return 2;
	}
	snprintf(path, sizeof(path), "%s/syscall-cost.%d", dir, (int)getpid());
	dfd = open(dir, O_PATH | O_DIRECTORY);
	ffd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (ep < 0 || e1 < 0 || e2 < 0 || dfd < 0 || ffd < 0 || pwrite(ffd, buf, sizeof(buf), 0) != sizeof(buf)) {
		perror("syscall-cost: setup");
		if (ffd >= 0)
			unlink(path);
		return 2;
	}
	unlink(path);
	epoll_ctl(ep, EPOLL_CTL_ADD, e1, &ev);
	epoll_ctl(ep, EPOLL_CTL_ADD, e2, &ev);
	printf("ns per call, %d calls, %d repeats (one thread; on a PVM guest every entry and exit is a trap)\n",
	       CALLS, REPEATS);
	for (int c = 0; c < C_COUNT; c++) {
		printf("%-44s", names[c]);
		for (int r = 0; r < REPEATS; r++) {
			double t = now_ns();

			for (int i = 0; i < CALLS; i++) {
				switch (c) {
				case C_GETPPID: getppid(); break;
				case C_GETRUSAGE: getrusage(RUSAGE_THREAD, &ru); break;
				case C_EPOLL: epoll_wait(ep, &ev, 1, 0); break;
				case C_STATX: statx(dfd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &stx); break;
				case C_PREAD: if (pread(ffd, buf, sizeof(buf), 0) < 0) abort(); break;
				case C_EVENTFD: eventfd_write(e1, 1); break;
				case C_CLOCK: clock_gettime(CLOCK_MONOTONIC, &ts); break;
				}
			}
			printf(" %7.0f", (now_ns() - t) / CALLS);
		}
		printf("\n");
	}
	return 0;
}
