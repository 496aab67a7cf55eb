/* Per-opcode decoding of the copied arguments and the opcode dispatch table. */
#include "protocol/fuse_internal.h"

#include <errno.h>
#include <stdio.h>   /* RENAME_* */
#include <string.h>

#include "common/log.h"

#define OPS(req) ((req)->se->ops)
#define FS(req) ((req)->se->fs)
#define OUT_HDR sizeof(struct fuse_out_header)

/* --------------------------------------- fixed arguments and replies */

/* The op's fixed struct is at the start of the copy, which is malloc-aligned;
 * min_arg in the table guarantees it is all there. */
static const void *arg_fixed(struct fuse_req *req, size_t size)
{
	req->arg_pos = size;
	return req->arg;
}

static void reply_arg(struct fuse_req *req, const void *arg, size_t len)
{
	req->reply_arg = arg;
	req->reply_len = len;
}

/* Room after the out-header, for replies whose size the client chooses. */
static size_t reply_room(const struct fuse_req *req, size_t want)
{
	size_t room = req->wr_len - OUT_HDR;

	if (want > room)
		want = room;
	if (want > FERRY_OUT_BUF_SIZE)
		want = FERRY_OUT_BUF_SIZE;
	return want;
}

/* ------------------------------------------------------------ entries */

static int do_lookup(struct fuse_req *req)
{
	const char *name;
	int rc;

	if (!OPS(req)->lookup)
		return -ENOSYS;
	/* "." and ".." arrive with EXPORT_SUPPORT; the backend maps them. */
	rc = fuse_arg_name(req, &name, true);
	if (rc < 0)
		return rc;
	rc = OPS(req)->lookup(FS(req), &req->ctx, req->in.nodeid, name, &req->out.entry);
	if (rc < 0)
		return rc;
	reply_arg(req, &req->out.entry, sizeof(req->out.entry));
	return 0;
}

static int do_forget(struct fuse_req *req)
{
	const struct fuse_forget_in *in = arg_fixed(req, sizeof(*in));

	if (OPS(req)->forget)
		OPS(req)->forget(FS(req), req->in.nodeid, in->nlookup);
	return 0;
}

/* The forget array is not copied whole: it is bounded only by the request,
 * so it is streamed through the argument buffer in chunks. */
static int do_batch_forget(struct fuse_req *req)
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

static int do_getattr(struct fuse_req *req)
{
	const struct fuse_getattr_in *in = arg_fixed(req, sizeof(*in));
	int rc;

	if (!OPS(req)->getattr)
		return -ENOSYS;
	rc = OPS(req)->getattr(FS(req), &req->ctx, req->in.nodeid, in, &req->out.attr);
	if (rc < 0)
		return rc;
	reply_arg(req, &req->out.attr, sizeof(req->out.attr));
	return 0;
}

static int do_setattr(struct fuse_req *req)
{
	const struct fuse_setattr_in *in = arg_fixed(req, sizeof(*in));
	int rc;

	if (!OPS(req)->setattr)
		return -ENOSYS;
	rc = OPS(req)->setattr(FS(req), &req->ctx, req->in.nodeid, in, &req->out.attr);
	if (rc < 0)
		return rc;
	reply_arg(req, &req->out.attr, sizeof(req->out.attr));
	return 0;
}

static int do_readlink(struct fuse_req *req)
{
	size_t room = reply_room(req, PATH_MAX);
	ssize_t len;

	if (!OPS(req)->readlink)
		return -ENOSYS;
	len = OPS(req)->readlink(FS(req), &req->ctx, req->in.nodeid, req->w->out_buf, room);
	if (len < 0)
		return (int)len;
	if ((size_t)len > room)
		return -EIO;
	reply_arg(req, req->w->out_buf, (size_t)len);
	return 0;
}

static int do_symlink(struct fuse_req *req)
{
	const char *name, *target;
	size_t target_len;
	int rc;

	if (!OPS(req)->symlink)
		return -ENOSYS;
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
	if (rc < 0)
		return rc;
	rc = OPS(req)->symlink(FS(req), &req->ctx, req->in.nodeid, name, target,
			       &req->out.entry);
	if (rc < 0)
		return rc;
	reply_arg(req, &req->out.entry, sizeof(req->out.entry));
	return 0;
}

static int do_mknod(struct fuse_req *req)
{
	const struct fuse_mknod_in *in = arg_fixed(req, sizeof(*in));
	const char *name;
	int rc;

	if (!OPS(req)->mknod)
		return -ENOSYS;
	rc = fuse_arg_name(req, &name, false);
	if (rc < 0)
		return rc;
	rc = fuse_arg_create_ext(req);
	if (rc < 0)
		return rc;
	rc = OPS(req)->mknod(FS(req), &req->ctx, req->in.nodeid, name, in, &req->out.entry);
	if (rc < 0)
		return rc;
	reply_arg(req, &req->out.entry, sizeof(req->out.entry));
	return 0;
}

static int do_mkdir(struct fuse_req *req)
{
	const struct fuse_mkdir_in *in = arg_fixed(req, sizeof(*in));
	const char *name;
	int rc;

	if (!OPS(req)->mkdir)
		return -ENOSYS;
	rc = fuse_arg_name(req, &name, false);
	if (rc < 0)
		return rc;
	rc = fuse_arg_create_ext(req);
	if (rc < 0)
		return rc;
	rc = OPS(req)->mkdir(FS(req), &req->ctx, req->in.nodeid, name, in, &req->out.entry);
	if (rc < 0)
		return rc;
	reply_arg(req, &req->out.entry, sizeof(req->out.entry));
	return 0;
}

static int do_unlink(struct fuse_req *req)
{
	const char *name;
	int rc;

	if (!OPS(req)->unlink)
		return -ENOSYS;
	rc = fuse_arg_name(req, &name, false);
	if (rc < 0)
		return rc;
	return OPS(req)->unlink(FS(req), &req->ctx, req->in.nodeid, name);
}

static int do_rmdir(struct fuse_req *req)
{
	const char *name;
	int rc;

	if (!OPS(req)->rmdir)
		return -ENOSYS;
	rc = fuse_arg_name(req, &name, false);
	if (rc < 0)
		return rc;
	return OPS(req)->rmdir(FS(req), &req->ctx, req->in.nodeid, name);
}

static int rename_common(struct fuse_req *req, uint64_t newdir, uint32_t flags)
{
	const char *name, *newname;
	int rc;

	if (!OPS(req)->rename)
		return -ENOSYS;
	rc = fuse_arg_name(req, &name, false);
	if (rc < 0)
		return rc;
	rc = fuse_arg_name(req, &newname, false);
	if (rc < 0)
		return rc;
	return OPS(req)->rename(FS(req), &req->ctx, req->in.nodeid, name, newdir,
				newname, flags);
}

static int do_rename(struct fuse_req *req)
{
	const struct fuse_rename_in *in = arg_fixed(req, sizeof(*in));

	return rename_common(req, in->newdir, 0);
}

static int do_rename2(struct fuse_req *req)
{
	const struct fuse_rename2_in *in = arg_fixed(req, sizeof(*in));

	/* Unknown bits would reach renameat2 with a meaning we never checked. */
	if (in->flags & ~(uint32_t)(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT))
		return -EINVAL;
	return rename_common(req, in->newdir, in->flags);
}

static int do_link(struct fuse_req *req)
{
	const struct fuse_link_in *in = arg_fixed(req, sizeof(*in));
	const char *newname;
	int rc;

	if (!OPS(req)->link)
		return -ENOSYS;
	rc = fuse_arg_name(req, &newname, false);
	if (rc < 0)
		return rc;
	/* The header's nodeid is the new parent; the inode is in the args. */
	rc = OPS(req)->link(FS(req), &req->ctx, in->oldnodeid, req->in.nodeid, newname,
			    &req->out.entry);
	if (rc < 0)
		return rc;
	reply_arg(req, &req->out.entry, sizeof(req->out.entry));
	return 0;
}

static int do_create(struct fuse_req *req)
{
	const struct fuse_create_in *in = arg_fixed(req, sizeof(*in));
	const char *name;
	int rc;

	if (!OPS(req)->create)
		return -ENOSYS;
	rc = fuse_arg_name(req, &name, false);
	if (rc < 0)
		return rc;
	rc = fuse_arg_create_ext(req);
	if (rc < 0)
		return rc;
	rc = OPS(req)->create(FS(req), &req->ctx, req->in.nodeid, name, in,
			      &req->out.create.entry, &req->out.create.open);
	if (rc < 0)
		return rc;
	reply_arg(req, &req->out.create, sizeof(req->out.create));
	return 0;
}

/* The client sends the name of the unnamed dentry it made for O_TMPFILE,
 * which is "/"; it means nothing to us but must still be well-formed. */
static int do_tmpfile(struct fuse_req *req)
{
	const struct fuse_create_in *in = arg_fixed(req, sizeof(*in));
	const char *name;
	size_t len;
	int rc;

	if (!OPS(req)->tmpfile)
		return -ENOSYS;
	rc = fuse_arg_string(req, &name, &len);
	if (rc < 0)
		return rc;
	rc = fuse_arg_create_ext(req);
	if (rc < 0)
		return rc;
	rc = OPS(req)->tmpfile(FS(req), &req->ctx, req->in.nodeid, in,
			       &req->out.create.entry, &req->out.create.open);
	if (rc < 0)
		return rc;
	reply_arg(req, &req->out.create, sizeof(req->out.create));
	return 0;
}

/* ------------------------------------------------------------- files */

static int do_open(struct fuse_req *req)
{
	const struct fuse_open_in *in = arg_fixed(req, sizeof(*in));
	int rc;

	if (!OPS(req)->open)
		return -ENOSYS;
	rc = OPS(req)->open(FS(req), &req->ctx, req->in.nodeid, in, &req->out.open);
	if (rc < 0)
		return rc;
	reply_arg(req, &req->out.open, sizeof(req->out.open));
	return 0;
}

static int do_opendir(struct fuse_req *req)
{
	const struct fuse_open_in *in = arg_fixed(req, sizeof(*in));
	int rc;

	if (!OPS(req)->opendir)
		return -ENOSYS;
	rc = OPS(req)->opendir(FS(req), &req->ctx, req->in.nodeid, in, &req->out.open);
	if (rc < 0)
		return rc;
	reply_arg(req, &req->out.open, sizeof(req->out.open));
	return 0;
}

/* Reads straight into the guest's reply buffers after the out-header; the
 * size is clipped to what the reply can hold rather than refused, like a
 * short read. */
static int do_read(struct fuse_req *req)
{
	struct fuse_read_in in = *(const struct fuse_read_in *)arg_fixed(req, sizeof(in));
	size_t size = in.size;
	ssize_t done;
	int n_iov;

	if (!OPS(req)->read)
		return -ENOSYS;
	if (size > req->se->conn.max_write)
		size = req->se->conn.max_write;
	if (size > req->wr_len - OUT_HDR)
		size = req->wr_len - OUT_HDR;
	in.size = (uint32_t)size;
	n_iov = iov_slice(req->w->iov, FERRY_MAX_IOV, req->treq->wr, req->treq->wr_cnt, OUT_HDR, size);
	if (n_iov < 0)
		return n_iov;
	done = OPS(req)->read(FS(req), &req->ctx, req->in.nodeid, &in, req->w->iov,
			      (unsigned)n_iov);
	if (req->deferred)
		return (int)done;   /* FERRY_DEFERRED: the op answers */
	if (done < 0)
		return (int)done;
	if ((size_t)done > size)
		return -EIO;
	req->reply_in_place = (size_t)done;
	return 0;
}

/* The payload stays in guest memory: the backend writes from sub-iovecs of
 * rd. Its size must be what the request claims and what we negotiated. */
static int do_write(struct fuse_req *req)
{
	const struct fuse_write_in *in = arg_fixed(req, sizeof(*in));
	size_t offset = sizeof(struct fuse_in_header) + req->arg_len;
	ssize_t done;
	int n_iov;

	if (!OPS(req)->write)
		return -ENOSYS;
	if (in->size > req->se->conn.max_write || in->size > req->payload_len) {
		log_debug("fuse: WRITE of %u bytes, %zu present, max %u",
			  in->size, req->payload_len, req->se->conn.max_write);
		return -EINVAL;
	}
	n_iov = iov_slice(req->w->iov, FERRY_MAX_IOV, req->treq->rd, req->treq->rd_cnt, offset, in->size);
	if (n_iov < 0)
		return n_iov;
	done = OPS(req)->write(FS(req), &req->ctx, req->in.nodeid, in, req->w->iov,
			       (unsigned)n_iov);
	if (done < 0)
		return (int)done;
	if ((size_t)done > in->size)
		return -EIO;
	req->out.write.size = (uint32_t)done;
	reply_arg(req, &req->out.write, sizeof(req->out.write));
	return 0;
}

static int do_statfs(struct fuse_req *req)
{
	int rc;

	if (!OPS(req)->statfs)
		return -ENOSYS;
	rc = OPS(req)->statfs(FS(req), &req->ctx, req->in.nodeid, &req->out.statfs.st);
	if (rc < 0)
		return rc;
	reply_arg(req, &req->out.statfs, sizeof(req->out.statfs));
	return 0;
}

static int do_release(struct fuse_req *req)
{
	const struct fuse_release_in *in = arg_fixed(req, sizeof(*in));

	if (!OPS(req)->release)
		return -ENOSYS;
	return OPS(req)->release(FS(req), &req->ctx, req->in.nodeid, in);
}

static int do_releasedir(struct fuse_req *req)
{
	const struct fuse_release_in *in = arg_fixed(req, sizeof(*in));

	if (!OPS(req)->releasedir)
		return -ENOSYS;
	return OPS(req)->releasedir(FS(req), &req->ctx, req->in.nodeid, in);
}

static int do_fsync(struct fuse_req *req)
{
	const struct fuse_fsync_in *in = arg_fixed(req, sizeof(*in));

	int rc;

	if (!OPS(req)->fsync)
		return -ENOSYS;
	rc = OPS(req)->fsync(FS(req), &req->ctx, req->in.nodeid, in);
	/* As for SETLKW: FERRY_DEFERRED without having deferred the
	 * request would leave the guest waiting forever. */
	if (rc == FERRY_DEFERRED && !req->deferred)
		return -EIO;
	return rc;
}

static int do_fsyncdir(struct fuse_req *req)
{
	const struct fuse_fsync_in *in = arg_fixed(req, sizeof(*in));

	int rc;

	if (!OPS(req)->fsyncdir)
		return -ENOSYS;
	rc = OPS(req)->fsyncdir(FS(req), &req->ctx, req->in.nodeid, in);
	if (rc == FERRY_DEFERRED && !req->deferred)
		return -EIO;
	return rc;
}

static int do_flush(struct fuse_req *req)
{
	const struct fuse_flush_in *in = arg_fixed(req, sizeof(*in));

	if (!OPS(req)->flush)
		return -ENOSYS;
	return OPS(req)->flush(FS(req), &req->ctx, req->in.nodeid, in);
}

/* Entries are encoded into the worker's buffer, then copied to the guest:
 * the backend never formats into memory the guest can change under it. */
static int readdir_common(struct fuse_req *req, bool plus)
{
	const struct fuse_read_in *in = arg_fixed(req, sizeof(*in));
	struct fuse_dirbuf db = { .buf = req->w->out_buf, .len = 0 };
	int rc;

	if (!OPS(req)->readdir)
		return -ENOSYS;
	db.size = reply_room(req, in->size);
	rc = OPS(req)->readdir(FS(req), &req->ctx, req->in.nodeid, in, plus, &db);
	if (db.len > db.size)
		return -EIO;
	/* READDIRPLUS entries carry lookup references: once any are encoded,
	 * the client must see them even if the listing failed later. */
	if (rc < 0 && db.len == 0)
		return rc;
	reply_arg(req, db.buf, db.len);
	return 0;
}

static int do_readdir(struct fuse_req *req)
{
	return readdir_common(req, false);
}

static int do_readdirplus(struct fuse_req *req)
{
	if (!(req->se->conn.flags & FUSE_DO_READDIRPLUS))
		return -ENOSYS;
	return readdir_common(req, true);
}

/* ------------------------------------------------------------ xattrs */

static int do_setxattr(struct fuse_req *req)
{
	struct fuse_setxattr_in in;
	size_t in_size = req->se->setxattr_in_size;
	const char *name;
	int rc;

	if (!OPS(req)->setxattr)
		return -ENOSYS;
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
static int xattr_reply(struct fuse_req *req, uint32_t asked, ssize_t len, size_t room)
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

static int do_getxattr(struct fuse_req *req)
{
	const struct fuse_getxattr_in *in = arg_fixed(req, sizeof(*in));
	uint32_t asked = in->size;
	const char *name;
	size_t room;
	ssize_t len;
	int rc;

	if (!OPS(req)->getxattr)
		return -ENOSYS;
	rc = fuse_arg_xattr_name(req, &name);
	if (rc < 0)
		return rc;
	room = asked ? reply_room(req, asked) : 0;
	len = OPS(req)->getxattr(FS(req), &req->ctx, req->in.nodeid, name,
				 asked ? req->w->out_buf : NULL, room);
	return xattr_reply(req, asked, len, room);
}

static int do_listxattr(struct fuse_req *req)
{
	const struct fuse_getxattr_in *in = arg_fixed(req, sizeof(*in));
	uint32_t asked = in->size;
	size_t room;
	ssize_t len;

	if (!OPS(req)->listxattr)
		return -ENOSYS;
	room = asked ? reply_room(req, asked) : 0;
	len = OPS(req)->listxattr(FS(req), &req->ctx, req->in.nodeid,
				  asked ? req->w->out_buf : NULL, room);
	return xattr_reply(req, asked, len, room);
}

static int do_removexattr(struct fuse_req *req)
{
	const char *name;
	int rc;

	if (!OPS(req)->removexattr)
		return -ENOSYS;
	rc = fuse_arg_xattr_name(req, &name);
	if (rc < 0)
		return rc;
	return OPS(req)->removexattr(FS(req), &req->ctx, req->in.nodeid, name);
}

/* ------------------------------------------------------------ the rest */

static int do_access(struct fuse_req *req)
{
	const struct fuse_access_in *in = arg_fixed(req, sizeof(*in));

	if (!OPS(req)->access)
		return -ENOSYS;
	return OPS(req)->access(FS(req), &req->ctx, req->in.nodeid, in->mask);
}

static int do_getlk(struct fuse_req *req)
{
	const struct fuse_lk_in *in = arg_fixed(req, sizeof(*in));
	int rc;

	if (!OPS(req)->getlk)
		return -ENOSYS;
	rc = OPS(req)->getlk(FS(req), &req->ctx, req->in.nodeid, in, &req->out.lk);
	if (rc < 0)
		return rc;
	reply_arg(req, &req->out.lk, sizeof(req->out.lk));
	return 0;
}

static int setlk_common(struct fuse_req *req, bool sleep)
{
	const struct fuse_lk_in *in = arg_fixed(req, sizeof(*in));
	int rc;

	if (!OPS(req)->setlk)
		return -ENOSYS;
	rc = OPS(req)->setlk(FS(req), &req->ctx, req->in.nodeid, in, sleep);
	/* FERRY_DEFERRED without having deferred the request would leave
	 * the guest waiting forever. */
	if (rc == FERRY_DEFERRED && !req->deferred)
		return -EIO;
	return rc;
}

static int do_setlk(struct fuse_req *req)
{
	return setlk_common(req, false);
}

static int do_setlkw(struct fuse_req *req)
{
	return setlk_common(req, true);
}

/* Only deferred requests can still be in flight. */
static int do_interrupt(struct fuse_req *req)
{
	const struct fuse_interrupt_in *in = arg_fixed(req, sizeof(*in));

	fuse_deferred_interrupt(req->se, in->unique);
	return 0;
}

static int do_fallocate(struct fuse_req *req)
{
	const struct fuse_fallocate_in *in = arg_fixed(req, sizeof(*in));

	if (!OPS(req)->fallocate)
		return -ENOSYS;
	return OPS(req)->fallocate(FS(req), &req->ctx, req->in.nodeid, in);
}

static int do_lseek(struct fuse_req *req)
{
	const struct fuse_lseek_in *in = arg_fixed(req, sizeof(*in));
	int rc;

	if (!OPS(req)->lseek)
		return -ENOSYS;
	rc = OPS(req)->lseek(FS(req), &req->ctx, req->in.nodeid, in, &req->out.lseek);
	if (rc < 0)
		return rc;
	reply_arg(req, &req->out.lseek, sizeof(req->out.lseek));
	return 0;
}

static int do_copy_file_range(struct fuse_req *req)
{
	const struct fuse_copy_file_range_in *in = arg_fixed(req, sizeof(*in));
	ssize_t done;

	if (!OPS(req)->copy_file_range)
		return -ENOSYS;
	done = OPS(req)->copy_file_range(FS(req), &req->ctx, req->in.nodeid, in);
	if (done < 0)
		return (int)done;
	/* The reply field is 32 bits; the client never asks for more. */
	if ((uint64_t)done > in->len || (uint64_t)done > UINT32_MAX)
		return -EIO;
	req->out.write.size = (uint32_t)done;
	reply_arg(req, &req->out.write, sizeof(req->out.write));
	return 0;
}

static int do_syncfs(struct fuse_req *req)
{
	if (!OPS(req)->syncfs)
		return -ENOSYS;
	return OPS(req)->syncfs(FS(req), &req->ctx, req->in.nodeid);
}

/* ------------------------------------------------------------ the table */

#define OP(code, fn, min, reply, fl) \
	[code] = { .name = #code, .handle = (fn), .min_arg = (min), .reply_arg = (reply), .flags = (fl) }
/* Known opcodes we do not implement: ENOSYS, and the client stops asking. */
#define OP_NOSYS(code) [code] = { .name = #code }

static const struct fuse_op_desc fuse_ops_table[] = {
	OP(FUSE_LOOKUP, do_lookup, 0, sizeof(struct fuse_entry_out), 0),
	OP(FUSE_FORGET, do_forget, sizeof(struct fuse_forget_in), 0, FUSE_OP_NO_REPLY),
	OP(FUSE_GETATTR, do_getattr, sizeof(struct fuse_getattr_in), sizeof(struct fuse_attr_out), 0),
	OP(FUSE_SETATTR, do_setattr, sizeof(struct fuse_setattr_in), sizeof(struct fuse_attr_out), 0),
	OP(FUSE_READLINK, do_readlink, 0, 0, 0),
	OP(FUSE_SYMLINK, do_symlink, 0, sizeof(struct fuse_entry_out), FUSE_OP_MODIFIES),
	OP(FUSE_MKNOD, do_mknod, sizeof(struct fuse_mknod_in), sizeof(struct fuse_entry_out),
	   FUSE_OP_MODIFIES),
	OP(FUSE_MKDIR, do_mkdir, sizeof(struct fuse_mkdir_in), sizeof(struct fuse_entry_out),
	   FUSE_OP_MODIFIES),
	OP(FUSE_UNLINK, do_unlink, 0, 0, FUSE_OP_MODIFIES),
	OP(FUSE_RMDIR, do_rmdir, 0, 0, FUSE_OP_MODIFIES),
	OP(FUSE_RENAME, do_rename, sizeof(struct fuse_rename_in), 0, FUSE_OP_MODIFIES),
	OP(FUSE_LINK, do_link, sizeof(struct fuse_link_in), sizeof(struct fuse_entry_out),
	   FUSE_OP_MODIFIES),
	OP(FUSE_OPEN, do_open, sizeof(struct fuse_open_in), sizeof(struct fuse_open_out), 0),
	OP(FUSE_READ, do_read, sizeof(struct fuse_read_in), 0, 0),
	OP(FUSE_WRITE, do_write, sizeof(struct fuse_write_in), sizeof(struct fuse_write_out),
	   FUSE_OP_HEAD_ONLY | FUSE_OP_MODIFIES),
	OP(FUSE_STATFS, do_statfs, 0, sizeof(struct fuse_statfs_out), 0),
	OP(FUSE_RELEASE, do_release, sizeof(struct fuse_release_in), 0, 0),
	OP(FUSE_FSYNC, do_fsync, sizeof(struct fuse_fsync_in), 0, 0),
	/* The fixed part is 8 or 16 bytes depending on SETXATTR_EXT. */
	OP(FUSE_SETXATTR, do_setxattr, FUSE_COMPAT_SETXATTR_IN_SIZE, 0,
	   FUSE_OP_XATTR | FUSE_OP_MODIFIES),
	OP(FUSE_GETXATTR, do_getxattr, sizeof(struct fuse_getxattr_in), 0, FUSE_OP_XATTR),
	OP(FUSE_LISTXATTR, do_listxattr, sizeof(struct fuse_getxattr_in), 0, FUSE_OP_XATTR),
	OP(FUSE_REMOVEXATTR, do_removexattr, 0, 0, FUSE_OP_XATTR | FUSE_OP_MODIFIES),
	OP(FUSE_FLUSH, do_flush, sizeof(struct fuse_flush_in), 0, 0),
	/* Pre-7.36 clients send only major, minor, max_readahead and flags. */
	OP(FUSE_INIT, fuse_do_init, 16, sizeof(struct fuse_init_out), 0),
	OP(FUSE_OPENDIR, do_opendir, sizeof(struct fuse_open_in), sizeof(struct fuse_open_out), 0),
	OP(FUSE_READDIR, do_readdir, sizeof(struct fuse_read_in), 0, 0),
	OP(FUSE_RELEASEDIR, do_releasedir, sizeof(struct fuse_release_in), 0, 0),
	OP(FUSE_FSYNCDIR, do_fsyncdir, sizeof(struct fuse_fsync_in), 0, 0),
	OP(FUSE_GETLK, do_getlk, sizeof(struct fuse_lk_in), sizeof(struct fuse_lk_out), 0),
	OP(FUSE_SETLK, do_setlk, sizeof(struct fuse_lk_in), 0, 0),
	OP(FUSE_SETLKW, do_setlkw, sizeof(struct fuse_lk_in), 0, 0),
	OP(FUSE_ACCESS, do_access, sizeof(struct fuse_access_in), 0, 0),
	OP(FUSE_CREATE, do_create, sizeof(struct fuse_create_in),
	   sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out), FUSE_OP_MODIFIES),
	OP(FUSE_INTERRUPT, do_interrupt, sizeof(struct fuse_interrupt_in), 0, FUSE_OP_NO_REPLY),
	OP_NOSYS(FUSE_BMAP),
	OP(FUSE_DESTROY, fuse_do_destroy, 0, 0, 0),
	OP_NOSYS(FUSE_IOCTL),
	OP_NOSYS(FUSE_POLL),
	OP_NOSYS(FUSE_NOTIFY_REPLY),
	OP(FUSE_BATCH_FORGET, do_batch_forget, sizeof(struct fuse_batch_forget_in), 0,
	   FUSE_OP_NO_REPLY | FUSE_OP_HEAD_ONLY),
	OP(FUSE_FALLOCATE, do_fallocate, sizeof(struct fuse_fallocate_in), 0, FUSE_OP_MODIFIES),
	OP(FUSE_READDIRPLUS, do_readdirplus, sizeof(struct fuse_read_in), 0, 0),
	OP(FUSE_RENAME2, do_rename2, sizeof(struct fuse_rename2_in), 0, FUSE_OP_MODIFIES),
	OP(FUSE_LSEEK, do_lseek, sizeof(struct fuse_lseek_in), sizeof(struct fuse_lseek_out), 0),
	OP(FUSE_COPY_FILE_RANGE, do_copy_file_range, sizeof(struct fuse_copy_file_range_in),
	   sizeof(struct fuse_write_out), FUSE_OP_MODIFIES),
	OP_NOSYS(FUSE_SETUPMAPPING),
	OP_NOSYS(FUSE_REMOVEMAPPING),
	OP(FUSE_SYNCFS, do_syncfs, sizeof(struct fuse_syncfs_in), 0, 0),
	OP(FUSE_TMPFILE, do_tmpfile, sizeof(struct fuse_create_in),
	   sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out), FUSE_OP_MODIFIES),
};

const struct fuse_op_desc *fuse_op_lookup(uint32_t opcode)
{
	const struct fuse_op_desc *desc;

	if (opcode >= sizeof(fuse_ops_table) / sizeof(fuse_ops_table[0]))
		return NULL;
	desc = &fuse_ops_table[opcode];
	return desc->name ? desc : NULL;
}
