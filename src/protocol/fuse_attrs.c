/* The handlers for an inode's attributes and the file system's: GETATTR, STATX, SETATTR, READLINK, ACCESS, STATFS, SYNCFS and the xattrs. */
#include "protocol/fuse_handlers.h"

#include <string.h>

int fuse_do_getattr(struct fuse_request *req)
{
	const struct fuse_getattr_in *in = arg_fixed(req, sizeof(*in));
	int rc = OPS(req)->getattr(FS(req), &req->ctx, req->in.nodeid, in, &req->out.attr);

	return REPLY_OUT(req, rc, attr);
}

/* The reply is assembled in the worker's out_buf, as READLINK's is: it is
 * larger than anything in the reply union. */
int fuse_do_statx(struct fuse_request *req)
{
	const struct fuse_statx_in *in = arg_fixed(req, sizeof(*in));
	struct fuse_statx_out *out = (struct fuse_statx_out *)req->w->out_buf;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = OPS(req)->statx(FS(req), &req->ctx, req->in.nodeid, in, out);
	return reply_if_ok(req, rc, out, sizeof(*out));
}

int fuse_do_readlink(struct fuse_request *req)
{
	size_t room = reply_room(req, PATH_MAX);
	ssize_t len = OPS(req)->readlink(FS(req), &req->ctx, req->in.nodeid, req->w->out_buf, room);

	if (len < 0)
		return (int)len;
	if ((size_t)len > room)
		return -EIO;
	reply_arg(req, req->w->out_buf, (size_t)len);
	return 0;
}

int fuse_do_setattr(struct fuse_request *req)
{
	const struct fuse_setattr_in *in = arg_fixed(req, sizeof(*in));
	int rc = OPS(req)->setattr(FS(req), &req->ctx, req->in.nodeid, in, &req->out.attr);

	return REPLY_OUT(req, rc, attr);
}

int fuse_do_statfs(struct fuse_request *req)
{
	int rc = OPS(req)->statfs(FS(req), &req->ctx, req->in.nodeid, &req->out.statfs.st);

	return REPLY_OUT(req, rc, statfs);
}

int fuse_do_access(struct fuse_request *req)
{
	const struct fuse_access_in *in = arg_fixed(req, sizeof(*in));

	return OPS(req)->access(FS(req), &req->ctx, req->in.nodeid, in->mask);
}

int fuse_do_syncfs(struct fuse_request *req)
{
	return OPS(req)->syncfs(FS(req), &req->ctx, req->in.nodeid);
}

/* ------------------------------------------------------------ xattrs */

int fuse_do_setxattr(struct fuse_request *req)
{
	struct fuse_setxattr_in in;
	size_t in_size = req->se->setxattr_in_size;
	const char *name;
	int rc;

	/* The struct grew with SETXATTR_EXT; its size is what INIT agreed. */
	if (req->arg_len < in_size)
		return -EINVAL;
	memset(&in, 0, sizeof(in));
	memcpy(&in, req->arg, in_size);
	req->arg_pos = in_size;
	rc = fuse_arg_xattr_name(req, &name);
	if (rc < 0)
		return rc;
	if (in.size > FERRY_XATTR_SIZE_MAX)
		return -E2BIG;
	if (in.size > req->arg_len - req->arg_pos)
		return -EINVAL;
	return OPS(req)->setxattr(FS(req), &req->ctx, req->in.nodeid, name,
				  req->arg + req->arg_pos, in.size, in.flags,
				  in.setxattr_flags);
}

/* GETXATTR and LISTXATTR: size 0 asks for the needed size, anything else
 * for the data, ERANGE when it does not fit. */
static int xattr_reply(struct fuse_request *req, uint32_t asked, ssize_t len, size_t room)
{
	if (len < 0)
		return (int)len;
	if (asked == 0) {
		if (req->wr_len - OUT_HDR < sizeof(req->out.getxattr))
			return -ERANGE;
		req->out.getxattr.size = (uint32_t)len;
		reply_arg(req, &req->out.getxattr, sizeof(req->out.getxattr));
		return 0;
	}
	if ((size_t)len > room)
		return -ERANGE;
	reply_arg(req, req->w->out_buf, (size_t)len);
	return 0;
}

/* Where GETXATTR and LISTXATTR put the data: nowhere when only the size
 * is asked for. */
static void *xattr_buf(struct fuse_request *req, uint32_t asked, size_t *room)
{
	*room = asked ? reply_room(req, asked) : 0;
	return asked ? req->w->out_buf : NULL;
}

int fuse_do_getxattr(struct fuse_request *req)
{
	const struct fuse_getxattr_in *in = arg_fixed(req, sizeof(*in));
	const char *name;
	size_t room;
	void *buf;
	int rc = fuse_arg_xattr_name(req, &name);

	if (rc < 0)
		return rc;
	buf = xattr_buf(req, in->size, &room);
	return xattr_reply(req, in->size,
			   OPS(req)->getxattr(FS(req), &req->ctx, req->in.nodeid, name, buf, room),
			   room);
}

int fuse_do_listxattr(struct fuse_request *req)
{
	const struct fuse_getxattr_in *in = arg_fixed(req, sizeof(*in));
	size_t room;
	void *buf = xattr_buf(req, in->size, &room);

	return xattr_reply(req, in->size,
			   OPS(req)->listxattr(FS(req), &req->ctx, req->in.nodeid, buf, room),
			   room);
}

int fuse_do_removexattr(struct fuse_request *req)
{
	const char *name;
	int rc = fuse_arg_xattr_name(req, &name);

	return rc < 0 ? rc : OPS(req)->removexattr(FS(req), &req->ctx, req->in.nodeid, name);
}
