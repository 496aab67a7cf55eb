/* One builder per FUSE request ferryfs-load sends, laid out as the Linux driver lays it out. */
#include "fuse_requests.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int fr_read(struct fc_slot *s, uint64_t unique, uint64_t nodeid, uint64_t fh,
	    uint64_t off, uint32_t size, bool full_check)
{
	struct fuse_read_in in = { .fh = fh, .offset = off, .size = size };
	int ret;

	fc_begin(s, FUSE_READ, nodeid, unique);
	/* Poisoned first: a reply that claims data it never wrote then fails
	 * the pattern check even if the offset repeats. The strength is fixed
	 * when the request is built, so one built during warmup is checked in
	 * full even if its reply comes in the measured interval. */
	s->full_check = full_check;
	fc_pattern_poison(s->data, off, in.size,
			  s->full_check ? FC_POISON_STRIDE_FULL : FC_CHECK_STRIDE_SPARSE);
	ret = fc_arg(s, &in, sizeof(in));
	if (!ret)
		ret = fc_reply(s, 0);
	if (!ret)
		ret = fc_data_out(s, in.size);
	s->expect_len = sizeof(struct fuse_out_header) + in.size;
	s->data_len = in.size;
	return ret;
}

int fr_write(struct fc_slot *s, uint64_t unique, uint64_t nodeid, uint64_t fh,
	     uint64_t off, uint32_t size)
{
	struct fuse_write_in in = { .fh = fh, .offset = off, .size = size };
	int ret;

	fc_begin(s, FUSE_WRITE, nodeid, unique);
	fc_pattern_fill(s->data, off, in.size);
	ret = fc_arg(s, &in, sizeof(in));
	if (!ret)
		ret = fc_data_in(s, in.size);
	if (!ret)
		ret = fc_reply(s, sizeof(struct fuse_write_out));
	s->expect_len = sizeof(struct fuse_out_header) + sizeof(struct fuse_write_out);
	s->data_len = in.size;
	return ret;
}

int fr_name(struct fc_slot *s, uint64_t unique, uint32_t opcode, uint64_t parent,
	    const char *name, const void *arg, uint32_t alen, uint32_t reply)
{
	int ret = 0;

	fc_begin(s, opcode, parent, unique);
	if (alen)
		ret = fc_arg(s, arg, alen);
	if (!ret)
		ret = fc_arg(s, name, (uint32_t)strlen(name) + 1);
	if (!ret)
		ret = fc_reply(s, reply);
	s->expect_len = sizeof(struct fuse_out_header) + reply;
	return ret;
}

int fr_lookup(struct fc_slot *s, uint64_t unique, uint64_t parent, const char *name)
{
	return fr_name(s, unique, FUSE_LOOKUP, parent, name, NULL, 0,
		       sizeof(struct fuse_entry_out));
}

int fr_create(struct fc_slot *s, uint64_t unique, uint64_t parent, const char *name)
{
	struct fuse_create_in in = { .flags = O_RDWR | O_CREAT | O_EXCL,
				     .mode = S_IFREG | 0644, .umask = 022 };

	return fr_name(s, unique, FUSE_CREATE, parent, name, &in, sizeof(in),
		       sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out));
}

/* The common shape: one argument, a reply of exactly reply bytes of
 * arguments. */
static int fixed(struct fc_slot *s, uint64_t unique, uint32_t opcode, uint64_t nodeid,
		 const void *arg, uint32_t alen, uint32_t reply)
{
	int ret;

	fc_begin(s, opcode, nodeid, unique);
	ret = fc_arg(s, arg, alen);
	if (!ret)
		ret = fc_reply(s, reply);
	s->expect_len = sizeof(struct fuse_out_header) + reply;
	return ret;
}

int fr_release(struct fc_slot *s, uint64_t unique, uint32_t opcode, uint64_t nodeid,
	       uint64_t fh, uint32_t flags)
{
	struct fuse_release_in in = { .fh = fh, .flags = flags };

	return fixed(s, unique, opcode, nodeid, &in, sizeof(in), 0);
}

int fr_fsync(struct fc_slot *s, uint64_t unique, uint64_t nodeid, uint64_t fh)
{
	struct fuse_fsync_in in = { .fh = fh };

	return fixed(s, unique, FUSE_FSYNC, nodeid, &in, sizeof(in), 0);
}

int fr_getattr(struct fc_slot *s, uint64_t unique, uint64_t nodeid)
{
	struct fuse_getattr_in in = { 0 };

	return fixed(s, unique, FUSE_GETATTR, nodeid, &in, sizeof(in),
		     sizeof(struct fuse_attr_out));
}

int fr_open(struct fc_slot *s, uint64_t unique, uint32_t opcode, uint64_t nodeid,
	    uint32_t flags)
{
	struct fuse_open_in in = { .flags = flags };

	return fixed(s, unique, opcode, nodeid, &in, sizeof(in), sizeof(struct fuse_open_out));
}

int fr_readdirplus(struct fc_slot *s, uint64_t unique, uint64_t nodeid, uint64_t fh,
		   uint64_t off)
{
	struct fuse_read_in in = { .fh = fh, .offset = off, .size = FR_RDP_BUF };
	int ret;

	fc_begin(s, FUSE_READDIRPLUS, nodeid, unique);
	ret = fc_arg(s, &in, sizeof(in));
	if (!ret)
		ret = fc_reply(s, 0);
	if (!ret)
		ret = fc_data_out(s, FR_RDP_BUF);
	return ret;
}

int fr_check_entry(const struct fuse_entry_out *e, uint32_t mode_type, const char *what,
		   char *why, size_t whylen)
{
	if (!e->nodeid || (e->attr.mode & S_IFMT) != mode_type) {
		snprintf(why, whylen, "%s: nodeid %llu mode %o", what,
			 (unsigned long long)e->nodeid, e->attr.mode);
		return -EBADMSG;
	}
	return 0;
}
