/* Several host directories under one share (--add-dir): their roots held at start, NAME at the share's root, and ".." kept inside each. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/pt_internal.h"
#include "common/log.h"

uint32_t pt_area_named(const struct passthrough *pt, const struct inode *dir, const char *name)
{
	int i;

	if (!pt->n_areas || dir->nodeid != FUSE_ROOT_ID)
		return 0;
	i = added_dir_find(&pt->opts.added_dirs, name, strlen(name));
	return i < 0 ? 0 : (uint32_t)i + 1;
}

/* Deeper than this a walk up gives up and says "outside". */
#define AREA_WALK_DEPTH 4096

int pt_area_contains(struct passthrough *pt, uint32_t area, int fd)
{
	const struct inode_key *top = &pt->areas[area - 1].root->key;
	struct inode_key key, up_key;
	struct statx stx;
	int ret = -EACCES, cur = dup(fd);

	if (cur < 0)
		return -errno;
	for (int depth = 0; depth < AREA_WALK_DEPTH; depth++) {
		int up;

		if (pt_stat_fd(cur, &stx) < 0)
			break;
		pt_key_from_statx(&stx, &key);
		if (key.ino == top->ino && key.dev == top->dev) {
			ret = 0;
			break;
		}
		up = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (up < 0)
			break;
		close(cur);
		cur = up;
		/* The host's root is its own parent: the walk left the dir. */
		if (pt_stat_fd(cur, &stx) < 0)
			break;
		pt_key_from_statx(&stx, &up_key);
		if (up_key.ino == key.ino && up_key.dev == key.dev)
			break;
	}
	close(cur);
	return ret;
}

/* One added dir: its fd (the daemon's, or opened here) becomes the root
 * inode of area, with one request ref held until pt_areas_free. */
static int setup_area(struct passthrough *pt, int root_fd, uint32_t area, struct added_dir *d)
{
	char name[NAME_MAX + 1];
	struct inode_key key;
	struct statx stx;
	int ret, fd = d->opened ? d->fd : open(d->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);

	d->opened = false;      /* ours now, whatever happens */
	if (fd < 0) {
		ret = -errno;
		log_err("--add-dir: cannot open %s: %s", d->dir, strerror(errno));
		return ret;
	}
	memcpy(name, d->name, d->name_len);
	name[d->name_len] = '\0';
	/* A NAME the shared dir has already would hide that entry from the
	 * guest, which is better said at start than found later. */
	if (faccessat(root_fd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
		log_err("--add-dir=%s: the shared directory has an entry '%s' already",
			name, name);
		ret = -EEXIST;
		goto close_fd;
	}
	ret = pt_stat_fd(fd, &stx);
	if (ret == 0 && !S_ISDIR(stx.stx_mode))
		ret = -ENOTDIR;
	if (ret < 0) {
		log_err("--add-dir=%s: %s: %s", name, d->dir, strerror(-ret));
		goto close_fd;
	}
	ret = fd_budget_take(&pt->fds);
	if (ret < 0)
		goto close_fd;
	pt_key_from_statx(&stx, &key);
	key.area = area;
	/* No file handle: the ref held keeps the fd open for good. */
	return inode_lookup_add(pt->inodes, fd, &key, S_IFDIR, NULL, d->read_only,
				&pt->areas[area - 1].root);

close_fd:
	close(fd);
	return ret;
}

int pt_areas_setup(struct passthrough *pt, int root_fd)
{
	struct added_dir_list *l = &pt->opts.added_dirs;
	int ret = 0;

	if (l->count == 0)
		return 0;
	pt->ino_remap = malloc(sizeof(*pt->ino_remap));
	if (!pt->ino_remap)
		ret = -ENOMEM;
	else
		ino_remap_init(pt->ino_remap);
	for (unsigned i = 0; i < l->count && ret == 0; i++) {
		ret = setup_area(pt, root_fd, i + 1, &l->dirs[i]);
		if (ret == 0) {
			pt->areas[i].host_ino = pt->areas[i].root->key.ino;
			pt->areas[i].read_only = l->dirs[i].read_only;
			pt->n_areas = i + 1;
		}
	}
	/* On failure pt_areas_free closes the fds of the dirs not reached. */
	return ret;
}

void pt_areas_free(struct passthrough *pt)
{
	struct added_dir_list *l = &pt->opts.added_dirs;

	for (unsigned i = 0; i < pt->n_areas; i++)
		inode_put(pt->inodes, pt->areas[i].root);
	pt->n_areas = 0;
	for (unsigned i = 0; i < l->count; i++)
		if (l->dirs[i].opened) {
			close(l->dirs[i].fd);
			l->dirs[i].opened = false;
		}
	if (pt->ino_remap) {
		ino_remap_free(pt->ino_remap);
		free(pt->ino_remap);
		pt->ino_remap = NULL;
	}
}
