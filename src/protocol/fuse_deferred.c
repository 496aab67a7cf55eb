/* Deferred requests: an op answers after its handler returned, through the request's channel; INTERRUPT and cancellation. */
#include "protocol/fuse_handlers.h"

#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>

#include "common/log.h"

/*
 * A session has FERRY_MAX_DEFERRED slots, so a guest cannot make the
 * backend start waits without bound. Only deferring ops, their completion,
 * INTERRUPT and cancellation take deferred_lock: never the request path
 * of a request that is not deferred.
 */

int fuse_deferred_init(struct fuse_server *se)
{
	int rc = -pthread_mutex_init(&se->deferred_lock, NULL);

	if (rc)
		return rc;
	for (unsigned i = 0; i < FERRY_MAX_DEFERRED; i++)
		se->deferred[i].se = se;
	return 0;
}

void fuse_deferred_destroy(struct fuse_server *se)
{
	pthread_mutex_destroy(&se->deferred_lock);
}

int fuse_deferred_begin(const struct fuse_request_ctx *ctx, fuse_deferred_cancel_fn cancel,
			void *arg, struct fuse_deferred **out)
{
	/* ctx is always the one inside the request being processed. */
	struct fuse_request *req = (struct fuse_request *)((char *)ctx - offsetof(struct fuse_request, ctx));
	struct fuse_server *se = req->se;
	struct fuse_deferred *d = NULL;

	if (!ctx->can_defer || !req->treq->chan || req->deferred)
		return -ENOLCK;
	pthread_mutex_lock(&se->deferred_lock);
	for (unsigned i = 0; i < FERRY_MAX_DEFERRED; i++) {
		if (!se->deferred[i].in_use) {
			d = &se->deferred[i];
			break;
		}
	}
	if (d) {
		d->in_use = true;
		d->unique = req->in.unique;
		d->w = req->w;
		d->chan = req->treq->chan;
		d->token = req->treq->token;
		d->cancel = cancel;
		d->cancel_arg = arg;
	}
	pthread_mutex_unlock(&se->deferred_lock);
	if (!d) {
		log_warn("fuse: %u requests already wait; unique %llu fails with ENOLCK",
			 FERRY_MAX_DEFERRED, (unsigned long long)req->in.unique);
		return -ENOLCK;
	}
	req->deferred = true;
	*out = d;
	return 0;
}

void fuse_deferred_finish_data(struct fuse_deferred *d, int rc, void *data, size_t len)
{
	struct fuse_server *se = d->se;
	struct fuse_out_header out = { .len = sizeof(out) };
	struct ferry_chan *chan;
	void *token;

	if (rc > 0)
		rc = 0;
	if (rc < -4095 || len > UINT32_MAX - sizeof(out))
		rc = -EIO;
	if (rc < 0) {
		free(data);
		data = NULL;
		len = 0;
	}
	/* The slot is free before the reply leaves: once the guest has the
	 * reply it may reuse the unique, and INTERRUPT must not find us. */
	pthread_mutex_lock(&se->deferred_lock);
	out.unique = d->unique;
	chan = d->chan;
	token = d->token;
	d->in_use = false;
	pthread_mutex_unlock(&se->deferred_lock);
	out.error = rc;
	out.len += (uint32_t)len;
	chan->complete(chan, token, &out, sizeof(out), data, (uint32_t)len);
}

void fuse_deferred_finish(struct fuse_deferred *d, int rc)
{
	fuse_deferred_finish_data(d, rc, NULL, 0);
}

/* Cancels the requests of worker w, or all of them when w is NULL. */
static void deferred_cancel(struct fuse_server *se, const struct fuse_worker *w)
{
	pthread_mutex_lock(&se->deferred_lock);
	for (unsigned i = 0; i < FERRY_MAX_DEFERRED; i++) {
		struct fuse_deferred *d = &se->deferred[i];

		if (d->in_use && (!w || d->w == w))
			d->cancel(d->cancel_arg);
	}
	pthread_mutex_unlock(&se->deferred_lock);
}

static bool deferred_any(struct fuse_server *se)
{
	bool any = false;

	pthread_mutex_lock(&se->deferred_lock);
	for (unsigned i = 0; i < FERRY_MAX_DEFERRED && !any; i++)
		any = se->deferred[i].in_use;
	pthread_mutex_unlock(&se->deferred_lock);
	return any;
}

/*
 * The guest does not learn whether an INTERRUPT found its request: a
 * request not (yet) deferred here was either answered already or will be
 * answered normally. (Linux's virtio-fs driver does not send INTERRUPT at
 * all so far; the host kernel over /dev/fuse does.)
 */
void fuse_deferred_interrupt(struct fuse_server *se, uint64_t unique)
{
	pthread_mutex_lock(&se->deferred_lock);
	for (unsigned i = 0; i < FERRY_MAX_DEFERRED; i++) {
		struct fuse_deferred *d = &se->deferred[i];

		if (d->in_use && d->unique == unique) {
			d->cancel(d->cancel_arg);
			break;
		}
	}
	pthread_mutex_unlock(&se->deferred_lock);
}

/* Only deferred requests can still be in flight. */
int fuse_do_interrupt(struct fuse_request *req)
{
	const struct fuse_interrupt_in *in = arg_fixed(req, sizeof(*in));

	fuse_deferred_interrupt(req->se, in->unique);
	return 0;
}

void fuse_worker_cancel_deferred(struct fuse_worker *w)
{
	deferred_cancel(w->se, w);
}

/* Deferred requests are ops in flight too; cancelled, they finish at once. */
void fuse_deferred_cancel_all(struct fuse_server *se)
{
	deferred_cancel(se, NULL);
	while (deferred_any(se))
		sched_yield();
}
