/* Unit tests: sends one raw FUSE request through a fuse_worker and keeps the reply apart. */
#ifndef FERRY_TEST_RAW_REQ_H
#define FERRY_TEST_RAW_REQ_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <linux/fuse.h>

#include "protocol/fuse_server.h"

/* The last reply: its header and up to 64 KiB of arguments after it. */
struct raw_reply {
	uint32_t used;                  /* bytes the worker wrote; 0: no reply */
	struct fuse_out_header h;       /* zero when used < sizeof(h) */
	uint8_t arg[65536];
};

/*
 * Lays out a request in buf (size bytes): the header h, with h.len set to
 * the total, then the pieces a, b and c in turn (any may have length 0).
 * Returns the total length; aborts if it does not fit, a test's own bug.
 */
size_t raw_req_build(void *buf, size_t size, struct fuse_in_header h,
		     const void *a, size_t a_len, const void *b, size_t b_len,
		     const void *c, size_t c_len);

/*
 * Runs len bytes of buf as one readable iovec through w, with room bytes
 * (at most sizeof(h) + sizeof(arg)) of writable reply buffer that starts
 * poisoned, and copies what came back into r. The request's channel,
 * token and queued_behind are those of as (its buffers are ignored); as
 * NULL: none, the request cannot be deferred. Returns r->used,
 * FERRY_DEFERRED (then nothing is copied) included.
 */
uint32_t raw_req_run(struct fuse_worker *w, const void *buf, size_t len, size_t room,
		     const struct ferry_req *as, struct raw_reply *r);

/* A NUL-terminated name as one piece of a request: its address and length. */
#define NM(s) s, strlen(s) + 1

/*
 * raw_req_build and raw_req_run in one, for the usual request: at most
 * three pages of pieces after h, the whole of r for the reply, no channel.
 * Returns the reply's error (0 or -errno), or 1 when no reply header came.
 */
int raw_req_send(struct fuse_worker *w, struct fuse_in_header h,
		 const void *a, size_t a_len, const void *b, size_t b_len,
		 const void *c, size_t c_len, struct raw_reply *r);

#endif
