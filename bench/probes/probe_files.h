/* The host probes' files: an unlinked data file in the directory under test, queue slots in a shared memfd, the data pattern, and the median of three rounds. */
#ifndef FERRY_BENCH_PROBE_FILES_H
#define FERRY_BENCH_PROBE_FILES_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Makes DIR/NAME.XXXXXX, unlinked at once (so a killed probe leaves
 * nothing), and slot_bytes of a memfd mapped shared and zeroed: memory of
 * the kind a guest's is. 0, or -errno with what failed in *what. */
static inline int probe_files_open(const char *dir, const char *name, size_t slot_bytes,
				   int *fd, uint8_t **shared, const char **what)
{
	char path[4096];
	int mfd;

	snprintf(path, sizeof(path), "%s/%s.XXXXXX", dir, name);
	*what = dir;
	*fd = mkstemp(path);
	if (*fd < 0)
		return -errno;
	unlink(path);
	*what = "memfd";
	mfd = memfd_create(name, 0);
	if (mfd < 0 || ftruncate(mfd, (off_t)slot_bytes) < 0)
		goto fail;
	*shared = mmap(NULL, slot_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	if (*shared == MAP_FAILED)
		goto fail;
	close(mfd);
	memset(*shared, 0, slot_bytes);
	return 0;

fail:
	{
		int err = -errno;

		if (mfd >= 0)
			close(mfd);
		close(*fd);
		return err;
	}
}

/* The start of a probe whose one argument is the directory under test:
 * checks the command line (printing the usage, with what the probe does in
 * DIR, when it is wrong) and opens the probe's files as probe_files_open
 * does, saying what failed. 0, -EINVAL for a wrong command line, or -errno. */
static inline int probe_files_start(int argc, char **argv, const char *name, const char *does_in_dir,
				    size_t slot_bytes, int *fd, uint8_t **shared)
{
	const char *what;
	int ret;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR  (%s;\n       pins itself to CPUs 0 and 1)\n",
			name, does_in_dir);
		return -EINVAL;
	}
	ret = probe_files_open(argv[1], name, slot_bytes, fd, shared, &what);
	if (ret < 0)
		fprintf(stderr, "%s: %s: %s\n", name, what, strerror(-ret));
	return ret;
}

/* The word ferryfs-load puts at offset off of a file (fc_pattern): only
 * where it is written and read matters to the probes, not its values. */
static inline uint64_t probe_pattern(uint64_t off)
{
	return off * 0x9e3779b97f4a7c15ull;
}

/* Fills len bytes at b with the pattern of the file's bytes from off, every
 * word, as ferryfs-load's WRITEs and its fill phase do. */
static inline void probe_fill(uint8_t *b, uint64_t off, uint32_t len)
{
	for (uint32_t i = 0; i < len / 8; i++) {
		uint64_t w = probe_pattern(off + 8ull * i);

		memcpy(b + 8ull * i, &w, sizeof(w));
	}
}

static inline double median3(const double v[3])
{
	double a = v[0], b = v[1], c = v[2];

	return a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
}

#endif
