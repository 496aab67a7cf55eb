/* The one adapter between a transport and the FUSE session: each worker gets a FUSE worker, its requests go to it. */
#include "daemon/service.h"

#include <errno.h>
#include <stdio.h>
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

/* --request-timeout: the worker's context is its deadline side, which
 * holds its FUSE worker. */
static void *deadline_start(void *opaque, unsigned worker_index)
{
	struct daemon_state *st = opaque;
	struct deadline_worker *dw;
	int ret = deadline_worker_new(st->deadline, &dw);

	if (ret) {
		log_err("worker %u: no FUSE worker: %s", worker_index, strerror(-ret));
		return NULL;
	}
	return dw;
}

static void deadline_stop(void *opaque, unsigned worker_index, void *ctx)
{
	(void)opaque;
	(void)worker_index;
	deadline_worker_free(ctx);
}

static uint32_t deadline_worker_serve(void *ctx, const struct ferry_req *req)
{
	return deadline_serve(ctx, req);
}

static void deadline_cancel(void *ctx)
{
	fuse_worker_cancel_deferred(deadline_worker_fuse(ctx));
}

#define DEADLINE_WORKERS \
	.start = deadline_start, .stop = deadline_stop, .serve = deadline_worker_serve, \
	.cancel = deadline_cancel, .reset = client_reset

const struct ferry_service daemon_service_deadline = { DEADLINE_WORKERS };

static int save_state(void *opaque, int fd, char *reason, size_t reason_size)
{
	struct daemon_state *st = opaque;
	unsigned stuck = st->deadline ? deadline_stuck(st->deadline) : 0;

	/* A stuck call may still change the tables once its host call returns
	 * (it gives back what its dropped reply took), so they cannot be
	 * saved as they will be. */
	if (stuck) {
		snprintf(reason, reason_size, "--request-timeout: %u host system call(s) that "
			 "timed out have not returned yet; migrate once the host's storage "
			 "answers again", stuck);
		return -EBUSY;
	}
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

const struct ferry_service daemon_service_deadline_migratable = {
	DEADLINE_WORKERS,
	.save_state = save_state,
	.load_state = load_state,
};

const struct ferry_service daemon_service_pooled_migratable = {
	POOLED_WORKERS,
	.save_state = save_state,
	.load_state = load_state,
};
