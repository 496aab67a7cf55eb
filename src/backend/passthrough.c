/* Passthrough backend: FUSE ops served from a host directory through O_PATH fds. */
#include "backend/passthrough.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "backend/creds.h"
#include "backend/fd_budget.h"
#include "backend/handles.h"
#include "backend/inode_table.h"
#include "backend/file_io.h"
#include "backend/locks.h"
#include "backend/offload.h"
#include "backend/reads.h"
#include "backend/sync.h"
#include "common/log.h"

/* fds the daemon keeps for itself (sockets, eventfds, logs) beyond the
 * guest's budget. */
#define FD_RESERVE 128
#define PROC_FD_NAME_MAX 16
#define PROC_FD_PATH_MAX 40
/* Mounts below the share that file handles can reach; beyond that the
 * inodes keep their fds (prefer) or fail (mandatory). */
#define MOUNT_FDS_MAX 64

struct passthrough {
	struct passthrough_opts opts;
	char *shared_dir;
	int proc_self_fd;
	struct fd_budget fds;
	struct inode_table *inodes;
	struct handle_table *handles;
	struct lock_table *locks;
	struct sync_runner *syncs;
	struct read_runner *reads;
	struct offload *offload;    /* slow syncs and cold reads */
	pthread_mutex_t mounts_lock;
	struct { int mnt_id; int fd; } mounts[MOUNT_FDS_MAX];
	atomic_uint nmounts;
	uint64_t timeout_sec;
	uint32_t timeout_nsec;
	bool switch_creds;      /* only root can take on the guest's ids */
	/* Settled by INIT. */
	bool writeback;
	bool dont_mask;         /* the guest left umask to us (POSIX ACLs) */
	bool submounts;         /* the guest makes host mounts its submounts */
	bool posix_acl;
	/* The guest's kernel strips a new file's set-group-ID bit itself when
	 * its caller is outside the directory's group (Linux 6.0+; FUSE 7.37
	 * came with 6.1), so the host must not strip it again without the
	 * caller's groups. Older guests leave that to the host. */
	bool guest_strips_sgid;
	/* The guest says when an access ACL drops sgid (FUSE_SETXATTR_EXT's
	 * FUSE_SETXATTR_ACL_KILL_SGID); older guests leave that to the host. */
	bool guest_kills_acl_sgid;
	/* The guest says when a write, truncate or O_TRUNC open must clear
	 * suid/sgid (FUSE_HANDLE_KILLPRIV_V2). */
	bool guest_kills_suidgid;
};

/* ---- small helpers ---------------------------------------------------- */

static int errno_or(int ret)
{
	return ret < 0 ? -errno : 0;
}

/* The protocol already checked names; a second cheap look costs nothing
 * and keeps a protocol bug from becoming a path traversal. */
static int check_name(const char *name)
{
	if (!name[0] || strchr(name, '/') || !strcmp(name, ".") ||
	    !strcmp(name, ".."))
		return -EINVAL;
	return 0;
}

static bool is_dot_or_dotdot(const char *name)
{
	return name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2]));
}

/* Only regular files and directories are ever opened for I/O: opening a
 * FIFO blocks the thread, a device node reaches host hardware
 * (CVE-2020-35517). Everything else stays an O_PATH fd. */
static bool openable_type(mode_t type)
{
	return type == S_IFREG || type == S_IFDIR;
}

static void proc_fd_name(char buf[PROC_FD_NAME_MAX], int fd)
{
	snprintf(buf, PROC_FD_NAME_MAX, "%d", fd);
}

/* Path for the xattr calls, which have no *at() form: relative to the
 * working directory, which passthrough_new() made /proc/self/fd because a
 * sandbox leaves no absolute path to /proc. */
static void proc_fd_path(char buf[PROC_FD_PATH_MAX], int fd)
{
	snprintf(buf, PROC_FD_PATH_MAX, "%d", fd);
}

/* Turns an O_PATH fd into a usable one through its /proc/self/fd link. The
 * caller checked openable_type() and took budget for the result. */
static int reopen(struct passthrough *pt, int fd, int flags)
{
	char name[PROC_FD_NAME_MAX];
	int nfd;

	proc_fd_name(name, fd);
	nfd = openat(pt->proc_self_fd, name, (flags & ~O_NOFOLLOW) | O_CLOEXEC);
	return nfd < 0 ? -errno : nfd;
}

static int stat_fd(int fd, struct statx *stx)
{
	return errno_or(statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW,
			      STATX_BASIC_STATS | STATX_MNT_ID, stx));
}

static void key_from_statx(const struct statx *stx, struct inode_key *key)
{
	key->dev = ((uint64_t)stx->stx_dev_major << 32) | stx->stx_dev_minor;
	key->ino = stx->stx_ino;
	/* Kernels before 5.8 do not know STATX_MNT_ID; dev then has to do. */
	key->mnt_id = (stx->stx_mask & STATX_MNT_ID) ? stx->stx_mnt_id : 0;
}

/* The guest decodes rdev with new_decode_dev(). */
static uint32_t encode_dev(uint32_t major, uint32_t minor)
{
	return (minor & 0xff) | ((major & 0xfff) << 8) | ((minor & ~0xffu) << 12);
}

static void attr_from_statx(const struct passthrough *pt, const struct statx *stx,
			    struct fuse_attr *attr)
{
	memset(attr, 0, sizeof(*attr));
	attr->ino = stx->stx_ino;
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

static void fill_entry(struct passthrough *pt, const struct inode *parent,
		       const struct inode *inode, const struct statx *stx,
		       struct fuse_entry_out *out)
{
	memset(out, 0, sizeof(*out));
	out->nodeid = inode->nodeid;
	out->generation = 0;    /* nodeids are never reused */
	out->entry_valid = out->attr_valid = pt->timeout_sec;
	out->entry_valid_nsec = out->attr_valid_nsec = pt->timeout_nsec;
	attr_from_statx(pt, stx, &out->attr);
	/* A directory on another mount: the guest makes it a submount so its
	 * st_dev differs and inode numbers cannot collide. */
	if (pt->submounts && parent && S_ISDIR(stx->stx_mode) &&
	    (inode->key.mnt_id != parent->key.mnt_id ||
	     inode->key.dev != parent->key.dev))
		out->attr.flags |= FUSE_ATTR_SUBMOUNT;
}

/*
 * The host ids a guest request runs as; -EPERM for a forbidden guest id
 * (--translate-uid forbid-guest) and, for a daemon that switches ids, for
 * the -1 a guest's kernel sends for a caller it cannot map.
 */
static int host_ids(const struct passthrough *pt, const struct fuse_req_ctx *ctx,
		    uint32_t *uid, uint32_t *gid)
{
	int ret = idmap_to_host(&pt->opts.uid_map, ctx->uid, uid);

	if (ret == 0)
		ret = idmap_to_host(&pt->opts.gid_map, ctx->gid, gid);
	if (ret == 0 && pt->switch_creds && (*uid == UINT32_MAX || *gid == UINT32_MAX))
		ret = -EPERM;
	return ret;
}

/*
 * An op whose outcome the guest's kernel has already decided runs as the
 * daemon (creds.h says why); the caller is still refused if its ids are.
 */
static int check_caller(const struct passthrough *pt, const struct fuse_req_ctx *ctx)
{
	uint32_t uid, gid;

	return host_ids(pt, ctx, &uid, &gid);
}

/* Takes on the caller's ids in the given role until as_daemon. */
static int as_caller(struct passthrough *pt, const struct fuse_req_ctx *ctx,
		     enum creds_role role)
{
	uint32_t uid, gid;
	int ret = host_ids(pt, ctx, &uid, &gid);

	if (ret < 0 || !pt->switch_creds)
		return ret;
	return creds_switch(uid, gid, role);
}

static void as_daemon(struct passthrough *pt)
{
	if (pt->switch_creds)
		creds_restore();
}

/*
 * For a guest that leaves a set-group-ID decision to the host: the host
 * judges the caller as unprivileged, except the guest's root, which holds
 * CAP_FSETID there and keeps the bit.
 */
static enum creds_role host_judged_role(const struct fuse_req_ctx *ctx)
{
	return ctx->uid == 0 ? CREDS_OWNER : CREDS_OWNER_NO_FSETID;
}

/*
 * Creating ops run as the caller's owner ids (creds.h) with the umask the
 * guest wants applied: none when its kernel already masked the mode, its
 * own with DONT_MASK so a default ACL can override it as it would locally.
 * For a guest that leaves set-group-ID stripping to the host, without
 * CAP_FSETID unless root, and with the parent's group as a supplementary
 * group when the guest sent it: the host then keeps a new file's
 * set-group-ID bit in a set-group-ID directory only for a member of the
 * directory's group. A group the id mapping refuses is left out, which
 * costs at most that bit.
 */
static int begin_create(struct passthrough *pt, const struct fuse_req_ctx *ctx,
			uint32_t guest_umask)
{
	uint32_t host_gid;
	int ret = creds_set_umask(pt->dont_mask ? (guest_umask & 0777) : 0);

	if (ret < 0)
		return ret;
	if (pt->switch_creds && ctx->has_supp_gid &&
	    idmap_to_host(&pt->opts.gid_map, ctx->supp_gid, &host_gid) == 0) {
		ret = creds_add_supp_group(host_gid);
		if (ret < 0)
			return ret;
	}
	ret = as_caller(pt, ctx, pt->guest_strips_sgid ? CREDS_OWNER :
						       host_judged_role(ctx));
	if (ret < 0 && pt->switch_creds)
		creds_restore();
	return ret;
}

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
	ret = reopen(pt, fd, O_RDONLY | O_DIRECTORY);
	if (ret < 0)
		goto out;
	pt->mounts[n].mnt_id = mnt_id;
	pt->mounts[n].fd = ret;
	atomic_store_explicit(&pt->nmounts, n + 1, memory_order_release);
out:
	pthread_mutex_unlock(&pt->mounts_lock);
	return ret;
}

struct handle_buf {
	struct inode_handle h;
	unsigned char bytes[MAX_HANDLE_SZ];
};

/*
 * The file handle a new inode keeps instead of its fd, or NULL in *out to
 * keep the fd: never with --inode-file-handles=never, and when the file
 * system has none (EOPNOTSUPP) with prefer; mandatory fails instead.
 */
static int handle_for_inode(struct passthrough *pt, int fd, mode_t type,
			    struct handle_buf *hb, const struct inode_handle **out)
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

/* Shared tail of the lookups: identifies the file behind fd (an fd taken
 * from the budget) and finds or adds its inode. Consumes fd and its budget
 * on every path. */
static int add_inode(struct passthrough *pt, int fd, struct inode **out,
		     struct statx *stx)
{
	const struct inode_handle *handle;
	struct handle_buf hb;
	struct inode_key key;
	int ret = stat_fd(fd, stx);

	if (ret < 0)
		goto close_fd;
	ret = handle_for_inode(pt, fd, stx->stx_mode, &hb, &handle);
	if (ret < 0)
		goto close_fd;
	key_from_statx(stx, &key);
	/* ".." that lands on the shared dir maps to nodeid 1 via the key. */
	return inode_lookup_add(pt->inodes, fd, &key, stx->stx_mode, handle, out);

close_fd:
	close(fd);
	fd_budget_give_back(&pt->fds);
	return ret;
}

/* Gives the guest the inode behind an fd of ours (O_PATH or not); takes
 * one lookup and one request ref on the result. */
static int inode_from_fd(struct passthrough *pt, int fd, struct inode **inode,
			 struct statx *stx)
{
	int path_fd, ret = fd_budget_take(&pt->fds);

	if (ret < 0)
		return ret;
	path_fd = reopen(pt, fd, O_PATH);
	if (path_fd < 0) {
		fd_budget_give_back(&pt->fds);
		return path_fd;
	}
	return add_inode(pt, path_fd, inode, stx);
}

/*
 * Resolves one name below dir without ever leaving the share: names are
 * single components, opened with O_NOFOLLOW relative to the parent's fd, so
 * a symlink is returned as itself for the guest to resolve in its own
 * namespace. ".." of the root is the root. On success the inode has one
 * more guest lookup and one request ref for the caller to put.
 */
static int lookup_inode(struct passthrough *pt, struct inode *dir,
			const char *name, struct inode **out, struct statx *stx)
{
	struct inode *root = inode_table_root(pt->inodes);
	struct inode_key key;
	int fd, ret;

	if (!strcmp(name, ".") || (!strcmp(name, "..") && dir == root)) {
		ret = stat_fd(dir->fd, stx);
		if (ret < 0)
			return ret;
		inode_get_again(pt->inodes, dir);
		inode_add_lookup(pt->inodes, dir);
		*out = dir;
		return 0;
	}
	/* Most names the guest looks up are inodes it already knows (other
	 * names, READDIRPLUS, a lookup after its entry timed out). A stat of
	 * the name finds them without opening and closing a duplicate fd:
	 * the table's fd keeps that inode alive, so its key cannot have been
	 * reused by another file. Only unknown inodes are opened. */
	ret = errno_or(statx(dir->fd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
			     STATX_BASIC_STATS | STATX_MNT_ID, stx));
	if (ret < 0)
		return ret;
	key_from_statx(stx, &key);
	if (inode_find_key(pt->inodes, &key, out) == 0)
		return 0;
	ret = fd_budget_take(&pt->fds);
	if (ret < 0)
		return ret;
	fd = openat(dir->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		fd_budget_give_back(&pt->fds);
		return ret;
	}
	return add_inode(pt, fd, out, stx);
}

static int lookup_entry(struct passthrough *pt, struct inode *dir,
			const char *name, struct fuse_entry_out *out)
{
	struct inode *inode;
	struct statx stx;
	int ret = lookup_inode(pt, dir, name, &inode, &stx);

	if (ret < 0)
		return ret;
	fill_entry(pt, dir, inode, &stx, out);
	inode_put(pt->inodes, inode);
	return 0;
}

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

static uint32_t fopen_flags(struct passthrough *pt, bool is_dir)
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

/* ---- ops -------------------------------------------------------------- */

static int pt_init(void *fs, const struct fuse_conn_info *conn)
{
	struct passthrough *pt = fs;

	pt->writeback = conn->flags & FUSE_WRITEBACK_CACHE;
	pt->dont_mask = conn->flags & FUSE_DONT_MASK;
	pt->posix_acl = conn->flags & FUSE_POSIX_ACL;
	pt->submounts = pt->opts.announce_submounts && (conn->flags & FUSE_SUBMOUNTS);
	pt->guest_strips_sgid = conn->proto_minor >= 37;
	pt->guest_kills_acl_sgid = conn->flags & FUSE_SETXATTR_EXT;
	pt->guest_kills_suidgid = conn->flags & FUSE_HANDLE_KILLPRIV_V2;
	return 0;
}

/* The guest unmounted: it names no file any more. A new INIT may follow. */
static void pt_destroy(void *fs)
{
	struct passthrough *pt = fs;

	locks_drop_all(pt->locks);
	handle_remove_all(pt->handles);
	inode_forget_all(pt->inodes);
}

static int pt_lookup(void *fs, const struct fuse_req_ctx *ctx, uint64_t parent,
		     const char *name, struct fuse_entry_out *out)
{
	struct passthrough *pt = fs;
	struct inode *dir;
	int ret;

	if (!name[0] || strchr(name, '/'))
		return -EINVAL;
	ret = inode_get(pt->inodes, parent, &dir);
	if (ret < 0)
		return ret;
	ret = lookup_entry(pt, dir, name, out);
	inode_put(pt->inodes, dir);
	return ret;
}

static void pt_forget(void *fs, uint64_t nodeid, uint64_t nlookup)
{
	struct passthrough *pt = fs;

	inode_forget(pt->inodes, nodeid, nlookup);
}

static int pt_getattr(void *fs, const struct fuse_req_ctx *ctx,
		      uint64_t nodeid, const struct fuse_getattr_in *in,
		      struct fuse_attr_out *out)
{
	struct passthrough *pt = fs;
	struct inode *inode;
	struct statx stx;
	int ret;

	ret = inode_get(pt->inodes, nodeid, &inode);
	if (ret < 0)
		return ret;
	ret = stat_fd(inode->fd, &stx);
	if (ret == 0) {
		memset(out, 0, sizeof(*out));
		out->attr_valid = pt->timeout_sec;
		out->attr_valid_nsec = pt->timeout_nsec;
		attr_from_statx(pt, &stx, &out->attr);
	}
	inode_put(pt->inodes, inode);
	return ret;
}

/* FATTR_KILL_SUIDGID: the guest's kernel decided the bits must go (as a
 * local truncate by a non-CAP_FSETID caller would); sgid only matters
 * with group execute, as in the kernel. */
static int kill_suidgid(struct passthrough *pt, struct inode *inode)
{
	char name[PROC_FD_NAME_MAX];
	struct statx stx;
	mode_t mode;
	int ret = stat_fd(inode->fd, &stx);

	if (ret < 0 || !S_ISREG(stx.stx_mode))
		return ret;
	mode = stx.stx_mode & 07777;
	if (!(mode & S_ISUID) && (mode & (S_ISGID | S_IXGRP)) != (S_ISGID | S_IXGRP))
		return 0;
	mode &= ~S_ISUID;
	if (mode & S_IXGRP)
		mode &= ~S_ISGID;
	proc_fd_name(name, inode->fd);
	return errno_or(fchmodat(pt->proc_self_fd, name, mode, 0));
}

/*
 * The host kernel clears security.capability on write, truncate and chown,
 * but not the name --xattrmap stores the guest's under; the daemon clears
 * that one itself (CVE-2021-20263, as QEMU's virtiofsd after its fix).
 * fd may be O_PATH: the /proc link reaches the inode either way.
 */
static int drop_mapped_capability(struct passthrough *pt, int fd)
{
	const char *name = pt->opts.xattrmap.capability_name;
	char path[PROC_FD_PATH_MAX];

	if (!name[0])
		return 0;
	proc_fd_path(path, fd);
	if (removexattr(path, name) < 0 && errno != ENODATA && errno != EOPNOTSUPP)
		return -errno;
	return 0;
}

static int truncate_inode(struct passthrough *pt, struct inode *inode,
			  int fh_fd, uint64_t size)
{
	int fd, ret;

	if (fh_fd >= 0)
		return errno_or(ftruncate(fh_fd, size));
	if (inode->type == S_IFDIR)
		return -EISDIR;
	if (inode->type != S_IFREG)
		return -EINVAL;
	ret = fd_budget_take(&pt->fds);
	if (ret < 0)
		goto out;
	fd = reopen(pt, inode->fd, O_WRONLY);
	if (fd < 0) {
		ret = fd;
		goto give_back;
	}
	ret = errno_or(ftruncate(fd, size));
	close(fd);
give_back:
	fd_budget_give_back(&pt->fds);
out:
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

static int pt_setattr(void *fs, const struct fuse_req_ctx *ctx,
		      uint64_t nodeid, const struct fuse_setattr_in *in,
		      struct fuse_attr_out *out)
{
	struct passthrough *pt = fs;
	uint32_t valid = in->valid;
	char name[PROC_FD_NAME_MAX];
	struct handle *h = NULL;
	struct inode *inode;
	struct statx stx;
	int fh_fd = -1;
	int ret;

	ret = inode_get(pt->inodes, nodeid, &inode);
	if (ret < 0)
		goto out;
	if (pt->opts.readonly &&
	    (valid & (FATTR_MODE | FATTR_UID | FATTR_GID | FATTR_SIZE |
		      FATTR_ATIME | FATTR_MTIME | FATTR_ATIME_NOW |
		      FATTR_MTIME_NOW | FATTR_KILL_SUIDGID))) {
		ret = -EROFS;
		goto put_inode;
	}
	if (valid & FATTR_FH) {
		ret = handle_get(pt->handles, in->fh, nodeid, &h);
		if (ret < 0)
			goto put_inode;
		if (!h->dir)
			fh_fd = h->fd;
	}
	proc_fd_name(name, inode->fd);

	/* The guest's kernel has checked ownership and write access, and
	 * stripped a set-group-ID bit its caller may not set; as the daemon,
	 * the host neither repeats the check nor strips again. */
	ret = check_caller(pt, ctx);
	if (ret < 0)
		goto put_handle;
	if (valid & FATTR_MODE) {
		if (fh_fd >= 0)
			ret = errno_or(fchmod(fh_fd, in->mode & 07777));
		else
			ret = errno_or(fchmodat(pt->proc_self_fd, name,
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
		ret = errno_or(fchownat(inode->fd, "", uid, gid,
					AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW));
		if (ret < 0)
			goto attrs_out;
	}
	if (valid & FATTR_SIZE) {
		ret = truncate_inode(pt, inode, fh_fd, in->size);
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
			ret = errno_or(futimens(fh_fd, ts));
		else
			ret = errno_or(utimensat(pt->proc_self_fd, name, ts, 0));
		if (ret < 0)
			goto attrs_out;
	}
attrs_out:
	if (ret == 0 && (valid & (FATTR_UID | FATTR_GID | FATTR_SIZE)))
		ret = drop_mapped_capability(pt, inode->fd);
	if (ret == 0 && (valid & FATTR_KILL_SUIDGID) && !(valid & FATTR_MODE))
		ret = kill_suidgid(pt, inode);
	if (ret == 0)
		ret = stat_fd(inode->fd, &stx);
	if (ret == 0) {
		memset(out, 0, sizeof(*out));
		out->attr_valid = pt->timeout_sec;
		out->attr_valid_nsec = pt->timeout_nsec;
		attr_from_statx(pt, &stx, &out->attr);
	}
put_handle:
	if (h)
		handle_put(pt->handles, h);
put_inode:
	inode_put(pt->inodes, inode);
out:
	return ret;
}

static ssize_t pt_readlink(void *fs, const struct fuse_req_ctx *ctx,
			   uint64_t nodeid, char *buf, size_t size)
{
	struct passthrough *pt = fs;
	struct inode *inode;
	ssize_t ret;

	ret = inode_get(pt->inodes, nodeid, &inode);
	if (ret < 0)
		return ret;
	if (inode->type == S_IFLNK) {
		ret = readlinkat(inode->fd, "", buf, size);
		if (ret < 0)
			ret = -errno;
	} else {
		ret = -EINVAL;
	}
	inode_put(pt->inodes, inode);
	return ret;
}

/* FUSE_SECURITY_CTX: the label the guest's LSM gave the new inode. Set as
 * the daemon: security.* may need privileges the guest ids lack. */
static int apply_secctx(struct passthrough *pt, const struct fuse_req_ctx *ctx,
			struct inode *inode)
{
	char path[PROC_FD_PATH_MAX];

	char mapped[XATTRMAP_NAME_MAX + 1];
	const char *name;
	int ret;

	if (!ctx->secctx_name)
		return 0;
	/* The label is an xattr like any other: the map renames it too. */
	ret = xattrmap_to_host(&pt->opts.xattrmap, ctx->secctx_name, mapped, &name);
	if (ret < 0)
		return ret;
	proc_fd_path(path, inode->fd);
	return errno_or(setxattr(path, name, ctx->secctx_value,
				 ctx->secctx_size, 0));
}

/* Shared tail of MKNOD/MKDIR/SYMLINK: make the node as the guest, then
 * look it up as the daemon. */
enum make_kind { MAKE_NODE, MAKE_DIR, MAKE_SYMLINK };

static int make_node(struct passthrough *pt, const struct fuse_req_ctx *ctx,
		     uint64_t parent, const char *name, enum make_kind kind,
		     mode_t mode, uint32_t rdev, uint32_t guest_umask,
		     const char *target, struct fuse_entry_out *out)
{
	struct inode *dir, *inode;
	struct statx stx;
	int ret;

	ret = check_name(name);
	if (ret < 0)
		goto out;
	ret = inode_get(pt->inodes, parent, &dir);
	if (ret < 0)
		goto out;
	ret = begin_create(pt, ctx, guest_umask);
	if (ret < 0)
		goto put_dir;
	switch (kind) {
	case MAKE_NODE:
		/* Creating FIFOs, sockets and device nodes is harmless; only
		 * opening them on the host is not, and OPEN refuses that. */
		ret = errno_or(mknodat(dir->fd, name, mode, rdev));
		break;
	case MAKE_DIR:
		ret = errno_or(mkdirat(dir->fd, name, mode));
		break;
	case MAKE_SYMLINK:
		/* The target is only stored; the guest resolves it. */
		ret = errno_or(symlinkat(target, dir->fd, name));
		break;
	}
	as_daemon(pt);
	if (ret < 0)
		goto put_dir;
	ret = lookup_inode(pt, dir, name, &inode, &stx);
	if (ret < 0)
		goto put_dir;
	ret = apply_secctx(pt, ctx, inode);
	if (ret < 0) {
		/* an unlabelled node must not stay behind */
		unlinkat(dir->fd, name, kind == MAKE_DIR ? AT_REMOVEDIR : 0);
		inode_drop_lookup(pt->inodes, inode);
		goto put_inode;
	}
	fill_entry(pt, dir, inode, &stx, out);
put_inode:
	inode_put(pt->inodes, inode);
put_dir:
	inode_put(pt->inodes, dir);
out:
	return ret;
}

static int pt_symlink(void *fs, const struct fuse_req_ctx *ctx, uint64_t parent,
		      const char *name, const char *target,
		      struct fuse_entry_out *out)
{
	return make_node(fs, ctx, parent, name, MAKE_SYMLINK, 0, 0, 0, target, out);
}

static int pt_mknod(void *fs, const struct fuse_req_ctx *ctx, uint64_t parent,
		    const char *name, const struct fuse_mknod_in *in,
		    struct fuse_entry_out *out)
{
	return make_node(fs, ctx, parent, name, MAKE_NODE, in->mode, in->rdev,
			 in->umask, NULL, out);
}

static int pt_mkdir(void *fs, const struct fuse_req_ctx *ctx, uint64_t parent,
		    const char *name, const struct fuse_mkdir_in *in,
		    struct fuse_entry_out *out)
{
	return make_node(fs, ctx, parent, name, MAKE_DIR, in->mode, 0,
			 in->umask, NULL, out);
}

static int remove_name(struct passthrough *pt, const struct fuse_req_ctx *ctx,
		       uint64_t parent, const char *name, int flags)
{
	struct inode *dir;
	int ret;

	ret = check_name(name);
	if (ret < 0)
		goto out;
	ret = inode_get(pt->inodes, parent, &dir);
	if (ret < 0)
		goto out;
	ret = check_caller(pt, ctx);
	if (ret < 0)
		goto put_dir;
	ret = errno_or(unlinkat(dir->fd, name, flags));
put_dir:
	inode_put(pt->inodes, dir);
out:
	return ret;
}

static int pt_unlink(void *fs, const struct fuse_req_ctx *ctx, uint64_t parent,
		     const char *name)
{
	return remove_name(fs, ctx, parent, name, 0);
}

static int pt_rmdir(void *fs, const struct fuse_req_ctx *ctx, uint64_t parent,
		    const char *name)
{
	return remove_name(fs, ctx, parent, name, AT_REMOVEDIR);
}

static int pt_rename(void *fs, const struct fuse_req_ctx *ctx, uint64_t parent,
		     const char *name, uint64_t newparent, const char *newname,
		     uint32_t flags)
{
	struct passthrough *pt = fs;
	struct inode *olddir, *newdir;
	int ret;

	if (check_name(name) < 0 || check_name(newname) < 0 ||
	    (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT))) {
		ret = -EINVAL;
		goto out;
	}
	ret = inode_get(pt->inodes, parent, &olddir);
	if (ret < 0)
		goto out;
	ret = inode_get(pt->inodes, newparent, &newdir);
	if (ret < 0)
		goto put_old;
	ret = check_caller(pt, ctx);
	if (ret < 0)
		goto put_new;
	ret = errno_or(renameat2(olddir->fd, name, newdir->fd, newname, flags));
put_new:
	inode_put(pt->inodes, newdir);
put_old:
	inode_put(pt->inodes, olddir);
out:
	return ret;
}

static int pt_link(void *fs, const struct fuse_req_ctx *ctx, uint64_t nodeid,
		   uint64_t newparent, const char *newname,
		   struct fuse_entry_out *out)
{
	struct passthrough *pt = fs;
	char name[PROC_FD_NAME_MAX];
	struct inode *inode, *newdir;
	struct statx stx;
	int ret;

	ret = check_name(newname);
	if (ret < 0)
		goto out;
	ret = inode_get(pt->inodes, nodeid, &inode);
	if (ret < 0)
		goto out;
	ret = inode_get(pt->inodes, newparent, &newdir);
	if (ret < 0)
		goto put_inode;
	/* linkat(fd, "", AT_EMPTY_PATH) needs CAP_DAC_READ_SEARCH, which the
	 * sandbox keeps only for file handles; the /proc link names the inode
	 * too (even an O_TMPFILE one) and the magic link stops at the inode
	 * itself, so a symlink is linked, not its target. */
	proc_fd_name(name, inode->fd);
	ret = check_caller(pt, ctx);
	if (ret < 0)
		goto put_newdir;
	ret = errno_or(linkat(pt->proc_self_fd, name, newdir->fd, newname,
			      AT_SYMLINK_FOLLOW));
	if (ret < 0)
		goto put_newdir;
	ret = stat_fd(inode->fd, &stx);
	if (ret < 0)
		goto put_newdir;
	inode_add_lookup(pt->inodes, inode);
	fill_entry(pt, newdir, inode, &stx, out);
put_newdir:
	inode_put(pt->inodes, newdir);
put_inode:
	inode_put(pt->inodes, inode);
out:
	return ret;
}

/*
 * Opens inode for I/O as the daemon: the guest's kernel has checked the
 * caller's access, also for the wider access writeback asks for (O_WRONLY
 * becomes O_RDWR). An O_TRUNC is the exception: with FUSE_ATOMIC_O_TRUNC
 * the guest's kernel leaves clearing suid/sgid to us. Under killpriv v2 it
 * says when (FUSE_OPEN_KILL_SUIDGID): the caller without CAP_FSETID then.
 * Without it, the host judges the caller (host_judged_role).
 */
static int open_for_guest(struct passthrough *pt, const struct fuse_req_ctx *ctx,
			  struct inode *inode, int flags, uint32_t open_flags)
{
	bool as_truncater = flags & O_TRUNC;
	enum creds_role role = host_judged_role(ctx);
	int fd, ret;

	if (pt->guest_kills_suidgid) {
		as_truncater = as_truncater && (open_flags & FUSE_OPEN_KILL_SUIDGID);
		role = CREDS_OWNER_NO_FSETID;
	}
	ret = as_truncater ? as_caller(pt, ctx, role) : check_caller(pt, ctx);
	if (ret < 0)
		return ret;
	fd = reopen(pt, inode->fd, flags);
	/* O_NOATIME needs ownership or CAP_FOWNER on the host, which
	 * --modcaps may take away; the guest's kernel checked its own side,
	 * so a refusal here only costs the atime. */
	if (fd == -EPERM && (flags & O_NOATIME))
		fd = reopen(pt, inode->fd, flags & ~O_NOATIME);
	if (as_truncater)
		as_daemon(pt);
	return fd;
}

static int pt_open(void *fs, const struct fuse_req_ctx *ctx, uint64_t nodeid,
		   const struct fuse_open_in *in, struct fuse_open_out *out)
{
	struct passthrough *pt = fs;
	struct inode *inode;
	int flags = host_open_flags(pt, in->flags);
	uint64_t fh;
	int fd, ret;

	if (pt->opts.readonly && writes_data(flags)) {
		ret = -EROFS;
		goto out;
	}
	ret = inode_get(pt->inodes, nodeid, &inode);
	if (ret < 0)
		goto out;
	/* Same answer as virtiofsd: the guest's kernel never sends OPEN for
	 * special files, so whoever does gets EBADF and nothing is opened. */
	if (!openable_type(inode->type)) {
		ret = -EBADF;
		goto put_inode;
	}
	ret = fd_budget_take(&pt->fds);
	if (ret < 0)
		goto put_inode;
	fd = open_for_guest(pt, ctx, inode, flags, in->open_flags);
	if (fd < 0) {
		ret = fd;
		goto give_back;
	}
	if (flags & O_TRUNC) {
		ret = drop_mapped_capability(pt, fd);
		if (ret < 0) {
			close(fd);
			goto give_back;
		}
	}
	/* the handle owns fd, its budget and this inode ref from here on */
	ret = handle_add(pt->handles, inode, fd, NULL, &fh);
	if (ret < 0)
		goto out;
	memset(out, 0, sizeof(*out));
	out->fh = fh;
	out->open_flags = fopen_flags(pt, inode->type == S_IFDIR);
	return 0;

give_back:
	fd_budget_give_back(&pt->fds);
put_inode:
	inode_put(pt->inodes, inode);
out:
	return ret;
}

/* CREATE and TMPFILE: the new file's fd is both the handle and, reopened
 * O_PATH, the inode, so both name the same file even if the name is
 * swapped right after. */
static int create_common(struct passthrough *pt, const struct fuse_req_ctx *ctx,
			 uint64_t parent, const char *name,
			 const struct fuse_create_in *in,
			 struct fuse_entry_out *entry, struct fuse_open_out *open_out)
{
	struct inode *dir, *inode;
	struct statx stx;
	uint64_t fh;
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
	ret = fd_budget_take(&pt->fds);
	if (ret < 0)
		goto put_dir;
	ret = begin_create(pt, ctx, in->umask);
	if (ret < 0)
		goto give_back;
	fd = openat(dir->fd, name, flags, in->mode & 07777);
	if (fd < 0)
		ret = -errno;
	as_daemon(pt);
	if (ret < 0)
		goto give_back;
	ret = inode_from_fd(pt, fd, &inode, &stx);
	if (ret < 0)
		goto close_fd;
	ret = apply_secctx(pt, ctx, inode);
	if (ret < 0) {
		if (strcmp(name, "."))
			unlinkat(dir->fd, name, 0);
		inode_drop_lookup(pt->inodes, inode);
		inode_put(pt->inodes, inode);
		goto close_fd;
	}
	fill_entry(pt, dir, inode, &stx, entry);
	/* the handle takes fd, its budget and the inode's request ref */
	ret = handle_add(pt->handles, inode, fd, NULL, &fh);
	if (ret < 0) {
		/* the guest will not hear of this nodeid */
		inode_forget(pt->inodes, entry->nodeid, 1);
		goto put_dir;
	}
	memset(open_out, 0, sizeof(*open_out));
	open_out->fh = fh;
	open_out->open_flags = fopen_flags(pt, false);
	inode_put(pt->inodes, dir);
	return 0;

close_fd:
	close(fd);
give_back:
	fd_budget_give_back(&pt->fds);
put_dir:
	inode_put(pt->inodes, dir);
out:
	return ret;
}

static int pt_create(void *fs, const struct fuse_req_ctx *ctx, uint64_t parent,
		     const char *name, const struct fuse_create_in *in,
		     struct fuse_entry_out *entry, struct fuse_open_out *open)
{
	int ret = check_name(name);

	if (ret < 0)
		return ret;
	return create_common(fs, ctx, parent, name, in, entry, open);
}

static int pt_tmpfile(void *fs, const struct fuse_req_ctx *ctx, uint64_t parent,
		      const struct fuse_create_in *in,
		      struct fuse_entry_out *entry, struct fuse_open_out *open)
{
	return create_common(fs, ctx, parent, NULL, in, entry, open);
}

static int get_file_handle(struct passthrough *pt, uint64_t nodeid, uint64_t fh,
			   struct handle **out)
{
	int ret = handle_get(pt->handles, fh, nodeid, out);

	if (ret == 0 && (*out)->dir) {
		handle_put(pt->handles, *out);
		ret = -EISDIR;
	}
	return ret;
}

static ssize_t pt_read(void *fs, const struct fuse_req_ctx *ctx,
		       uint64_t nodeid, const struct fuse_read_in *in,
		       const struct iovec *dst, unsigned dst_cnt)
{
	struct passthrough *pt = fs;
	struct handle *h;
	ssize_t ret;

	ret = get_file_handle(pt, nodeid, in->fh, &h);
	if (ret < 0)
		return ret;
	return read_handle(pt->reads, ctx, h, dst, dst_cnt, in->size, in->offset);
}

static ssize_t pt_write(void *fs, const struct fuse_req_ctx *ctx,
			uint64_t nodeid, const struct fuse_write_in *in,
			const struct iovec *src, unsigned src_cnt)
{
	struct passthrough *pt = fs;
	bool kill_priv = (in->write_flags & FUSE_WRITE_KILL_SUIDGID) &&
			 pt->switch_creds;
	bool as_writer = false;
	struct handle *h;
	struct stat st;
	ssize_t ret;

	ret = get_file_handle(pt, nodeid, in->fh, &h);
	if (ret < 0)
		goto out;
	ret = drop_mapped_capability(pt, h->fd);
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
		ret = as_caller(pt, ctx, CREDS_OWNER_NO_FSETID);
		if (ret < 0)
			goto put;
		as_writer = true;
	}
	ret = iov_transfer(true, h->fd, src, src_cnt, in->size, in->offset, 0);
	if (as_writer)
		as_daemon(pt);
put:
	handle_put(pt->handles, h);
out:
	return ret;
}

static int pt_statfs(void *fs, const struct fuse_req_ctx *ctx, uint64_t nodeid,
		     struct fuse_kstatfs *out)
{
	struct passthrough *pt = fs;
	struct inode *inode;
	struct statvfs sv;
	int ret;

	ret = inode_get(pt->inodes, nodeid, &inode);
	if (ret < 0)
		return ret;
	ret = errno_or(fstatvfs(inode->fd, &sv));
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
	}
	inode_put(pt->inodes, inode);
	return ret;
}

static int pt_release(void *fs, const struct fuse_req_ctx *ctx,
		      uint64_t nodeid, const struct fuse_release_in *in)
{
	struct passthrough *pt = fs;

	/* The guest skipped FLUSH and folds it into RELEASE. flock locks
	 * (FUSE_RELEASE_FLOCK_UNLOCK) go with the handle's fd. */
	if (in->release_flags & FUSE_RELEASE_FLUSH)
		locks_drop_owner(pt->locks, nodeid, in->lock_owner);
	return handle_remove(pt->handles, in->fh, nodeid);
}

static int pt_fsync(void *fs, const struct fuse_req_ctx *ctx, uint64_t nodeid,
		    const struct fuse_fsync_in *in)
{
	struct passthrough *pt = fs;
	struct handle *h;
	int ret;

	ret = handle_get(pt->handles, in->fh, nodeid, &h);
	if (ret < 0)
		return ret;
	return sync_handle(pt->syncs, ctx, h, in->fsync_flags & FUSE_FSYNC_FDATASYNC);
}

/* Closing any fd of a file drops the process's POSIX locks on it, which is
 * what close() in the guest means; the handle itself stays open. */
static int pt_flush(void *fs, const struct fuse_req_ctx *ctx, uint64_t nodeid,
		    const struct fuse_flush_in *in)
{
	struct passthrough *pt = fs;
	struct handle *h;
	int fd, ret;

	ret = handle_get(pt->handles, in->fh, nodeid, &h);
	if (ret < 0)
		return ret;
	locks_drop_owner(pt->locks, nodeid, in->lock_owner);
	fd = dup(h->fd);
	ret = fd < 0 ? -errno : errno_or(close(fd));
	handle_put(pt->handles, h);
	return ret;
}

static int pt_opendir(void *fs, const struct fuse_req_ctx *ctx,
		      uint64_t nodeid, const struct fuse_open_in *in,
		      struct fuse_open_out *out)
{
	struct passthrough *pt = fs;
	struct inode *inode;
	uint64_t fh;
	DIR *dir;
	int fd, ret;

	ret = inode_get(pt->inodes, nodeid, &inode);
	if (ret < 0)
		goto out;
	if (inode->type != S_IFDIR) {
		ret = -ENOTDIR;
		goto put_inode;
	}
	ret = fd_budget_take(&pt->fds);
	if (ret < 0)
		goto put_inode;
	fd = open_for_guest(pt, ctx, inode, O_RDONLY | O_DIRECTORY | O_NONBLOCK, 0);
	if (fd < 0) {
		ret = fd;
		goto give_back;
	}
	dir = fdopendir(fd);
	if (!dir) {
		ret = -errno;
		goto close_fd;
	}
	ret = handle_add(pt->handles, inode, -1, dir, &fh);
	if (ret < 0)
		goto out;
	memset(out, 0, sizeof(*out));
	out->fh = fh;
	out->open_flags = fopen_flags(pt, true);
	return 0;

close_fd:
	close(fd);
give_back:
	fd_budget_give_back(&pt->fds);
put_inode:
	inode_put(pt->inodes, inode);
out:
	return ret;
}

/* One READDIRPLUS entry: a lookup reference only for entries that fit. */
static int add_plus_entry(struct passthrough *pt, struct handle *h,
			  const struct dirent *de, size_t namelen,
			  struct fuse_dirbuf *db)
{
	struct fuse_entry_out entry;
	uint32_t type = de->d_type;
	int ret;

	if (!fuse_dirbuf_fits_plus(db, namelen))
		return -ENOSPC;
	/* READDIRPLUS lookups are the client prefetching: once the fd budget
	 * runs low they would starve the lookups and opens the guest asks for
	 * by name, so the entry goes out without attributes instead. */
	if (is_dot_or_dotdot(de->d_name) || fd_budget_low(&pt->fds))
		goto without_lookup;
	ret = lookup_entry(pt, h->inode, de->d_name, &entry);
	if (ret == -ENFILE)
		goto without_lookup;
	if (ret < 0)
		return ret;
	type = (entry.attr.mode & S_IFMT) >> 12;
	ret = fuse_dirbuf_add_plus(db, de->d_name, namelen, &entry, type,
				   de->d_off);
	if (ret < 0)
		inode_forget(pt->inodes, entry.nodeid, 1);
	return ret;

without_lookup:
	/* nodeid 0: the guest lists the name, caches nothing, takes no lookup */
	memset(&entry, 0, sizeof(entry));
	entry.attr.ino = de->d_ino;
	entry.attr.mode = DTTOIF(de->d_type);
	return fuse_dirbuf_add_plus(db, de->d_name, namelen, &entry, type,
				    de->d_off);
}

static int pt_readdir(void *fs, const struct fuse_req_ctx *ctx,
		      uint64_t nodeid, const struct fuse_read_in *in, bool plus,
		      struct fuse_dirbuf *db)
{
	struct passthrough *pt = fs;
	struct handle *h;
	int ret;

	ret = handle_get(pt->handles, in->fh, nodeid, &h);
	if (ret < 0)
		goto out;
	if (!h->dir) {
		ret = -ENOTDIR;
		goto put;
	}
	pthread_mutex_lock(&h->dir_lock);
	/* d_off cookies are what the guest hands back as the offset; seek
	 * only when it does not continue where the stream stands. */
	if (!h->dir_offset_known || h->dir_offset != in->offset) {
		seekdir(h->dir, in->offset);
		h->dir_offset = in->offset;
		h->dir_offset_known = true;
		h->dir_pending = NULL;
	}
	for (;;) {
		struct dirent *de = h->dir_pending;
		size_t namelen;

		h->dir_pending = NULL;
		if (!de) {
			errno = 0;
			de = readdir(h->dir);
		}
		if (!de) {
			if (errno && db->len == 0)
				ret = -errno;
			break;
		}
		namelen = strlen(de->d_name);
		if (plus)
			ret = add_plus_entry(pt, h, de, namelen, db);
		else
			ret = fuse_dirbuf_add(db, de->d_name, namelen,
					      de->d_ino, de->d_type, de->d_off);
		if (ret == -ENOENT) {
			/* unlinked since readdir saw it: skip it */
			ret = 0;
		} else if (ret < 0) {
			/* The guest did not get this entry: the next call at
			 * dir_offset starts with it. */
			h->dir_pending = de;
			if (ret == -ENOSPC || db->len > 0)
				ret = 0;
			break;
		}
		h->dir_offset = de->d_off;
	}
	pthread_mutex_unlock(&h->dir_lock);
put:
	handle_put(pt->handles, h);
out:
	return ret;
}

static int pt_releasedir(void *fs, const struct fuse_req_ctx *ctx,
			 uint64_t nodeid, const struct fuse_release_in *in)
{
	struct passthrough *pt = fs;

	return handle_remove(pt->handles, in->fh, nodeid);
}

static int pt_fsyncdir(void *fs, const struct fuse_req_ctx *ctx,
		       uint64_t nodeid, const struct fuse_fsync_in *in)
{
	return pt_fsync(fs, ctx, nodeid, in);
}

/* Without POSIX ACLs negotiated the guest's kernel does not enforce them,
 * so it must not see or set them (as virtiofsd does). */
static bool blocked_xattr(struct passthrough *pt, const char *name)
{
	return !pt->posix_acl && !strncmp(name, "system.posix_acl_", 17);
}

/* The host name for a name the guest sent: -EOPNOTSUPP for blocked ACL
 * names, the --xattrmap verdict otherwise. */
static int host_xattr_name(struct passthrough *pt, const char *name,
			   char buf[XATTRMAP_NAME_MAX + 1], const char **host)
{
	if (blocked_xattr(pt, name))
		return -EOPNOTSUPP;
	return xattrmap_to_host(&pt->opts.xattrmap, name, buf, host);
}

/*
 * The common start of the xattr ops that take a name: whether xattrs are
 * served, the host's name for the guest's under --xattrmap,
 * and the inode, with a request ref for the caller to put, as a
 * /proc/self/fd path.
 */
static int xattr_begin(struct passthrough *pt, uint64_t nodeid,
		       const char *name, char mapped[XATTRMAP_NAME_MAX + 1], const char **host_name,
		       struct inode **inode, char path[PROC_FD_PATH_MAX])
{
	int ret;

	if (!pt->opts.xattr)
		return -ENOSYS;
	ret = host_xattr_name(pt, name, mapped, host_name);
	if (ret < 0)
		return ret;
	ret = inode_get(pt->inodes, nodeid, inode);
	if (ret < 0)
		return ret;
	proc_fd_path(path, (*inode)->fd);
	return 0;
}

/*
 * xattrs go through the /proc/self/fd path so no inode is opened for them
 * (FIFOs and devices stay O_PATH); the path-following calls stop at the
 * inode the magic link names, symlinks included. They run as the daemon:
 * the guest's kernel has checked the caller's access to the inode and to
 * the trusted.* and security.* names (its VFS and capability hooks).
 */
static int pt_setxattr(void *fs, const struct fuse_req_ctx *ctx,
		       uint64_t nodeid, const char *name, const void *value,
		       size_t size, uint32_t flags, uint32_t setxattr_flags)
{
	struct passthrough *pt = fs;
	char path[PROC_FD_PATH_MAX], mapped[XATTRMAP_NAME_MAX + 1];
	const char *host_name;
	bool host_judges_sgid;
	struct inode *inode;
	int ret;

	ret = xattr_begin(pt, nodeid, name, mapped, &host_name, &inode,
			  path);
	if (ret < 0)
		goto out;
	/* A guest that cannot say whether an access ACL drops sgid leaves it
	 * to the host: the caller's ids without CAP_FSETID, as for creates. */
	host_judges_sgid = !pt->guest_kills_acl_sgid &&
			   !strcmp(name, "system.posix_acl_access");
	ret = host_judges_sgid ? as_caller(pt, ctx, host_judged_role(ctx)) :
				 check_caller(pt, ctx);
	if (ret < 0)
		goto put;
	ret = errno_or(setxattr(path, host_name, value, size, flags));
	if (host_judges_sgid)
		as_daemon(pt);
	/* Setting an access ACL the guest's kernel judged to drop sgid: the
	 * host, as the daemon, would keep it, also for an ACL the map stores
	 * under another name. */
	if (ret == 0 && (setxattr_flags & FUSE_SETXATTR_ACL_KILL_SGID) &&
	    !strcmp(name, "system.posix_acl_access")) {
		struct statx stx;

		ret = stat_fd(inode->fd, &stx);
		if (ret == 0 && (stx.stx_mode & S_ISGID))
			ret = errno_or(fchmodat(AT_FDCWD, path, stx.stx_mode & 07777 & ~S_ISGID, 0));
	}
put:
	inode_put(pt->inodes, inode);
out:
	return ret;
}

static ssize_t pt_getxattr(void *fs, const struct fuse_req_ctx *ctx,
			   uint64_t nodeid, const char *name, void *value,
			   size_t size)
{
	struct passthrough *pt = fs;
	char path[PROC_FD_PATH_MAX], mapped[XATTRMAP_NAME_MAX + 1];
	const char *host_name;
	struct inode *inode;
	ssize_t ret;

	ret = xattr_begin(pt, nodeid, name, mapped, &host_name, &inode,
			  path);
	if (ret < 0)
		goto out;
	ret = check_caller(pt, ctx);
	if (ret < 0)
		goto put;
	ret = getxattr(path, host_name, value, size);
	if (ret < 0)
		ret = -errno;
put:
	inode_put(pt->inodes, inode);
out:
	return ret;
}

/* Turns a host listxattr result into the guest's in place: --xattrmap
 * hides or shortens names, blocked ACL names go, and so do trusted.* names
 * for a caller other than root, as a local file system hides them from a
 * caller without CAP_SYS_ADMIN; nothing grows. */
static size_t filter_xattr_list(struct passthrough *pt, char *list, size_t len,
				bool show_trusted)
{
	size_t in = 0, out = 0;

	while (in < len) {
		size_t n = strnlen(list + in, len - in);
		const char *guest;

		list[in + n] = '\0';   /* a last name the host left unterminated */
		if (xattrmap_to_guest(&pt->opts.xattrmap, list + in, &guest) &&
		    !blocked_xattr(pt, guest) &&
		    (show_trusted || strncmp(guest, "trusted.", 8))) {
			size_t g = strlen(guest) + 1;

			memmove(list + out, guest, g);
			out += g;
		}
		in += n + 1;
	}
	return out;
}

static ssize_t pt_listxattr(void *fs, const struct fuse_req_ctx *ctx,
			    uint64_t nodeid, char *list, size_t size)
{
	struct passthrough *pt = fs;
	char path[PROC_FD_PATH_MAX];
	struct inode *inode;
	ssize_t ret;

	if (!pt->opts.xattr)
		return -ENOSYS;
	ret = inode_get(pt->inodes, nodeid, &inode);
	if (ret < 0)
		goto out;
	proc_fd_path(path, inode->fd);
	ret = check_caller(pt, ctx);
	if (ret < 0)
		goto put;
	ret = listxattr(path, list, size);
	if (ret < 0)
		ret = -errno;
	/* A size probe (size 0) may overstate, as with QEMU's virtiofsd: the
	 * mapped list is never longer, and the guest copes with that. */
	if (ret > 0 && size > 0)
		ret = filter_xattr_list(pt, list, ret, ctx->uid == 0);
put:
	inode_put(pt->inodes, inode);
out:
	return ret;
}

static int pt_removexattr(void *fs, const struct fuse_req_ctx *ctx,
			  uint64_t nodeid, const char *name)
{
	struct passthrough *pt = fs;
	char path[PROC_FD_PATH_MAX], mapped[XATTRMAP_NAME_MAX + 1];
	const char *host_name;
	struct inode *inode;
	int ret;

	ret = xattr_begin(pt, nodeid, name, mapped, &host_name, &inode,
			  path);
	if (ret < 0)
		goto out;
	/* The guest's kernel removes file capabilities itself when a writer
	 * changes the file (security_inode_killpriv), without a permission
	 * check, so even a forbidden writer's removal goes through; an
	 * explicit removal it has already checked for CAP_SETFCAP. The name
	 * is the guest's; the host's may differ under --xattrmap. */
	if (strcmp(name, "security.capability")) {
		ret = check_caller(pt, ctx);
		if (ret < 0)
			goto put;
	}
	ret = errno_or(removexattr(path, host_name));
put:
	inode_put(pt->inodes, inode);
out:
	return ret;
}

static int pt_access(void *fs, const struct fuse_req_ctx *ctx, uint64_t nodeid,
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
	ret = as_caller(pt, ctx, CREDS_CALLER_ONLY);
	if (ret < 0)
		goto put;
	/* AT_EACCESS: check the switched effective ids, not the real ones. */
	ret = errno_or(faccessat(inode->fd, "", mask & (R_OK | W_OK | X_OK),
				 AT_EACCESS | AT_EMPTY_PATH));
	as_daemon(pt);
	if (ret == 0 && pt->opts.readonly && (mask & W_OK))
		ret = -EROFS;
put:
	inode_put(pt->inodes, inode);
out:
	return ret;
}

static int pt_fallocate(void *fs, const struct fuse_req_ctx *ctx,
			uint64_t nodeid, const struct fuse_fallocate_in *in)
{
	struct passthrough *pt = fs;
	struct handle *h;
	int ret;

	ret = get_file_handle(pt, nodeid, in->fh, &h);
	if (ret < 0)
		return ret;
	ret = errno_or(fallocate(h->fd, in->mode, in->offset, in->length));
	handle_put(pt->handles, h);
	return ret;
}

static int pt_lseek(void *fs, const struct fuse_req_ctx *ctx, uint64_t nodeid,
		    const struct fuse_lseek_in *in, struct fuse_lseek_out *out)
{
	struct passthrough *pt = fs;
	struct handle *h;
	off_t off;
	int ret;

	ret = get_file_handle(pt, nodeid, in->fh, &h);
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
	handle_put(pt->handles, h);
	return ret;
}

static ssize_t pt_copy_file_range(void *fs, const struct fuse_req_ctx *ctx,
				  uint64_t nodeid,
				  const struct fuse_copy_file_range_in *in)
{
	struct passthrough *pt = fs;
	struct handle *src, *dst;
	loff_t off_in = in->off_in, off_out = in->off_out;
	ssize_t ret;

	ret = get_file_handle(pt, nodeid, in->fh_in, &src);
	if (ret < 0)
		goto out;
	ret = get_file_handle(pt, in->nodeid_out, in->fh_out, &dst);
	if (ret < 0)
		goto put_src;
	ret = copy_file_range(src->fd, &off_in, dst->fd, &off_out, in->len,
			      in->flags);
	if (ret < 0)
		ret = -errno;
	handle_put(pt->handles, dst);
put_src:
	handle_put(pt->handles, src);
out:
	return ret;
}

/* syncfs() of the file system behind an O_PATH fd (which syncfs refuses):
 * a special file is never opened, so the share's root stands in for it. */
static int sync_fs_of(struct passthrough *pt, int path_fd, mode_t type)
{
	int fd, ret;

	ret = fd_budget_take(&pt->fds);
	if (ret < 0)
		goto out;
	if (openable_type(type))
		fd = reopen(pt, path_fd, O_RDONLY | O_NONBLOCK);
	else
		fd = reopen(pt, inode_table_root(pt->inodes)->fd,
			    O_RDONLY | O_DIRECTORY);
	if (fd < 0) {
		ret = fd;
		goto give_back;
	}
	ret = errno_or(syncfs(fd));
	close(fd);
give_back:
	fd_budget_give_back(&pt->fds);
out:
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

	if (!openable_type(inode->type) ||
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
	 * at most SYNC_MOUNTS_MAX of them live at once, within FD_RESERVE.
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

static int pt_syncfs(void *fs, const struct fuse_req_ctx *ctx, uint64_t nodeid)
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

static int pt_getlk(void *fs, const struct fuse_req_ctx *ctx, uint64_t nodeid,
		    const struct fuse_lk_in *in, struct fuse_lk_out *out)
{
	struct passthrough *pt = fs;
	struct handle *h;
	int ret;

	ret = get_file_handle(pt, nodeid, in->fh, &h);
	if (ret < 0)
		return ret;
	ret = locks_getlk(pt->locks, h, nodeid, in, out);
	handle_put(pt->handles, h);
	return ret;
}

static int pt_setlk(void *fs, const struct fuse_req_ctx *ctx, uint64_t nodeid,
		    const struct fuse_lk_in *in, bool sleep)
{
	struct passthrough *pt = fs;
	struct handle *h;
	int ret;

	ret = get_file_handle(pt, nodeid, in->fh, &h);
	if (ret < 0)
		return ret;
	ret = locks_setlk(pt->locks, ctx, h, nodeid, in, sleep);
	/* Answered later: the waiter keeps our reference. */
	if (ret != FUSE_REPLY_LATER)
		handle_put(pt->handles, h);
	return ret;
}

const struct fs_ops passthrough_ops = {
	.init = pt_init,
	.destroy = pt_destroy,
	.lookup = pt_lookup,
	.forget = pt_forget,
	.getattr = pt_getattr,
	.setattr = pt_setattr,
	.readlink = pt_readlink,
	.symlink = pt_symlink,
	.mknod = pt_mknod,
	.mkdir = pt_mkdir,
	.unlink = pt_unlink,
	.rmdir = pt_rmdir,
	.rename = pt_rename,
	.link = pt_link,
	.open = pt_open,
	.read = pt_read,
	.write = pt_write,
	.statfs = pt_statfs,
	.release = pt_release,
	.fsync = pt_fsync,
	.flush = pt_flush,
	.opendir = pt_opendir,
	.readdir = pt_readdir,
	.releasedir = pt_releasedir,
	.fsyncdir = pt_fsyncdir,
	.setxattr = pt_setxattr,
	.getxattr = pt_getxattr,
	.listxattr = pt_listxattr,
	.removexattr = pt_removexattr,
	.access = pt_access,
	.create = pt_create,
	.fallocate = pt_fallocate,
	.lseek = pt_lseek,
	.copy_file_range = pt_copy_file_range,
	.syncfs = pt_syncfs,
	.tmpfile = pt_tmpfile,
	/* Offered to the guest only with --posix-lock / --flock. */
	.getlk = pt_getlk,
	.setlk = pt_setlk,
};

/* ---- setup ------------------------------------------------------------ */

static void set_timeout(struct passthrough *pt)
{
	double t = pt->opts.timeout;

	if (t < 0) {
		switch (pt->opts.cache) {
		case CACHE_NEVER:
			t = 0;
			break;
		case CACHE_ALWAYS:
		case CACHE_METADATA:
			t = 86400;
			break;
		case CACHE_AUTO:
		default:
			t = 1;
			break;
		}
	}
	pt->timeout_sec = (uint64_t)t;
	pt->timeout_nsec = (uint32_t)((t - (double)pt->timeout_sec) * 1e9);
}

static void close_mount_fds(struct passthrough *pt)
{
	for (unsigned i = 0; i < pt->nmounts; i++)
		close(pt->mounts[i].fd);
	pthread_mutex_destroy(&pt->mounts_lock);
}

static long guest_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return 1 << 20;
	if (rl.rlim_cur > 2 * FD_RESERVE)
		return rl.rlim_cur - FD_RESERVE;
	return rl.rlim_cur / 2;
}

/* File handles need the file system's support and CAP_DAC_READ_SEARCH:
 * find out once, on the root, rather than on the guest's first lookup. */
static int check_file_handles(struct passthrough *pt, int root_fd)
{
	const struct inode_handle *handle;
	struct handle_buf hb;
	int fd, ret;

	if (pt->opts.file_handles == FILE_HANDLES_NEVER)
		return 0;
	ret = handle_for_inode(pt, root_fd, S_IFDIR, &hb, &handle);
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

int passthrough_new(struct passthrough **out, const struct passthrough_opts *opts)
{
	struct passthrough *pt;
	struct inode_key root_key;
	struct statx stx;
	int root_fd, ret;

	if (!opts || !opts->shared_dir)
		return -EINVAL;
	pt = calloc(1, sizeof(*pt));
	if (!pt) {
		ret = -ENOMEM;
		goto err;
	}
	pt->opts = *opts;
	pt->shared_dir = strdup(opts->shared_dir);
	if (!pt->shared_dir) {
		ret = -ENOMEM;
		goto err_free;
	}
	pt->opts.shared_dir = pt->shared_dir;
	pthread_mutex_init(&pt->mounts_lock, NULL);
	pt->writeback = opts->writeback;
	set_timeout(pt);
	pt->fds.limit = guest_fd_limit();

	pt->switch_creds = geteuid() == 0;
	if (pt->switch_creds) {
		ret = creds_drop_supplementary_groups();
		if (ret < 0) {
			log_err("cannot drop supplementary groups: %s", strerror(-ret));
			goto err_dir;
		}
		/* Here, before any serving thread starts and before the
		 * daemon gives up CAP_SETPCAP: every thread inherits it. */
		ret = creds_keep_caps_on_switch();
		if (ret < 0) {
			log_err("cannot keep capabilities across id switches "
				"(SECBIT_NO_SETUID_FIXUP): %s", strerror(-ret));
			goto err_dir;
		}
	}

	if (opts->proc_self_fd_given)
		pt->proc_self_fd = opts->proc_self_fd;
	else
		pt->proc_self_fd = open("/proc/self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (pt->proc_self_fd < 0) {
		ret = -errno;
		log_err("cannot open /proc/self/fd: %s", strerror(errno));
		goto err_dir;
	}
	root_fd = open(opts->shared_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0) {
		ret = -errno;
		log_err("cannot open shared dir %s: %s", opts->shared_dir,
			strerror(errno));
		goto err_proc;
	}
	ret = stat_fd(root_fd, &stx);
	if (ret < 0)
		goto err_root;
	/* After the shared dir is open: its path may be relative. Threads
	 * that unshare(CLONE_FS) for their umask keep this cwd. */
	if (fchdir(pt->proc_self_fd) < 0) {
		ret = -errno;
		log_err("cannot enter /proc/self/fd: %s", strerror(errno));
		goto err_root;
	}
	ret = check_file_handles(pt, root_fd);
	if (ret < 0)
		goto err_root;
	key_from_statx(&stx, &root_key);
	ret = inode_table_new(&pt->inodes, &pt->fds, root_fd, &root_key);
	if (ret < 0)
		goto err_root;
	ret = handle_table_new(&pt->handles, pt->inodes, &pt->fds);
	if (ret < 0)
		goto err_inodes;
	ret = lock_table_new(&pt->locks, pt->handles, &pt->fds, pt->proc_self_fd);
	if (ret < 0)
		goto err_handles;
	ret = offload_new(&pt->offload);
	if (ret < 0)
		goto err_locks;
	ret = sync_runner_new(&pt->syncs, pt->handles, pt->offload, opts->defer_every_sync);
	if (ret < 0)
		goto err_offload;
	ret = read_runner_new(&pt->reads, pt->handles, pt->offload, opts->defer_every_read);
	if (ret < 0)
		goto err_syncs;
	*out = pt;
	return 0;

err_syncs:
	sync_runner_free(pt->syncs);
err_offload:
	offload_free(pt->offload);
err_locks:
	lock_table_free(pt->locks);
err_handles:
	handle_table_free(pt->handles);
err_inodes:
	inode_table_free(pt->inodes);   /* closes root_fd */
	goto err_proc;
err_root:
	close(root_fd);
err_proc:
	close(pt->proc_self_fd);
err_dir:
	close_mount_fds(pt);
	free(pt->shared_dir);
err_free:
	free(pt);
err:
	return ret;
}

void passthrough_hold_offload(struct passthrough *pt, bool hold)
{
	offload_hold(pt->offload, hold);
}

void passthrough_pretend_uncached(struct passthrough *pt, bool on)
{
	read_runner_pretend_uncached(pt->reads, on);
}

void passthrough_free(struct passthrough *pt)
{
	if (!pt)
		return;
	/* First: its jobs still use the runners and hold handles. */
	offload_free(pt->offload);
	read_runner_free(pt->reads);
	sync_runner_free(pt->syncs);
	lock_table_free(pt->locks);
	handle_table_free(pt->handles);
	inode_table_free(pt->inodes);
	close(pt->proc_self_fd);
	close_mount_fds(pt);
	free(pt->shared_dir);
	free(pt);
}
