/* ferryfs-load --host-pread: the read workloads with pread(2) on a host file, the bound for any daemon. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "load.h"
#include "measure.h"

#define HOST_FILE "ferryfs-host-pread.dat"
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

int host_pread_run(const struct load_cfg *cfg, struct load_result *res)
{
	bool random = !strcmp(cfg->workload, "randread");
	uint64_t nblocks = cfg->file_size / cfg->block_size;
	uint64_t rng = cfg->seed | 1, seq = 0, t_start, t_end, now;
	struct load_lat lat = { 0 };
	char path[PATH_MAX];
	double cpu0 = 0;
	bool measuring = false;
	void *buf = NULL;
	int fd, ret;

	memset(res, 0, sizeof(*res));
	if (strcmp(cfg->workload, "read") && !random) {
		fprintf(stderr, "ferryfs-load: --host-pread runs read and randread only\n");
		return -EINVAL;
	}
	if (cfg->queues != 1) {
		fprintf(stderr, "ferryfs-load: --host-pread is one thread; --queues does not apply\n");
		return -EINVAL;
	}
	if (snprintf(path, sizeof(path), "%s/%s", cfg->host_dir, HOST_FILE) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = -errno;
		fprintf(stderr, "ferryfs-load: create %s: %s\n", path, strerror(errno));
		return ret;
	}
	ret = fill_file(fd, nblocks * cfg->block_size);
	if (ret)
		goto out_unlink;
	if (posix_memalign(&buf, 4096, cfg->block_size)) {
		ret = -ENOMEM;
		goto out_unlink;
	}

	t_start = load_now_ns() + (uint64_t)(cfg->warmup * 1e9);
	t_end = t_start + (uint64_t)(cfg->seconds * 1e9);
	for (now = load_now_ns(); now < t_end;) {
		uint64_t blk = random ? load_xorshift(&rng) % nblocks : seq++ % nblocks;
		uint64_t off = blk * cfg->block_size, t0 = now;
		uint64_t bad;
		ssize_t n;

		/* The same poison and check as ferryfs-load's READs (see
		 * fc_pattern_verify), so the two do the same work per byte. */
		fc_pattern_poison(buf, off, cfg->block_size,
				  measuring ? FC_CHECK_STRIDE_SPARSE : FC_POISON_STRIDE_FULL);
		n = pread(fd, buf, cfg->block_size, (off_t)off);
		now = load_now_ns();
		if (n != (ssize_t)cfg->block_size ||
		    fc_pattern_verify(buf, off, cfg->block_size, !measuring, &bad)) {
			fprintf(stderr, "ferryfs-load: host pread at %llu: %s\n",
				(unsigned long long)off, n < 0 ? strerror(errno) : "wrong data");
			res->errors++;
			break;
		}
		if (!measuring) {
			if (now < t_start)
				continue;
			measuring = true;
			t_start = now;
			cpu0 = load_self_cpu_us();
			continue;
		}
		ret = load_lat_add(&lat, now - t0);
		if (ret)
			goto out_free;
		res->ops++;
		res->bytes += cfg->block_size;
	}
	res->elapsed_s = measuring ? (double)(now - t_start) / 1e9 : 0;
	res->daemon_cpu_us = measuring ? load_self_cpu_us() - cpu0 : -1;
	res->load_cpu_us = res->daemon_cpu_us;
	load_latency_summary(&lat, res);
out_free:
	free(lat.v);
	free(buf);
out_unlink:
	close(fd);
	unlink(path);
	return ret;
}
