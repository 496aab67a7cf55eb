/* READ: straight into the guest's buffers when the data is cached; on an offload thread when it must come from the disk while requests wait behind it. */
#ifndef FERRY_READS_H
#define FERRY_READS_H

#include <stdbool.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "backend/open_files.h"
#include "backend/offload.h"
#include "protocol/fuse_ops.h"

struct read_runner;

/* Deferred reads run on offload, which must end (offload_free) before the
 * runner is freed. */
int read_runner_new(struct read_runner **out, struct open_file_table *handles,
		    struct offload *offload);
void read_runner_free(struct read_runner *r);

#ifdef FERRY_TEST_HOOKS
/* Test builds only (passthrough_test_hooks.h). on: every read that may
 * wait is tried without waiting, as on a file system known to be cold; */
void read_runner_defer_all(struct read_runner *r, bool on);
/* on: every read that may be deferred finds its data "not cached" without
 * asking the kernel. A real RWF_NOWAIT miss starts readahead and returns
 * the data if the disk was quick, which on a busy machine (the reader
 * preempted meanwhile) is nearly every time. */
void read_runner_pretend_uncached(struct read_runner *r, bool on);
#endif

/*
 * Reads up to size bytes at off from h->fd into dst, taking over the
 * caller's ref on h. Returns the bytes read or -errno when done here, or
 * FERRY_DEFERRED when an offload thread answers: when requests are queued
 * behind it (ctx->queued_behind) and the data is not in the host's page
 * cache, so that the disk read does not hold them up. dst is then no longer
 * used: the thread reads into a buffer of its own.
 */
ssize_t read_handle(struct read_runner *r, const struct fuse_request_ctx *ctx,
		    struct open_file *h, const struct iovec *dst, unsigned dst_cnt,
		    size_t size, uint64_t off);

#endif
