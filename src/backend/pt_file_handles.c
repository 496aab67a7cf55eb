/* File handles for passthrough inodes (--inode-file-handles), and the mount fds open_by_handle_at() needs. */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "backend/pt_internal.h"
#include "common/log.h"

/* Any fd on a mount serves open_by_handle_at() as its mount_fd. Only
 * directories are kept (a mount is entered through its root directory), so
 * a deleted file's blocks are never pinned. Found without a lock; the
 * mutex only orders the rare additions. */
static int mount_fd_for(struct passthrough *pt, int mnt_id, int fd, bool is_dir)
{
	unsigned n = atomic_load_explicit(&pt->nmounts, memory_order_acquire);
	int ret = -EOPNOTSUPP;

	for (unsigned i = 0; i < n; i++)
		if (pt->mounts[i].mnt_id == mnt_id)
			return pt->mounts[i].fd;
	if (!is_dir)
		return ret;
	pthread_mutex_lock(&pt->mounts_lock);
	n = atomic_load_explicit(&pt->nmounts, memory_order_relaxed);
	for (unsigned i = 0; i < n; i++) {
		if (pt->mounts[i].mnt_id == mnt_id) {
			ret = pt->mounts[i].fd;
			goto out;
		}
	}
	if (n == MOUNT_FDS_MAX)
		goto out;
	/* open_by_handle_at() refuses an O_PATH mount_fd (EBADF). */
	ret = pt_reopen(pt, fd, O_RDONLY | O_DIRECTORY);
	if (ret < 0)
		goto out;
	pt->mounts[n].mnt_id = mnt_id;
	pt->mounts[n].fd = ret;
	atomic_store_explicit(&pt->nmounts, n + 1, memory_order_release);
out:
	pthread_mutex_unlock(&pt->mounts_lock);
	return ret;
}

/*
 * The file handle a new inode keeps instead of its fd, or NULL in *out to
 * keep the fd: never with --inode-file-handles=never, and when the file
 * system has none (EOPNOTSUPP) with prefer; mandatory fails instead.
 */
int pt_handle_for_inode(struct passthrough *pt, int fd, mode_t type,
			struct pt_handle_buf *hb, const struct inode_handle **out)
{
	int mnt_id, ret;

	*out = NULL;
	if (pt->opts.file_handles == FILE_HANDLES_NEVER)
		return 0;
	hb->h.fh.handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(fd, "", &hb->h.fh, &mnt_id, AT_EMPTY_PATH) < 0)
		ret = -errno;
	else
		ret = mount_fd_for(pt, mnt_id, fd, S_ISDIR(type));
	if (ret >= 0) {
		hb->h.mount_fd = ret;
		*out = &hb->h;
		return 0;
	}
	return pt->opts.file_handles == FILE_HANDLES_MANDATORY ? ret : 0;
}

/* File handles need the file system's support and CAP_DAC_READ_SEARCH:
 * find out once, on the root, rather than on the guest's first lookup. */
int pt_check_file_handles(struct passthrough *pt, int root_fd)
{
	const struct inode_handle *handle;
	struct pt_handle_buf hb;
	int fd, ret;

	if (pt->opts.file_handles == FILE_HANDLES_NEVER)
		return 0;
	ret = pt_handle_for_inode(pt, root_fd, S_IFDIR, &hb, &handle);
	if (ret == 0 && handle) {
		fd = open_by_handle_at(handle->mount_fd, (struct file_handle *)&handle->fh,
				       O_PATH | O_CLOEXEC);
		if (fd >= 0) {
			close(fd);
			return 0;
		}
		ret = -errno;
	} else if (ret == 0) {
		ret = -EOPNOTSUPP;
	}
	if (pt->opts.file_handles == FILE_HANDLES_MANDATORY) {
		log_err("--inode-file-handles=mandatory: no usable file handles on %s: %s",
			pt->shared_dir, strerror(-ret));
		return ret;
	}
	log_warn("--inode-file-handles=prefer: no usable file handles on %s (%s); "
		 "inodes keep O_PATH fds", pt->shared_dir, strerror(-ret));
	pt->opts.file_handles = FILE_HANDLES_NEVER;
	return 0;
}

void pt_close_mount_fds(struct passthrough *pt)
{
	for (unsigned i = 0; i < pt->nmounts; i++)
		close(pt->mounts[i].fd);
	pthread_mutex_destroy(&pt->mounts_lock);
}
