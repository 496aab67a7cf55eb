/* ferryfs-load --host: any workload as the host's own loop of system calls in a directory, at a depth of --host-threads; the bound for any daemon. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "evict.h"
#include "host.h"
#include "measure.h"
#include "workloads.h"

#define FILL_CHUNK (1u << 20)

static int fill_file(int fd, uint64_t size)
{
	char *buf = malloc(FILL_CHUNK);
	uint64_t off = 0;
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	while (off < size) {
		uint32_t len = size - off < FILL_CHUNK ? (uint32_t)(size - off) : FILL_CHUNK;

		fc_pattern_fill(buf, off, len);
		if (pwrite(fd, buf, len, (off_t)off) != (ssize_t)len) {
			ret = errno ? -errno : -EIO;
			break;
		}
		off += len;
	}
	free(buf);
	return ret;
}

/* The data file, made and filled as ferryfs-load's fill phase does. */
static int make_data_file(struct host_run *h)
{
	struct stat st;
	int ret;

	h->fd = openat(h->wdir, "data", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (h->fd < 0)
		return -errno;
	ret = fill_file(h->fd, h->nblocks * h->cfg->block_size);
	if (ret)
		return ret;
	h->path_fd = openat(h->wdir, "data", O_PATH | O_CLOEXEC);
	if (h->path_fd < 0 || fstat(h->path_fd, &st))
		return -errno;
	h->file_ino = st.st_ino;
	return 0;
}

/* readdirplus's directory: --dir-entries empty files f000000... */
static int make_dir(struct host_run *h)
{
	uint32_t i;
	int dfd, fd, ret = 0;
	char name[32];

	if (mkdirat(h->wdir, "dir", 0755))
		return -errno;
	dfd = openat(h->wdir, "dir", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	for (i = 0; i < h->cfg->dir_entries && !ret; i++) {
		snprintf(name, sizeof(name), "f%06u", i);
		fd = openat(dfd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0)
			ret = -errno;
		else
			close(fd);
	}
	close(dfd);
	return ret;
}

/* Removes what the run made, whatever state it stopped in; lanes[0]
 * holds the shared files. */
static void remove_all(struct host_run *lanes, unsigned nlanes, const char *wname)
{
	struct host_run *h = &lanes[0];
	char name[48];
	uint32_t i;
	int dfd;

	for (i = 0; i < nlanes; i++)
		if (lanes[i].dir.fd >= 0)
			close(lanes[i].dir.fd);
	dfd = openat(h->wdir, "dir", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		for (i = 0; i < h->cfg->dir_entries; i++) {
			snprintf(name, sizeof(name), "f%06u", i);
			unlinkat(dfd, name, 0);
		}
		close(dfd);
		unlinkat(h->wdir, "dir", AT_REMOVEDIR);
	}
	if (h->fd >= 0)
		close(h->fd);
	if (h->path_fd >= 0)
		close(h->path_fd);
	unlinkat(h->wdir, "data", 0);
	for (i = 0; i < nlanes; i++) {
		/* A create-unlink step stopped between its calls leaves its name. */
		if (lanes[i].names) {
			snprintf(name, sizeof(name), "cu-%u-%llu", i,
				 (unsigned long long)lanes[i].names - 1);
			unlinkat(h->wdir, name, 0);
		}
		free(lanes[i].dir.seen);
		free(lanes[i].dir.dents);
		free(lanes[i].buf);
	}
	close(h->wdir);
	rmdir(wname);
}

/* CPU of the calling thread so far: a lane's own, whatever the others do. */
static double thread_cpu_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/*
 * CPU per fill of one block, timed after the run on the same buffer and
 * offsets as the loop's: the loop's own CPU holds h->fills of them, work a
 * daemon never does (the driver fills a WRITE's data), so a floor under a
 * daemon is the loop's CPU less this. Timed apart, not per step: a clock
 * read around each fill would cost the loop more than a 4 KiB fill.
 */
#define FILL_TIMING_US 20000.0

static double fill_cpu_us_each(struct host_run *h)
{
	uint32_t bs = h->cfg->block_size;
	double t0 = thread_cpu_us(), t; /* as the lanes' */
	uint64_t n = 0;

	do {
		for (unsigned i = 0; i < 16; i++, n++)
			fc_pattern_fill(h->buf, (n % h->nblocks) * bs, bs);
		t = thread_cpu_us() - t0;
	} while (t < FILL_TIMING_US);
	return t / (double)n;
}

/* What the lanes share while they run: the window and the --ops count. */
struct host_window {
	uint64_t t_start;       /* the warmup ends here */
	uint64_t t_end;         /* UINT64_MAX with --ops */
	uint64_t ops_done;      /* atomic: measured calls of all lanes */
	bool stop;              /* atomic: a lane failed, the others end too */
};

/* One lane's thread and what it measured. */
struct host_lane {
	struct host_run h;
	struct host_window *win;
	struct load_result res; /* counts only */
	struct load_lat lat;
	uint64_t first_ns, last_ns; /* its measured interval; first 0: none */
	double cpu_us;              /* its thread's CPU over that interval */
	pthread_t thread;
	int ret;
};

static bool window_open(const struct host_lane *l, uint64_t now)
{
	const struct load_cfg *cfg = l->h.cfg;

	if (__atomic_load_n(&l->win->stop, __ATOMIC_RELAXED) || now >= l->win->t_end)
		return false;
	return !cfg->ops || __atomic_load_n(&l->win->ops_done, __ATOMIC_RELAXED) < cfg->ops;
}

/* Runs steps until the window closes (--seconds), or until the lanes'
 * measured steps made --ops calls (the last steps may make a few more: a
 * step is whole); in each lane the first step after the warmup starts its
 * measured interval, as host-pread always did. */
static void *lane_measure(void *arg)
{
	struct host_lane *l = arg;
	struct host_run *h = &l->h;
	uint64_t now;
	int ret = 0;

	for (now = load_now_ns(); window_open(l, now);) {
		struct host_count c = { 0 };
		uint64_t t0 = now;
		uint32_t i;

		ret = h->step(h, &c);
		now = load_now_ns();
		if (ret) {
			l->res.errors += ret == -EBADMSG;
			break;
		}
		if (!h->measuring) {
			if (now < l->win->t_start)
				continue;
			h->measuring = true;
			l->first_ns = now;
			l->cpu_us = -thread_cpu_us();
			continue;
		}
		/* A step of several calls: each its share of the step's time. */
		for (i = 0; i < c.ops && !ret; i++)
			ret = load_lat_add(&l->lat, (now - t0) / c.ops);
		l->res.lat_backwards += now < t0;
		if (ret)
			break;
		l->res.ops += c.ops;
		l->res.bytes += c.bytes;
		l->res.entries += c.entries;
		l->res.cycles += c.cycles;
		__atomic_fetch_add(&l->win->ops_done, c.ops, __ATOMIC_RELAXED);
	}
	l->last_ns = now;
	l->cpu_us = l->first_ns ? l->cpu_us + thread_cpu_us() : 0;
	if (ret)
		__atomic_store_n(&l->win->stop, true, __ATOMIC_RELAXED);
	l->ret = ret;
	return NULL;
}

/* Sleeps until the monotonic clock reads at least t (load_now_ns's). */
static void sleep_until(uint64_t t)
{
	for (uint64_t now = load_now_ns(); now < t; now = load_now_ns()) {
		uint64_t ns = t - now;
		struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000u),
				       .tv_nsec = (long)(ns % 1000000000u) };

		nanosleep(&ts, NULL);
	}
}

/* The lanes' figures as one run's: counts summed, latencies pooled, the
 * interval from the first lane's start to the last lane's end. */
static int lanes_merge(struct host_lane *lanes, unsigned n, struct load_result *res)
{
	struct load_lat all = { 0 };
	uint64_t first = UINT64_MAX, last = 0;
	int ret = 0;

	for (unsigned i = 0; i < n; i++) {
		struct host_lane *l = &lanes[i];

		res->ops += l->res.ops;
		res->bytes += l->res.bytes;
		res->entries += l->res.entries;
		res->cycles += l->res.cycles;
		res->errors += l->res.errors;
		res->lat_backwards += l->res.lat_backwards;
		res->daemon_cpu_us += l->cpu_us;
		if (l->first_ns) {
			first = l->first_ns < first ? l->first_ns : first;
			last = l->last_ns > last ? l->last_ns : last;
		}
		for (size_t k = 0; k < l->lat.n && !ret; k++)
			ret = load_lat_add(&all, l->lat.v[k]);
		if (!ret && l->ret && l->ret != -EBADMSG)
			ret = l->ret;
	}
	res->elapsed_s = last > first ? (double)(last - first) / 1e9 : 0;
	load_latency_summary(&all, res);
	free(all.v);
	return ret;
}

/* Starts the lanes, takes --watch-pid's CPU over the measured window, and
 * gathers the lanes' figures into res: the loop's CPU is the sum of the
 * lanes' threads' over their own measured intervals. */
static int measure(struct host_lane *lanes, unsigned n, struct host_window *win,
		   struct load_result *res)
{
	const struct load_cfg *cfg = lanes[0].h.cfg;
	unsigned started = 0;
	int64_t watch0, watch1;
	int ret = 0;

	win->t_start = load_now_ns() + (uint64_t)(cfg->warmup * 1e9);
	win->t_end = cfg->ops ? UINT64_MAX : win->t_start + (uint64_t)(cfg->seconds * 1e9);
	for (; started < n && !ret; started++) {
		lanes[started].win = win;
		ret = -pthread_create(&lanes[started].thread, NULL, lane_measure, &lanes[started]);
	}
	if (ret) {
		started--;
		__atomic_store_n(&win->stop, true, __ATOMIC_RELAXED);
	}
	sleep_until(win->t_start);
	watch0 = load_proc_cpu_us(cfg->watch_pid);
	for (unsigned i = 0; i < started; i++)
		pthread_join(lanes[i].thread, NULL);
	watch1 = load_proc_cpu_us(cfg->watch_pid);
	res->watch_cpu_us = watch0 >= 0 && watch1 >= 0 ? (double)(watch1 - watch0) : -1;
	if (!ret)
		ret = lanes_merge(lanes, started, res);
	res->load_cpu_us = res->daemon_cpu_us;
	for (unsigned i = 0; i < n; i++)
		free(lanes[i].lat.v);
	if (res->elapsed_s <= 0)
		res->daemon_cpu_us = res->load_cpu_us = -1;
	return ret;
}

/* Lane i: the shared files of lane 0, its own buffers and random offsets. */
static int lane_init(struct host_run *lanes, unsigned i, const struct load_workload *wl)
{
	struct host_run *h = &lanes[i];

	if (i)
		*h = (struct host_run){
			.cfg = lanes[0].cfg, .wdir = lanes[0].wdir, .fd = lanes[0].fd,
			.path_fd = lanes[0].path_fd, .file_ino = lanes[0].file_ino,
			.nblocks = lanes[0].nblocks, .seq = lanes[0].seq, .dir.fd = -1,
		};
	h->lane = i;
	h->step = wl->host;
	h->rng = (h->cfg->seed + (uint64_t)i * 0x9e3779b97f4a7c15ull) | 1;
	if (posix_memalign(&h->buf, 4096, h->cfg->block_size))
		return -ENOMEM;
	if (!wl->dir)
		return 0;
	h->dir.seen = calloc(1, (h->cfg->dir_entries + 7) / 8);
	h->dir.dents = malloc(HOST_DENTS_SIZE);
	return h->dir.seen && h->dir.dents ? 0 : -ENOMEM;
}

int host_run(const struct load_cfg *cfg, struct load_result *res)
{
	const struct load_workload *wl = load_workload_find(cfg->workload);
	unsigned n = cfg->host_threads ? cfg->host_threads : 1;
	struct host_window win = { 0 };
	struct host_lane *lanes;
	struct host_run *runs;
	uint64_t seq = 0;
	char wname[PATH_MAX];
	int ret = 0;

	memset(res, 0, sizeof(*res));
	if (!wl || !wl->host)
		return -EINVAL;
	if (cfg->queues != 1) {
		fprintf(stderr, "ferryfs-load: --host has no queues (--host-threads sets its depth); --queues does not apply\n");
		return -EINVAL;
	}
	if (snprintf(wname, sizeof(wname), "%s/ferryfs-host.%d", cfg->host_dir,
		     (int)getpid()) >= (int)sizeof(wname))
		return -ENAMETOOLONG;
	lanes = calloc(n, sizeof(*lanes));
	runs = calloc(n, sizeof(*runs));
	if (!lanes || !runs) {
		free(lanes);
		free(runs);
		return -ENOMEM;
	}
	runs[0] = (struct host_run){
		.cfg = cfg, .fd = -1, .path_fd = -1, .dir.fd = -1, .seq = &seq,
		.nblocks = cfg->file_size / cfg->block_size,
	};
	for (unsigned i = 1; i < n; i++)
		runs[i].dir.fd = -1;
	if (mkdir(wname, 0755) || (runs[0].wdir = open(wname, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		ret = -errno;
		fprintf(stderr, "ferryfs-load: make %s: %s\n", wname, strerror(errno));
		rmdir(wname);
		free(lanes);
		free(runs);
		return ret;
	}
	if (wl->data_file)
		ret = make_data_file(&runs[0]);
	if (!ret && wl->dir)
		ret = make_dir(&runs[0]);
	for (unsigned i = 0; i < n && !ret; i++)
		ret = lane_init(runs, i, wl);
	if (ret) {
		fprintf(stderr, "ferryfs-load: setting up %s in %s: %s\n", cfg->workload, wname,
			strerror(-ret));
	} else {
		struct evictor ev = { .fd = -1 };
		uint64_t fills = 0;

		for (unsigned i = 0; i < n; i++)
			lanes[i].h = runs[i];
		/* --cold: written data must reach the file system before the
		 * kernel can drop it. */
		if (cfg->cold_dir && wl->data_file) {
			char path[PATH_MAX + 8];

			snprintf(path, sizeof(path), "%s/data", wname);
			ret = fsync(runs[0].fd) ? -errno : evict_start(&ev, path);
		}
		if (!ret)
			ret = measure(lanes, n, &win, res);
		evict_stop(&ev);
		for (unsigned i = 0; i < n; i++) {
			fills += lanes[i].h.fills;
			runs[i] = lanes[i].h;  /* what remove_all must undo */
		}
		res->fill_cpu_us = fills ? (double)fills * fill_cpu_us_each(&runs[0]) : -1;
	}
	if (ret)
		res->fill_cpu_us = -1;
	remove_all(runs, n, wname);
	free(lanes);
	free(runs);
	return ret == -EBADMSG ? 0 : ret;
}
