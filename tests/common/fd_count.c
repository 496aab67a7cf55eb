/* Counts this process's open file descriptors: a leak shows as growth between two counts. */
#include "fd_count.h"

#include <dirent.h>
#include <errno.h>

int fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -errno;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1;
}
