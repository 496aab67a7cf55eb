/* Writes the migration stream from plain structs handed over by callbacks. */
#include "migration/stream_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

/* Open flags that would change the file when the destination reopens it:
 * a source must strip them, and the decoder refuses them. */
#define MIG_BAD_OPEN_FLAGS (O_CREAT | O_EXCL | O_TRUNC)

/* Room for n more bytes; returns where they go. */
static unsigned char *buf_grow(struct mig_buf *b, size_t n)
{
	if (b->cap - b->len < n) {
		size_t cap = b->cap ? b->cap : 4096;
		unsigned char *d;

		while (cap - b->len < n) {
			if (cap > SIZE_MAX / 2)
				return NULL;
			cap *= 2;
		}
		d = realloc(b->data, cap);
		if (!d)
			return NULL;
		b->data = d;
		b->cap = cap;
	}
	b->len += n;
	return b->data + b->len - n;
}

static unsigned char *record(struct mig_buf *b, uint16_t type, size_t body)
{
	unsigned char *p;

	if (body > UINT32_MAX)
		return NULL;
	p = buf_grow(b, MIG_RECORD_HEADER_SIZE + body);
	if (!p)
		return NULL;
	mig_put16(p, type);
	mig_put16(p + 2, 0);
	mig_put32(p + 4, (uint32_t)body);
	return p + MIG_RECORD_HEADER_SIZE;
}

static int put_session(struct mig_buf *b, const struct mig_session *s)
{
	unsigned char *p = record(b, MIG_REC_SESSION, MIG_SESSION_SIZE);

	if (!p)
		return -ENOMEM;
	memset(p, 0, MIG_SESSION_SIZE);
	if (!s->initialized)
		return 0;
	mig_put32(p, 1);
	mig_put32(p + 4, s->major);
	mig_put32(p + 8, s->minor);
	mig_put32(p + 12, s->max_write);
	mig_put64(p + 16, s->flags);
	mig_put32(p + 24, s->max_readahead);
	mig_put32(p + 28, s->time_gran);
	mig_put16(p + 32, s->max_pages);
	mig_put16(p + 34, s->max_background);
	mig_put16(p + 36, s->congestion_threshold);
	mig_put16(p + 38, s->map_alignment);
	return 0;
}

static int put_options(struct mig_buf *b, const struct mig_options *o)
{
	unsigned char *p;

	if ((o->flags & ~MIG_OPT_ALL) || o->cache_mode >= MIG_CACHE_COUNT ||
	    o->file_handles >= MIG_FH_COUNT || o->migration_mode >= MIG_MODE_COUNT)
		return -EINVAL;
	p = record(b, MIG_REC_OPTIONS, MIG_OPTIONS_SIZE);
	if (!p)
		return -ENOMEM;
	mig_put32(p, o->flags);
	p[4] = o->cache_mode;
	p[5] = o->file_handles;
	p[6] = o->migration_mode;
	p[7] = 0;
	mig_put64(p + 8, o->config_digest);
	return 0;
}

static int put_counters(struct mig_buf *b, const struct mig_counters *c)
{
	unsigned char *p;
	size_t n;

	if (c->shard_bits > MIG_SHARD_BITS_MAX)
		return -EINVAL;
	n = (size_t)1 << c->shard_bits;
	p = record(b, MIG_REC_COUNTERS, MIG_COUNTERS_FIXED + 8 * n);
	if (!p)
		return -ENOMEM;
	mig_put64(p, c->next_fh);
	mig_put32(p + 8, c->shard_bits);
	mig_put32(p + 12, 0);
	for (size_t i = 0; i < n; i++)
		mig_put64(p + MIG_COUNTERS_FIXED + 8 * i, c->next_seq[i]);
	return 0;
}

static int put_inode(struct mig_buf *b, const struct mig_inode *in)
{
	size_t body = MIG_INODE_FIXED;
	unsigned char *p;

	if ((in->flags & ~MIG_INODE_ALL) || mig_check_type(in->type))
		return -EINVAL;
	if (in->flags & MIG_INODE_PATH) {
		if (!in->name || mig_check_name(in->name, in->name_len))
			return -EINVAL;
		body += MIG_INODE_PATH_FIXED + in->name_len;
	}
	if (in->flags & MIG_INODE_FILE_HANDLE) {
		if (!in->file_handle || in->file_handle->size > MIG_FILE_HANDLE_MAX)
			return -EINVAL;
		body += MIG_INODE_FILE_HANDLE_FIXED + in->file_handle->size;
	}
	p = record(b, MIG_REC_INODE, body);
	if (!p)
		return -ENOMEM;
	mig_put64(p, in->nodeid);
	mig_put64(p + 8, in->nlookup);
	mig_put64(p + 16, in->generation);
	mig_put32(p + 24, in->type);
	mig_put32(p + 28, in->flags);
	p += MIG_INODE_FIXED;
	if (in->flags & MIG_INODE_PATH) {
		mig_put64(p, in->parent);
		mig_put16(p + 8, (uint16_t)in->name_len);
		memcpy(p + MIG_INODE_PATH_FIXED, in->name, in->name_len);
		p += MIG_INODE_PATH_FIXED + in->name_len;
	}
	if (in->flags & MIG_INODE_FILE_HANDLE) {
		mig_put32(p, (uint32_t)in->file_handle->handle_type);
		mig_put64(p + 4, in->file_handle->mount_id);
		mig_put16(p + 12, in->file_handle->size);
		memcpy(p + MIG_INODE_FILE_HANDLE_FIXED, in->file_handle->bytes, in->file_handle->size);
	}
	return 0;
}

static int put_handle(struct mig_buf *b, const struct mig_open_file *h)
{
	unsigned char *p;

	if ((h->open_flags & MIG_BAD_OPEN_FLAGS) ||
	    (h->kind != MIG_OPEN_REGULAR && h->kind != MIG_OPEN_DIR))
		return -EINVAL;
	p = record(b, MIG_REC_OPEN_FILE, MIG_OPEN_FILE_SIZE);
	if (!p)
		return -ENOMEM;
	mig_put64(p, h->fh);
	mig_put64(p + 8, h->nodeid);
	mig_put32(p + 16, h->open_flags);
	mig_put32(p + 20, h->kind);
	return 0;
}

static int put_lock(struct mig_buf *b, const struct mig_lock *l)
{
	unsigned char *p;

	if ((l->kind != MIG_LOCK_POSIX && l->kind != MIG_LOCK_FLOCK) ||
	    (l->type != MIG_LOCK_READ && l->type != MIG_LOCK_WRITE))
		return -EINVAL;
	p = record(b, MIG_REC_LOCK, MIG_LOCK_SIZE);
	if (!p)
		return -ENOMEM;
	memset(p, 0, MIG_LOCK_SIZE);
	mig_put64(p, l->nodeid);
	mig_put64(p + 8, l->owner);
	mig_put64(p + 16, l->start);
	mig_put64(p + 24, l->end);
	mig_put32(p + 32, l->pid);
	p[36] = l->kind;
	p[37] = l->type;
	return 0;
}

int mig_encode(const struct mig_source *src, struct mig_buf *out)
{
	size_t start = out->len;
	unsigned char *p;
	int rc = -ENOMEM;

	p = buf_grow(out, MIG_HEADER_SIZE);
	if (!p)
		goto fail;
	memcpy(p, MIG_MAGIC, 8);
	mig_put32(p + 8, MIG_VERSION);
	mig_put32(p + 12, 0);
	rc = put_session(out, src->session);
	if (!rc)
		rc = put_options(out, src->options);
	if (!rc)
		rc = put_counters(out, src->counters);
	while (!rc && src->next_inode) {
		struct mig_inode in;

		rc = src->next_inode(src->arg, &in);
		if (rc <= 0)
			break;
		rc = put_inode(out, &in);
	}
	while (!rc && src->next_open_file) {
		struct mig_open_file h;

		rc = src->next_open_file(src->arg, &h);
		if (rc <= 0)
			break;
		rc = put_handle(out, &h);
	}
	while (!rc && src->next_lock) {
		struct mig_lock l;

		rc = src->next_lock(src->arg, &l);
		if (rc <= 0)
			break;
		rc = put_lock(out, &l);
	}
	if (rc < 0)
		goto fail;
	rc = -ENOMEM;
	p = record(out, MIG_REC_END, 4);
	if (!p)
		goto fail;
	/* The header's length and the checksum cover what is now final. */
	mig_fix_checksum(out->data + start, out->len - start);
	return 0;
fail:
	out->len = start;
	return rc;
}

/* ---- from arrays, and from a decoded state -------------------------------- */

struct arrays_iter {
	const struct mig_arrays *a;
	size_t inode, open_file, lock;
};

static int next_array_inode(void *arg, struct mig_inode *out)
{
	struct arrays_iter *it = arg;

	if (it->inode == it->a->n_inodes)
		return 0;
	*out = it->a->inodes[it->inode++];
	return 1;
}

static int next_array_open_file(void *arg, struct mig_open_file *out)
{
	struct arrays_iter *it = arg;

	if (it->open_file == it->a->n_open_files)
		return 0;
	*out = it->a->open_files[it->open_file++];
	return 1;
}

static int next_array_lock(void *arg, struct mig_lock *out)
{
	struct arrays_iter *it = arg;

	if (it->lock == it->a->n_locks)
		return 0;
	*out = it->a->locks[it->lock++];
	return 1;
}

int mig_encode_arrays(const struct mig_arrays *a, struct mig_buf *out)
{
	struct arrays_iter it = { .a = a };
	struct mig_source src = {
		.session = a->session, .options = a->options,
		.counters = a->counters, .next_inode = next_array_inode,
		.next_open_file = next_array_open_file, .next_lock = next_array_lock,
		.arg = &it,
	};

	return mig_encode(&src, out);
}

int mig_encode_state(const struct mig_state *st, struct mig_buf *out)
{
	struct mig_arrays a = {
		.session = &st->session, .options = &st->options,
		.counters = &st->counters,
		.inodes = st->inodes, .n_inodes = st->n_inodes,
		.open_files = st->open_files, .n_open_files = st->n_open_files,
		.locks = st->locks, .n_locks = st->n_locks,
	};

	return mig_encode_arrays(&a, out);
}
