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

/* What a probe of where data lands or comes from works on. */
struct probe_files {
	const char *dir;   /* the directory under test */
	int fd;            /* the data file made there, unlinked */
	uint8_t *shared;   /* slot_bytes of a shared memfd: memory of the kind a guest's is */
	uint8_t *priv;     /* slot_bytes of private memory: the host loop's own buffers */
	uint8_t *scratch;  /* one MiB to fill or check the file with */
};

/* The main of a probe whose one argument is the directory under test:
 * checks the command line (printing the usage, with what the probe does in
 * DIR, when it is wrong), opens the files as probe_files_open does,
 * allocates the private buffers, zeroed, and runs measure on them. The exit
 * status: 0, 1 when something failed (said on stderr), 2 for a wrong
 * command line. */
static inline int probe_main(int argc, char **argv, const char *name, const char *does_in_dir,
			     size_t slot_bytes, int (*measure)(const struct probe_files *pf))
{
	struct probe_files pf;
	const char *what;
	int ret;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR  (%s;\n       pins itself to CPUs 0 and 1)\n",
			name, does_in_dir);
		return 2;
	}
	pf.dir = argv[1];
	ret = probe_files_open(pf.dir, name, slot_bytes, &pf.fd, &pf.shared, &what);
	if (ret < 0) {
		fprintf(stderr, "%s: %s: %s\n", name, what, strerror(-ret));
		return 1;
	}
	pf.priv = aligned_alloc(4096, slot_bytes);
	pf.scratch = aligned_alloc(4096, 1u << 20);
	if (!pf.priv || !pf.scratch) {
		fprintf(stderr, "%s: private buffers: %s\n", name, strerror(ENOMEM));
		ret = -ENOMEM;
	} else {
		memset(pf.priv, 0, slot_bytes);
		ret = measure(&pf);
	}
	free(pf.priv);
	free(pf.scratch);
	munmap(pf.shared, slot_bytes);
	close(pf.fd);
	return ret < 0 ? 1 : 0;
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
