/* Names in passthrough directories: lookup and forget, and the ops that make, link, rename and remove names. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/pt_internal.h"

static bool is_read_only_root(const struct passthrough *pt, const struct statx *stx)
{
	struct inode_key key;

	pt_key_from_statx(stx, &key);
	return policy_set_has_root(&pt->read_only_set, key.dev, key.ino);
}

/* A root, or a file of a read-only subtree reached by another name. */
static bool is_read_only_by_identity(const struct passthrough *pt, const struct statx *stx)
{
	struct inode_key key;

	pt_key_from_statx(stx, &key);
	return policy_set_has(&pt->read_only_set, key.dev, key.ino,
			      stx->stx_nlink > 1 && !S_ISDIR(stx->stx_mode));
}

bool pt_hidden(const struct passthrough *pt, const struct statx *stx)
{
	struct inode_key key;

	if (pt->hidden_set.n_roots == 0)
		return false;
	pt_key_from_statx(stx, &key);
	return policy_set_has(&pt->hidden_set, key.dev, key.ino,
			      stx->stx_nlink > 1 && !S_ISDIR(stx->stx_mode));
}

/*
 * Whether the directory fd lies in a --read-only subtree, found by walking
 * ".." up to the share's root. Only a LOOKUP of ".." needs it (the guest's
 * export operations send one): there the parent's flag says nothing about
 * the grandparent. Fails closed: a walk that cannot finish says read-only.
 */
static bool ancestry_read_only(struct passthrough *pt, int fd)
{
	struct inode *root = inode_table_root(pt->inodes);
	struct inode_key key;
	struct statx stx;
	bool ro = true;
	int cur = dup(fd);

	for (int depth = 0; cur >= 0 && depth < 4096; depth++) {
		int up;

		if (pt_stat_fd(cur, &stx) < 0)
			break;
		if (is_read_only_root(pt, &stx))
			break;
		pt_key_from_statx(&stx, &key);
		if (key.ino == root->key.ino && key.dev == root->key.dev) {
			ro = false;
			break;
		}
		up = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
		close(cur);
		cur = up;
	}
	if (cur >= 0)
		close(cur);
	return ro;
}

int pt_name_policy(struct passthrough *pt, const struct inode *dir, const char *name,
		   enum pt_name_use use)
{
	struct statx stx;
	bool exists;

	/* An added dir's NAME at the root is taken, as a mount point is:
	 * nothing may be made there, and it cannot be removed or moved. */
	if (pt_area_named(pt, dir, name))
		return use == PT_NAME_MADE ? -EEXIST : -EBUSY;
	/* Without roots only a read-only added dir's flag can refuse. */
	if (pt->read_only_set.n_roots == 0 && pt->hidden_set.n_roots == 0)
		return dir->read_only ? -EROFS : 0;
	/* A name that is not there is neither hidden nor protected; the call
	 * that follows gives its own error. */
	exists = statx(dir->fd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
		       STATX_TYPE | STATX_INO | STATX_NLINK, &stx) == 0;
	if (exists && pt_hidden(pt, &stx))
		return use == PT_NAME_MADE ? -EACCES : -ENOENT;
	if (dir->read_only)
		return -EROFS;
	if (exists && is_read_only_root(pt, &stx))
		return -EROFS;
	return 0;
}

/* Shared tail of the lookups: identifies the file behind fd (an fd taken
 * from the budget) and finds or adds its inode. Consumes fd and its budget
 * on every path. A new inode is read-only when parent_read_only says its
 * directory is, or when it is protected by identity (a root, or a
 * multiply-linked file of a read-only subtree). */
static int add_inode(struct passthrough *pt, int fd, uint32_t area, bool parent_read_only,
		     struct inode **out, struct statx *stx)
{
	const struct inode_file_handle *handle;
	struct inode_handle_buf hb;
	struct inode_key key;
	int ret = pt_stat_fd(fd, stx);

	if (ret < 0)
		goto close_fd;
	ret = pt_handle_at_lookup(pt, fd, stx, &hb, &handle);
	if (ret < 0)
		goto close_fd;
	pt_key_from_statx(stx, &key);
	key.area = area;
	/* ".." that lands on the shared dir maps to nodeid 1 via the key. */
	return inode_lookup_add(pt->inodes, fd, &key, stx->stx_mode, handle,
				parent_read_only || is_read_only_by_identity(pt, stx), out);

close_fd:
	pt_close_fd(pt, fd);
	return ret;
}

/* Gives the guest the inode behind an fd of ours (O_PATH or not), made in
 * parent; takes one lookup and one request ref on the result. */
int pt_inode_from_fd(struct passthrough *pt, const struct inode *parent, int fd,
		     struct inode **inode, struct statx *stx)
{
	int path_fd = pt_reopen_counted(pt, fd, O_PATH);

	if (path_fd < 0)
		return path_fd;
	return add_inode(pt, path_fd, parent->key.area, parent->read_only, inode, stx);
}

/* The answer of a lookup that names an inode held already: one more
 * guest lookup and one request ref on it. */
static int held_inode(struct passthrough *pt, struct inode *inode, struct inode **out,
		      struct statx *stx)
{
	int ret = pt_stat_fd(inode->fd, stx);

	if (ret < 0)
		return ret;
	inode_get_again(pt->inodes, inode);
	inode_add_lookup(pt->inodes, inode);
	*out = inode;
	return 0;
}

/*
 * Resolves one name below dir without ever leaving the share: names are
 * single components, opened with O_NOFOLLOW relative to the parent's fd, so
 * a symlink is returned as itself for the guest to resolve in its own
 * namespace. ".." of the root is the root, and ".." of an added dir's root
 * is the share's root too (never the host's parent of that dir); an added
 * dir's NAME at the root is its root. On success the inode has one more
 * guest lookup and one request ref for the caller to put.
 */
static int lookup_inode(struct passthrough *pt, struct inode *dir,
			const char *name, struct inode **out, struct statx *stx)
{
	struct inode *root = inode_table_root(pt->inodes);
	bool dotdot = !strcmp(name, "..");
	struct inode_key key;
	bool parent_read_only;
	uint32_t area;
	int fd, ret;

	if (!strcmp(name, ".") || (dotdot && dir == root))
		return held_inode(pt, dir, out, stx);
	if (pt->n_areas) {
		area = pt_area_named(pt, dir, name);
		if (area)
			return held_inode(pt, pt->areas[area - 1].root, out, stx);
		if (dotdot && pt_is_area_root(pt, dir))
			return held_inode(pt, root, out, stx);
		/* ".." must stay below the added dir's root, which a host
		 * rename could have moved dir out of (the sandbox does not
		 * confine added dirs): dir below it, its parent is too. */
		if (dotdot && dir->key.area) {
			ret = pt_area_contains(pt, dir->key.area, dir->fd);
			if (ret < 0)
				return ret;
		}
	}
	/* Most names the guest looks up are inodes it already knows (other
	 * names, READDIRPLUS, a lookup after its entry timed out). A stat of
	 * the name finds them without opening and closing a duplicate fd:
	 * the table's fd keeps that inode alive, so its key cannot have been
	 * reused by another file. Only unknown inodes are opened. */
	ret = pt_errno_or(statx(dir->fd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
				STATX_BASIC_STATS | STATX_MNT_ID, stx));
	if (ret < 0)
		return ret;
	/* A hidden object has no inode: no name, "..", or host-made link
	 * gives the guest a nodeid for it, so no request can reach it. */
	if (pt_hidden(pt, stx))
		return -ENOENT;
	area = dir->key.area;
	pt_key_from_statx(stx, &key);
	key.area = area;
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
	/* A name's policy is its directory's, but ".." goes up, where the
	 * directory's flag says nothing. The --read-only PATHs are the shared
	 * dir's: an added dir has only its own flag (and the roots' identity). */
	parent_read_only = dir->read_only;
	if (dotdot && area) {
		parent_read_only = pt->areas[area - 1].read_only;
	} else if (dotdot && pt->read_only_set.n_roots) {
		parent_read_only = ancestry_read_only(pt, fd);
	}
	return add_inode(pt, fd, area, parent_read_only, out, stx);
}

int pt_lookup_entry(struct passthrough *pt, struct inode *dir,
		    const char *name, struct fuse_entry_out *out)
{
	struct inode *inode;
	struct statx stx;
	int ret = lookup_inode(pt, dir, name, &inode, &stx);

	if (ret < 0)
		return ret;
	pt_fill_entry(pt, dir, inode, &stx, out);
	inode_put(pt->inodes, inode);
	return 0;
}

int pt_lookup(void *fs, const struct fuse_request_ctx *ctx, uint64_t parent,
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
	ret = pt_lookup_entry(pt, dir, name, out);
	inode_put(pt->inodes, dir);
	return ret;
}

void pt_forget(void *fs, uint64_t nodeid, uint64_t nlookup)
{
	struct passthrough *pt = fs;

	inode_forget(pt->inodes, nodeid, nlookup);
}

ssize_t pt_readlink(void *fs, const struct fuse_request_ctx *ctx,
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

/* The directory a name is made in or removed from: the name checked, and
 * a request ref on parent's inode for the caller to put. */
static int dir_for_name(struct passthrough *pt, uint64_t parent, const char *name,
			struct inode **dir)
{
	int ret = pt_check_name(name);

	if (ret < 0)
		return ret;
	return inode_get(pt->inodes, parent, dir);
}

/* Shared tail of MKNOD/MKDIR/SYMLINK: make the node as the guest, then
 * look it up as the daemon. */
enum make_kind { MAKE_NODE, MAKE_DIR, MAKE_SYMLINK };

static int make_node(struct passthrough *pt, const struct fuse_request_ctx *ctx,
		     uint64_t parent, const char *name, enum make_kind kind,
		     mode_t mode, uint32_t rdev, uint32_t guest_umask,
		     const char *target, struct fuse_entry_out *out)
{
	struct quota_ticket held = { 0 };
	struct inode *dir, *inode;
	struct statx stx;
	int ret;

	ret = dir_for_name(pt, parent, name, &dir);
	if (ret < 0)
		goto out;
	ret = pt_name_policy(pt, dir, name, PT_NAME_MADE);
	if (ret < 0)
		goto put_dir;
	if (quota_on(pt->quota)) {
		bool own_block = kind == MAKE_DIR ||
				 (kind == MAKE_SYMLINK && strlen(target) > QUOTA_INLINE_SYMLINK_MAX);

		ret = quota_reserve(pt->quota, own_block ? QUOTA_BLOCK_BYTES : QUOTA_NAME_BYTES, 1,
				    &held);
		if (ret < 0)
			goto put_dir;
	}
	ret = pt_begin_create(pt, ctx, guest_umask);
	if (ret < 0)
		goto put_dir;
	switch (kind) {
	case MAKE_NODE:
		/* Creating FIFOs, sockets and device nodes is harmless; only
		 * opening them on the host is not, and OPEN refuses that. */
		ret = pt_errno_or(mknodat(dir->fd, name, mode, rdev));
		break;
	case MAKE_DIR:
		ret = pt_errno_or(mkdirat(dir->fd, name, mode));
		break;
	case MAKE_SYMLINK:
		/* The target is only stored; the guest resolves it. */
		ret = pt_errno_or(symlinkat(target, dir->fd, name));
		break;
	}
	pt_as_daemon(pt);
	if (ret < 0)
		goto put_dir;
	ret = lookup_inode(pt, dir, name, &inode, &stx);
	if (ret < 0)
		goto put_dir;
	if (quota_on(pt->quota)) {
		quota_inode_made(pt->quota, inode->fd);
		quota_settle(pt->quota, dir->fd);
	}
	ret = pt_apply_secctx(pt, ctx, inode);
	if (ret < 0) {
		/* an unlabelled node must not stay behind */
		unlinkat(dir->fd, name, kind == MAKE_DIR ? AT_REMOVEDIR : 0);
		inode_drop_lookup(pt->inodes, inode);
		goto put_inode;
	}
	pt_fill_entry(pt, dir, inode, &stx, out);
put_inode:
	inode_put(pt->inodes, inode);
put_dir:
	if (quota_on(pt->quota))
		quota_release(pt->quota, &held);
	inode_put(pt->inodes, dir);
out:
	return ret;
}

int pt_symlink(void *fs, const struct fuse_request_ctx *ctx, uint64_t parent,
	       const char *name, const char *target,
	       struct fuse_entry_out *out)
{
	return make_node(fs, ctx, parent, name, MAKE_SYMLINK, 0, 0, 0, target, out);
}

int pt_mknod(void *fs, const struct fuse_request_ctx *ctx, uint64_t parent,
	     const char *name, const struct fuse_mknod_in *in,
	     struct fuse_entry_out *out)
{
	return make_node(fs, ctx, parent, name, MAKE_NODE, in->mode, in->rdev,
			 in->umask, NULL, out);
}

int pt_mkdir(void *fs, const struct fuse_request_ctx *ctx, uint64_t parent,
	     const char *name, const struct fuse_mkdir_in *in,
	     struct fuse_entry_out *out)
{
	return make_node(fs, ctx, parent, name, MAKE_DIR, in->mode, 0,
			 in->umask, NULL, out);
}

static int remove_name(struct passthrough *pt, const struct fuse_request_ctx *ctx,
		       uint64_t parent, const char *name, int flags)
{
	struct quota_removal gone = { 0 };
	struct inode *dir;
	int ret;

	ret = dir_for_name(pt, parent, name, &dir);
	if (ret < 0)
		goto out;
	ret = pt_name_policy(pt, dir, name, PT_NAME_REMOVED);
	if (ret < 0)
		goto put_dir;
	ret = pt_check_caller(pt, ctx);
	if (ret < 0)
		goto put_dir;
	if (quota_on(pt->quota))
		quota_removing(pt->quota, dir->fd, name, &gone);
	ret = pt_errno_or(unlinkat(dir->fd, name, flags));
	if (ret == 0 && quota_on(pt->quota))
		quota_removed(pt->quota, &gone);
put_dir:
	inode_put(pt->inodes, dir);
out:
	return ret;
}

int pt_unlink(void *fs, const struct fuse_request_ctx *ctx, uint64_t parent,
	      const char *name)
{
	return remove_name(fs, ctx, parent, name, 0);
}

int pt_rmdir(void *fs, const struct fuse_request_ctx *ctx, uint64_t parent,
	     const char *name)
{
	return remove_name(fs, ctx, parent, name, AT_REMOVEDIR);
}

int pt_rename(void *fs, const struct fuse_request_ctx *ctx, uint64_t parent,
	      const char *name, uint64_t newparent, const char *newname,
	      uint32_t flags)
{
	struct passthrough *pt = fs;
	struct quota_removal replaced = { 0 };
	struct inode *olddir, *newdir;
	int ret;

	if (pt_check_name(name) < 0 || pt_check_name(newname) < 0 ||
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
	/* Between two directories of the share: two file systems for the
	 * guest, which copies instead. */
	ret = pt_same_area(olddir, newdir);
	if (ret < 0)
		goto put_new;
	/* Out of, into or within a read-only subtree, or moving or replacing
	 * one of its roots; a hidden source is absent, a hidden destination
	 * a name the guest may not take. */
	ret = pt_name_policy(pt, olddir, name, PT_NAME_REMOVED);
	if (ret == 0)
		ret = pt_name_policy(pt, newdir, newname, PT_NAME_MADE);
	if (ret < 0)
		goto put_new;
	ret = pt_check_caller(pt, ctx);
	if (ret < 0)
		goto put_new;
	/* A rename over a file removes that file (unless both names are of
	 * one file); an exchange removes nothing. */
	if (quota_on(pt->quota) && !(flags & RENAME_EXCHANGE))
		quota_replacing(pt->quota, olddir->fd, name, newdir->fd, newname, &replaced);
	ret = pt_errno_or(renameat2(olddir->fd, name, newdir->fd, newname, flags));
	if (ret == 0 && quota_on(pt->quota)) {
		quota_removed(pt->quota, &replaced);
		quota_settle(pt->quota, newdir->fd);
	}
put_new:
	inode_put(pt->inodes, newdir);
put_old:
	inode_put(pt->inodes, olddir);
out:
	return ret;
}

int pt_link(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
	    uint64_t newparent, const char *newname,
	    struct fuse_entry_out *out)
{
	struct passthrough *pt = fs;
	char name[PROC_FD_NAME_MAX];
	struct quota_ticket held = { 0 };
	struct inode *inode, *newdir;
	struct statx stx;
	int ret;

	ret = dir_for_name(pt, newparent, newname, &newdir);
	if (ret < 0)
		goto out;
	ret = inode_get(pt->inodes, nodeid, &inode);
	if (ret < 0)
		goto put_newdir;
	/* A link into a read-only subtree changes it; a link of a file in
	 * one changes that file (its link count), and its new name would be
	 * a way around the policy if the inode were ever looked up afresh. */
	ret = pt_same_area(inode, newdir);
	if (ret == 0)
		ret = pt_name_policy(pt, newdir, newname, PT_NAME_MADE);
	if (ret == 0)
		ret = pt_refuse_change(inode);
	if (ret < 0)
		goto put_inode;
	/* linkat(fd, "", AT_EMPTY_PATH) needs CAP_DAC_READ_SEARCH, which the
	 * sandbox keeps only for file handles; the /proc link names the inode
	 * too (even an O_TMPFILE one) and the magic link stops at the inode
	 * itself, so a symlink is linked, not its target. */
	pt_proc_fd_name(name, inode->fd);
	ret = pt_check_caller(pt, ctx);
	if (ret < 0)
		goto put_inode;
	/* One more name of a counted file: only its directory may grow. */
	if (quota_on(pt->quota)) {
		ret = quota_reserve(pt->quota, QUOTA_NAME_BYTES, 0, &held);
		if (ret < 0)
			goto put_inode;
	}
	ret = pt_errno_or(linkat(pt->proc_self_fd, name, newdir->fd, newname,
				 AT_SYMLINK_FOLLOW));
	if (quota_on(pt->quota)) {
		if (ret == 0)
			quota_settle(pt->quota, newdir->fd);
		quota_release(pt->quota, &held);
	}
	if (ret < 0)
		goto put_inode;
	ret = pt_stat_fd(inode->fd, &stx);
	if (ret < 0)
		goto put_inode;
	inode_add_lookup(pt->inodes, inode);
	pt_fill_entry(pt, newdir, inode, &stx, out);
put_inode:
	inode_put(pt->inodes, inode);
put_newdir:
	inode_put(pt->inodes, newdir);
out:
	return ret;
}
