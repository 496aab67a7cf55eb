/* The opcode dispatch table: for each FUSE opcode its handler, the argument and reply sizes checked before it runs, and its flags. */
#include "protocol/fuse_handlers.h"

#define OP(code, fn, min, reply, fl) \
	[code] = { .name = #code, .run = (fn), .min_arg = (min), .reply_arg = (reply), .flags = (fl) }
/* Known opcodes we do not implement: ENOSYS, and the client stops asking. */
#define OP_NOSYS(code) [code] = { .name = #code }

static const struct fuse_op_desc fuse_ops_table[] = {
	OP(FUSE_LOOKUP, fuse_do_lookup, 0, sizeof(struct fuse_entry_out), 0),
	OP(FUSE_FORGET, fuse_do_forget, sizeof(struct fuse_forget_in), 0, FUSE_OP_NO_REPLY),
	OP(FUSE_GETATTR, fuse_do_getattr, sizeof(struct fuse_getattr_in), sizeof(struct fuse_attr_out), 0),
	OP(FUSE_SETATTR, fuse_do_setattr, sizeof(struct fuse_setattr_in), sizeof(struct fuse_attr_out), 0),
	OP(FUSE_READLINK, fuse_do_readlink, 0, 0, 0),
	OP(FUSE_SYMLINK, fuse_do_symlink, 0, sizeof(struct fuse_entry_out), FUSE_OP_MODIFIES),
	OP(FUSE_MKNOD, fuse_do_mknod, sizeof(struct fuse_mknod_in), sizeof(struct fuse_entry_out),
	   FUSE_OP_MODIFIES),
	OP(FUSE_MKDIR, fuse_do_mkdir, sizeof(struct fuse_mkdir_in), sizeof(struct fuse_entry_out),
	   FUSE_OP_MODIFIES),
	OP(FUSE_UNLINK, fuse_do_unlink, 0, 0, FUSE_OP_MODIFIES),
	OP(FUSE_RMDIR, fuse_do_rmdir, 0, 0, FUSE_OP_MODIFIES),
	OP(FUSE_RENAME, fuse_do_rename, sizeof(struct fuse_rename_in), 0, FUSE_OP_MODIFIES),
	OP(FUSE_LINK, fuse_do_link, sizeof(struct fuse_link_in), sizeof(struct fuse_entry_out),
	   FUSE_OP_MODIFIES),
	OP(FUSE_OPEN, fuse_do_open, sizeof(struct fuse_open_in), sizeof(struct fuse_open_out), 0),
	OP(FUSE_READ, fuse_do_read, sizeof(struct fuse_read_in), 0, 0),
	OP(FUSE_WRITE, fuse_do_write, sizeof(struct fuse_write_in), sizeof(struct fuse_write_out),
	   FUSE_OP_HEAD_ONLY | FUSE_OP_MODIFIES),
	OP(FUSE_STATFS, fuse_do_statfs, 0, sizeof(struct fuse_statfs_out), 0),
	OP(FUSE_RELEASE, fuse_do_release, sizeof(struct fuse_release_in), 0, 0),
	OP(FUSE_FSYNC, fuse_do_fsync, sizeof(struct fuse_fsync_in), 0, 0),
	/* The fixed part is 8 or 16 bytes depending on SETXATTR_EXT. */
	OP(FUSE_SETXATTR, fuse_do_setxattr, FUSE_COMPAT_SETXATTR_IN_SIZE, 0,
	   FUSE_OP_XATTR | FUSE_OP_MODIFIES),
	OP(FUSE_GETXATTR, fuse_do_getxattr, sizeof(struct fuse_getxattr_in), 0, FUSE_OP_XATTR),
	OP(FUSE_LISTXATTR, fuse_do_listxattr, sizeof(struct fuse_getxattr_in), 0, FUSE_OP_XATTR),
	OP(FUSE_REMOVEXATTR, fuse_do_removexattr, 0, 0, FUSE_OP_XATTR | FUSE_OP_MODIFIES),
	OP(FUSE_FLUSH, fuse_do_flush, sizeof(struct fuse_flush_in), 0, 0),
	/* Pre-7.36 clients send only major, minor, max_readahead and flags. */
	OP(FUSE_INIT, fuse_do_init, 16, sizeof(struct fuse_init_out), 0),
	OP(FUSE_OPENDIR, fuse_do_opendir, sizeof(struct fuse_open_in), sizeof(struct fuse_open_out), 0),
	OP(FUSE_READDIR, fuse_do_readdir, sizeof(struct fuse_read_in), 0, 0),
	OP(FUSE_RELEASEDIR, fuse_do_releasedir, sizeof(struct fuse_release_in), 0, 0),
	OP(FUSE_FSYNCDIR, fuse_do_fsyncdir, sizeof(struct fuse_fsync_in), 0, 0),
	OP(FUSE_GETLK, fuse_do_getlk, sizeof(struct fuse_lk_in), sizeof(struct fuse_lk_out), 0),
	OP(FUSE_SETLK, fuse_do_setlk, sizeof(struct fuse_lk_in), 0, 0),
	OP(FUSE_SETLKW, fuse_do_setlkw, sizeof(struct fuse_lk_in), 0, 0),
	OP(FUSE_ACCESS, fuse_do_access, sizeof(struct fuse_access_in), 0, 0),
	OP(FUSE_CREATE, fuse_do_create, sizeof(struct fuse_create_in),
	   sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out), FUSE_OP_MODIFIES),
	OP(FUSE_INTERRUPT, fuse_do_interrupt, sizeof(struct fuse_interrupt_in), 0, FUSE_OP_NO_REPLY),
	OP_NOSYS(FUSE_BMAP),
	OP(FUSE_DESTROY, fuse_do_destroy, 0, 0, 0),
	OP_NOSYS(FUSE_IOCTL),
	OP_NOSYS(FUSE_POLL),
	OP_NOSYS(FUSE_NOTIFY_REPLY),
	OP(FUSE_BATCH_FORGET, fuse_do_batch_forget, sizeof(struct fuse_batch_forget_in), 0,
	   FUSE_OP_NO_REPLY | FUSE_OP_HEAD_ONLY),
	OP(FUSE_FALLOCATE, fuse_do_fallocate, sizeof(struct fuse_fallocate_in), 0, FUSE_OP_MODIFIES),
	OP(FUSE_READDIRPLUS, fuse_do_readdirplus, sizeof(struct fuse_read_in), 0, 0),
	OP(FUSE_RENAME2, fuse_do_rename2, sizeof(struct fuse_rename2_in), 0, FUSE_OP_MODIFIES),
	OP(FUSE_LSEEK, fuse_do_lseek, sizeof(struct fuse_lseek_in), sizeof(struct fuse_lseek_out), 0),
	OP(FUSE_COPY_FILE_RANGE, fuse_do_copy_file_range, sizeof(struct fuse_copy_file_range_in),
	   sizeof(struct fuse_write_out), FUSE_OP_MODIFIES),
	OP_NOSYS(FUSE_SETUPMAPPING),
	OP_NOSYS(FUSE_REMOVEMAPPING),
	OP(FUSE_SYNCFS, fuse_do_syncfs, sizeof(struct fuse_syncfs_in), 0, 0),
	OP(FUSE_TMPFILE, fuse_do_tmpfile, sizeof(struct fuse_create_in),
	   sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out), FUSE_OP_MODIFIES),
};

const struct fuse_op_desc *fuse_op_lookup(uint32_t opcode)
{
	const struct fuse_op_desc *desc;

	if (opcode >= sizeof(fuse_ops_table) / sizeof(fuse_ops_table[0]))
		return NULL;
	desc = &fuse_ops_table[opcode];
	return desc->name ? desc : NULL;
}
