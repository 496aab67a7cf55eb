/* read-cost: is io_uring cheaper than pread or preadv2 for 4 KiB random reads? CPU per read through each, io_uring in batches. */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cpu_time.h"

#define BLOCK 4096u
#define FILE_SIZE (64u << 20)
#define READS 400000u
#define MAX_BATCH 16u

static uint64_t next_offset(uint64_t *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return (*state % (FILE_SIZE / BLOCK)) * BLOCK;
}

static int fill_file(int fd)
{
	static char chunk[1 << 20];

	memset(chunk, 0x5a, sizeof(chunk));
	for (uint64_t off = 0; off < FILE_SIZE; off += sizeof(chunk))
		if (pwrite(fd, chunk, sizeof(chunk), (off_t)off) != (ssize_t)sizeof(chunk))
			return -errno;
	return 0;
}

static int time_sync(int fd, char *buf, int use_preadv2, double *us)
{
	uint64_t rng = 1;
	double t0 = cpu_time_us(RUSAGE_SELF);

	for (unsigned i = 0; i < READS; i++) {
		struct iovec v = { buf + (i % MAX_BATCH) * BLOCK, BLOCK };
		off_t off = (off_t)next_offset(&rng);
		ssize_t r = use_preadv2 ? preadv2(fd, &v, 1, off, 0) :
			    pread(fd, v.iov_base, BLOCK, off);

		if (r != (ssize_t)BLOCK)
			return r < 0 ? -errno : -EIO;
	}
	*us = (cpu_time_us(RUSAGE_SELF) - t0) / READS;
	return 0;
}

static int time_uring(int fd, char *buf, unsigned batch, unsigned flags, double *us)
{
	struct io_uring ring;
	struct iovec vecs[MAX_BATCH];
	uint64_t rng = 1;
	double t0;
	int ret;

	ret = io_uring_queue_init(2 * MAX_BATCH, &ring, flags);
	if (ret < 0)
		return ret;
	t0 = cpu_time_us(RUSAGE_SELF);
	for (unsigned i = 0; i < READS && ret >= 0; i += batch) {
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;

		for (unsigned j = 0; j < batch; j++) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

			vecs[j] = (struct iovec){ buf + j * BLOCK, BLOCK };
			io_uring_prep_readv(sqe, fd, &vecs[j], 1, next_offset(&rng));
		}
		ret = io_uring_submit_and_wait(&ring, batch);
		io_uring_for_each_cqe(&ring, head, cqe) {
			if (cqe->res != (int)BLOCK)
				ret = cqe->res < 0 ? cqe->res : -EIO;
			seen++;
		}
		io_uring_cq_advance(&ring, seen);
	}
	*us = (cpu_time_us(RUSAGE_SELF) - t0) / READS;
	io_uring_queue_exit(&ring);
	return ret < 0 ? ret : 0;
}

int main(int argc, char **argv)
{
	static const unsigned batches[] = { 1, 4, 16 };
	char path[4096], *buf = NULL;
	double us;
	int fd, ret;

	if (argc != 2) {
		fprintf(stderr, "usage: read-cost DIR  (writes a 64 MiB file there, reads it, removes it)\n");
		return 2;
	}
	snprintf(path, sizeof(path), "%s/read-cost.XXXXXX", argv[1]);
	fd = mkstemp(path);
	if (fd < 0) {
		fprintf(stderr, "read-cost: %s: %s\n", path, strerror(errno));
		return 2;
	}
	ret = fill_file(fd);
	if (!ret && posix_memalign((void **)&buf, BLOCK, MAX_BATCH * BLOCK))
		ret = -ENOMEM;
	if (!ret)
		ret = time_sync(fd, buf, 0, &us);
	if (!ret)
		printf("pread                      %.3f us/read\n", us);
	if (!ret)
		ret = time_sync(fd, buf, 1, &us);
	if (!ret)
		printf("preadv2                    %.3f us/read\n", us);
	for (unsigned b = 0; !ret && b < sizeof(batches) / sizeof(batches[0]); b++) {
		ret = time_uring(fd, buf, batches[b], 0, &us);
		if (!ret)
			printf("io_uring, %2u per enter     %.3f us/read\n", batches[b], us);
	}
	if (!ret)
		ret = time_uring(fd, buf, MAX_BATCH, IORING_SETUP_SINGLE_ISSUER |
				 IORING_SETUP_DEFER_TASKRUN, &us);
	if (!ret)
		printf("io_uring, 16, defer_taskrun %.3f us/read\n", us);
	if (ret)
		fprintf(stderr, "read-cost: %s\n", strerror(-ret));
	free(buf);
	close(fd);
	unlink(path);
	return ret ? 1 : 0;
}
