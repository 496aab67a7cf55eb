/* The per-opcode handlers (fuse_handlers.c) the dispatch table (fuse_dispatch.c) points at. */
#ifndef FERRY_FUSE_HANDLERS_H
#define FERRY_FUSE_HANDLERS_H

#include "protocol/fuse_internal.h"

/*
 * Each runs with the op's fixed argument struct (min_arg bytes) copied to
 * req->arg and room for its fixed reply (reply_arg bytes) checked; it
 * parses what follows, calls the backend and sets the reply. 0 or -errno,
 * or FERRY_DEFERRED when the backend took the request to answer later.
 */
int fuse_do_lookup(struct fuse_request *req);
int fuse_do_forget(struct fuse_request *req);
int fuse_do_batch_forget(struct fuse_request *req);
int fuse_do_getattr(struct fuse_request *req);
int fuse_do_setattr(struct fuse_request *req);
int fuse_do_readlink(struct fuse_request *req);
int fuse_do_symlink(struct fuse_request *req);
int fuse_do_mknod(struct fuse_request *req);
int fuse_do_mkdir(struct fuse_request *req);
int fuse_do_unlink(struct fuse_request *req);
int fuse_do_rmdir(struct fuse_request *req);
int fuse_do_rename(struct fuse_request *req);
int fuse_do_rename2(struct fuse_request *req);
int fuse_do_link(struct fuse_request *req);
int fuse_do_create(struct fuse_request *req);
int fuse_do_tmpfile(struct fuse_request *req);
int fuse_do_open(struct fuse_request *req);
int fuse_do_opendir(struct fuse_request *req);
int fuse_do_read(struct fuse_request *req);
int fuse_do_write(struct fuse_request *req);
int fuse_do_statfs(struct fuse_request *req);
int fuse_do_release(struct fuse_request *req);
int fuse_do_releasedir(struct fuse_request *req);
int fuse_do_fsync(struct fuse_request *req);
int fuse_do_fsyncdir(struct fuse_request *req);
int fuse_do_flush(struct fuse_request *req);
int fuse_do_readdir(struct fuse_request *req);
int fuse_do_readdirplus(struct fuse_request *req);
int fuse_do_setxattr(struct fuse_request *req);
int fuse_do_getxattr(struct fuse_request *req);
int fuse_do_listxattr(struct fuse_request *req);
int fuse_do_removexattr(struct fuse_request *req);
int fuse_do_access(struct fuse_request *req);
int fuse_do_getlk(struct fuse_request *req);
int fuse_do_setlk(struct fuse_request *req);
int fuse_do_setlkw(struct fuse_request *req);
int fuse_do_interrupt(struct fuse_request *req);
int fuse_do_fallocate(struct fuse_request *req);
int fuse_do_lseek(struct fuse_request *req);
int fuse_do_copy_file_range(struct fuse_request *req);
int fuse_do_syncfs(struct fuse_request *req);

#endif
