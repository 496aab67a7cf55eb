/* The opcode lookup: the table's rows (fuse_opcodes.h) as an array indexed by opcode. */
#include "protocol/fuse_opcodes.h"

#include <stddef.h>

#define ROW(code, handler, fs_op, min, reply, fl) \
	[code] = { .name = #code, .run = fuse_do_##handler, \
		   .backend_op = offsetof(struct fs_ops, fs_op), \
		   .min_arg = (min), .reply_arg = (reply), .flags = (fl) },
#define ROW_PROTOCOL(code, handler, min, reply, fl) \
	[code] = { .name = #code, .run = fuse_do_##handler, \
		   .backend_op = FUSE_NO_BACKEND_OP, \
		   .min_arg = (min), .reply_arg = (reply), .flags = (fl) },
#define ROW_NOSYS(code) [code] = { .name = #code },

static const struct fuse_op_desc fuse_ops_table[] = {
	FUSE_OPCODES(ROW, ROW_PROTOCOL, ROW_NOSYS)
};

const struct fuse_op_desc *fuse_op_lookup(uint32_t opcode)
{
	const struct fuse_op_desc *desc;

	if (opcode >= sizeof(fuse_ops_table) / sizeof(fuse_ops_table[0]))
		return NULL;
	desc = &fuse_ops_table[opcode];
	return desc->name ? desc : NULL;
}
