/* Guest half of adddir-current: what rename(2) and link(2) answer, by errno name, and the inode numbers of a tree. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The errno names the test expects to see; another prints as a number. */
static const char *errno_name(int e)
{
	switch (e) {
	case 0: return "OK";
	case EXDEV: return "EXDEV";
	case EROFS: return "EROFS";
	case EBUSY: return "EBUSY";
	case EEXIST: return "EEXIST";
	case ENOENT: return "ENOENT";
	case EACCES: return "EACCES";
	case EPERM: return "EPERM";
	case ENOTEMPTY: return "ENOTEMPTY";
	default: return NULL;
	}
}

static int say_errno(int rc)
{
	int e = rc < 0 ? errno : 0;
	const char *n = errno_name(e);

	if (n)
		printf("%s\n", n);
	else
		printf("errno %d\n", e);
	return 0;
}

/* inos: every object below the top once (no hard links in the test's
 * tree), so two paths with one number are a collision. */
static struct { uint64_t ino; dev_t dev; } *seen;
static size_t nseen, cap;

static int record(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)path;
	(void)flag;
	(void)f;
	if (nseen == cap) {
		cap = cap ? cap * 2 : 256;
		seen = realloc(seen, cap * sizeof(*seen));
		if (!seen)
			return 1;
	}
	seen[nseen].ino = st->st_ino;
	seen[nseen].dev = st->st_dev;
	nseen++;
	return 0;
}

static int by_ino(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int inos(const char *top)
{
	size_t dups = 0, devs = 1;

	if (nftw(top, record, 16, FTW_PHYS) != 0) {
		printf("walk failed: %s\n", strerror(errno));
		return 1;
	}
	for (size_t i = 1; i < nseen; i++)
		devs += seen[i].dev != seen[0].dev;
	qsort(seen, nseen, sizeof(*seen), by_ino);
	for (size_t i = 1; i < nseen; i++)
		dups += seen[i].ino == seen[i - 1].ino;
	printf("objects %zu duplicates %zu other-devices %zu\n", nseen, dups, devs - 1);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "rename"))
		return say_errno(rename(argv[2], argv[3]));
	if (argc == 4 && !strcmp(argv[1], "link"))
		return say_errno(link(argv[2], argv[3]));
	if (argc == 3 && !strcmp(argv[1], "inos"))
		return inos(argv[2]);
	fprintf(stderr, "usage: gadd rename|link A B | inos DIR\n");
	return 2;
}
