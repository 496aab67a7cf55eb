/* Per-path policy: the syntax check of a --read-only PATH and its resolution below the share. */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "backend/path_policy.h"
#include "common/array.h"

/* As struct inode_key holds a device (pt_key_from_statx). */
static uint64_t dev_key(dev_t dev)
{
	return ((uint64_t)major(dev) << 32) | minor(dev);
}

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

int path_policy_resolve(int root_fd, const char *path, bool link_ok, struct policy_root *out,
			int *fd_out, const char **why)
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
	/* Protecting the link itself would leave its target as it was,
	 * which is not what a user naming it means. */
	if (S_ISLNK(st.st_mode) && !link_ok) {
		*why = "it is a symlink: name what it points to, inside the share";
		ret = -ELOOP;
		goto out;
	}
	out->dev = dev_key(st.st_dev);
	out->ino = st.st_ino;
	if (fd_out) {
		*fd_out = fd;
		fd = -1;
	}
out:
	if (fd >= 0)
		close(fd);
	return ret;
}

/* A subtree deeper than this is not walked further; the start says so. */
#define LINK_WALK_DEPTH 256

static int links_add(struct policy_links *set, const struct stat *st)
{
	int ret = array_reserve((void **)&set->keys, &set->cap, set->count + 1,
				sizeof(*set->keys), 64);

	if (ret)
		return ret;
	set->keys[set->count].dev = dev_key(st->st_dev);
	set->keys[set->count].ino = st->st_ino;
	set->count++;
	return 0;
}

static int collect_below(struct policy_links *set, int dir_fd, unsigned depth)
{
	struct dirent *de;
	struct stat st;
	DIR *dir;
	int sub, ret = 0, fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	dir = fdopendir(fd);
	if (!dir) {
		ret = -errno;
		close(fd);
		return ret;
	}
	while (ret == 0 && (de = readdir(dir)) != NULL) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;       /* gone meanwhile */
		if (!S_ISDIR(st.st_mode)) {
			if (st.st_nlink > 1)
				ret = links_add(set, &st);
			continue;
		}
		if (depth + 1 >= LINK_WALK_DEPTH) {
			ret = -ELOOP;
			break;
		}
		sub = openat(fd, de->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0)
			continue;
		ret = collect_below(set, sub, depth + 1);
		close(sub);
	}
	closedir(dir);
	return ret;
}

int policy_links_collect(struct policy_links *set, int dir_fd)
{
	struct stat st;

	if (fstat(dir_fd, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return st.st_nlink > 1 ? links_add(set, &st) : 0;
	return collect_below(set, dir_fd, 0);
}

/* By inode number first, so a directory entry's d_ino alone (its device
 * not yet known) finds its candidates too. */
static int root_cmp(const void *a, const void *b)
{
	const struct policy_root *x = a, *y = b;

	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return x->dev < y->dev ? -1 : x->dev > y->dev;
}

static int ino_cmp(const void *a, const void *b)
{
	const struct policy_root *x = a, *y = b;

	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

void policy_links_seal(struct policy_links *set)
{
	if (set->count > 1)
		qsort(set->keys, set->count, sizeof(*set->keys), root_cmp);
}

bool policy_links_have(const struct policy_links *set, uint64_t dev, uint64_t ino)
{
	struct policy_root key = { .dev = dev, .ino = ino };

	return set->count &&
	       bsearch(&key, set->keys, set->count, sizeof(key), root_cmp) != NULL;
}

bool policy_set_may_have_ino(const struct policy_set *set, uint64_t ino)
{
	struct policy_root key = { .ino = ino };

	for (unsigned i = 0; i < set->n_roots; i++)
		if (set->roots[i].ino == ino)
			return true;
	return set->links.count &&
	       bsearch(&key, set->links.keys, set->links.count, sizeof(key), ino_cmp) != NULL;
}

void policy_links_free(struct policy_links *set)
{
	free(set->keys);
	memset(set, 0, sizeof(*set));
}
