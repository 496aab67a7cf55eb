/* Unit tests: sends one raw FUSE request through a fuse_worker and keeps the reply apart. */
#include "raw_req.h"

#include <string.h>
#include <sys/uio.h>

uint32_t raw_req_run(struct fuse_worker *w, const void *buf, size_t len, size_t room,
		     void *later_token, struct raw_reply *r)
{
	static uint8_t out[sizeof(struct fuse_out_header) + sizeof(r->arg)];
	struct iovec rd = { (void *)buf, len };
	struct iovec wr = { out, room < sizeof(out) ? room : sizeof(out) };

	/* Poisoned, so a reply that claims bytes it never wrote shows. */
	memset(out, 0xa5, sizeof(out));
	r->used = fuse_worker_process(w, &rd, 1, &wr, 1, later_token);
	memset(&r->h, 0, sizeof(r->h));
	if (r->used != FUSE_REPLY_DEFERRED && r->used >= sizeof(r->h)) {
		memcpy(&r->h, out, sizeof(r->h));
		memcpy(r->arg, out + sizeof(r->h), r->used - sizeof(r->h));
	}
	return r->used;
}
