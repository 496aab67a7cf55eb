/* SYNCFS for the passthrough backend: the file system of one inode, and the other host mounts below the share the guest has used. */
#include <fcntl.h>
#include <unistd.h>

#include "backend/pt_internal.h"

/* syncfs() of the file system behind an O_PATH fd (which syncfs refuses):
 * a special file is never opened, so the share's root stands in for it. */
static int sync_fs_of(struct passthrough *pt, int path_fd, mode_t type)
{
	int fd, ret;

	if (pt_openable_type(type))
		fd = pt_reopen_counted(pt, path_fd, O_RDONLY | O_NONBLOCK);
	else
		fd = pt_reopen_counted(pt, inode_table_root(pt->inodes)->fd,
				       O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return fd;
	ret = pt_errno_or(syncfs(fd));
	pt_close_fd(pt, fd);
	return ret;
}

/* The host mounts other than the root's that the guest has inodes on. */
#define SYNC_MOUNTS_MAX 64

struct mount_scan {
	uint64_t root_dev, root_mnt_id;
	struct { uint64_t dev, mnt_id; int fd; mode_t type; } mounts[SYNC_MOUNTS_MAX];
	unsigned count;
	bool overflow;
};

/* Runs under a shard lock: only compares and dups, no I/O. */
static void note_mount(struct inode *inode, void *arg)
{
	struct mount_scan *scan = arg;
	unsigned i;

	if (!pt_openable_type(inode->type) ||
	    (inode->key.dev == scan->root_dev && inode->key.mnt_id == scan->root_mnt_id))
		return;
	for (i = 0; i < scan->count; i++)
		if (scan->mounts[i].dev == inode->key.dev &&
		    scan->mounts[i].mnt_id == inode->key.mnt_id)
			return;
	if (i == SYNC_MOUNTS_MAX) {
		scan->overflow = true;
		return;
	}
	/* A dup keeps the inode's file open after the shard lock is gone;
	 * at most SYNC_MOUNTS_MAX of them live at once, within FD_RESERVE
	 * (passthrough.c).
	 * An idle file-handle inode has no fd: then sync() must do. */
	scan->mounts[i].fd = inode->fd < 0 ? -1 : fcntl(inode->fd, F_DUPFD_CLOEXEC, 0);
	if (scan->mounts[i].fd < 0) {
		scan->overflow = true;
		return;
	}
	scan->mounts[i].dev = inode->key.dev;
	scan->mounts[i].mnt_id = inode->key.mnt_id;
	scan->mounts[i].type = inode->type;
	scan->count++;
}

/*
 * Without announced submounts the guest has one superblock and sends one
 * SYNCFS, for the root; every host mount below it the guest has touched
 * must be synced too, or data written there is not on disk when the guest
 * thinks it is.
 */
static int sync_other_mounts(struct passthrough *pt)
{
	struct inode *root = inode_table_root(pt->inodes);
	/* ~2 KiB on the stack: SYNCFS allocates nothing. */
	struct mount_scan scan = {
		.root_dev = root->key.dev, .root_mnt_id = root->key.mnt_id,
	};
	int ret = 0;

	inode_table_foreach(pt->inodes, note_mount, &scan);
	for (unsigned i = 0; i < scan.count; i++) {
		int r = sync_fs_of(pt, scan.mounts[i].fd, scan.mounts[i].type);

		if (r < 0 && ret == 0)
			ret = r;
		close(scan.mounts[i].fd);
	}
	/* More mounts than we track (or no fd to spare): sync them all. */
	if (scan.overflow)
		sync();
	return ret;
}

int pt_syncfs(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid)
{
	struct passthrough *pt = fs;
	struct inode *inode;
	int ret;

	ret = inode_get(pt->inodes, nodeid, &inode);
	if (ret < 0)
		return ret;
	ret = sync_fs_of(pt, inode->fd, inode->type);
	if (ret == 0 && !pt->submounts && inode == inode_table_root(pt->inodes))
		ret = sync_other_mounts(pt);
	inode_put(pt->inodes, inode);
	return ret;
}
