/* The FUSE opcode table: one row per opcode with its handler, the backend op it needs, the sizes checked before it runs and its flags. */
#ifndef FERRY_FUSE_OPCODES_H
#define FERRY_FUSE_OPCODES_H

#include "protocol/fuse_internal.h"

/*
 * Rows, one per opcode; each user of the table says what a row becomes:
 *
 *   OP(code, handler, backend_op, min_arg, reply_arg, flags)
 *     fuse_do_<handler> serves it once the backend has the fs_ops member
 *     <backend_op> (ENOSYS without it), the request carries min_arg fixed
 *     argument bytes (EINVAL) and the reply has room for reply_arg bytes
 *     (ERANGE); flags are FUSE_OP_* (fuse_internal.h).
 *   OP_PROTOCOL(code, handler, min_arg, reply_arg, flags)
 *     the same for what the protocol answers whatever the backend has
 *     (INIT, DESTROY, INTERRUPT, and FORGET, which has no reply to refuse).
 *   OP_NOSYS(code)
 *     known, not implemented: ENOSYS, and the client stops asking.
 *
 * fuse_dispatch.c makes the lookup array of it, and the handler
 * prototypes below come from the same rows.
 */
#define FUSE_OPCODES(OP, OP_PROTOCOL, OP_NOSYS) \
	OP(FUSE_LOOKUP, lookup, lookup, 0, sizeof(struct fuse_entry_out), 0) \
	OP_PROTOCOL(FUSE_FORGET, forget, sizeof(struct fuse_forget_in), 0, FUSE_OP_NO_REPLY) \
	OP(FUSE_GETATTR, getattr, getattr, sizeof(struct fuse_getattr_in), \
	   sizeof(struct fuse_attr_out), 0) \
	OP(FUSE_SETATTR, setattr, setattr, sizeof(struct fuse_setattr_in), \
	   sizeof(struct fuse_attr_out), 0) \
	OP(FUSE_READLINK, readlink, readlink, 0, 0, 0) \
	OP(FUSE_SYMLINK, symlink, symlink, 0, sizeof(struct fuse_entry_out), FUSE_OP_MODIFIES) \
	OP(FUSE_MKNOD, mknod, mknod, sizeof(struct fuse_mknod_in), \
	   sizeof(struct fuse_entry_out), FUSE_OP_MODIFIES) \
	OP(FUSE_MKDIR, mkdir, mkdir, sizeof(struct fuse_mkdir_in), \
	   sizeof(struct fuse_entry_out), FUSE_OP_MODIFIES) \
	OP(FUSE_UNLINK, unlink, unlink, 0, 0, FUSE_OP_MODIFIES) \
	OP(FUSE_RMDIR, unlink, rmdir, 0, 0, FUSE_OP_MODIFIES) \
	OP(FUSE_RENAME, rename, rename, sizeof(struct fuse_rename_in), 0, FUSE_OP_MODIFIES) \
	OP(FUSE_LINK, link, link, sizeof(struct fuse_link_in), \
	   sizeof(struct fuse_entry_out), FUSE_OP_MODIFIES) \
	OP(FUSE_OPEN, open, open, sizeof(struct fuse_open_in), sizeof(struct fuse_open_out), 0) \
	OP(FUSE_READ, read, read, sizeof(struct fuse_read_in), 0, 0) \
	OP(FUSE_WRITE, write, write, sizeof(struct fuse_write_in), \
	   sizeof(struct fuse_write_out), FUSE_OP_HEAD_ONLY | FUSE_OP_MODIFIES) \
	OP(FUSE_STATFS, statfs, statfs, 0, sizeof(struct fuse_statfs_out), 0) \
	OP(FUSE_RELEASE, release, release, sizeof(struct fuse_release_in), 0, 0) \
	OP(FUSE_FSYNC, fsync, fsync, sizeof(struct fuse_fsync_in), 0, 0) \
	/* The fixed part is 8 or 16 bytes depending on SETXATTR_EXT. */ \
	OP(FUSE_SETXATTR, setxattr, setxattr, FUSE_COMPAT_SETXATTR_IN_SIZE, 0, \
	   FUSE_OP_XATTR | FUSE_OP_MODIFIES) \
	OP(FUSE_GETXATTR, getxattr, getxattr, sizeof(struct fuse_getxattr_in), 0, FUSE_OP_XATTR) \
	OP(FUSE_LISTXATTR, listxattr, listxattr, sizeof(struct fuse_getxattr_in), 0, \
	   FUSE_OP_XATTR) \
	OP(FUSE_REMOVEXATTR, removexattr, removexattr, 0, 0, FUSE_OP_XATTR | FUSE_OP_MODIFIES) \
	OP(FUSE_FLUSH, flush, flush, sizeof(struct fuse_flush_in), 0, 0) \
	/* Pre-7.36 clients send only major, minor, max_readahead and flags. */ \
	OP_PROTOCOL(FUSE_INIT, init, 16, sizeof(struct fuse_init_out), 0) \
	OP(FUSE_OPENDIR, open, opendir, sizeof(struct fuse_open_in), \
	   sizeof(struct fuse_open_out), 0) \
	OP(FUSE_READDIR, readdir, readdir, sizeof(struct fuse_read_in), 0, 0) \
	OP(FUSE_RELEASEDIR, release, releasedir, sizeof(struct fuse_release_in), 0, 0) \
	OP(FUSE_FSYNCDIR, fsync, fsyncdir, sizeof(struct fuse_fsync_in), 0, 0) \
	OP(FUSE_GETLK, getlk, getlk, sizeof(struct fuse_lk_in), sizeof(struct fuse_lk_out), 0) \
	OP(FUSE_SETLK, setlk, setlk, sizeof(struct fuse_lk_in), 0, 0) \
	OP(FUSE_SETLKW, setlk, setlk, sizeof(struct fuse_lk_in), 0, 0) \
	OP(FUSE_ACCESS, access, access, sizeof(struct fuse_access_in), 0, 0) \
	OP(FUSE_CREATE, create, create, sizeof(struct fuse_create_in), \
	   sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out), FUSE_OP_MODIFIES) \
	OP_PROTOCOL(FUSE_INTERRUPT, interrupt, sizeof(struct fuse_interrupt_in), 0, \
		    FUSE_OP_NO_REPLY) \
	OP_NOSYS(FUSE_BMAP) \
	OP_PROTOCOL(FUSE_DESTROY, destroy, 0, 0, 0) \
	OP_NOSYS(FUSE_IOCTL) \
	OP_NOSYS(FUSE_POLL) \
	OP_NOSYS(FUSE_NOTIFY_REPLY) \
	OP_PROTOCOL(FUSE_BATCH_FORGET, batch_forget, sizeof(struct fuse_batch_forget_in), 0, \
		    FUSE_OP_NO_REPLY | FUSE_OP_HEAD_ONLY) \
	OP(FUSE_FALLOCATE, fallocate, fallocate, sizeof(struct fuse_fallocate_in), 0, \
	   FUSE_OP_MODIFIES) \
	OP(FUSE_READDIRPLUS, readdir, readdir, sizeof(struct fuse_read_in), 0, 0) \
	OP(FUSE_RENAME2, rename2, rename, sizeof(struct fuse_rename2_in), 0, FUSE_OP_MODIFIES) \
	OP(FUSE_LSEEK, lseek, lseek, sizeof(struct fuse_lseek_in), \
	   sizeof(struct fuse_lseek_out), 0) \
	OP(FUSE_COPY_FILE_RANGE, copy_file_range, copy_file_range, \
	   sizeof(struct fuse_copy_file_range_in), sizeof(struct fuse_write_out), \
	   FUSE_OP_MODIFIES) \
	OP_NOSYS(FUSE_SETUPMAPPING) \
	OP_NOSYS(FUSE_REMOVEMAPPING) \
	OP(FUSE_SYNCFS, syncfs, syncfs, sizeof(struct fuse_syncfs_in), 0, 0) \
	OP(FUSE_TMPFILE, tmpfile, tmpfile, sizeof(struct fuse_create_in), \
	   sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out), FUSE_OP_MODIFIES) \
	OP(FUSE_STATX, statx, statx, sizeof(struct fuse_statx_in), \
	   sizeof(struct fuse_statx_out), 0)

/*
 * The handlers, declared from the rows: each runs with the op's fixed
 * argument struct (min_arg bytes) copied to req->arg, room for its fixed
 * reply (reply_arg bytes) checked and, for an OP row, the backend op
 * present; it parses what follows, calls the backend and sets the reply.
 * 0 or -errno, or FERRY_DEFERRED when the backend took the request to
 * answer later.
 */
#define FUSE_HANDLER_DECLARE(code, handler, ...) int fuse_do_##handler(struct fuse_request *req);
#define FUSE_HANDLER_NONE(code)
FUSE_OPCODES(FUSE_HANDLER_DECLARE, FUSE_HANDLER_DECLARE, FUSE_HANDLER_NONE)
#undef FUSE_HANDLER_DECLARE
#undef FUSE_HANDLER_NONE

#endif
