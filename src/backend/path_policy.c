/* Per-path policy: the syntax check of a --read-only PATH and its resolution below the share. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "backend/path_policy.h"

int path_list_add(struct path_list *l, const char *path, char *msg, size_t msg_size)
{
	const char *p = path;

	if (!path[0] || path[0] == '/') {
		snprintf(msg, msg_size, "'%s': a path relative to the shared directory is needed",
			 path);
		return -EINVAL;
	}
	if (strlen(path) >= PATH_MAX) {
		snprintf(msg, msg_size, "path too long");
		return -EINVAL;
	}
	/* Each component: "." and ".." would let a path name something
	 * outside the share or the share itself in disguise. */
	while (*p) {
		size_t len = strcspn(p, "/");

		if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.')) {
			snprintf(msg, msg_size, "'%s': no '.' or '..' component allowed", path);
			return -EINVAL;
		}
		p += len;
		while (*p == '/')
			p++;
	}
	if (l->count >= PATH_POLICY_MAX) {
		snprintf(msg, msg_size, "at most %d paths", PATH_POLICY_MAX);
		return -EINVAL;
	}
	l->paths[l->count++] = path;
	return 0;
}

int path_policy_resolve(int root_fd, const char *path, struct policy_root *out,
			const char **why)
{
	char comp[NAME_MAX + 1];
	const char *p = path;
	struct stat st;
	int fd = -1, ret = 0;

	*why = NULL;
	while (*p) {
		size_t len = strcspn(p, "/");
		int next;

		if (len > NAME_MAX) {
			*why = "a component is too long";
			ret = -ENAMETOOLONG;
			goto out;
		}
		memcpy(comp, p, len);
		comp[len] = '\0';
		/* O_NOFOLLOW on every component: a symlink on the way would
		 * lead anywhere on the host; the syntax check ruled out "..". */
		next = openat(fd < 0 ? root_fd : fd, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0) {
			ret = -errno;
			*why = "it does not exist below the shared directory";
			goto out;
		}
		if (fd >= 0)
			close(fd);
		fd = next;
		p += len;
		while (*p == '/')
			p++;
		if (*p) {
			if (fstat(fd, &st) < 0) {
				ret = -errno;
				goto out;
			}
			if (!S_ISDIR(st.st_mode)) {
				*why = "a component on the way is not a directory (symlinks are not followed)";
				ret = -ENOTDIR;
				goto out;
			}
		}
	}
	if (fd < 0 || fstat(fd, &st) < 0) {
		ret = fd < 0 ? -EINVAL : -errno;
		goto out;
	}
	/* As struct inode_key holds it (pt_key_from_statx). */
	out->dev = ((uint64_t)major(st.st_dev) << 32) | minor(st.st_dev);
	out->ino = st.st_ino;
out:
	if (fd >= 0)
		close(fd);
	return ret;
}
