/* Attributes of passthrough inodes: GETATTR, STATX, SETATTR, ACCESS and STATFS. */
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "backend/pt_internal.h"

/* The reply of GETATTR and SETATTR: the inode's attributes as they are now. */
static int attr_out(struct passthrough *pt, struct inode *inode,
		    struct fuse_attr_out *out)
{
	struct statx stx;
	int ret = pt_stat_fd(inode->fd, &stx);

	if (ret == 0) {
		memset(out, 0, sizeof(*out));
		out->attr_valid = pt->timeout_sec;
		out->attr_valid_nsec = pt->timeout_nsec;
		pt_attr_from_statx(pt, inode->key.area, &stx, &out->attr);
	}
	return ret;
}

int pt_getattr(void *fs, const struct fuse_request_ctx *ctx,
	       uint64_t nodeid, const struct fuse_getattr_in *in,
	       struct fuse_attr_out *out)
{
	struct passthrough *pt = fs;
	struct inode *inode;
	int ret;

	ret = inode_get(pt->inodes, nodeid, &inode);
	if (ret < 0)
		return ret;
	ret = attr_out(pt, inode, out);
	inode_put(pt->inodes, inode);
	return ret;
}

static struct fuse_sx_time sx_time(struct statx_timestamp t)
{
	return (struct fuse_sx_time){ .tv_sec = t.tv_sec, .tv_nsec = t.tv_nsec };
}

/*
 * FUSE_STATX: the host's statx of the inode, the fields the guest asked for
 * and the host has (btime where its file system keeps one), ids as GETATTR
 * shows them. Like GETATTR it reads the inode, not the open file in->fh
 * names: both are the same file. The host's device and whether the file is
 * a mount root there say nothing about the guest's mount, and stay out.
 */
int pt_statx(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
	     const struct fuse_statx_in *in, struct fuse_statx_out *out)
{
	const uint32_t served = STATX_BASIC_STATS | STATX_BTIME;
	struct passthrough *pt = fs;
	struct fuse_statx *sx = &out->stat;
	struct inode *inode;
	struct statx stx;
	uint32_t area;
	int ret;

	(void)ctx;
	ret = inode_get(pt->inodes, nodeid, &inode);
	if (ret < 0)
		return ret;
	area = inode->key.area;
	ret = pt_errno_or(statx(inode->fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW |
				(in->sx_flags & AT_STATX_SYNC_TYPE),
				in->sx_mask & served, &stx));
	inode_put(pt->inodes, inode);
	if (ret < 0)
		return ret;
	out->attr_valid = pt->timeout_sec;
	out->attr_valid_nsec = pt->timeout_nsec;
	sx->mask = stx.stx_mask & in->sx_mask & served;
	sx->blksize = stx.stx_blksize;
	sx->attributes_mask = stx.stx_attributes_mask & ~(uint64_t)STATX_ATTR_MOUNT_ROOT;
	sx->attributes = stx.stx_attributes & sx->attributes_mask;
	sx->nlink = stx.stx_nlink;
	sx->uid = idmap_to_guest(&pt->opts.uid_map, stx.stx_uid);
	sx->gid = idmap_to_guest(&pt->opts.gid_map, stx.stx_gid);
	sx->mode = stx.stx_mode;
	sx->ino = pt_guest_ino(pt, area, stx.stx_ino);
	sx->size = stx.stx_size;
	sx->blocks = stx.stx_blocks;
	sx->atime = sx_time(stx.stx_atime);
	sx->ctime = sx_time(stx.stx_ctime);
	sx->mtime = sx_time(stx.stx_mtime);
	if (sx->mask & STATX_BTIME)
		sx->btime = sx_time(stx.stx_btime);
	sx->rdev_major = stx.stx_rdev_major;
	sx->rdev_minor = stx.stx_rdev_minor;
	return 0;
}

/* FATTR_KILL_SUIDGID: the guest's kernel decided the bits must go (as a
 * local truncate by a non-CAP_FSETID caller would); sgid only matters
 * with group execute, as in the kernel. */
static int kill_suidgid(struct passthrough *pt, struct inode *inode)
{
	char name[PROC_FD_NAME_MAX];
	struct statx stx;
	mode_t mode;
	int ret = pt_stat_fd(inode->fd, &stx);

	if (ret < 0 || !S_ISREG(stx.stx_mode))
		return ret;
	mode = stx.stx_mode & 07777;
	if (!(mode & S_ISUID) && (mode & (S_ISGID | S_IXGRP)) != (S_ISGID | S_IXGRP))
		return 0;
	mode &= ~S_ISUID;
	if (mode & S_IXGRP)
		mode &= ~S_ISGID;
	pt_proc_fd_name(name, inode->fd);
	return pt_errno_or(fchmodat(pt->proc_self_fd, name, mode, 0));
}

static int truncate_inode(struct passthrough *pt, struct inode *inode,
			  int fh_fd, uint64_t size)
{
	int fd, ret;

	if (fh_fd >= 0)
		return pt_errno_or(ftruncate(fh_fd, size));
	if (inode->type == S_IFDIR)
		return -EISDIR;
	if (inode->type != S_IFREG)
		return -EINVAL;
	fd = pt_reopen_counted(pt, inode->fd, O_WRONLY);
	if (fd < 0)
		return fd;
	ret = pt_errno_or(ftruncate(fd, size));
	pt_close_fd(pt, fd);
	return ret;
}

static struct timespec guest_time(uint32_t valid, uint32_t set_bit,
				  uint32_t now_bit, uint64_t sec, uint32_t nsec)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = UTIME_OMIT };

	if (valid & now_bit) {
		ts.tv_nsec = UTIME_NOW;
	} else if (valid & set_bit) {
		ts.tv_sec = sec;
		ts.tv_nsec = nsec < 1000000000 ? nsec : 999999999;
	}
	return ts;
}

int pt_setattr(void *fs, const struct fuse_request_ctx *ctx,
	       uint64_t nodeid, const struct fuse_setattr_in *in,
	       struct fuse_attr_out *out)
{
	struct passthrough *pt = fs;
	uint32_t valid = in->valid;
	char name[PROC_FD_NAME_MAX];
	struct open_file *h = NULL;
	struct inode *inode;
	int fh_fd = -1;
	int ret;

	ret = inode_get(pt->inodes, nodeid, &inode);
	if (ret < 0)
		goto out;
	if ((pt->opts.readonly || inode->read_only) &&
	    (valid & (FATTR_MODE | FATTR_UID | FATTR_GID | FATTR_SIZE |
		      FATTR_ATIME | FATTR_MTIME | FATTR_ATIME_NOW |
		      FATTR_MTIME_NOW | FATTR_KILL_SUIDGID))) {
		ret = -EROFS;
		goto put_inode;
	}
	if (valid & FATTR_FH) {
		ret = open_file_get(pt->open_files, in->fh, nodeid, &h);
		if (ret < 0)
			goto put_inode;
		if (!h->dir)
			fh_fd = h->fd;
	}
	pt_proc_fd_name(name, inode->fd);

	/* The guest's kernel has checked ownership and write access, and
	 * stripped a set-group-ID bit its caller may not set; as the daemon,
	 * the host neither repeats the check nor strips again. */
	ret = pt_check_caller(pt, ctx);
	if (ret < 0)
		goto put_handle;
	if (valid & FATTR_MODE) {
		if (fh_fd >= 0)
			ret = pt_errno_or(fchmod(fh_fd, in->mode & 07777));
		else
			ret = pt_errno_or(fchmodat(pt->proc_self_fd, name,
						   in->mode & 07777, 0));
		if (ret < 0)
			goto attrs_out;
	}
	if (valid & (FATTR_UID | FATTR_GID)) {
		uint32_t uid = (uint32_t)-1, gid = (uint32_t)-1;

		if (valid & FATTR_UID)
			ret = idmap_to_host(&pt->opts.uid_map, in->uid, &uid);
		if (ret == 0 && (valid & FATTR_GID))
			ret = idmap_to_host(&pt->opts.gid_map, in->gid, &gid);
		if (ret < 0)
			goto attrs_out;
		ret = pt_errno_or(fchownat(inode->fd, "", uid, gid,
					   AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW));
		if (ret < 0)
			goto attrs_out;
	}
	if (valid & FATTR_SIZE) {
		/* Growing leaves a hole, which allocates nothing: there is
		 * nothing to refuse, only the blocks a shrink freed to count. */
		ret = truncate_inode(pt, inode, fh_fd, in->size);
		if (quota_on(pt->quota))
			quota_settle(pt->quota, inode->fd);
		if (ret < 0)
			goto attrs_out;
	}
	if (valid & (FATTR_ATIME | FATTR_MTIME | FATTR_ATIME_NOW | FATTR_MTIME_NOW)) {
		struct timespec ts[2] = {
			guest_time(valid, FATTR_ATIME, FATTR_ATIME_NOW,
				   in->atime, in->atimensec),
			guest_time(valid, FATTR_MTIME, FATTR_MTIME_NOW,
				   in->mtime, in->mtimensec),
		};

		if (fh_fd >= 0)
			ret = pt_errno_or(futimens(fh_fd, ts));
		else
			ret = pt_errno_or(utimensat(pt->proc_self_fd, name, ts, 0));
		if (ret < 0)
			goto attrs_out;
	}
attrs_out:
	if (ret == 0 && (valid & (FATTR_UID | FATTR_GID | FATTR_SIZE)))
		ret = pt_drop_mapped_capability(pt, inode->fd);
	if (ret == 0 && (valid & FATTR_KILL_SUIDGID) && !(valid & FATTR_MODE))
		ret = kill_suidgid(pt, inode);
	if (ret == 0)
		ret = attr_out(pt, inode, out);
put_handle:
	if (h)
		open_file_put(pt->open_files, h);
put_inode:
	inode_put(pt->inodes, inode);
out:
	return ret;
}

int pt_access(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
	      uint32_t mask)
{
	struct passthrough *pt = fs;
	struct inode *inode;
	int ret;

	ret = inode_get(pt->inodes, nodeid, &inode);
	if (ret < 0)
		goto out;
	/* The one op that asks the host's judgement of the caller (a client
	 * without default_permissions sends it): the caller's ids and no
	 * capability, so the host judges them as it would locally. */
	ret = pt_as_caller(pt, ctx, CREDS_CALLER_ONLY);
	if (ret < 0)
		goto put;
	/* AT_EACCESS: check the switched effective ids, not the real ones. */
	ret = pt_errno_or(faccessat(inode->fd, "", mask & (R_OK | W_OK | X_OK),
				    AT_EACCESS | AT_EMPTY_PATH));
	pt_as_daemon(pt);
	if (ret == 0 && (pt->opts.readonly || inode->read_only) && (mask & W_OK))
		ret = -EROFS;
put:
	inode_put(pt->inodes, inode);
out:
	return ret;
}

/* The quota's totals and what is left, in the host's units. */
static void statfs_quota(struct quota *q, struct fuse_kstatfs *out)
{
	struct quota_statfs s = {
		.blocks = out->blocks, .bfree = out->bfree, .bavail = out->bavail,
		.files = out->files, .ffree = out->ffree, .frsize = out->frsize,
	};

	quota_apply_statfs(q, &s);
	out->blocks = s.blocks;
	out->bfree = s.bfree;
	out->bavail = s.bavail;
	out->files = s.files;
	out->ffree = s.ffree;
}

int pt_statfs(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
	      struct fuse_kstatfs *out)
{
	struct passthrough *pt = fs;
	struct inode *inode;
	struct statvfs sv;
	int ret;

	ret = inode_get(pt->inodes, nodeid, &inode);
	if (ret < 0)
		return ret;
	ret = pt_errno_or(fstatvfs(inode->fd, &sv));
	if (ret == 0) {
		memset(out, 0, sizeof(*out));
		out->blocks = sv.f_blocks;
		out->bfree = sv.f_bfree;
		out->bavail = sv.f_bavail;
		out->files = sv.f_files;
		out->ffree = sv.f_ffree;
		out->bsize = sv.f_bsize;
		out->namelen = sv.f_namemax;
		out->frsize = sv.f_frsize;
		if (quota_on(pt->quota))
			statfs_quota(pt->quota, out);
	}
	inode_put(pt->inodes, inode);
	return ret;
}
