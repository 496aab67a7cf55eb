/* copy-threads: can two threads that each copy half of every 1 MiB pread (or pwrite, --write) of a tmpfs file beat one thread, and by how much: the most that splitting a large READ or WRITE can gain. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MIB (1u << 20)
#define FILE_MIB 64u
#define SLOTS 16u          /* rotating destination buffers, as a queue of 16 */
#define READS 4000u

struct part {
	int fd;
	uint8_t *buf;
	unsigned index, parts;
	bool write;             /* pwrite into the file instead of pread */
	int err;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *copier(void *arg)
{
	struct part *p = arg;
	size_t len = MIB / p->parts, at = (size_t)p->index * len;

	for (unsigned i = 0; i < READS; i++) {
		off_t off = (off_t)(i % FILE_MIB) * MIB + (off_t)at;
		uint8_t *b = p->buf + (size_t)(i % SLOTS) * MIB + at;
		ssize_t n = p->write ? pwrite(p->fd, b, len, off) : pread(p->fd, b, len, off);

		if (n != (ssize_t)len) {
			p->err = errno ? errno : EIO;
			break;
		}
	}
	return NULL;
}

/* MiB/s of READS 1 MiB reads (writes) split among parts threads, or -1. */
static double run(int fd, uint8_t *buf, unsigned parts, bool write)
{
	struct part p[2];
	pthread_t t[2];
	double start = now_s();

	for (unsigned i = 0; i < parts; i++) {
		p[i] = (struct part){ .fd = fd, .buf = buf, .index = i, .parts = parts,
				   .write = write };
		if (pthread_create(&t[i], NULL, copier, &p[i]) != 0)
			return -1;
	}
	for (unsigned i = 0; i < parts; i++)
		pthread_join(t[i], NULL);
	for (unsigned i = 0; i < parts; i++)
		if (p[i].err)
			return -1;
	return READS / (now_s() - start);
}

int main(int argc, char **argv)
{
	char path[4096];
	uint8_t *buf;
	bool write = argc == 3 && !strcmp(argv[2], "--write");
	int fd;

	if (argc != 2 && !write) {
		fprintf(stderr, "usage: copy-threads DIR [--write]  (writes a 64 MiB file there, reads it\n"
			"       or with --write overwrites it, removes it)\n");
		return 2;
	}
	snprintf(path, sizeof(path), "%s/copy-threads.XXXXXX", argv[1]);
	fd = mkstemp(path);
	buf = aligned_alloc(4096, (size_t)SLOTS * MIB);
	if (fd < 0 || !buf) {
		fprintf(stderr, "copy-threads: %s: %s\n", path, strerror(errno));
		return 1;
	}
	unlink(path);
	memset(buf, 0x5a, (size_t)SLOTS * MIB);
	for (unsigned i = 0; i < FILE_MIB; i++)
		if (pwrite(fd, buf, MIB, (off_t)i * MIB) != (ssize_t)MIB) {
			fprintf(stderr, "copy-threads: write: %s\n", strerror(errno));
			return 1;
		}
	/* Alternated, so a change in the machine's load hits both. */
	for (unsigned round = 0; round < 3; round++) {
		double one = run(fd, buf, 1, write), two = run(fd, buf, 2, write);

		if (one < 0 || two < 0) {
			fprintf(stderr, "copy-threads: %s failed\n", write ? "write" : "read");
			return 1;
		}
		printf("round %u, %s: 1 thread %.0f MiB/s, 2 threads %.0f MiB/s (%.2fx)\n",
		       round + 1, write ? "pwrite" : "pread", one, two, two / one);
	}
	close(fd);
	free(buf);
	return 0;
}
