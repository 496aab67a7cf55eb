/* The per-opcode handlers: each op's arguments after its fixed struct, the backend call, the reply. */
#include "protocol/fuse_handlers.h"

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
static const void *arg_fixed(struct fuse_request *req, size_t size)
{
	req->arg_pos = size;
	return req->arg;
}

static void reply_arg(struct fuse_request *req, const void *arg, size_t len)
{
	req->reply_arg = arg;
	req->reply_len = len;
}

/* The backend's result; on success the fixed reply it filled in. */
static int reply_if_ok(struct fuse_request *req, int rc, const void *arg, size_t len)
{
	if (rc < 0)
		return rc;
	reply_arg(req, arg, len);
	return 0;
}

static int reply_entry(struct fuse_request *req, int rc)
{
	return reply_if_ok(req, rc, &req->out.entry, sizeof(req->out.entry));
}

static int reply_attr(struct fuse_request *req, int rc)
{
	return reply_if_ok(req, rc, &req->out.attr, sizeof(req->out.attr));
}

static int reply_open(struct fuse_request *req, int rc)
{
	return reply_if_ok(req, rc, &req->out.open, sizeof(req->out.open));
}

static int reply_create(struct fuse_request *req, int rc)
{
	return reply_if_ok(req, rc, &req->out.create, sizeof(req->out.create));
}

/* FERRY_DEFERRED from an op that did not defer the request would leave the
 * guest waiting forever (SETLKW, FSYNC, FSYNCDIR may defer). */
static int not_stranded(const struct fuse_request *req, int rc)
{
	if (rc == FERRY_DEFERRED && !req->deferred)
		return -EIO;
	return rc;
}

/* A creating op's new entry name, then its security context and group. */
static int arg_new_name(struct fuse_request *req, const char **name)
{
	int rc = fuse_arg_name(req, name, false);

	if (rc < 0)
		return rc;
	return fuse_arg_create_ext(req);
}

/* Room after the out-header, for replies whose size the client chooses. */
static size_t reply_room(const struct fuse_request *req, size_t want)
{
	size_t room = req->wr_len - OUT_HDR;

	if (want > room)
		want = room;
	if (want > FERRY_OUT_BUF_SIZE)
		want = FERRY_OUT_BUF_SIZE;
	return want;
}

/* The backend ops that come in a file and a directory form of one type. */
typedef __typeof__(*((struct fs_ops *)0)->unlink) fs_remove_fn;
typedef __typeof__(*((struct fs_ops *)0)->open) fs_open_fn;
typedef __typeof__(*((struct fs_ops *)0)->release) fs_release_fn;
typedef __typeof__(*((struct fs_ops *)0)->fsync) fs_fsync_fn;

/* ------------------------------------------------------------ entries */

int fuse_do_lookup(struct fuse_request *req)
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
	return reply_entry(req, rc);
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

int fuse_do_getattr(struct fuse_request *req)
{
	const struct fuse_getattr_in *in = arg_fixed(req, sizeof(*in));
	int rc;

	if (!OPS(req)->getattr)
		return -ENOSYS;
	rc = OPS(req)->getattr(FS(req), &req->ctx, req->in.nodeid, in, &req->out.attr);
	return reply_attr(req, rc);
}

int fuse_do_setattr(struct fuse_request *req)
{
	const struct fuse_setattr_in *in = arg_fixed(req, sizeof(*in));
	int rc;

	if (!OPS(req)->setattr)
		return -ENOSYS;
	rc = OPS(req)->setattr(FS(req), &req->ctx, req->in.nodeid, in, &req->out.attr);
	return reply_attr(req, rc);
}

int fuse_do_readlink(struct fuse_request *req)
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

int fuse_do_symlink(struct fuse_request *req)
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
	return reply_entry(req, rc);
}

int fuse_do_mknod(struct fuse_request *req)
{
	const struct fuse_mknod_in *in = arg_fixed(req, sizeof(*in));
	const char *name;
	int rc;

	if (!OPS(req)->mknod)
		return -ENOSYS;
	rc = arg_new_name(req, &name);
	if (rc < 0)
		return rc;
	rc = OPS(req)->mknod(FS(req), &req->ctx, req->in.nodeid, name, in, &req->out.entry);
	return reply_entry(req, rc);
}

int fuse_do_mkdir(struct fuse_request *req)
{
	const struct fuse_mkdir_in *in = arg_fixed(req, sizeof(*in));
	const char *name;
	int rc;

	if (!OPS(req)->mkdir)
		return -ENOSYS;
	rc = arg_new_name(req, &name);
	if (rc < 0)
		return rc;
	rc = OPS(req)->mkdir(FS(req), &req->ctx, req->in.nodeid, name, in, &req->out.entry);
	return reply_entry(req, rc);
}

/* UNLINK and RMDIR: a name in the parent, nothing more. */
static int remove_common(struct fuse_request *req, fs_remove_fn *op)
{
	const char *name;
	int rc;

	if (!op)
		return -ENOSYS;
	rc = fuse_arg_name(req, &name, false);
	if (rc < 0)
		return rc;
	return op(FS(req), &req->ctx, req->in.nodeid, name);
}

int fuse_do_unlink(struct fuse_request *req)
{
	return remove_common(req, OPS(req)->unlink);
}

int fuse_do_rmdir(struct fuse_request *req)
{
	return remove_common(req, OPS(req)->rmdir);
}

static int rename_common(struct fuse_request *req, uint64_t newdir, uint32_t flags)
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

int fuse_do_link(struct fuse_request *req)
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
	return reply_entry(req, rc);
}

int fuse_do_create(struct fuse_request *req)
{
	const struct fuse_create_in *in = arg_fixed(req, sizeof(*in));
	const char *name;
	int rc;

	if (!OPS(req)->create)
		return -ENOSYS;
	rc = arg_new_name(req, &name);
	if (rc < 0)
		return rc;
	rc = OPS(req)->create(FS(req), &req->ctx, req->in.nodeid, name, in,
			      &req->out.create.entry, &req->out.create.open);
	return reply_create(req, rc);
}

/* The client sends the name of the unnamed dentry it made for O_TMPFILE,
 * which is "/"; it means nothing to us but must still be well-formed. */
int fuse_do_tmpfile(struct fuse_request *req)
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
	return reply_create(req, rc);
}

/* ------------------------------------------------------------- files */

/* OPEN and OPENDIR, RELEASE and RELEASEDIR, FSYNC and FSYNCDIR: the same
 * arguments for a file and a directory, each pair to its own backend op. */
static int open_common(struct fuse_request *req, fs_open_fn *op)
{
	const struct fuse_open_in *in = arg_fixed(req, sizeof(*in));

	if (!op)
		return -ENOSYS;
	return reply_open(req, op(FS(req), &req->ctx, req->in.nodeid, in, &req->out.open));
}

int fuse_do_open(struct fuse_request *req)
{
	return open_common(req, OPS(req)->open);
}

int fuse_do_opendir(struct fuse_request *req)
{
	return open_common(req, OPS(req)->opendir);
}

/* Reads straight into the guest's reply buffers after the out-header; the
 * size is clipped to what the reply can hold rather than refused, like a
 * short read. */
int fuse_do_read(struct fuse_request *req)
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
int fuse_do_write(struct fuse_request *req)
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
	if (req->w->run.lens) {
		int held = fuse_write_run_hold(req, in, offset);

		if (held != 0)
			return held < 0 ? held : 0;
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

int fuse_do_statfs(struct fuse_request *req)
{
	int rc;

	if (!OPS(req)->statfs)
		return -ENOSYS;
	rc = OPS(req)->statfs(FS(req), &req->ctx, req->in.nodeid, &req->out.statfs.st);
	return reply_if_ok(req, rc, &req->out.statfs, sizeof(req->out.statfs));
}

static int release_common(struct fuse_request *req, fs_release_fn *op)
{
	const struct fuse_release_in *in = arg_fixed(req, sizeof(*in));

	if (!op)
		return -ENOSYS;
	return op(FS(req), &req->ctx, req->in.nodeid, in);
}

int fuse_do_release(struct fuse_request *req)
{
	return release_common(req, OPS(req)->release);
}

int fuse_do_releasedir(struct fuse_request *req)
{
	return release_common(req, OPS(req)->releasedir);
}

static int fsync_common(struct fuse_request *req, fs_fsync_fn *op)
{
	const struct fuse_fsync_in *in = arg_fixed(req, sizeof(*in));

	if (!op)
		return -ENOSYS;
	return not_stranded(req, op(FS(req), &req->ctx, req->in.nodeid, in));
}

int fuse_do_fsync(struct fuse_request *req)
{
	return fsync_common(req, OPS(req)->fsync);
}

int fuse_do_fsyncdir(struct fuse_request *req)
{
	return fsync_common(req, OPS(req)->fsyncdir);
}

int fuse_do_flush(struct fuse_request *req)
{
	const struct fuse_flush_in *in = arg_fixed(req, sizeof(*in));

	if (!OPS(req)->flush)
		return -ENOSYS;
	return OPS(req)->flush(FS(req), &req->ctx, req->in.nodeid, in);
}

/* Entries are encoded into the worker's buffer, then copied to the guest:
 * the backend never formats into memory the guest can change under it. */
static int readdir_common(struct fuse_request *req, bool plus)
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

int fuse_do_readdir(struct fuse_request *req)
{
	return readdir_common(req, false);
}

int fuse_do_readdirplus(struct fuse_request *req)
{
	if (!(req->se->conn.flags & FUSE_DO_READDIRPLUS))
		return -ENOSYS;
	return readdir_common(req, true);
}

/* ------------------------------------------------------------ xattrs */

int fuse_do_setxattr(struct fuse_request *req)
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

int fuse_do_getxattr(struct fuse_request *req)
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

int fuse_do_listxattr(struct fuse_request *req)
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

int fuse_do_removexattr(struct fuse_request *req)
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

int fuse_do_access(struct fuse_request *req)
{
	const struct fuse_access_in *in = arg_fixed(req, sizeof(*in));

	if (!OPS(req)->access)
		return -ENOSYS;
	return OPS(req)->access(FS(req), &req->ctx, req->in.nodeid, in->mask);
}

int fuse_do_getlk(struct fuse_request *req)
{
	const struct fuse_lk_in *in = arg_fixed(req, sizeof(*in));
	int rc;

	if (!OPS(req)->getlk)
		return -ENOSYS;
	rc = OPS(req)->getlk(FS(req), &req->ctx, req->in.nodeid, in, &req->out.lk);
	return reply_if_ok(req, rc, &req->out.lk, sizeof(req->out.lk));
}

static int setlk_common(struct fuse_request *req, bool sleep)
{
	const struct fuse_lk_in *in = arg_fixed(req, sizeof(*in));

	if (!OPS(req)->setlk)
		return -ENOSYS;
	return not_stranded(req, OPS(req)->setlk(FS(req), &req->ctx, req->in.nodeid, in, sleep));
}

int fuse_do_setlk(struct fuse_request *req)
{
	return setlk_common(req, false);
}

int fuse_do_setlkw(struct fuse_request *req)
{
	return setlk_common(req, true);
}

/* Only deferred requests can still be in flight. */
int fuse_do_interrupt(struct fuse_request *req)
{
	const struct fuse_interrupt_in *in = arg_fixed(req, sizeof(*in));

	fuse_deferred_interrupt(req->se, in->unique);
	return 0;
}

int fuse_do_fallocate(struct fuse_request *req)
{
	const struct fuse_fallocate_in *in = arg_fixed(req, sizeof(*in));

	if (!OPS(req)->fallocate)
		return -ENOSYS;
	return OPS(req)->fallocate(FS(req), &req->ctx, req->in.nodeid, in);
}

int fuse_do_lseek(struct fuse_request *req)
{
	const struct fuse_lseek_in *in = arg_fixed(req, sizeof(*in));
	int rc;

	if (!OPS(req)->lseek)
		return -ENOSYS;
	rc = OPS(req)->lseek(FS(req), &req->ctx, req->in.nodeid, in, &req->out.lseek);
	return reply_if_ok(req, rc, &req->out.lseek, sizeof(req->out.lseek));
}

int fuse_do_copy_file_range(struct fuse_request *req)
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

int fuse_do_syncfs(struct fuse_request *req)
{
	if (!OPS(req)->syncfs)
		return -ENOSYS;
	return OPS(req)->syncfs(FS(req), &req->ctx, req->in.nodeid);
}
