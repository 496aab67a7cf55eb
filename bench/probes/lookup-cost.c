/* lookup-cost: what does a name lookup cost the host when made as ferryfs-load's lookup workload makes it (statx of a present and a missing name in turn): the floor under a daemon's LOOKUP. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cpu_time.h"

#define LOOKUPS 400000u
int main(int argc, char **argv)
{
	char dir[4096], name[64];
	struct statx stx;
	double t0, hit_us, miss_us, both_us;
	unsigned long long misses = 0;
	int dfd, fd;

	if (argc != 2) {
		fprintf(stderr, "usage: lookup-cost DIR   (a scratch directory is made in DIR)\n");
		return 2;
	}
	snprintf(dir, sizeof(dir), "%s/lookup-cost.XXXXXX", argv[1]);
	if (!mkdtemp(dir)) {
		perror(dir);
		return 2;
	}
	dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	fd = openat(dfd, "data", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	if (dfd < 0 || fd < 0) {
		perror("setup");
		return 2;
	}
	close(fd);

	t0 = cpu_time_us(RUSAGE_SELF);
	for (unsigned i = 0; i < LOOKUPS; i++)
		statx(dfd, "data", AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &stx);
	hit_us = (cpu_time_us(RUSAGE_SELF) - t0) / LOOKUPS;
	t0 = cpu_time_us(RUSAGE_SELF);
	for (unsigned i = 0; i < LOOKUPS; i++) {
		/* A new name each time, as the workload's "missing-N". */
		snprintf(name, sizeof(name), "missing-%llu", misses++);
		statx(dfd, name, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &stx);
	}
	miss_us = (cpu_time_us(RUSAGE_SELF) - t0) / LOOKUPS;
	t0 = cpu_time_us(RUSAGE_SELF);
	for (unsigned i = 0; i < LOOKUPS; i++) {
		if (i & 1) {
			snprintf(name, sizeof(name), "missing-%llu", misses++);
			statx(dfd, name, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &stx);
		} else {
			statx(dfd, "data", AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &stx);
		}
	}
	both_us = (cpu_time_us(RUSAGE_SELF) - t0) / LOOKUPS;
	printf("%s: statx of a present name %.2f us, of a missing name %.2f us, in turn %.2f us of CPU each\n",
	       argv[1], hit_us, miss_us, both_us);
	unlinkat(dfd, "data", 0);
	close(dfd);
	rmdir(dir);
	return 0;
}
