/* One request as a virtqueue hands it to the device's user: its readable and writable buffers. */
#ifndef FERRY_VU_REQUEST_H
#define FERRY_VU_REQUEST_H

#include <sys/uio.h>

/*
 * One request as the device sees it: the chain's device-readable buffers
 * (the FUSE request) and its device-writable buffers (room for the reply).
 * Every iovec points into mapped guest memory and was bounds-checked by the
 * transport; the guest may still change the bytes while we look at them, so
 * the consumer copies what it validates. Its own header, so that virtq.h,
 * which fills it, does not need the device API in vhost_user.h.
 */
struct vu_request {
	const struct iovec *rd;
	unsigned rd_cnt;
	const struct iovec *wr;
	unsigned wr_cnt;
	/* Names the request to vu_request_complete() if handle() defers it. */
	void *token;
	/* Requests the driver had queued behind this one when it was taken
	 * (as of the last look at the ring): what a slow request would hold up. */
	unsigned queued_behind;
};

#endif
