/* What the handlers share: the op's fixed argument, the reply it sets, and the backend it calls. */
#ifndef FERRY_FUSE_HANDLERS_H
#define FERRY_FUSE_HANDLERS_H

#include <errno.h>

#include "protocol/fuse_opcodes.h"

/* The backend; the table checked that the op a handler calls is there. */
#define OPS(req) ((req)->se->ops)
#define FS(req) ((req)->se->fs)
#define OUT_HDR sizeof(struct fuse_out_header)

/* The op's fixed struct is at the start of the copy, which is malloc-aligned;
 * min_arg in the table guarantees it is all there. */
static inline const void *arg_fixed(struct fuse_request *req, size_t size)
{
	req->arg_pos = size;
	return req->arg;
}

static inline void reply_arg(struct fuse_request *req, const void *arg, size_t len)
{
	req->reply_arg = arg;
	req->reply_len = len;
}

/* The backend's result; on success the fixed reply it filled in. */
static inline int reply_if_ok(struct fuse_request *req, int rc, const void *arg, size_t len)
{
	if (rc < 0)
		return rc;
	reply_arg(req, arg, len);
	return 0;
}

/* The backend's result; on success the fixed reply it filled in at
 * req->out.member (entry, attr, open, create, statfs, lk, lseek). */
#define REPLY_OUT(req, rc, member) \
	reply_if_ok((req), (rc), &(req)->out.member, sizeof((req)->out.member))

/* Room after the out-header, for replies whose size the client chooses. */
static inline size_t reply_room(const struct fuse_request *req, size_t want)
{
	size_t room = req->wr_len - OUT_HDR;

	if (want > room)
		want = room;
	if (want > FERRY_OUT_BUF_SIZE)
		want = FERRY_OUT_BUF_SIZE;
	return want;
}

/* FERRY_DEFERRED from an op that did not defer the request would leave the
 * guest waiting forever (SETLKW, FSYNC, FSYNCDIR may defer). */
static inline int not_stranded(const struct fuse_request *req, int rc)
{
	if (rc == FERRY_DEFERRED && !req->deferred)
		return -EIO;
	return rc;
}

#endif
