/* A canary directory next to the shared one: anything the daemon does outside the share shows up in its snapshot. */
#include "canary.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int canary_setup(struct canary *c, const char *parent, const char *prefix)
{
	const char *tmp = parent ? parent : getenv("TMPDIR");
	char path[sizeof(c->canary) + 16];
	int fd, ret = 0;

	snprintf(c->base, sizeof(c->base), "%s/%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", prefix);
	if (!mkdtemp(c->base))
		return -errno;
	snprintf(c->share, sizeof(c->share), "%s/share", c->base);
	snprintf(c->canary, sizeof(c->canary), "%s/canary", c->base);
	if (mkdir(c->share, 0755) < 0 || mkdir(c->canary, 0755) < 0)
		return -errno;
	snprintf(path, sizeof(path), "%s/secret", c->canary);
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (write(fd, "canary", 6) != 6)
		ret = -EIO;
	close(fd);
	snprintf(path, sizeof(path), "%s/sub", c->canary);
	if (ret == 0 && mkdir(path, 0700) < 0)
		ret = -errno;
	return ret;
}

int canary_snapshot(const struct canary *c, char *out, size_t size)
{
	const char *dirs[] = { c->base, c->canary };
	size_t used = 0;

	out[0] = 0;
	for (unsigned i = 0; i < 2; i++) {
		DIR *d = opendir(dirs[i]);
		struct dirent *e;

		if (!d)
			return -errno;
		while ((e = readdir(d))) {
			struct stat st;

			/* base's parent is the busy host /tmp. */
			if (strcmp(e->d_name, "..") == 0)
				continue;
			/* The share changes: only its presence counts. */
			if (i == 0 && strcmp(e->d_name, "share") == 0) {
				used += (size_t)snprintf(out + used, size - used, "share;");
				continue;
			}
			if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
				closedir(d);
				return -errno;
			}
			used += (size_t)snprintf(out + used, size - used,
				"%s %llu %o %u %u %u %lld %ld.%ld %ld.%ld;", e->d_name,
				(unsigned long long)st.st_ino, st.st_mode, (unsigned)st.st_nlink,
				st.st_uid, st.st_gid, (long long)st.st_size,
				st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
				st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
			if (used >= size) {
				closedir(d);
				return -ENOSPC;
			}
		}
		closedir(d);
	}
	return 0;
}

void canary_remove(const struct canary *c)
{
	char cmd[3 * sizeof(c->base) + 64];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s/share' '%s/canary'; rmdir '%s' 2>/dev/null",
		 c->base, c->base, c->base);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", c->base);
}
