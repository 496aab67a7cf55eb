/* The handlers for names in a directory: LOOKUP and FORGET, creating, removing, renaming and linking entries. */
#include "protocol/fuse_handlers.h"

#include <stdio.h>   /* RENAME_* */

#include "common/log.h"

int fuse_do_lookup(struct fuse_request *req)
{
	const char *name;
	/* "." and ".." arrive with EXPORT_SUPPORT; the backend maps them. */
	int rc = fuse_arg_name(req, &name, true);

	if (rc == 0)
		rc = OPS(req)->lookup(FS(req), &req->ctx, req->in.nodeid, name, &req->out.entry);
	return REPLY_OUT(req, rc, entry);
}

int fuse_do_forget(struct fuse_request *req)
{
	const struct fuse_forget_in *in = arg_fixed(req, sizeof(*in));

	if (OPS(req)->forget)
		OPS(req)->forget(FS(req), req->in.nodeid, in->nlookup);
	return 0;
}

/* The forget array is not copied whole: it is bounded only by the request,
 * so it is streamed through the argument buffer in chunks. */
int fuse_do_batch_forget(struct fuse_request *req)
{
	const struct fuse_batch_forget_in *in = arg_fixed(req, sizeof(*in));
	const size_t one = sizeof(struct fuse_forget_one);
	const size_t chunk_max = FERRY_ARG_BUF_SIZE / sizeof(struct fuse_forget_one);
	uint32_t count = in->count;
	size_t offset = sizeof(struct fuse_in_header) + sizeof(*in);
	struct fuse_forget_one *ones = (struct fuse_forget_one *)req->w->arg_buf;

	if (count > req->payload_len / one) {
		log_debug("fuse: BATCH_FORGET of %u entries in %zu bytes",
			  count, req->payload_len);
		return -EINVAL;
	}
	if (!OPS(req)->forget)
		return 0;
	/* count was read from the copy before the buffer is reused below. */
	while (count > 0) {
		size_t n = count < chunk_max ? count : chunk_max;

		iov_copy_from(ones, req->treq->rd, req->treq->rd_cnt, offset, n * one);
		for (size_t i = 0; i < n; i++)
			OPS(req)->forget(FS(req), ones[i].nodeid, ones[i].nlookup);
		offset += n * one;
		count -= (uint32_t)n;
	}
	return 0;
}

/* ------------------------------------------------------------ creating */

/* A creating op's new entry name, then its security context and group. */
static int arg_new_name(struct fuse_request *req, const char **name)
{
	int rc = fuse_arg_name(req, name, false);

	if (rc < 0)
		return rc;
	return fuse_arg_create_ext(req);
}

int fuse_do_symlink(struct fuse_request *req)
{
	const char *name, *target;
	size_t target_len;
	int rc;

	rc = fuse_arg_name(req, &name, false);
	if (rc < 0)
		return rc;
	rc = fuse_arg_string(req, &target, &target_len);
	if (rc < 0)
		return rc;
	if (target_len == 0)
		return -EINVAL;
	if (target_len >= PATH_MAX)
		return -ENAMETOOLONG;
	rc = fuse_arg_create_ext(req);
	if (rc == 0)
		rc = OPS(req)->symlink(FS(req), &req->ctx, req->in.nodeid, name, target,
				       &req->out.entry);
	return REPLY_OUT(req, rc, entry);
}

int fuse_do_mknod(struct fuse_request *req)
{
	const struct fuse_mknod_in *in = arg_fixed(req, sizeof(*in));
	const char *name;
	int rc = arg_new_name(req, &name);

	if (rc == 0)
		rc = OPS(req)->mknod(FS(req), &req->ctx, req->in.nodeid, name, in, &req->out.entry);
	return REPLY_OUT(req, rc, entry);
}

int fuse_do_mkdir(struct fuse_request *req)
{
	const struct fuse_mkdir_in *in = arg_fixed(req, sizeof(*in));
	const char *name;
	int rc = arg_new_name(req, &name);

	if (rc == 0)
		rc = OPS(req)->mkdir(FS(req), &req->ctx, req->in.nodeid, name, in, &req->out.entry);
	return REPLY_OUT(req, rc, entry);
}

int fuse_do_create(struct fuse_request *req)
{
	const struct fuse_create_in *in = arg_fixed(req, sizeof(*in));
	const char *name;
	int rc = arg_new_name(req, &name);

	if (rc == 0)
		rc = OPS(req)->create(FS(req), &req->ctx, req->in.nodeid, name, in,
				      &req->out.create.entry, &req->out.create.open);
	return REPLY_OUT(req, rc, create);
}

/* The client sends the name of the unnamed dentry it made for O_TMPFILE,
 * which is "/"; it means nothing to us but must still be well-formed. */
int fuse_do_tmpfile(struct fuse_request *req)
{
	const struct fuse_create_in *in = arg_fixed(req, sizeof(*in));
	const char *name;
	size_t len;
	int rc = fuse_arg_string(req, &name, &len);

	if (rc == 0)
		rc = fuse_arg_create_ext(req);
	if (rc == 0)
		rc = OPS(req)->tmpfile(FS(req), &req->ctx, req->in.nodeid, in,
				       &req->out.create.entry, &req->out.create.open);
	return REPLY_OUT(req, rc, create);
}

int fuse_do_link(struct fuse_request *req)
{
	const struct fuse_link_in *in = arg_fixed(req, sizeof(*in));
	const char *newname;
	int rc = fuse_arg_name(req, &newname, false);

	/* The header's nodeid is the new parent; the inode is in the args. */
	if (rc == 0)
		rc = OPS(req)->link(FS(req), &req->ctx, in->oldnodeid, req->in.nodeid, newname,
				    &req->out.entry);
	return REPLY_OUT(req, rc, entry);
}

/* ------------------------------------------------- removing, renaming */

/* UNLINK and RMDIR: a name in the parent, nothing more. */
int fuse_do_unlink(struct fuse_request *req)
{
	__typeof__(OPS(req)->unlink) op =
		req->in.opcode == FUSE_RMDIR ? OPS(req)->rmdir : OPS(req)->unlink;
	const char *name;
	int rc = fuse_arg_name(req, &name, false);

	return rc < 0 ? rc : op(FS(req), &req->ctx, req->in.nodeid, name);
}

static int rename_common(struct fuse_request *req, uint64_t newdir, uint32_t flags)
{
	const char *name, *newname;
	int rc;

	rc = fuse_arg_name(req, &name, false);
	if (rc < 0)
		return rc;
	rc = fuse_arg_name(req, &newname, false);
	if (rc < 0)
		return rc;
	return OPS(req)->rename(FS(req), &req->ctx, req->in.nodeid, name, newdir,
				newname, flags);
}

int fuse_do_rename(struct fuse_request *req)
{
	const struct fuse_rename_in *in = arg_fixed(req, sizeof(*in));

	return rename_common(req, in->newdir, 0);
}

int fuse_do_rename2(struct fuse_request *req)
{
	const struct fuse_rename2_in *in = arg_fixed(req, sizeof(*in));

	/* Unknown bits would reach renameat2 with a meaning we never checked. */
	if (in->flags & ~(uint32_t)(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT))
		return -EINVAL;
	return rename_common(req, in->newdir, in->flags);
}
