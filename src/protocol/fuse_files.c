/* The handlers for open files and directories: OPEN, READ, WRITE, READDIR, RELEASE, the syncs, locks and the rest on an fh. */
#include "protocol/fuse_handlers.h"

#include "common/log.h"

/* OPEN and OPENDIR, RELEASE and RELEASEDIR, FSYNC and FSYNCDIR: one
 * handler for the file and the directory form, which take the same
 * arguments; each form goes to its own backend op. */
static bool on_dir(const struct fuse_request *req)
{
	uint32_t opcode = req->in.opcode;

	return opcode == FUSE_OPENDIR || opcode == FUSE_RELEASEDIR || opcode == FUSE_FSYNCDIR;
}

int fuse_do_open(struct fuse_request *req)
{
	const struct fuse_open_in *in = arg_fixed(req, sizeof(*in));
	__typeof__(OPS(req)->open) op = on_dir(req) ? OPS(req)->opendir : OPS(req)->open;

	return REPLY_OUT(req, op(FS(req), &req->ctx, req->in.nodeid, in, &req->out.open), open);
}

int fuse_do_release(struct fuse_request *req)
{
	const struct fuse_release_in *in = arg_fixed(req, sizeof(*in));
	__typeof__(OPS(req)->release) op = on_dir(req) ? OPS(req)->releasedir : OPS(req)->release;

	return op(FS(req), &req->ctx, req->in.nodeid, in);
}

int fuse_do_fsync(struct fuse_request *req)
{
	const struct fuse_fsync_in *in = arg_fixed(req, sizeof(*in));
	__typeof__(OPS(req)->fsync) op = on_dir(req) ? OPS(req)->fsyncdir : OPS(req)->fsync;

	return not_stranded(req, op(FS(req), &req->ctx, req->in.nodeid, in));
}

/* ------------------------------------------------------ data, entries */

/* Reads straight into the guest's reply buffers after the out-header; the
 * size is clipped to what the reply can hold rather than refused, like a
 * short read. */
int fuse_do_read(struct fuse_request *req)
{
	struct fuse_read_in in = *(const struct fuse_read_in *)arg_fixed(req, sizeof(in));
	size_t size = in.size;
	ssize_t done;
	int n_iov;

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

/* WRITE and COPY_FILE_RANGE: bytes done, at most what was asked for. */
static int reply_written(struct fuse_request *req, ssize_t done, uint64_t asked)
{
	if (done < 0)
		return (int)done;
	if ((uint64_t)done > asked)
		return -EIO;
	req->out.write.size = (uint32_t)done;
	reply_arg(req, &req->out.write, sizeof(req->out.write));
	return 0;
}

/* The payload stays in guest memory: the backend writes from sub-iovecs of
 * rd. Its size must be what the request claims and what we negotiated. */
int fuse_do_write(struct fuse_request *req)
{
	const struct fuse_write_in *in = arg_fixed(req, sizeof(*in));
	size_t offset = sizeof(struct fuse_in_header) + req->arg_len;
	int n_iov;

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
	return reply_written(req, OPS(req)->write(FS(req), &req->ctx, req->in.nodeid, in,
						  req->w->iov, (unsigned)n_iov),
			     in->size);
}

int fuse_do_copy_file_range(struct fuse_request *req)
{
	const struct fuse_copy_file_range_in *in = arg_fixed(req, sizeof(*in));
	/* The reply field is 32 bits; the client never asks for more. */
	uint64_t asked = in->len < UINT32_MAX ? in->len : UINT32_MAX;

	return reply_written(req, OPS(req)->copy_file_range(FS(req), &req->ctx, req->in.nodeid, in),
			     asked);
}

/* READDIR and READDIRPLUS. Entries are encoded into the worker's buffer,
 * then copied to the guest: the backend never formats into memory the
 * guest can change under it. */
int fuse_do_readdir(struct fuse_request *req)
{
	const struct fuse_read_in *in = arg_fixed(req, sizeof(*in));
	bool plus = req->in.opcode == FUSE_READDIRPLUS;
	struct fuse_dirbuf db = { .buf = req->w->out_buf, .len = 0 };
	int rc;

	if (plus && !(req->se->conn.flags & FUSE_DO_READDIRPLUS))
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

/* ------------------------------------------------------- on an open fh */

int fuse_do_flush(struct fuse_request *req)
{
	const struct fuse_flush_in *in = arg_fixed(req, sizeof(*in));

	return OPS(req)->flush(FS(req), &req->ctx, req->in.nodeid, in);
}

int fuse_do_fallocate(struct fuse_request *req)
{
	const struct fuse_fallocate_in *in = arg_fixed(req, sizeof(*in));

	return OPS(req)->fallocate(FS(req), &req->ctx, req->in.nodeid, in);
}

int fuse_do_lseek(struct fuse_request *req)
{
	const struct fuse_lseek_in *in = arg_fixed(req, sizeof(*in));
	int rc = OPS(req)->lseek(FS(req), &req->ctx, req->in.nodeid, in, &req->out.lseek);

	return REPLY_OUT(req, rc, lseek);
}

/* SETLK and SETLKW, which may wait (sleep) for the lock. */
int fuse_do_setlk(struct fuse_request *req)
{
	const struct fuse_lk_in *in = arg_fixed(req, sizeof(*in));
	bool sleep = req->in.opcode == FUSE_SETLKW;

	return not_stranded(req, OPS(req)->setlk(FS(req), &req->ctx, req->in.nodeid, in, sleep));
}

int fuse_do_getlk(struct fuse_request *req)
{
	const struct fuse_lk_in *in = arg_fixed(req, sizeof(*in));
	int rc = OPS(req)->getlk(FS(req), &req->ctx, req->in.nodeid, in, &req->out.lk);

	return REPLY_OUT(req, rc, lk);
}
