/* Small helpers of the passthrough ops: /proc/self/fd reopening, statx into FUSE attributes and entries. */
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/pt_internal.h"

int pt_reopen(struct passthrough *pt, int fd, int flags)
{
	char name[PROC_FD_NAME_MAX];
	int nfd;

	pt_proc_fd_name(name, fd);
	nfd = openat(pt->proc_self_fd, name, (flags & ~O_NOFOLLOW) | O_CLOEXEC);
	return nfd < 0 ? -errno : nfd;
}

int pt_reopen_counted(struct passthrough *pt, int fd, int flags)
{
	int ret = fd_budget_take(&pt->fds);

	if (ret < 0)
		return ret;
	ret = pt_reopen(pt, fd, flags);
	if (ret < 0)
		fd_budget_give_back(&pt->fds);
	return ret;
}

int pt_stat_fd(int fd, struct statx *stx)
{
	return pt_errno_or(statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW,
				 STATX_BASIC_STATS | STATX_MNT_ID, stx));
}

void pt_key_from_statx(const struct statx *stx, struct inode_key *key)
{
	key->dev = ((uint64_t)stx->stx_dev_major << 32) | stx->stx_dev_minor;
	key->ino = stx->stx_ino;
	/* Kernels before 5.8 do not know STATX_MNT_ID; dev then has to do. */
	key->mnt_id = (stx->stx_mask & STATX_MNT_ID) ? (uint32_t)stx->stx_mnt_id : 0;
	key->area = 0;
}

/* The guest decodes rdev with new_decode_dev(). */
static uint32_t encode_dev(uint32_t major, uint32_t minor)
{
	return (minor & 0xff) | ((major & 0xfff) << 8) | ((minor & ~0xffu) << 12);
}

void pt_attr_from_statx(const struct passthrough *pt, uint32_t area, const struct statx *stx,
			struct fuse_attr *attr)
{
	memset(attr, 0, sizeof(*attr));
	attr->ino = pt_guest_ino(pt, area, stx->stx_ino);
	attr->size = stx->stx_size;
	attr->blocks = stx->stx_blocks;
	attr->atime = stx->stx_atime.tv_sec;
	attr->mtime = stx->stx_mtime.tv_sec;
	attr->ctime = stx->stx_ctime.tv_sec;
	attr->atimensec = stx->stx_atime.tv_nsec;
	attr->mtimensec = stx->stx_mtime.tv_nsec;
	attr->ctimensec = stx->stx_ctime.tv_nsec;
	attr->mode = stx->stx_mode;
	attr->nlink = stx->stx_nlink;
	attr->uid = idmap_to_guest(&pt->opts.uid_map, stx->stx_uid);
	attr->gid = idmap_to_guest(&pt->opts.gid_map, stx->stx_gid);
	attr->rdev = encode_dev(stx->stx_rdev_major, stx->stx_rdev_minor);
	attr->blksize = stx->stx_blksize;
}

void pt_fill_entry(struct passthrough *pt, const struct inode *parent,
		   const struct inode *inode, const struct statx *stx,
		   struct fuse_entry_out *out)
{
	memset(out, 0, sizeof(*out));
	out->nodeid = inode->nodeid;
	out->generation = 0;    /* nodeids are never reused */
	out->entry_valid = out->attr_valid = pt->timeout_sec;
	out->entry_valid_nsec = out->attr_valid_nsec = pt->timeout_nsec;
	pt_attr_from_statx(pt, inode->key.area, stx, &out->attr);
	/* A directory on another mount: the guest makes it a submount so its
	 * st_dev differs and inode numbers cannot collide. An added dir's
	 * root is not one: its area in the inode numbers keeps them apart,
	 * and the guest sees one file system for the whole share. */
	if (pt->submounts && parent && S_ISDIR(stx->stx_mode) &&
	    inode->key.area == parent->key.area &&
	    (inode->key.mnt_id != parent->key.mnt_id ||
	     inode->key.dev != parent->key.dev))
		out->attr.flags |= FUSE_ATTR_SUBMOUNT;
}
