/* Extended attributes of passthrough inodes: the four xattr ops, one preamble, and a new inode's security label. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "backend/acl_xattr.h"
#include "backend/pt_internal.h"

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

/* What the xattr ops share between their start and end. */
struct xattr_op {
	struct inode *inode;          /* a request ref, put by xattr_end */
	const char *host_name;        /* the host's name for the guest's */
	char path[PROC_FD_PATH_MAX];  /* the inode as a /proc/self/fd path */
	char mapped[XATTRMAP_NAME_MAX + 1];
};

/*
 * The common start of the xattr ops: whether xattrs are served, the host's
 * name for the guest's under --xattrmap (for the ops that take a name;
 * LISTXATTR passes NULL), and the inode; on success the caller ends with
 * xattr_end.
 */
static int xattr_begin(struct passthrough *pt, uint64_t nodeid, const char *name,
		       struct xattr_op *x)
{
	int ret;

	if (!pt->opts.xattr)
		return -ENOSYS;
	x->host_name = NULL;
	if (name) {
		ret = host_xattr_name(pt, name, x->mapped, &x->host_name);
		if (ret < 0)
			return ret;
	}
	ret = inode_get(pt->inodes, nodeid, &x->inode);
	if (ret < 0)
		return ret;
	pt_proc_fd_path(x->path, x->inode->fd);
	return 0;
}

static void xattr_end(struct passthrough *pt, struct xattr_op *x)
{
	inode_put(pt->inodes, x->inode);
}

/*
 * Whether the value of this xattr is an ACL with ids: when the guest's name
 * is an ACL's (the guest's kernel reads and writes the value as one, in
 * guest ids) or the host's name is (the host's kernel enforces it, in host
 * ids). Both count under --xattrmap: an ACL the map stores under another
 * name keeps host ids on the host, as the files' owners do, and a guest
 * name the map turns into a host ACL name cannot grant a host id the map
 * would refuse.
 */
static bool acl_value(const char *guest_name, const struct xattr_op *x)
{
	return acl_xattr_name(guest_name) || acl_xattr_name(x->host_name);
}

/* An ACL value whose ids a uid or gid map translates. */
static bool acl_ids_translated(struct passthrough *pt, const char *guest_name,
			       const struct xattr_op *x)
{
	return acl_xattr_translates(&pt->opts.uid_map, &pt->opts.gid_map) &&
	       acl_value(guest_name, x);
}

/*
 * xattrs go through the /proc/self/fd path so no inode is opened for them
 * (FIFOs and devices stay O_PATH); the path-following calls stop at the
 * inode the magic link names, symlinks included. They run as the daemon:
 * the guest's kernel has checked the caller's access to the inode and to
 * the trusted.* and security.* names (its VFS and capability hooks).
 */
int pt_setxattr(void *fs, const struct fuse_request_ctx *ctx,
		uint64_t nodeid, const char *name, const void *value,
		size_t size, uint32_t flags, uint32_t setxattr_flags)
{
	struct passthrough *pt = fs;
	struct quota_ticket held = { 0 };
	void *host_value = NULL;
	bool host_judges_sgid;
	struct xattr_op x;
	int ret;

	ret = xattr_begin(pt, nodeid, name, &x);
	if (ret < 0)
		return ret;
	ret = pt_refuse_change(x.inode);
	if (ret < 0)
		goto put;
	/* Room for the name and value themselves: a file system that keeps
	 * them in the inode allocates nothing, and the settle says so. */
	if (quota_on(pt->quota)) {
		ret = quota_reserve(pt->quota, strlen(name) + size, 0, &held);
		if (ret < 0)
			goto put;
	}
	/* The ACL in host ids, before anything is written: an id the map
	 * refuses leaves the file as it was. */
	if (acl_ids_translated(pt, name, &x)) {
		host_value = malloc(size ? size : 1);
		if (!host_value) {
			ret = -ENOMEM;
			goto put;
		}
		ret = acl_xattr_to_host(&pt->opts.uid_map, &pt->opts.gid_map, value, size,
					host_value);
		if (ret < 0)
			goto put;
		value = host_value;
	}
	/* A guest that cannot say whether an access ACL drops sgid leaves it
	 * to the host: the caller's ids without CAP_FSETID, as for creates. */
	host_judges_sgid = !pt->guest_kills_acl_sgid &&
			   !strcmp(name, "system.posix_acl_access");
	ret = host_judges_sgid ? pt_as_caller(pt, ctx, pt_host_judged_role(ctx)) :
				 pt_check_caller(pt, ctx);
	if (ret < 0)
		goto put;
	ret = pt_errno_or(setxattr(x.path, x.host_name, value, size, flags));
	if (host_judges_sgid)
		pt_as_daemon(pt);
	/* Setting an access ACL the guest's kernel judged to drop sgid: the
	 * host, as the daemon, would keep it, also for an ACL the map stores
	 * under another name. */
	if (ret == 0 && (setxattr_flags & FUSE_SETXATTR_ACL_KILL_SGID) &&
	    !strcmp(name, "system.posix_acl_access")) {
		char fd_name[PROC_FD_NAME_MAX];
		struct statx stx;

		/* fchmodat on the /proc/self/fd name, as SETATTR does: the
		 * seccomp filter allows no path-based chmod. */
		pt_proc_fd_name(fd_name, x.inode->fd);
		ret = pt_stat_fd(x.inode->fd, &stx);
		if (ret == 0 && (stx.stx_mode & S_ISGID))
			ret = pt_errno_or(fchmodat(pt->proc_self_fd, fd_name,
						   stx.stx_mode & 07777 & ~S_ISGID, 0));
	}
put:
	if (quota_on(pt->quota)) {
		quota_settle(pt->quota, x.inode->fd);
		quota_release(pt->quota, &held);
	}
	free(host_value);
	xattr_end(pt, &x);
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

/* GETXATTR of name, or LISTXATTR with name NULL: the host's answer as the
 * guest should see it, after the caller's check. */
static ssize_t xattr_read(struct passthrough *pt, const struct fuse_request_ctx *ctx,
			  uint64_t nodeid, const char *name, void *buf, size_t size)
{
	struct xattr_op x;
	ssize_t ret;

	ret = xattr_begin(pt, nodeid, name, &x);
	if (ret < 0)
		return ret;
	ret = pt_check_caller(pt, ctx);
	if (ret < 0)
		goto end;
	ret = name ? getxattr(x.path, x.host_name, buf, size) : listxattr(x.path, buf, size);
	if (ret < 0)
		ret = -errno;
	/* A size probe (size 0) may overstate, as with QEMU's virtiofsd: the
	 * mapped list is never longer, and the guest copes with that. */
	else if (!name && ret > 0 && size > 0)
		ret = filter_xattr_list(pt, buf, ret, ctx->uid == 0);
	/*
	 * An ACL in guest ids; a size probe's answer holds already, since
	 * translating changes no length. Without a map this still shows an
	 * id the host gave as (uid_t)-1 as the overflow id: a daemon in a user
	 * namespace (an unprivileged start) gets -1 for every id outside it,
	 * and the guest's kernel would refuse the whole ACL. A value that is
	 * no ACL is then left as the host had it.
	 */
	else if (name && size > 0 && acl_value(name, &x)) {
		int translated = acl_xattr_to_guest(&pt->opts.uid_map, &pt->opts.gid_map,
						    buf, (size_t)ret);
		if (translated < 0 && acl_ids_translated(pt, name, &x))
			ret = translated;
	}
end:
	xattr_end(pt, &x);
	return ret;
}

ssize_t pt_getxattr(void *fs, const struct fuse_request_ctx *ctx,
		    uint64_t nodeid, const char *name, void *value,
		    size_t size)
{
	return xattr_read(fs, ctx, nodeid, name, value, size);
}

ssize_t pt_listxattr(void *fs, const struct fuse_request_ctx *ctx,
		     uint64_t nodeid, char *list, size_t size)
{
	return xattr_read(fs, ctx, nodeid, NULL, list, size);
}

int pt_removexattr(void *fs, const struct fuse_request_ctx *ctx,
		   uint64_t nodeid, const char *name)
{
	struct passthrough *pt = fs;
	struct xattr_op x;
	int ret;

	ret = xattr_begin(pt, nodeid, name, &x);
	if (ret < 0)
		return ret;
	ret = pt_refuse_change(x.inode);
	if (ret < 0)
		goto put;
	/* The guest's kernel removes file capabilities itself when a writer
	 * changes the file (security_inode_killpriv), without a permission
	 * check, so even a forbidden writer's removal goes through; an
	 * explicit removal it has already checked for CAP_SETFCAP. The name
	 * is the guest's; the host's may differ under --xattrmap. */
	if (strcmp(name, "security.capability")) {
		ret = pt_check_caller(pt, ctx);
		if (ret < 0)
			goto put;
	}
	ret = pt_errno_or(removexattr(x.path, x.host_name));
	if (ret == 0 && quota_on(pt->quota))
		quota_settle(pt->quota, x.inode->fd);
put:
	xattr_end(pt, &x);
	return ret;
}

/* FUSE_SECURITY_CTX: the label the guest's LSM gave the new inode. Set as
 * the daemon: security.* may need privileges the guest ids lack. */
int pt_apply_secctx(struct passthrough *pt, const struct fuse_request_ctx *ctx,
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
	pt_proc_fd_path(path, inode->fd);
	return pt_errno_or(setxattr(path, name, ctx->secctx_value,
				    ctx->secctx_size, 0));
}
