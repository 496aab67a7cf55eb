/* The one adapter between a transport and the FUSE session: each worker gets a FUSE worker, its requests go to it. */
#include "daemon/service.h"

#include <string.h>

#include "common/log.h"

/*
 * Each worker of either transport (a virtqueue's thread, a /dev/fuse
 * reader thread) gets a FUSE worker of the session, and its requests go to
 * it as they come.
 */
static void *worker_start(void *opaque, unsigned worker_index)
{
	struct daemon_state *st = opaque;
	struct fuse_worker *w;
	int ret = fuse_worker_new(st->session, &w);

	if (ret) {
		log_err("worker %u: no FUSE worker: %s", worker_index, strerror(-ret));
		return NULL;
	}
	return w;
}

static void worker_stop(void *opaque, unsigned worker_index, void *ctx)
{
	(void)opaque;
	(void)worker_index;
	fuse_worker_free(ctx);
}

static uint32_t worker_serve(void *ctx, const struct ferry_req *req)
{
	return fuse_worker_process(ctx, req);
}

static unsigned worker_serve_run(void *ctx, const struct ferry_req *const *reqs, unsigned n,
				  uint32_t *lens)
{
	return fuse_worker_process_run(ctx, reqs, n, lens);
}

static void worker_cancel(void *ctx)
{
	fuse_worker_cancel_deferred(ctx);
}

/* The guest rebooted (or its frontend went away) without unmounting: what
 * the old kernel held open is released, and the next INIT starts afresh. */
static void client_reset(void *opaque)
{
	struct daemon_state *st = opaque;

	fuse_server_reset(st->session);
}

/* What both services share. */
#define SESSION_WORKERS \
	.start = worker_start, .stop = worker_stop, .serve = worker_serve, \
	.serve_run = worker_serve_run, \
	.cancel = worker_cancel, .reset = client_reset

const struct ferry_service daemon_service = { SESSION_WORKERS };

static int save_state(void *opaque, int fd, char *reason, size_t reason_size)
{
	struct daemon_state *st = opaque;

	return migration_save(st->session, st->pt, &st->mig, fd, reason, reason_size);
}

static int load_state(void *opaque, int fd, char *reason, size_t reason_size)
{
	struct daemon_state *st = opaque;

	return migration_load(st->session, st->pt, &st->mig, fd, reason, reason_size);
}

/*
 * A share whose storage is remote (pool_policy.h): the worker's context is
 * its side of the request pool, which holds its FUSE worker; requests
 * that would wait on the storage with others queued behind them run on
 * the pool's threads (request_pool.h).
 */
static void *pooled_start(void *opaque, unsigned worker_index)
{
	struct daemon_state *st = opaque;
	struct request_pool_queue *q;
	int ret = request_pool_queue_new(st->pool, &q);

	if (ret) {
		log_err("worker %u: no FUSE worker: %s", worker_index, strerror(-ret));
		return NULL;
	}
	return q;
}

static void pooled_stop(void *opaque, unsigned worker_index, void *ctx)
{
	(void)opaque;
	(void)worker_index;
	request_pool_queue_free(ctx);
}

static uint32_t pooled_serve(void *ctx, const struct ferry_req *req)
{
	return request_pool_serve(ctx, req);
}

static unsigned pooled_serve_run(void *ctx, const struct ferry_req *const *reqs, unsigned n,
				 uint32_t *lens)
{
	return request_pool_serve_run(ctx, reqs, n, lens);
}

static void pooled_cancel(void *ctx)
{
	fuse_worker_cancel_deferred(request_pool_queue_fuse(ctx));
}

#define POOLED_WORKERS \
	.start = pooled_start, .stop = pooled_stop, .serve = pooled_serve, \
	.serve_run = pooled_serve_run, .cancel = pooled_cancel, .reset = client_reset

const struct ferry_service daemon_service_pooled = { POOLED_WORKERS };

/* Only vhost-user migrates: a /dev/fuse session lives in the host kernel,
 * which cannot move it. */
const struct ferry_service daemon_service_migratable = {
	SESSION_WORKERS,
	.save_state = save_state,
	.load_state = load_state,
};

const struct ferry_service daemon_service_pooled_migratable = {
	POOLED_WORKERS,
	.save_state = save_state,
	.load_state = load_state,
};
