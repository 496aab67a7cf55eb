/* The I/O workloads (read, randread, write, randwrite, write-fsync) and the data file they use. */
#include "workloads.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>

#include "fuse_requests.h"

enum { WF_WRITE, WF_FSYNC };

static int read_block(struct run *r, struct ld_slot *s, uint64_t blk)
{
	s->w.io.off = blk * r->cfg->block_size;
	return fr_read(&s->fc, load_unique(r), r->file_nodeid, r->file_fh, s->w.io.off,
		       r->cfg->block_size, !r->measuring);
}

static int write_block(struct run *r, struct ld_slot *s, uint64_t blk)
{
	s->w.io.off = blk * r->cfg->block_size;
	return fr_write(&s->fc, load_unique(r), r->file_nodeid, r->file_fh, s->w.io.off,
			r->cfg->block_size);
}

int io_read_next(struct run *r, struct ld_slot *s)
{
	return read_block(r, s, r->cursor++ % r->nblocks);
}

int io_randread_next(struct run *r, struct ld_slot *s)
{
	return read_block(r, s, load_rnd(r) % r->nblocks);
}

int io_write_next(struct run *r, struct ld_slot *s)
{
	return write_block(r, s, r->cursor++ % r->nblocks);
}

int io_randwrite_next(struct run *r, struct ld_slot *s)
{
	return write_block(r, s, load_rnd(r) % r->nblocks);
}

/* A READ must bring back the file's pattern, a WRITE must take the whole block. */
int io_done(struct run *r, struct ld_slot *s, char *why, size_t whylen)
{
	const struct fuse_out_header *out = fc_out_hdr(&s->fc);
	uint64_t bad;

	if (s->fc.opcode == FUSE_READ) {
		if (fc_pattern_verify(s->fc.data, s->w.io.off, out->len - sizeof(*out),
				      s->fc.full_check, &bad)) {
			snprintf(why, whylen, "READ at %llu: data at file offset %llu is not what was written",
				 (unsigned long long)s->w.io.off, (unsigned long long)bad);
			return -EBADMSG;
		}
	} else {
		const struct fuse_write_out *wo = fc_out_args(&s->fc);

		if (wo->size != r->cfg->block_size) {
			snprintf(why, whylen, "WRITE at %llu: wrote %u of %u bytes",
				 (unsigned long long)s->w.io.off, wo->size, r->cfg->block_size);
			return -EBADMSG;
		}
	}
	return 0;
}

/* One slot per queue writes and syncs, as a database's log writer would;
 * the others keep asking for attributes behind it. */
int io_write_fsync_next(struct run *r, struct ld_slot *s)
{
	if (s->fc.index)
		return meta_getattr_next(r, s);
	if (s->w.step == WF_WRITE)
		return write_block(r, s, r->cursor++ % r->nblocks);
	return fr_fsync(&s->fc, load_unique(r), r->file_nodeid, r->file_fh);
}

int io_write_fsync_done(struct run *r, struct ld_slot *s, char *why, size_t whylen)
{
	if (s->fc.index)
		return meta_getattr_done(r, s, why, whylen);
	if (s->w.step == WF_WRITE) {
		s->w.step = WF_FSYNC;
		return io_done(r, s, why, whylen);
	}
	s->w.step = WF_WRITE;
	r->cycles += r->measuring;
	return 0;
}

/* The fill phase writes the whole data file once, pipelined like a workload. */
static int fill_next(struct run *r, struct ld_slot *s)
{
	if (r->cursor >= r->nblocks)
		return -ENODATA;
	return write_block(r, s, r->cursor++);
}

int io_setup_data_file(struct run *r)
{
	int ret;

	ret = load_sync_create(r, r->workdir, "data", &r->file_nodeid, &r->file_ino, &r->file_fh);
	if (ret)
		return ret;
	r->cursor = 0;
	return load_engine(r, "fill", fill_next, io_done, 0, 0);
}

int io_teardown_data_file(struct run *r)
{
	struct fc_slot *s = load_sync_slot(r);
	int ret;

	if (!r->file_nodeid)
		return 0;
	ret = fr_release(s, load_unique(r), FUSE_RELEASE, r->file_nodeid, r->file_fh, O_RDWR);
	if (!ret)
		ret = load_sync_call(r, s);
	if (!ret)
		ret = load_sync_remove(r, FUSE_UNLINK, r->workdir, "data", r->file_nodeid,
				       1 + r->file_lookups);
	return ret;
}
