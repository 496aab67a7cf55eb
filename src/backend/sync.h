/* fsync and fdatasync: inline where they are quick, on an offload thread where they have been slow. */
#ifndef FERRY_SYNC_H
#define FERRY_SYNC_H

#include <stdbool.h>

#include "backend/open_files.h"
#include "backend/offload.h"
#include "protocol/fuse_ops.h"

struct sync_runner;

/* Deferred syncs run on offload, which must end (offload_free) before the
 * runner is freed. */
int sync_runner_new(struct sync_runner **out, struct open_file_table *handles,
		    struct offload *offload);
void sync_runner_free(struct sync_runner *r);

#ifdef FERRY_TEST_HOOKS
/* Test builds only (passthrough_test_hooks.h). on: every sync goes to a
 * thread, as on a slow file system. */
void sync_runner_defer_all(struct sync_runner *r, bool on);
#endif

/*
 * fsync(2) (fdatasync(2) with datasync) of h->fd, taking over the caller's
 * ref on h. Returns 0 or -errno when done here, or FERRY_DEFERRED when an
 * offload thread answers: when requests are queued behind it
 * (ctx->queued_behind) on a file system where a sync took longer than a
 * millisecond before, so that it does not hold them up.
 */
int sync_handle(struct sync_runner *r, const struct fuse_request_ctx *ctx,
		struct open_file *h, bool datasync);

#endif
