/* The request contract between a transport and what serves its requests: one request, its reply channel, the service. */
#ifndef FERRY_REQ_H
#define FERRY_REQ_H

/*
 * Both transports (the virtqueues of vhost-user, and /dev/fuse) hand
 * requests over in this form, and the FUSE protocol takes them in this
 * form, so neither knows the other: the daemon wires one ferry_service to
 * either transport. Modelled on crosvm's fuse Reader/Writer, which both its
 * virtio-fs worker and its /dev/fuse worker implement; unlike crosvm, a
 * request here may be answered after serve() returned ("deferred").
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/*
 * What serve() returns for a deferred request, and what an op of the
 * backend returns once it deferred its request: the reply comes later,
 * through the request's channel. One value for both, so it needs to be a
 * valid int (ops return int) and never a length a reply can have (serve()
 * returns uint32_t reply lengths, far below 2 GiB): INT32_MAX is both.
 */
#define FERRY_DEFERRED 0x7fffffff

/* Largest reply (without data) a deferred request may carry: a FUSE
 * out-header and a small argument. The virtqueue transport copies it, so
 * that the completing thread keeps no pointer into guest memory. */
#define FERRY_DEFERRED_REPLY_MAX 64u

/*
 * The way back to the client for deferred replies: a virtqueue, a
 * /dev/fuse reader. The transport embeds it in its own state and recovers
 * that from chan in complete().
 */
struct ferry_chan {
	/*
	 * Sends the reply of the deferred request token: reply (len bytes, at
	 * most FERRY_DEFERRED_REPLY_MAX), then data_len bytes of data (the
	 * reply's own length field counts both). data (may be NULL) is
	 * malloc'd and the transport frees it: a deferred READ's bytes, read
	 * on another thread into memory of its own. Callable from any thread,
	 * exactly once per deferred request, and before the worker that
	 * deferred it can stop (see ferry_service.cancel).
	 */
	void (*complete)(struct ferry_chan *chan, void *token, const void *reply,
			 uint32_t len, void *data, uint32_t data_len);
};

/*
 * One request as a transport hands it over: its readable buffers (the
 * request as the client sent it) and its writable buffers (room for the
 * reply). They are only valid during serve(). For the virtqueue they point
 * into guest memory, bounds-checked by the transport; the client may still
 * change the bytes meanwhile, so the consumer copies what it validates.
 */
struct ferry_req {
	const struct iovec *rd;
	unsigned rd_cnt;
	const struct iovec *wr;
	unsigned wr_cnt;
	/* Requests the client had queued behind this one when it was taken
	 * (0 when the transport cannot tell): what a slow request done
	 * inline would hold up. */
	unsigned queued_behind;
	/* Where a deferred reply goes; NULL: this request cannot be deferred. */
	struct ferry_chan *chan;
	/* Names the request to chan->complete(); NULL where the channel
	 * needs no name (a /dev/fuse reply carries its unique). */
	void *token;
};

/*
 * What serves a transport's requests. A transport runs one or more
 * workers (a queue's thread, a /dev/fuse reader thread); each gets its own
 * context from start() and hands it to every call on that worker.
 */
struct ferry_service {
	/* On the worker's thread as it starts; NULL means failure: the worker
	 * does not serve (a virtqueue is marked broken). */
	void *(*start)(void *opaque, unsigned worker_index);
	/* On the worker's thread as it stops, once none of its requests is
	 * deferred any more. */
	void (*stop)(void *opaque, unsigned worker_index, void *ctx);
	/* Serves one request inline on the worker's thread. Returns the
	 * reply's length written into req->wr (0: no reply), or
	 * FERRY_DEFERRED: the reply comes through req->chan. */
	uint32_t (*serve)(void *ctx, const struct ferry_req *req);
	/* Optional: serves reqs[0] and as many after it as it serves
	 * together with it (at least 1, at most n), in order, as serve()
	 * would one by one; returns how many, their reply lengths (or
	 * FERRY_DEFERRED) in lens. All n stay valid until it returns, so it
	 * may serve several with one system call. The transport offers the
	 * rest again, after it has sent these replies. */
	unsigned (*serve_run)(void *ctx, const struct ferry_req *const *reqs, unsigned n,
			       uint32_t *lens);
	/* On the worker's thread when it stops with requests deferred: each
	 * must then complete soon (the transport counts them and waits for
	 * the last before stop). May be NULL if serve() never defers. */
	void (*cancel)(void *ctx);
	/* Optional. The client that used the transport is gone without
	 * saying so (a guest reboot, a frontend that went away): state it
	 * built up (a FUSE session) must go. Called while no worker runs,
	 * before any request of a new client. */
	void (*reset)(void *opaque);
	/*
	 * Optional: live migration (docs/migration.md). Each runs while every
	 * worker is stopped and nothing is in flight, on a thread of the
	 * transport's own, and may block until done. save_state writes the
	 * whole state to fd and leaves every table as it was (a cancelled
	 * migration goes on serving). load_state reads one state from fd up
	 * to EOF, validates all of it, and installs it only if all of it is
	 * good: on failure nothing of it stays and the service serves as
	 * before. Neither closes fd. 0 or -errno, with why in reason
	 * (NUL-terminated). A transport offers migration only when both are
	 * set.
	 */
	int (*save_state)(void *opaque, int fd, char *reason, size_t reason_size);
	int (*load_state)(void *opaque, int fd, char *reason, size_t reason_size);
};

/* Whether h has what every transport calls: start, stop and serve. */
static inline bool ferry_service_valid(const struct ferry_service *h)
{
	return h && h->start && h->stop && h->serve;
}

#endif
