/* Large READs split between the caller and the helper thread bring back what one pread would, at EOF, on errors and from two callers at once; the spinning helper writes signals handed to it. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "backend/read_split.h"
#include "common/signal_handoff.h"
#include "../common/check.h"

#define FILE_SIZE ((9u << 20) + 12345u)

static int fd = -1;

/* The oracle: one pread of the same range into a buffer of our own. */
static bool same_as_pread(const struct iovec *iov, unsigned cnt, size_t got, uint64_t off)
{
	uint8_t *want = malloc(got ? got : 1);
	ssize_t n = pread(fd, want, got, (off_t)off);
	size_t at = 0;
	bool ok = n == (ssize_t)got;

	for (unsigned i = 0; ok && i < cnt && at < got; i++) {
		size_t len = iov[i].iov_len < got - at ? iov[i].iov_len : got - at;

		ok = memcmp(iov[i].iov_base, want + at, len) == 0;
		at += len;
	}
	free(want);
	return ok && at == got;
}

/* A list of segments of the given lengths over one buffer, poisoned. */
static unsigned make_list(struct iovec *iov, uint8_t *buf, const size_t *lens, unsigned cnt)
{
	size_t at = 0;

	for (unsigned i = 0; i < cnt; i++) {
		iov[i].iov_base = buf + at;
		iov[i].iov_len = lens[i];
		at += lens[i];
	}
	memset(buf, 0xa5, at);
	return cnt;
}

static void test_sizes(struct read_split *s, const char *what)
{
	static const struct { size_t size; uint64_t off; } cases[] = {
		{ READ_SPLIT_MIN, 0 }, { 1u << 20, 4096 }, { (1u << 20) + 4097, 3 },
		{ 9u << 20, 777 },            /* more chunks than CHUNKS_MAX at 128 KiB */
		{ 1u << 20, FILE_SIZE - 300000 },   /* EOF in the third chunk */
		{ 1u << 20, FILE_SIZE },      /* at EOF */
	};
	uint8_t *buf = malloc(10u << 20);

	for (unsigned c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		size_t size = cases[c].size;
		uint64_t off = cases[c].off;
		size_t expect = off >= FILE_SIZE ? 0 : FILE_SIZE - off < size ? FILE_SIZE - off : size;
		struct iovec one = { buf, size };
		ssize_t got;

		memset(buf, 0xa5, size);
		got = read_split_read(s, fd, &one, 1, size, off);
		CHECK_MSG(got == (ssize_t)expect && same_as_pread(&one, 1, expect, off),
			  "%s: %zu bytes at %llu in one segment: %zd of %zu, data as pread's",
			  what, size, (unsigned long long)off, got, expect);
	}
	free(buf);
}

/* Segments that do not line up with chunks, empty ones, and a list
 * longer than the read. */
static void test_odd_segments(struct read_split *s, const char *what)
{
	size_t lens[300];
	struct iovec iov[300];
	uint8_t *buf = malloc(4u << 20);
	size_t total = 0, size;
	ssize_t got;
	unsigned cnt;

	for (unsigned i = 0; i < 300; i++) {
		lens[i] = i % 7 == 3 ? 0 : 1000 + (i * 4099) % 13000;
		total += lens[i];
	}
	cnt = make_list(iov, buf, lens, 300);
	size = total - 5000;
	got = read_split_read(s, fd, iov, cnt, size, 12345);
	CHECK_MSG(got == (ssize_t)size && same_as_pread(iov, cnt, size, 12345),
		  "%s: %zu bytes into %u uneven segments (some empty): %zd, data as pread's",
		  what, size, cnt, got);
	/* The list must be left untouched past size. */
	CHECK(((uint8_t *)iov[cnt - 1].iov_base)[iov[cnt - 1].iov_len - 1] == 0xa5);
	free(buf);
}

static void test_errors(struct read_split *s, const char *what)
{
	uint8_t *buf = malloc(1u << 20);
	struct iovec one = { buf, 1u << 20 };
	struct iovec short_list = { buf, 300000 };

	CHECK_MSG(read_split_read(s, -1, &one, 1, 1u << 20, 0) == -EBADF,
		  "%s: a bad fd fails with EBADF", what);
	/* A list shorter than size: the read ends where the list does. */
	CHECK_MSG(read_split_read(s, fd, &short_list, 1, 1u << 20, 0) == 300000 &&
		  same_as_pread(&short_list, 1, 300000, 0),
		  "%s: a list shorter than the read fills the list and stops", what);
	free(buf);
}

struct caller {
	struct read_split *s;
	unsigned seed;
	int bad;
};

static void *caller_thread(void *arg)
{
	struct caller *c = arg;
	uint8_t *buf = malloc(2u << 20);

	for (unsigned i = 0; i < 40; i++) {
		size_t size = READ_SPLIT_MIN / 2 + rand_r(&c->seed) % ((2u << 20) - READ_SPLIT_MIN / 2);
		uint64_t off = (uint64_t)(rand_r(&c->seed) % FILE_SIZE);
		size_t expect;
		struct iovec one = { buf, 0 };
		ssize_t got;

		one.iov_len = size;
		expect = FILE_SIZE - off < size ? FILE_SIZE - off : size;
		got = read_split_read(c->s, fd, &one, 1, size, off);
		if (got != (ssize_t)expect || !same_as_pread(&one, 1, expect, off))
			c->bad++;
	}
	free(buf);
	return NULL;
}

static void test_two_callers(struct read_split *s, const char *what)
{
	struct caller c[2] = { { s, 1, 0 }, { s, 2, 0 } };
	pthread_t t[2];

	for (unsigned i = 0; i < 2; i++)
		CHECK(pthread_create(&t[i], NULL, caller_thread, &c[i]) == 0);
	for (unsigned i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	CHECK_MSG(c[0].bad == 0 && c[1].bad == 0,
		  "%s: two callers at once, 40 reads each: %d and %d wrong", what, c[0].bad, c[1].bad);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The helper does take chunks when it gets a CPU: reads go on (with a
 * time limit) until it has. */
static void test_helper_helps(struct read_split *s)
{
	uint8_t *buf = malloc(8u << 20);
	struct iovec one = { buf, 8u << 20 };
	uint64_t before = read_split_helped(s);
	double end = now_s() + 20;
	unsigned reads = 0;
	bool right = true;

	do {
		memset(buf, 0xa5, 8u << 20);
		right &= read_split_read(s, fd, &one, 1, 8u << 20, 4096) == (8 << 20);
		reads++;
	} while (read_split_helped(s) == before && now_s() < end);
	CHECK_MSG(right && read_split_helped(s) > before,
		  "the helper read %llu chunks of %u reads of 8 MiB",
		  (unsigned long long)(read_split_helped(s) - before), reads);
	right = same_as_pread(&one, 1, 8u << 20, 4096);
	CHECK_MSG(right, "the last of them is what pread reads");
	free(buf);
}

/* On one CPU read_split_new turns splitting off (the helper could only take
 * turns with its caller): large reads are still right, and no chunk of
 * them is the helper's. */
static void test_one_cpu(struct read_split *s)
{
	uint8_t *buf = malloc(8u << 20);
	struct iovec one = { buf, 8u << 20 };
	bool right = true;

	for (int i = 0; i < 8; i++) {
		memset(buf, 0xa5, 8u << 20);
		right &= read_split_read(s, fd, &one, 1, 8u << 20, 4096) == (8 << 20) &&
			 same_as_pread(&one, 1, 8u << 20, 4096);
	}
	CHECK_MSG(right && read_split_helped(s) == 0,
		  "one CPU: 8 reads of 8 MiB right, the helper read %llu chunks of them (none)",
		  (unsigned long long)read_split_helped(s));
	free(buf);
}

/* After its chunks the helper spins for the next read, and meanwhile
 * writes a signal handed to it (signal_handoff.h): a queue thread's call to
 * its driver. As a queue thread does, this one hands one over right after
 * its read returns, while the helper that read with it is still on its
 * CPU. A second thread that kept trying on its own seldom ran inside the
 * helper's 50 us spin on a loaded 2-CPU machine: two CI runs under ASan
 * went 21,885 and 24,173 reads without a hand-over. A read the back-off
 * keeps from the helper (a loaded machine) only delays it. */
static void test_helper_writes_handoff(struct read_split *s)
{
	uint8_t *buf = malloc(8u << 20);
	struct iovec one = { buf, 8u << 20 };
	int efd = eventfd(0, EFD_CLOEXEC);
	struct pollfd pfd = { .fd = efd, .events = POLLIN };
	double end = now_s() + 20;
	unsigned reads = 0;
	bool handed = false;
	uint64_t v = 0;

	if (efd < 0) {
		CHECK_MSG(0, "an eventfd to hand over");
		free(buf);
		return;
	}
	while (!handed && now_s() < end) {
		double spin_end;

		CHECK(read_split_read(s, fd, &one, 1, 8u << 20, 0) == (8 << 20));
		reads++;
		/* Longer than the helper's spin: a post fails only once it
		 * has gone to sleep. */
		spin_end = now_s() + 0.001;
		while (!(handed = signal_handoff_post(efd)) && now_s() < spin_end)
			;
	}
	CHECK_MSG(handed, "the spinning helper took a signal to write (%u reads)", reads);
	if (handed) {
		CHECK_MSG(poll(&pfd, 1, 5000) == 1 && read(efd, &v, sizeof(v)) == sizeof(v) && v == 1,
			  "and wrote it: the eventfd counted %llu", (unsigned long long)v);
		signal_handoff_forget(efd);
	}
	close(efd);
	free(buf);
}

/* What the back-off averages: a wait shorter than the helper's chunks
 * would have taken is a gain, a longer one a loss, bounded by one read. */
static void test_gain(void)
{
	/* 8 chunks of 16 us, 4 each, a 10 us wait for the helper's last. */
	CHECK_EQ(read_split_gain(8, 4, 16000, 10000), 54000);
	/* Preempted for 40 us: 64 us saved, 40 lost, still a gain (the old
	 * rule called this read late: more than half the saving). */
	CHECK(read_split_gain(8, 4, 16000, 40000) > 0);
	CHECK(read_split_gain(8, 4, 16000, 70000) < 0);
	/* A 3 ms time slice counts as one read alone, 128 us. */
	CHECK_EQ(read_split_gain(8, 4, 16000, 3000000), -128000);
	/* The helper took none: a chunk lost to its wake-up. */
	CHECK_EQ(read_split_gain(8, 8, 16000, 0), -16000);
	/* It took all: no chunk time of the caller's to judge by. */
	CHECK_EQ(read_split_gain(8, 0, 0, 90000), 0);
}

int main(void)
{
	char path[] = "/tmp/ferry-read-split-XXXXXX";
	struct read_split *on = NULL, *off = NULL;
	cpu_set_t set;
	uint8_t *data = malloc(FILE_SIZE);

	fd = mkstemp(path);
	if (fd < 0 || !data)
		return 1;
	unlink(path);
	for (size_t i = 0; i < FILE_SIZE; i++)
		data[i] = (uint8_t)(i * 2654435761u >> 13);
	CHECK(pwrite(fd, data, FILE_SIZE, 0) == (ssize_t)FILE_SIZE);
	free(data);

	test_gain();
	CHECK(read_split_new(&on, true) == 0);
	CHECK(read_split_new(&off, false) == 0);
	test_sizes(off, "alone");
	test_sizes(on, "split");
	test_odd_segments(off, "alone");
	test_odd_segments(on, "split");
	test_errors(on, "split");
	test_two_callers(on, "split");
	CHECK(read_split_helped(off) == 0);
	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) >= 2) {
		test_helper_helps(on);
		test_helper_writes_handoff(on);
	} else {
		test_one_cpu(on);
	}
	read_split_free(on);
	read_split_free(off);
	/* A split that never read large has no helper to stop. */
	CHECK(read_split_new(&on, true) == 0);
	read_split_free(on);
	close(fd);
	return check_result();
}
