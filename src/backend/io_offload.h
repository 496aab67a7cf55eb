/* READ and FSYNC of an open file: inline on the queue thread where that is quick, on the offload executor where they would wait for the disk while requests queue behind them. */
#ifndef FERRY_IO_OFFLOAD_H
#define FERRY_IO_OFFLOAD_H

#include <stdbool.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "backend/open_files.h"
#include "backend/offload.h"
#include "protocol/fuse_ops.h"

struct io_offload;

/* Deferred reads and syncs run on offload, which must end (offload_free)
 * before io is freed. */
int io_offload_new(struct io_offload **out, struct open_file_table *open_files,
		   struct offload *offload);
void io_offload_free(struct io_offload *io);

/*
 * Reads up to size bytes at off from h->fd into dst, taking over the
 * caller's ref on h. Returns the bytes read or -errno when done here, or
 * FERRY_DEFERRED when an offload thread answers: when requests are queued
 * behind it (ctx->queued_behind) and the data is not in the host's page
 * cache, so that the disk read does not hold them up. dst is then no longer
 * used: the thread reads into a buffer of its own.
 */
ssize_t read_handle(struct io_offload *io, const struct fuse_request_ctx *ctx,
		    struct open_file *h, const struct iovec *dst, unsigned dst_cnt,
		    size_t size, uint64_t off);

/*
 * fsync(2) (fdatasync(2) with datasync) of h->fd, taking over the caller's
 * ref on h. Returns 0 or -errno when done here, or FERRY_DEFERRED when an
 * offload thread answers: when requests are queued behind it
 * (ctx->queued_behind) on a file system where a sync took longer than a
 * millisecond before, so that it does not hold them up.
 */
int sync_handle(struct io_offload *io, const struct fuse_request_ctx *ctx,
		struct open_file *h, bool datasync);

#ifdef FERRY_TEST_HOOKS
#include "backend/test_switch.h"

/* Test builds only (passthrough_test_hooks.h), flipped with
 * test_switch_set. */
struct io_offload_switches {
	/* Every read that may wait is tried without waiting, as on a file
	 * system known to be cold. */
	test_switch defer_every_read;
	/* Every sync goes to a thread, as on a slow file system. */
	test_switch defer_every_sync;
	/* Every read that may be deferred finds its data "not cached" without
	 * asking the kernel. A real RWF_NOWAIT miss starts readahead and
	 * returns the data if the disk was quick, which on a busy machine (the
	 * reader preempted meanwhile) is nearly every time. */
	test_switch pretend_uncached;
	/* Every timed read on a file system that refuses RWF_NOWAIT counts as
	 * slow, as on a network file system's. */
	test_switch pretend_slow_reads;
};

struct io_offload_switches *io_offload_switches(struct io_offload *io);
#endif

#endif
