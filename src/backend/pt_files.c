/* Open files of the passthrough backend: open and create, and the ops on an open file's handle (read, write, sync, locks). */
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "backend/file_io.h"
#include "backend/pt_internal.h"

/* Host open flags for a guest OPEN/CREATE: only flags with a meaning for
 * an already resolved regular file pass; O_CREAT/O_EXCL/O_NOCTTY/O_PATH
 * and friends are the guest's kernel's business. */
static int host_open_flags(struct passthrough *pt, uint32_t guest_flags)
{
	int flags = guest_flags & (O_ACCMODE | O_APPEND | O_TRUNC | O_DIRECT |
				   O_DSYNC | O_SYNC | O_NOATIME | O_NONBLOCK |
				   O_LARGEFILE);

	if (!pt->opts.allow_direct_io)
		flags &= ~O_DIRECT;
	/* As virtiofsd: dropped unless asked for, since on the host it needs
	 * the file's owner or CAP_FOWNER. */
	if (!pt->opts.preserve_noatime)
		flags &= ~O_NOATIME;
	if (pt->writeback) {
		/* The guest's page cache reads around partial writes even
		 * through write-only files, and it places appends itself. */
		if ((flags & O_ACCMODE) == O_WRONLY)
			flags = (flags & ~O_ACCMODE) | O_RDWR;
		flags &= ~O_APPEND;
	}
	return flags;
}

uint32_t pt_fopen_flags(struct passthrough *pt, bool is_dir)
{
	switch (pt->opts.cache) {
	case CACHE_NEVER:
		return is_dir ? 0 : FOPEN_DIRECT_IO;
	case CACHE_METADATA:
		return is_dir ? FOPEN_CACHE_DIR | FOPEN_KEEP_CACHE : FOPEN_DIRECT_IO;
	case CACHE_ALWAYS:
		return is_dir ? FOPEN_CACHE_DIR | FOPEN_KEEP_CACHE : FOPEN_KEEP_CACHE;
	case CACHE_AUTO:
	default:
		return 0;
	}
}

static bool writes_data(int flags)
{
	return (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
}

/*
 * The host kernel clears security.capability on write, truncate and chown,
 * but not the name --xattrmap stores the guest's under; the daemon clears
 * that one itself (CVE-2021-20263, as QEMU's virtiofsd after its fix).
 * fd may be O_PATH: the /proc link reaches the inode either way.
 */
int pt_drop_mapped_capability(struct passthrough *pt, int fd)
{
	const char *name = pt->opts.xattrmap.capability_name;
	char path[PROC_FD_PATH_MAX];

	if (!name[0])
		return 0;
	pt_proc_fd_path(path, fd);
	if (removexattr(path, name) < 0 && errno != ENODATA && errno != EOPNOTSUPP)
		return -errno;
	return 0;
}

/*
 * Opens inode for I/O as the daemon: the guest's kernel has checked the
 * caller's access, also for the wider access writeback asks for (O_WRONLY
 * becomes O_RDWR). An O_TRUNC is the exception: with FUSE_ATOMIC_O_TRUNC
 * the guest's kernel leaves clearing suid/sgid to us. Under killpriv v2 it
 * says when (FUSE_OPEN_KILL_SUIDGID): the caller without CAP_FSETID then.
 * Without it, the host judges the caller (pt_host_judged_role).
 * The fd is counted against the budget (pt_close_fd gives it back).
 */
int pt_open_for_guest(struct passthrough *pt, const struct fuse_request_ctx *ctx,
		      struct inode *inode, int flags, uint32_t open_flags)
{
	bool as_truncater = flags & O_TRUNC;
	enum creds_role role = pt_host_judged_role(ctx);
	int fd, ret;

	if (pt->guest_kills_suidgid) {
		as_truncater = as_truncater && (open_flags & FUSE_OPEN_KILL_SUIDGID);
		role = CREDS_OWNER_NO_FSETID;
	}
	ret = fd_budget_take(&pt->fds);
	if (ret < 0)
		goto out;
	ret = as_truncater ? pt_as_caller(pt, ctx, role) : pt_check_caller(pt, ctx);
	if (ret < 0)
		goto give_back;
	/* One unit for both tries: the second replaces a failed first. */
	fd = pt_reopen(pt, inode->fd, flags);
	/* O_NOATIME needs ownership or CAP_FOWNER on the host, which
	 * --modcaps may take away; the guest's kernel checked its own side,
	 * so a refusal here only costs the atime. */
	if (fd == -EPERM && (flags & O_NOATIME))
		fd = pt_reopen(pt, inode->fd, flags & ~O_NOATIME);
	if (as_truncater)
		pt_as_daemon(pt);
	if (fd >= 0)
		return fd;
	ret = fd;
give_back:
	fd_budget_give_back(&pt->fds);
out:
	return ret;
}

/*
 * The reply of OPEN, OPENDIR and CREATE: a new handle takes fd (or dir),
 * its budget and the caller's inode ref, on failure too (open_file_add
 * releases them), and the guest is told its fh and caching.
 */
int pt_open_reply(struct passthrough *pt, struct inode *inode, int fd, DIR *dir,
		  struct fuse_open_out *out)
{
	bool is_dir = inode->type == S_IFDIR;
	uint64_t fh;
	int ret = open_file_add(pt->open_files, inode, fd, dir, &fh);

	if (ret < 0)
		return ret;
	memset(out, 0, sizeof(*out));
	out->fh = fh;
	out->open_flags = pt_fopen_flags(pt, is_dir);
	return 0;
}

int pt_open(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
	    const struct fuse_open_in *in, struct fuse_open_out *out)
{
	struct passthrough *pt = fs;
	struct inode *inode;
	int flags = host_open_flags(pt, in->flags);
	int fd, ret;

	if (pt->opts.readonly && writes_data(flags)) {
		ret = -EROFS;
		goto out;
	}
	ret = inode_get(pt->inodes, nodeid, &inode);
	if (ret < 0)
		goto out;
	/* Writes, fallocate and copy_file_range need a handle open for
	 * writing: refusing it here covers them all. */
	if (writes_data(flags)) {
		ret = pt_refuse_change(inode);
		if (ret < 0)
			goto put_inode;
	}
	/* Same answer as virtiofsd: the guest's kernel never sends OPEN for
	 * special files, so whoever does gets EBADF and nothing is opened. */
	if (!pt_openable_type(inode->type)) {
		ret = -EBADF;
		goto put_inode;
	}
	fd = pt_open_for_guest(pt, ctx, inode, flags, in->open_flags);
	if (fd < 0) {
		ret = fd;
		goto put_inode;
	}
	if (flags & O_TRUNC) {
		ret = pt_drop_mapped_capability(pt, fd);
		if (ret < 0) {
			pt_close_fd(pt, fd);
			goto put_inode;
		}
	}
	return pt_open_reply(pt, inode, fd, NULL, out);

put_inode:
	inode_put(pt->inodes, inode);
out:
	return ret;
}

/* CREATE and TMPFILE: the new file's fd is both the handle and, reopened
 * O_PATH, the inode, so both name the same file even if the name is
 * swapped right after. */
static int create_common(struct passthrough *pt, const struct fuse_request_ctx *ctx,
			 uint64_t parent, const char *name,
			 const struct fuse_create_in *in,
			 struct fuse_entry_out *entry, struct fuse_open_out *open_out)
{
	struct quota_ticket held = { 0 };
	struct inode *dir, *inode;
	struct statx stx;
	int flags, fd, ret;

	flags = host_open_flags(pt, in->flags) | O_CLOEXEC;
	if (name) {
		/* O_EXCL always: without it O_CREAT would open whatever the
		 * name is now, a FIFO or a symlink to a host path included. */
		flags |= O_CREAT | O_EXCL | O_NOFOLLOW;
	} else {
		flags |= O_TMPFILE | (in->flags & O_EXCL);
		if ((flags & O_ACCMODE) == O_RDONLY)
			flags = (flags & ~O_ACCMODE) | O_RDWR;
		name = ".";
	}
	ret = inode_get(pt->inodes, parent, &dir);
	if (ret < 0)
		goto out;
	ret = strcmp(name, ".") ? pt_name_policy(pt, dir, name, PT_NAME_MADE) :
				  pt_refuse_change(dir);
	if (ret < 0)
		goto put_dir;
	if (quota_on(pt->quota)) {
		ret = quota_reserve(pt->quota, QUOTA_NAME_BYTES, 1, &held);
		if (ret < 0)
			goto put_dir;
	}
	ret = fd_budget_take(&pt->fds);
	if (ret < 0)
		goto put_dir;
	ret = pt_begin_create(pt, ctx, in->umask);
	if (ret < 0)
		goto give_back;
	fd = openat(dir->fd, name, flags, in->mode & 07777);
	if (fd < 0)
		ret = -errno;
	pt_as_daemon(pt);
	if (ret < 0)
		goto give_back;
	if (quota_on(pt->quota)) {
		quota_inode_made(pt->quota, fd);
		quota_settle(pt->quota, dir->fd);
	}
	ret = pt_inode_from_fd(pt, dir, fd, &inode, &stx);
	if (ret < 0)
		goto close_fd;
	ret = pt_apply_secctx(pt, ctx, inode);
	if (ret < 0) {
		if (strcmp(name, "."))
			unlinkat(dir->fd, name, 0);
		inode_drop_lookup(pt->inodes, inode);
		inode_put(pt->inodes, inode);
		goto close_fd;
	}
	pt_fill_entry(pt, dir, inode, &stx, entry);
	ret = pt_open_reply(pt, inode, fd, NULL, open_out);
	if (ret < 0) {
		/* the guest will not hear of this nodeid */
		inode_forget(pt->inodes, entry->nodeid, 1);
		goto put_dir;
	}
	if (quota_on(pt->quota))
		quota_release(pt->quota, &held);
	inode_put(pt->inodes, dir);
	return 0;

close_fd:
	close(fd);
give_back:
	fd_budget_give_back(&pt->fds);
put_dir:
	if (quota_on(pt->quota))
		quota_release(pt->quota, &held);
	inode_put(pt->inodes, dir);
out:
	return ret;
}

int pt_create(void *fs, const struct fuse_request_ctx *ctx, uint64_t parent,
	      const char *name, const struct fuse_create_in *in,
	      struct fuse_entry_out *entry, struct fuse_open_out *open)
{
	int ret = pt_check_name(name);

	if (ret < 0)
		return ret;
	return create_common(fs, ctx, parent, name, in, entry, open);
}

int pt_tmpfile(void *fs, const struct fuse_request_ctx *ctx, uint64_t parent,
	       const struct fuse_create_in *in,
	       struct fuse_entry_out *entry, struct fuse_open_out *open)
{
	return create_common(fs, ctx, parent, NULL, in, entry, open);
}

ssize_t pt_read(void *fs, const struct fuse_request_ctx *ctx,
		uint64_t nodeid, const struct fuse_read_in *in,
		const struct iovec *dst, unsigned dst_cnt)
{
	struct passthrough *pt = fs;
	struct open_file *h;
	ssize_t ret;

	ret = pt_get_handle(pt, nodeid, in->fh, false, &h);
	if (ret < 0)
		return ret;
	return read_handle(pt->io, ctx, h, dst, dst_cnt, in->size, in->offset);
}

ssize_t pt_write(void *fs, const struct fuse_request_ctx *ctx,
		 uint64_t nodeid, const struct fuse_write_in *in,
		 const struct iovec *src, unsigned src_cnt)
{
	struct passthrough *pt = fs;
	bool kill_priv = (in->write_flags & FUSE_WRITE_KILL_SUIDGID) &&
			 pt->switch_creds;
	bool as_writer = false;
	struct quota_ticket held = { 0 };
	struct open_file *h;
	struct stat st;
	ssize_t ret;

	ret = pt_get_handle(pt, nodeid, in->fh, false, &h);
	if (ret < 0)
		return ret;
	/* Refused as a whole, before anything is written: the guest's file
	 * holds exactly what earlier writes were told. */
	if (quota_on(pt->quota)) {
		ret = quota_reserve_range(pt->quota, h->fd, in->offset, in->size, &held);
		if (ret < 0)
			goto put;
	}
	ret = pt_drop_mapped_capability(pt, h->fd);
	if (ret < 0)
		goto put;
	/*
	 * killpriv v2: the host kernel clears suid/sgid on write the way the
	 * guest's would, if the write runs as the guest's writer without
	 * CAP_FSETID; the writer's group decides whether a sgid bit without
	 * group execute stays. Only a file with a bit to lose pays for the
	 * switch; security.capability goes with any write anyway.
	 */
	if (kill_priv && fstat(h->fd, &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID))) {
		ret = pt_as_caller(pt, ctx, CREDS_OWNER_NO_FSETID);
		if (ret < 0)
			goto put;
		as_writer = true;
	}
	ret = iov_transfer(true, h->fd, src, src_cnt, in->size, in->offset, 0);
	if (as_writer)
		pt_as_daemon(pt);
put:
	if (quota_on(pt->quota)) {
		quota_settle(pt->quota, h->fd);
		quota_release(pt->quota, &held);
	}
	open_file_put(pt->open_files, h);
	return ret;
}

/* Closing any fd of a file drops the process's POSIX locks on it, which is
 * what close() in the guest means; the handle itself stays open. */
int pt_flush(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
	     const struct fuse_flush_in *in)
{
	struct passthrough *pt = fs;
	struct open_file *h;
	int fd, ret;

	ret = open_file_get(pt->open_files, in->fh, nodeid, &h);
	if (ret < 0)
		return ret;
	locks_drop_owner(pt->locks, nodeid, in->lock_owner);
	fd = dup(h->fd);
	ret = fd < 0 ? -errno : pt_errno_or(close(fd));
	open_file_put(pt->open_files, h);
	return ret;
}

int pt_release(void *fs, const struct fuse_request_ctx *ctx,
	       uint64_t nodeid, const struct fuse_release_in *in)
{
	struct passthrough *pt = fs;

	/* The guest skipped FLUSH and folds it into RELEASE. flock locks
	 * (FUSE_RELEASE_FLOCK_UNLOCK) go with the handle's fd. */
	if (in->release_flags & FUSE_RELEASE_FLUSH)
		locks_drop_owner(pt->locks, nodeid, in->lock_owner);
	return open_file_remove(pt->open_files, in->fh, nodeid);
}

int pt_fsync(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
	     const struct fuse_fsync_in *in)
{
	struct passthrough *pt = fs;
	struct open_file *h;
	int ret;

	ret = open_file_get(pt->open_files, in->fh, nodeid, &h);
	if (ret < 0)
		return ret;
	return sync_handle(pt->io, ctx, h, in->fsync_flags & FUSE_FSYNC_FDATASYNC);
}

int pt_fallocate(void *fs, const struct fuse_request_ctx *ctx,
		 uint64_t nodeid, const struct fuse_fallocate_in *in)
{
	struct passthrough *pt = fs;
	struct quota_ticket held = { 0 };
	struct open_file *h;
	int ret;

	ret = pt_get_handle(pt, nodeid, in->fh, false, &h);
	if (ret < 0)
		return ret;
	/* Only a hole punched or a range collapsed never allocates. */
	if (quota_on(pt->quota) && !(in->mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_COLLAPSE_RANGE)))
		ret = quota_reserve_range(pt->quota, h->fd, in->offset, in->length, &held);
	if (ret == 0)
		ret = pt_errno_or(fallocate(h->fd, in->mode, in->offset, in->length));
	if (quota_on(pt->quota)) {
		quota_settle(pt->quota, h->fd);
		quota_release(pt->quota, &held);
	}
	open_file_put(pt->open_files, h);
	return ret;
}

int pt_lseek(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
	     const struct fuse_lseek_in *in, struct fuse_lseek_out *out)
{
	struct passthrough *pt = fs;
	struct open_file *h;
	off_t off;
	int ret;

	ret = pt_get_handle(pt, nodeid, in->fh, false, &h);
	if (ret < 0)
		return ret;
	/* The fd's position is unused (all I/O is positioned), so moving it
	 * on a shared handle harms nobody. */
	off = lseek(h->fd, in->offset, in->whence);
	if (off < 0) {
		ret = -errno;
	} else {
		out->offset = off;
		ret = 0;
	}
	open_file_put(pt->open_files, h);
	return ret;
}

/* A copy holds room for what the source has from off_in on, not for the
 * length asked: callers ask for more than is there and get what is. */
static int reserve_copy(struct passthrough *pt, int src_fd, int dst_fd,
			const struct fuse_copy_file_range_in *in, struct quota_ticket *held)
{
	uint64_t len = in->len;
	struct stat st;

	if (fstat(src_fd, &st) < 0)
		return -errno;
	if ((uint64_t)st.st_size <= in->off_in)
		len = 0;
	else if (len > (uint64_t)st.st_size - in->off_in)
		len = (uint64_t)st.st_size - in->off_in;
	return quota_reserve_range(pt->quota, dst_fd, in->off_out, len, held);
}

ssize_t pt_copy_file_range(void *fs, const struct fuse_request_ctx *ctx,
			   uint64_t nodeid,
			   const struct fuse_copy_file_range_in *in)
{
	struct passthrough *pt = fs;
	struct quota_ticket held = { 0 };
	struct open_file *src, *dst;
	loff_t off_in = in->off_in, off_out = in->off_out;
	ssize_t ret;

	ret = pt_get_handle(pt, nodeid, in->fh_in, false, &src);
	if (ret < 0)
		return ret;
	ret = pt_get_handle(pt, in->nodeid_out, in->fh_out, false, &dst);
	if (ret < 0)
		goto put_src;
	if (quota_on(pt->quota)) {
		ret = reserve_copy(pt, src->fd, dst->fd, in, &held);
		if (ret < 0)
			goto put_dst;
	}
	ret = copy_file_range(src->fd, &off_in, dst->fd, &off_out, in->len,
			      in->flags);
	if (ret < 0)
		ret = -errno;
put_dst:
	if (quota_on(pt->quota)) {
		quota_settle(pt->quota, dst->fd);
		quota_release(pt->quota, &held);
	}
	open_file_put(pt->open_files, dst);
put_src:
	open_file_put(pt->open_files, src);
	return ret;
}

int pt_getlk(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
	     const struct fuse_lk_in *in, struct fuse_lk_out *out)
{
	struct passthrough *pt = fs;
	struct open_file *h;
	int ret;

	ret = pt_get_handle(pt, nodeid, in->fh, false, &h);
	if (ret < 0)
		return ret;
	ret = locks_getlk(pt->locks, h, nodeid, in, out);
	open_file_put(pt->open_files, h);
	return ret;
}

int pt_setlk(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
	     const struct fuse_lk_in *in, bool sleep)
{
	struct passthrough *pt = fs;
	struct open_file *h;
	int ret;

	ret = pt_get_handle(pt, nodeid, in->fh, false, &h);
	if (ret < 0)
		return ret;
	ret = locks_setlk(pt->locks, ctx, h, nodeid, in, sleep);
	/* Deferred: the waiter keeps our reference. */
	if (ret != FERRY_DEFERRED)
		open_file_put(pt->open_files, h);
	return ret;
}
