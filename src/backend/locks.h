/* The guest's POSIX and flock locks, held on the host (OFD and flock locks) so host processes see them. */
#ifndef FERRY_LOCKS_H
#define FERRY_LOCKS_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/fd_budget.h"
#include "backend/offload.h"
#include "backend/open_files.h"
#include "protocol/fuse_ops.h"

/*
 * POSIX locks belong to a process and an inode: one guest process's locks on
 * a file are one set whichever fd it used, and closing any of its fds drops
 * them all. Each (nodeid, lock owner) therefore gets its own host open file
 * description, and its locks are OFD locks on that: they conflict with other
 * owners' and with host processes' POSIX and OFD locks, as on a local file
 * system. flock locks belong to an open file: they are flock(2) on the
 * handle's own fd.
 */
struct lock_table;

/* A SETLKW that waits runs on offload (offload_submit_blocking), which
 * must end (offload_free) before the table is freed: queue stop and
 * DESTROY cancel the waits first. */
int lock_table_new(struct lock_table **out, struct open_file_table *open_files,
		   struct fd_budget *fds, int proc_self_fd, struct offload *offload);
void lock_table_free(struct lock_table *t);

int locks_getlk(struct lock_table *t, struct open_file *h, uint64_t nodeid,
		const struct fuse_lk_in *in, struct fuse_lk_out *out);
/*
 * SETLK/SETLKW. A SETLKW that cannot be granted at once is deferred:
 * it returns FERRY_DEFERRED, and a waiter thread keeps the caller's
 * reference on h until it is done; otherwise the caller still owns it.
 */
int locks_setlk(struct lock_table *t, const struct fuse_request_ctx *ctx,
		struct open_file *h, uint64_t nodeid, const struct fuse_lk_in *in,
		bool sleep);
/* FLUSH (a close in the guest): drops the owner's POSIX locks on nodeid. */
void locks_drop_owner(struct lock_table *t, uint64_t nodeid, uint64_t owner);
/* DESTROY: drops every owner's locks. */
void locks_drop_all(struct lock_table *t);
/*
 * Migration: whether a POSIX lock is held on the file of one of the
 * owners' entries, seen from a fresh open file description (F_OFD_GETLK
 * does not show a description its own locks). 1 with *nodeid set, 0 if
 * none. A file that cannot be probed counts as locked.
 */
int locks_find_held(struct lock_table *t, uint64_t *nodeid);
/* Whether fd's file has a lock that conflicts with a whole-file write lock
 * of another open file description (POSIX/OFD if posix, else flock):
 * 1, 0, or -errno when it cannot tell. */
int locks_probe_fd(int proc_self_fd, int fd, bool posix);

#endif
