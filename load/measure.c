/* Measurement: clocks, CPU time from /proc and getrusage, latency percentiles, the idle interval. */
#include "measure.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "load.h"

uint64_t load_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* utime+stime of every thread of pid, in µs; -1 when unreadable. */
static int64_t one_proc_cpu_us(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	/* The command name may hold spaces and parentheses: skip past the last
	 * ')'; then state is field 3 and utime, stime are fields 14 and 15. */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
			 &ut, &st) != 2)
		return -1;
	return (int64_t)((ut + st) * 1000000ull / (unsigned long long)sysconf(_SC_CLK_TCK));
}

/* CPU time of pid and its descendants: QEMU's virtiofsd forks into its
 * namespace sandbox and the child, not the pid we were given, does the work. */
int64_t load_proc_cpu_us(pid_t pid)
{
	char path[96], buf[4096], *tok, *save;
	int64_t sum, c;
	DIR *tasks;
	struct dirent *de;

	if (pid <= 0)
		return -1;
	sum = one_proc_cpu_us(pid);
	if (sum < 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	tasks = opendir(path);
	if (!tasks)
		return sum;
	while ((de = readdir(tasks))) {
		ssize_t n;
		int fd;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.20s/children", (int)pid,
			 de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = 0;
		for (tok = strtok_r(buf, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
			c = load_proc_cpu_us((pid_t)atoi(tok));
			if (c > 0)
				sum += c;
		}
	}
	closedir(tasks);
	return sum;
}

double load_self_cpu_us(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec * 1e6 + (double)ru.ru_utime.tv_usec +
	       (double)ru.ru_stime.tv_sec * 1e6 + (double)ru.ru_stime.tv_usec;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static double pct(const uint32_t *v, size_t n, double q)
{
	size_t i;

	if (!n)
		return 0;
	i = (size_t)(q * (double)n);
	if (i >= n)
		i = n - 1;
	return v[i] / 1000.0;
}

int load_lat_grow(struct load_lat *l)
{
	size_t cap = l->cap ? l->cap * 2 : 1 << 16;
	uint32_t *p = realloc(l->v, cap * sizeof(*p));

	if (!p)
		return -ENOMEM;
	l->v = p;
	l->cap = cap;
	return 0;
}

void load_latency_summary(struct load_lat *l, struct load_result *res)
{
	uint32_t *lat = l->v;
	size_t n = l->n;
	double sum = 0;

	qsort(lat, n, sizeof(*lat), cmp_u32);
	for (size_t i = 0; i < n; i++)
		sum += lat[i];
	res->lat_mean_us = n ? sum / (double)n / 1000.0 : 0;
	res->lat_p50_us = pct(lat, n, 0.5);
	res->lat_p99_us = pct(lat, n, 0.99);
	res->lat_p999_us = pct(lat, n, 0.999);
	res->lat_max_us = n ? lat[n - 1] / 1000.0 : 0;
}

/* A guest that stops sending but keeps its rings: what the daemon burns
 * while nothing is in flight (a queue thread that never stopped polling
 * would show a whole CPU). */
double load_idle_cpu_us(pid_t pid, double seconds)
{
	int64_t c0 = load_proc_cpu_us(pid), c1;
	struct timespec ts = { .tv_sec = (time_t)seconds,
			       .tv_nsec = (long)((seconds - (double)(time_t)seconds) * 1e9) };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	c1 = load_proc_cpu_us(pid);
	return (pid > 0 && c0 >= 0 && c1 >= 0) ? (double)(c1 - c0) : -1;
}
