/* Unit tests: sends one raw FUSE request through a fuse_worker and keeps the reply apart. */
#include "raw_req.h"

#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

size_t raw_req_build(void *buf, size_t size, struct fuse_in_header h,
		     const void *a, size_t a_len, const void *b, size_t b_len,
		     const void *c, size_t c_len)
{
	const void *piece[] = { a, b, c };
	const size_t piece_len[] = { a_len, b_len, c_len };
	uint8_t *out = buf;
	size_t len = sizeof(h);

	if (size < len)
		abort();
	for (unsigned i = 0; i < 3; i++) {
		if (!piece_len[i])
			continue;
		if (piece_len[i] > size - len)
			abort();
		memcpy(out + len, piece[i], piece_len[i]);
		len += piece_len[i];
	}
	h.len = (uint32_t)len;
	memcpy(out, &h, sizeof(h));
	return len;
}

uint32_t raw_req_run(struct fuse_worker *w, const void *buf, size_t len, size_t room,
		     const struct ferry_req *as, struct raw_reply *r)
{
	static uint8_t out[sizeof(struct fuse_out_header) + sizeof(r->arg)];
	struct iovec rd = { (void *)buf, len };
	struct iovec wr = { out, room < sizeof(out) ? room : sizeof(out) };
	struct ferry_req req = { .rd = &rd, .rd_cnt = 1, .wr = &wr, .wr_cnt = 1 };

	/* Poisoned, so a reply that claims bytes it never wrote shows. */
	memset(out, 0xa5, sizeof(out));
	if (as) {
		req.chan = as->chan;
		req.token = as->token;
		req.queued_behind = as->queued_behind;
	}
	r->used = fuse_worker_process(w, &req);
	memset(&r->h, 0, sizeof(r->h));
	if (r->used != FERRY_DEFERRED && r->used >= sizeof(r->h)) {
		memcpy(&r->h, out, sizeof(r->h));
		memcpy(r->arg, out + sizeof(r->h), r->used - sizeof(r->h));
	}
	return r->used;
}

int raw_req_send(struct fuse_worker *w, struct fuse_in_header h,
		 const void *a, size_t a_len, const void *b, size_t b_len,
		 const void *c, size_t c_len, struct raw_reply *r)
{
	static uint8_t in[sizeof(struct fuse_in_header) + 3 * 4096];
	size_t len = raw_req_build(in, sizeof(in), h, a, a_len, b, b_len, c, c_len);

	if (raw_req_run(w, in, len, sizeof(r->h) + sizeof(r->arg), NULL, r) < sizeof(r->h))
		return 1;
	return r->h.error;
}
