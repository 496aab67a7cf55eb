/* ferryfs-load --host: any workload as the host's own loop of system calls in a directory, one thread; the bound for any daemon. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

	h->dir.seen = calloc(1, (h->cfg->dir_entries + 7) / 8);
	h->dir.dents = malloc(HOST_DENTS_SIZE);
	if (!h->dir.seen || !h->dir.dents)
		return -ENOMEM;
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

/* Removes what the run made, whatever state it stopped in. */
static void remove_all(struct host_run *h, const char *wname)
{
	char name[32];
	uint32_t i;
	int dfd;

	if (h->dir.fd >= 0)
		close(h->dir.fd);
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
	/* A create-unlink step stopped between its calls leaves its name. */
	if (h->names) {
		snprintf(name, sizeof(name), "cu-%llu", (unsigned long long)h->names - 1);
		unlinkat(h->wdir, name, 0);
	}
	close(h->wdir);
	rmdir(wname);
	free(h->dir.seen);
	free(h->dir.dents);
	free(h->buf);
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
	double t0 = load_self_cpu_us(), t; /* as the loop's: one thread */
	uint64_t n = 0;

	do {
		for (unsigned i = 0; i < 16; i++, n++)
			fc_pattern_fill(h->buf, (n % h->nblocks) * bs, bs);
		t = load_self_cpu_us() - t0;
	} while (t < FILL_TIMING_US);
	return t / (double)n;
}

/* Runs steps until the window closes (--seconds), or until the steps it
 * measured made --ops calls (the last step may make a few more: a step
 * is whole); the first step after the warmup starts the measured
 * interval, as host-pread always did. */
static int measure(struct host_run *h, host_step_fn *step, struct load_result *res)
{
	const struct load_cfg *cfg = h->cfg;
	uint64_t t_start = load_now_ns() + (uint64_t)(cfg->warmup * 1e9), t_end, now;
	struct load_lat lat = { 0 };
	double cpu0 = 0;
	int64_t watch0 = -1, watch1;
	int ret = 0;

	t_end = cfg->ops ? UINT64_MAX : t_start + (uint64_t)(cfg->seconds * 1e9);
	for (now = load_now_ns(); now < t_end && !(cfg->ops && res->ops >= cfg->ops);) {
		struct host_count c = { 0 };
		uint64_t t0 = now;
		uint32_t i;

		ret = step(h, &c);
		now = load_now_ns();
		if (ret) {
			res->errors += ret == -EBADMSG;
			break;
		}
		if (!h->measuring) {
			if (now < t_start)
				continue;
			h->measuring = true;
			t_start = now;
			cpu0 = load_self_cpu_us();
			watch0 = load_proc_cpu_us(cfg->watch_pid);
			continue;
		}
		/* A step of several calls: each its share of the step's time. */
		for (i = 0; i < c.ops && !ret; i++)
			ret = load_lat_add(&lat, (now - t0) / c.ops);
		res->lat_backwards += now < t0;
		if (ret)
			break;
		res->ops += c.ops;
		res->bytes += c.bytes;
		res->entries += c.entries;
		res->cycles += c.cycles;
	}
	res->elapsed_s = h->measuring ? (double)(now - t_start) / 1e9 : 0;
	res->daemon_cpu_us = h->measuring ? load_self_cpu_us() - cpu0 : -1;
	res->load_cpu_us = res->daemon_cpu_us;
	watch1 = load_proc_cpu_us(cfg->watch_pid);
	res->watch_cpu_us = watch0 >= 0 && watch1 >= 0 ? (double)(watch1 - watch0) : -1;
	load_latency_summary(&lat, res);
	free(lat.v);
	return ret == -EBADMSG ? 0 : ret;
}

int host_run(const struct load_cfg *cfg, struct load_result *res)
{
	const struct load_workload *wl = load_workload_find(cfg->workload);
	struct host_run h = {
		.cfg = cfg, .fd = -1, .path_fd = -1, .dir.fd = -1, .rng = cfg->seed | 1,
		.nblocks = cfg->file_size / cfg->block_size,
	};
	char wname[PATH_MAX];
	int ret;

	memset(res, 0, sizeof(*res));
	if (!wl || !wl->host)
		return -EINVAL;
	if (cfg->queues != 1) {
		fprintf(stderr, "ferryfs-load: --host is one thread; --queues does not apply\n");
		return -EINVAL;
	}
	if (snprintf(wname, sizeof(wname), "%s/ferryfs-host.%d", cfg->host_dir,
		     (int)getpid()) >= (int)sizeof(wname))
		return -ENAMETOOLONG;
	if (mkdir(wname, 0755) || (h.wdir = open(wname, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		ret = -errno;
		fprintf(stderr, "ferryfs-load: make %s: %s\n", wname, strerror(errno));
		rmdir(wname);
		return ret;
	}
	ret = posix_memalign(&h.buf, 4096, cfg->block_size) ? -ENOMEM : 0;
	if (!ret && wl->data_file)
		ret = make_data_file(&h);
	if (!ret && wl->dir)
		ret = make_dir(&h);
	if (ret)
		fprintf(stderr, "ferryfs-load: setting up %s in %s: %s\n", cfg->workload, wname,
			strerror(-ret));
	else
		ret = measure(&h, wl->host, res);
	res->fill_cpu_us = h.fills ? (double)h.fills * fill_cpu_us_each(&h) : -1;
	remove_all(&h, wname);
	return ret;
}
