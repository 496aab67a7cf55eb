/* File handles for passthrough inodes (--inode-file-handles), decided per mount, and the mount fds open_by_handle_at() needs. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "backend/pt_internal.h"
#include "common/log.h"

#ifndef FUSE_SUPER_MAGIC
#define FUSE_SUPER_MAGIC 0x65735546
#endif

/* Found without a lock; the mutex only orders the rare additions. */
static int known_mount_fd(struct passthrough *pt, int mnt_id)
{
	unsigned n = atomic_load_explicit(&pt->nmounts, memory_order_acquire);

	for (unsigned i = 0; i < n; i++)
		if (pt->mounts[i].mnt_id == mnt_id)
			return pt->mounts[i].fd;
	return -ENOENT;
}

/* -errno when mount mnt_id was found to have no usable handles, else 0. */
static int known_no_handles(struct passthrough *pt, int mnt_id)
{
	unsigned n = atomic_load_explicit(&pt->nno_handles, memory_order_acquire);

	for (unsigned i = 0; i < n; i++)
		if (pt->no_handles[i].mnt_id == mnt_id)
			return pt->no_handles[i].err;
	return 0;
}

/* "MOUNT POINT (TYPE)" of mnt_id from our own mountinfo (a sandbox leaves
 * /proc only as proc_self_fd), for the one log line naming the mount; the
 * directory's path when the mount is not listed. */
static void mount_name(struct passthrough *pt, int mnt_id, int fd, char *buf,
		       size_t size)
{
	char line[4096], point[1024], type[64], fd_name[PROC_FD_NAME_MAX];
	const char *host = pt->opts.host_dir;
	int mfd = openat(pt->proc_self_fd, "../mountinfo", O_RDONLY | O_CLOEXEC);
	FILE *f = mfd < 0 ? NULL : fdopen(mfd, "r");
	bool line_start = true;
	ssize_t len;
	int id;

	if (!f && mfd >= 0)
		close(mfd);
	while (f && fgets(line, sizeof(line), f)) {
		const char *sep = strstr(line, " - ");
		bool at_start = line_start;

		/* A line longer than the buffer comes in pieces: only a
		 * line's first piece starts with its mount id. */
		line_start = strchr(line, '\n') != NULL;
		if (!at_start ||
		    sscanf(line, "%d %*d %*s %*s %1023s", &id, point) != 2 ||
		    id != mnt_id || !sep || sscanf(sep + 3, "%63s", type) != 1)
			continue;
		/* In a sandbox our root is the share: its mount points are
		 * the host's below the share's host path. */
		if (host && strcmp(host, pt->shared_dir) != 0)
			snprintf(buf, size, "%s%s (%s, mount %d)", host,
				 strcmp(point, "/") ? point : "", type, mnt_id);
		else
			snprintf(buf, size, "%s (%s, mount %d)", point, type, mnt_id);
		fclose(f);
		return;
	}
	if (f)
		fclose(f);
	pt_proc_fd_name(fd_name, fd);
	len = readlinkat(pt->proc_self_fd, fd_name, buf, size - 1);
	snprintf(buf + (len > 0 ? len : 0), size - (len > 0 ? len : 0),
		 " (mount %d)", mnt_id);
}

/*
 * Whether handles work on the mount of directory fd, whose handle is fh:
 * its new mount fd, or -errno. A FUSE mount is refused even when the
 * handle reopens now: the kernel resolves a FUSE handle only while it still
 * caches the inode unless the server exports (FUSE_EXPORT_SUPPORT, not
 * visible from here), and GlusterFS 10 was measured to give ESTALE once the
 * inode had been evicted, i.e. for a file the guest still holds.
 */
int pt_fd_on_fuse(int fd)
{
	struct statfs sfs;

	if (fstatfs(fd, &sfs) < 0)
		return -errno;
	return sfs.f_type == FUSE_SUPER_MAGIC;
}

static int probe_mount(struct passthrough *pt, int fd, struct file_handle *fh,
		       const char **why)
{
	int mfd, hfd, ret = pt_fd_on_fuse(fd);

	if (ret < 0)
		return ret;
	if (ret) {
		*why = "a FUSE mount: its handles may go stale once the host kernel forgets the inode (GlusterFS's do)";
		return -EOPNOTSUPP;
	}
	/* open_by_handle_at() refuses an O_PATH mount_fd (EBADF). Only
	 * directories are kept, so a deleted file's blocks are never pinned. */
	mfd = pt_reopen(pt, fd, O_RDONLY | O_DIRECTORY);
	if (mfd < 0)
		return mfd;
	hfd = open_by_handle_at(mfd, fh, O_PATH | O_CLOEXEC);
	if (hfd < 0) {
		ret = -errno;
		close(mfd);
		*why = ret == -EPERM ? "open_by_handle_at needs CAP_DAC_READ_SEARCH on the host" :
				       "open_by_handle_at cannot reopen its handles";
		return ret;
	}
	close(hfd);
	return mfd;
}

/* Records what the first directory met on mount mnt_id says about its
 * handles (name_err: name_to_handle_at()'s failure there, else 0), logging
 * once when they are unusable. The mount fd, or -errno. */
static int add_mount(struct passthrough *pt, int mnt_id, int fd, int name_err,
		     struct file_handle *fh)
{
	const char *why = NULL;
	char name[1200];
	unsigned n, nbad;
	int ret;

	pthread_mutex_lock(&pt->mounts_lock);
	ret = known_mount_fd(pt, mnt_id);
	if (ret >= 0)
		goto out;
	ret = known_no_handles(pt, mnt_id);
	if (ret < 0)
		goto out;
	n = atomic_load_explicit(&pt->nmounts, memory_order_relaxed);
	nbad = atomic_load_explicit(&pt->nno_handles, memory_order_relaxed);
	if (n == MOUNT_FDS_MAX || nbad == MOUNT_FDS_MAX) {
		ret = -EOPNOTSUPP;
		goto out;
	}
	if (name_err) {
		ret = name_err;
		why = "name_to_handle_at refuses";
	} else {
		ret = probe_mount(pt, fd, fh, &why);
	}
	mount_name(pt, mnt_id, fd, name, sizeof(name));
	if (ret >= 0) {
		pt->mounts[n].mnt_id = mnt_id;
		pt->mounts[n].fd = ret;
		atomic_store_explicit(&pt->nmounts, n + 1, memory_order_release);
		log_info("--inode-file-handles=%s: file handles on %s; inodes there "
			 "give back their fd while idle once half the fds are used",
			 pt->opts.file_handles == FILE_HANDLES_MANDATORY ? "mandatory" : "prefer",
			 name);
		goto out;
	}
	pt->no_handles[nbad].mnt_id = mnt_id;
	pt->no_handles[nbad].err = ret;
	atomic_store_explicit(&pt->nno_handles, nbad + 1, memory_order_release);
	/* prefer is the default: keeping fds on such a mount is its design. */
	if (pt->opts.file_handles == FILE_HANDLES_MANDATORY)
		log_err("--inode-file-handles=mandatory: no usable file handles on %s: %s (%s)",
			name, why ? why : "", strerror(-ret));
	else
		log_info("--inode-file-handles=prefer: no usable file handles on %s: %s (%s); "
			 "inodes there keep O_PATH fds", name, why ? why : "", strerror(-ret));
out:
	pthread_mutex_unlock(&pt->mounts_lock);
	return ret;
}

/*
 * The file handle an inode keeps for when it gives back its fd, or NULL in
 * *out to keep the fd: never with --inode-file-handles=never, and on a mount
 * without usable handles with prefer; mandatory fails there instead. A
 * mount is judged on the first directory met on it (the share's root at
 * start); a file on a mount not yet entered through a directory keeps its
 * fd (prefer) or fails (mandatory).
 */
int pt_handle_for_inode(struct passthrough *pt, int fd, const struct statx *stx,
			struct inode_handle_buf *hb, const struct inode_file_handle **out)
{
	bool stx_mnt = stx->stx_mask & STATX_MNT_ID;
	int mnt_id, name_err = 0, ret;

	*out = NULL;
	if (pt->opts.file_handles == FILE_HANDLES_NEVER)
		return 0;
	/* Known to have none: no name_to_handle_at() per lookup there. */
	ret = stx_mnt ? known_no_handles(pt, (int)stx->stx_mnt_id) : 0;
	if (ret < 0)
		goto none;
	hb->h.fh.handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(fd, "", &hb->h.fh, &mnt_id, AT_EMPTY_PATH) < 0) {
		name_err = -errno;
		ret = name_err;
		if (!stx_mnt)
			goto none;
		mnt_id = (int)stx->stx_mnt_id;
	}
	ret = name_err ? name_err : known_mount_fd(pt, mnt_id);
	if (ret < 0 && S_ISDIR(stx->stx_mode))
		ret = add_mount(pt, mnt_id, fd, name_err, &hb->h.fh);
	else if (ret == -ENOENT)
		ret = -EOPNOTSUPP;
	if (ret >= 0) {
		hb->h.mount_fd = ret;
		*out = &hb->h;
		return 0;
	}
none:
	return pt->opts.file_handles == FILE_HANDLES_MANDATORY ? ret : 0;
}

/*
 * Most inodes never give back their fd (an inode keeps it while fds are
 * plentiful), so with prefer a new inode takes no handle: a
 * name_to_handle_at() per lookup would be paid for handles hardly ever
 * used. The inode table takes it when the fd is about to go. But a mount is
 * judged on a directory, and a directory may keep its fd for long while
 * the files below it give theirs back: the first directory met on a mount
 * not judged yet is judged at once, as every lookup did before (once per
 * mount, and the share's own at start).
 */
int pt_handle_at_lookup(struct passthrough *pt, int fd, const struct statx *stx,
			struct inode_handle_buf *hb, const struct inode_file_handle **out)
{
	bool stx_mnt = stx->stx_mask & STATX_MNT_ID;
	int mnt_id = (int)stx->stx_mnt_id;

	*out = NULL;
	if (pt->opts.file_handles == FILE_HANDLES_PREFER &&
	    (!S_ISDIR(stx->stx_mode) ||
	     (stx_mnt && (known_mount_fd(pt, mnt_id) >= 0 || known_no_handles(pt, mnt_id) < 0))))
		return 0;
	return pt_handle_for_inode(pt, fd, stx, hb, out);
}

/* The inode table's inode_handle_fn: judged as at a lookup, from what the
 * inode kept of its statx. */
static int handle_of_inode_fd(void *arg, int fd, const struct inode_key *key, mode_t type,
			      struct inode_handle_buf *out)
{
	const struct inode_file_handle *handle;
	struct statx stx = {
		.stx_mask = key->mnt_id ? STATX_MNT_ID : 0,
		.stx_mnt_id = key->mnt_id,
		.stx_mode = (uint16_t)type,
	};
	int ret = pt_handle_for_inode(arg, fd, &stx, out, &handle);

	return ret < 0 ? ret : handle ? 0 : -EOPNOTSUPP;
}

void pt_start_lazy_handles(struct passthrough *pt)
{
	if (pt->opts.file_handles != FILE_HANDLES_NEVER)
		inode_table_take_handles(pt->inodes, handle_of_inode_fd, pt);
}

/* File handles need the file system's support and CAP_DAC_READ_SEARCH:
 * the share's own mount is judged at start rather than on the guest's first
 * lookup, so mandatory refuses to start there (logged by add_mount). */
int pt_check_file_handles(struct passthrough *pt, int root_fd)
{
	const struct inode_file_handle *handle;
	struct inode_handle_buf hb;
	struct statx stx;
	int ret;

	if (pt->opts.file_handles == FILE_HANDLES_NEVER)
		return 0;
	ret = pt_stat_fd(root_fd, &stx);
	if (ret < 0)
		return ret;
	return pt_handle_for_inode(pt, root_fd, &stx, &hb, &handle);
}

void pt_close_mount_fds(struct passthrough *pt)
{
	for (unsigned i = 0; i < pt->nmounts; i++)
		close(pt->mounts[i].fd);
	pthread_mutex_destroy(&pt->mounts_lock);
}
