/* Reads and validates a migration stream completely before anything in it is used. */
#include "migration/stream_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MIG_BAD_OPEN_FLAGS (O_CREAT | O_EXCL | O_TRUNC)
#define INITIAL_CAP 64u
/* What a session may say that buffers are sized from: a hostile stream
 * must not make the destination size a reply buffer in gigabytes. */
#define SESSION_MIN_WRITE 4096u
#define SESSION_MAX_WRITE (16u << 20)
#define SESSION_MAX_TIME_GRAN 1000000000u

struct dec {
	const unsigned char *buf;
	size_t end;             /* where the end record starts */
	size_t pos;             /* where the current record starts */
	unsigned rec_no;
	int stage;              /* the last known record type seen; 0: none */
	const struct mig_limits *lim;
	struct mig_state *st;
	char *reason;
	size_t reason_size;
};

static const char *type_name(unsigned type)
{
	switch (type) {
	case MIG_REC_SESSION: return "session";
	case MIG_REC_OPTIONS: return "options";
	case MIG_REC_COUNTERS: return "counters";
	case MIG_REC_INODE: return "inode";
	case MIG_REC_OPEN_FILE: return "handle";
	case MIG_REC_LOCK: return "lock";
	case MIG_REC_END: return "end";
	default: return "unknown";
	}
}

/* Says where (byte offset, record number) and why; returns rc. */
__attribute__((format(printf, 3, 4)))
static int fail(struct dec *d, int rc, const char *fmt, ...)
{
	va_list ap;
	int n = 0;

	if (!d->reason_size)
		return rc;
	if (d->rec_no)
		n = snprintf(d->reason, d->reason_size, "record %u at byte %zu: ",
			     d->rec_no, d->pos);
	if (n < 0 || (size_t)n >= d->reason_size)
		return rc;
	va_start(ap, fmt);
	vsnprintf(d->reason + n, d->reason_size - (size_t)n, fmt, ap);
	va_end(ap);
	return rc;
}

static bool all_zero(const unsigned char *p, size_t n)
{
	while (n--)
		if (*p++)
			return false;
	return true;
}

/* Grows an array by doubling up to max items; the stream's own claims of
 * size are never believed, only records actually present count. */
static int grow(void **arr, size_t *cap, size_t n, size_t item, size_t max)
{
	size_t ncap;
	void *p;

	if (n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : INITIAL_CAP;
	if (ncap > max)
		ncap = max;
	if (ncap <= n)
		return -E2BIG;
	p = realloc(*arr, ncap * item);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

/* ---- header and end ------------------------------------------------------ */

static int check_frame(struct dec *d, size_t len)
{
	const unsigned char *b = d->buf;
	uint64_t total;
	uint32_t want, got;

	if (len < MIG_HEADER_SIZE)
		return fail(d, -EBADMSG, "truncated: %zu bytes, a header alone is %u", len,
			    MIG_HEADER_SIZE);
	if (memcmp(b, MIG_MAGIC, 8))
		return fail(d, -EPROTO, "bad magic: not a ferryfs device-state stream");
	if (mig_get32(b + 8) != MIG_VERSION)
		return fail(d, -EPROTO, "unsupported stream version %u (this daemon reads %u)",
			    mig_get32(b + 8), MIG_VERSION);
	if (mig_get32(b + 12))
		return fail(d, -EPROTO, "unknown header flags 0x%x", mig_get32(b + 12));
	total = mig_get64(b + 16);
	if (total > d->lim->max_stream_bytes)
		return fail(d, -E2BIG, "stream of %llu bytes is over the limit of %zu",
			    (unsigned long long)total, d->lim->max_stream_bytes);
	if (total < MIG_HEADER_SIZE + MIG_END_SIZE)
		return fail(d, -EBADMSG, "header says %llu bytes, less than a header and an end record",
			    (unsigned long long)total);
	if (len < total)
		return fail(d, -EBADMSG, "truncated: %zu of the %llu bytes the header announces",
			    len, (unsigned long long)total);
	if (len > total)
		return fail(d, -EBADMSG, "%zu trailing bytes after the end record",
			    len - (size_t)total);
	d->end = len - MIG_END_SIZE;
	if (mig_get16(b + d->end) != MIG_REC_END || mig_get16(b + d->end + 2) ||
	    mig_get32(b + d->end + 4) != 4)
		return fail(d, -EBADMSG, "the stream does not end with an end record");
	/* Before any record is read: a damaged stream is refused as a whole
	 * rather than for whatever its damage happens to look like. */
	want = mig_get32(b + len - 4);
	got = mig_crc32c(0, b, len - 4);
	if (want != got)
		return fail(d, -EBADMSG, "checksum mismatch: stream says %08x, content gives %08x",
			    want, got);
	return 0;
}

/* ---- fixed records (records() checks their sizes) --------------------------- */

static int rec_session(struct dec *d, const unsigned char *p, uint32_t len)
{
	struct mig_session *s = &d->st->session;
	uint32_t init;

	init = mig_get32(p);
	if (init > 1)
		return fail(d, -EINVAL, "session state %u is neither 0 nor 1", init);
	if (!init) {
		if (!all_zero(p + 4, len - 4))
			return fail(d, -EINVAL, "a session before INIT carries values");
		return 0;
	}
	s->initialized = true;
	s->major = mig_get32(p + 4);
	s->minor = mig_get32(p + 8);
	s->max_write = mig_get32(p + 12);
	s->flags = mig_get64(p + 16);
	s->max_readahead = mig_get32(p + 24);
	s->time_gran = mig_get32(p + 28);
	s->max_pages = mig_get16(p + 32);
	s->max_background = mig_get16(p + 34);
	s->congestion_threshold = mig_get16(p + 36);
	s->map_alignment = mig_get16(p + 38);
	if (s->major != MIG_FUSE_MAJOR)
		return fail(d, -EINVAL, "FUSE major %u, not %u", s->major, MIG_FUSE_MAJOR);
	if (s->max_write < SESSION_MIN_WRITE || s->max_write > SESSION_MAX_WRITE)
		return fail(d, -EINVAL, "max_write %u outside %u..%u", s->max_write,
			    SESSION_MIN_WRITE, SESSION_MAX_WRITE);
	if (s->time_gran < 1 || s->time_gran > SESSION_MAX_TIME_GRAN)
		return fail(d, -EINVAL, "time_gran %u outside 1..%u", s->time_gran,
			    SESSION_MAX_TIME_GRAN);
	return 0;
}

static int rec_options(struct dec *d, const unsigned char *p, uint32_t len)
{
	struct mig_options *o = &d->st->options;

	o->flags = mig_get32(p);
	o->cache_mode = p[4];
	o->file_handles = p[5];
	o->migration_mode = p[6];
	o->config_digest = mig_get64(p + 8);
	if (o->flags & ~MIG_OPT_ALL)
		return fail(d, -EINVAL, "unknown option bits 0x%x", o->flags & ~MIG_OPT_ALL);
	if (o->cache_mode >= MIG_CACHE_COUNT || o->file_handles >= MIG_FH_COUNT ||
	    o->migration_mode >= MIG_MODE_COUNT || p[7])
		return fail(d, -EINVAL, "unknown cache, file-handle or migration mode");
	return 0;
}

static int rec_counters(struct dec *d, const unsigned char *p, uint32_t len)
{
	struct mig_counters *c = &d->st->counters;
	size_t n;

	if (len < MIG_COUNTERS_FIXED)
		return fail(d, -EBADMSG, "counters record of %u bytes", len);
	c->next_fh = mig_get64(p);
	c->shard_bits = mig_get32(p + 8);
	if (c->shard_bits > MIG_SHARD_BITS_MAX || mig_get32(p + 12))
		return fail(d, -EINVAL, "shard bits %u over %u", c->shard_bits,
			    MIG_SHARD_BITS_MAX);
	n = (size_t)1 << c->shard_bits;
	if (len != MIG_COUNTERS_FIXED + 8 * n)
		return fail(d, -EBADMSG, "counters record of %u bytes for %zu shards", len, n);
	if (c->next_fh == 0)
		return fail(d, -EINVAL, "next fh 0 (fh 0 is never handed out)");
	for (size_t i = 0; i < n; i++)
		c->next_seq[i] = mig_get64(p + MIG_COUNTERS_FIXED + 8 * i);
	return 0;
}

/* ---- inodes --------------------------------------------------------------- */

struct path_key {
	const struct mig_state *st;
	uint64_t parent;
	const char *name;
	size_t len;
};

static bool path_eq(const void *ctx, uint32_t idx)
{
	const struct path_key *k = ctx;
	const struct mig_inode *in = &k->st->inodes[idx];

	return in->parent == k->parent && in->name_len == k->len &&
	       !memcmp(in->name, k->name, k->len);
}

struct fhandle_key {
	const struct mig_state *st;
	const struct mig_file_handle *h;
};

static bool fhandle_eq(const void *ctx, uint32_t idx)
{
	const struct fhandle_key *k = ctx;

	return mig_fhandle_equal(k->st->inodes[idx].file_handle, k->h);
}

/* The inode's nodeid, flags and place in the order; its location comes
 * after. */
static int inode_identity(struct dec *d, const struct mig_inode *in)
{
	const struct mig_counters *c = &d->st->counters;
	uint64_t mask = ((uint64_t)1 << c->shard_bits) - 1;

	if (in->flags & ~MIG_INODE_ALL)
		return fail(d, -EINVAL, "unknown inode flags 0x%x", in->flags & ~MIG_INODE_ALL);
	if (mig_check_type(in->type))
		return fail(d, -EINVAL, "node %llu: file type 0%o unknown",
			    (unsigned long long)in->nodeid, in->type);
	if (in->nodeid == 0)
		return fail(d, -EINVAL, "node id 0");
	if (d->st->n_inodes == 0) {
		if (in->nodeid != MIG_ROOT_NODEID || in->flags != MIG_INODE_ROOT ||
		    in->type != S_IFDIR)
			return fail(d, -EINVAL, "the first inode must be the root: node 1, "
				    "a directory, flagged root and nothing else");
		return 0;
	}
	if (in->flags & MIG_INODE_ROOT)
		return fail(d, -EINVAL, "node %llu flagged root, but the root came first",
			    (unsigned long long)in->nodeid);
	if (in->nodeid == MIG_ROOT_NODEID)
		return fail(d, -EINVAL, "node id 1 is the root's");
	if ((in->flags & MIG_INODE_PATH) && (in->flags & MIG_INODE_UNLINKED))
		return fail(d, -EINVAL, "node %llu is unlinked but has a path",
			    (unsigned long long)in->nodeid);
	if (!(in->flags & (MIG_INODE_PATH | MIG_INODE_FILE_HANDLE | MIG_INODE_UNLINKED)))
		return fail(d, -EINVAL, "node %llu has no location",
			    (unsigned long long)in->nodeid);
	if ((in->nodeid >> c->shard_bits) >= c->next_seq[in->nodeid & mask])
		return fail(d, -EINVAL, "node %llu is past its shard's counter (%llu)",
			    (unsigned long long)in->nodeid,
			    (unsigned long long)c->next_seq[in->nodeid & mask]);
	if (mig_state_inode(d->st, in->nodeid))
		return fail(d, -EINVAL, "node %llu appears twice", (unsigned long long)in->nodeid);
	return 0;
}

static int inode_path(struct dec *d, struct mig_inode *in, const unsigned char **pp,
		      uint32_t *rem)
{
	const struct mig_inode *parent;
	const char *why;
	char *name;

	if (*rem < MIG_INODE_PATH_FIXED)
		return fail(d, -EBADMSG, "inode record too short for its path");
	in->parent = mig_get64(*pp);
	in->name_len = mig_get16(*pp + 8);
	if (*rem - MIG_INODE_PATH_FIXED < in->name_len)
		return fail(d, -EBADMSG, "name of %zu bytes past the record's end", in->name_len);
	why = mig_check_name((const char *)*pp + MIG_INODE_PATH_FIXED, in->name_len);
	if (why)
		return fail(d, -EINVAL, "node %llu: %s", (unsigned long long)in->nodeid, why);
	if (in->parent == in->nodeid)
		return fail(d, -EINVAL, "node %llu is its own parent", (unsigned long long)in->nodeid);
	parent = mig_state_inode(d->st, in->parent);
	if (!parent)
		return fail(d, -EINVAL, "node %llu: parent %llu not seen before it",
			    (unsigned long long)in->nodeid, (unsigned long long)in->parent);
	if (parent->type != S_IFDIR)
		return fail(d, -EINVAL, "node %llu: parent %llu is not a directory",
			    (unsigned long long)in->nodeid, (unsigned long long)in->parent);
	name = mig_arena_alloc(d->st->arena, in->name_len + 1);
	if (!name)
		return -ENOMEM;
	memcpy(name, *pp + MIG_INODE_PATH_FIXED, in->name_len);
	name[in->name_len] = '\0';
	in->name = name;
	*pp += MIG_INODE_PATH_FIXED + in->name_len;
	*rem -= MIG_INODE_PATH_FIXED + (uint32_t)in->name_len;
	return 0;
}

static int inode_handle(struct dec *d, struct mig_inode *in, const unsigned char **pp,
			uint32_t *rem)
{
	struct mig_file_handle *h;
	uint16_t size;

	if (*rem < MIG_INODE_FILE_HANDLE_FIXED)
		return fail(d, -EBADMSG, "inode record too short for its file handle");
	size = mig_get16(*pp + 12);
	if (size > MIG_FILE_HANDLE_MAX)
		return fail(d, -EINVAL, "node %llu: file handle of %u bytes, over %u",
			    (unsigned long long)in->nodeid, size, MIG_FILE_HANDLE_MAX);
	if (*rem - MIG_INODE_FILE_HANDLE_FIXED < size)
		return fail(d, -EBADMSG, "file handle of %u bytes past the record's end", size);
	/* Only the bytes used are allocated: nothing reads past size. */
	h = mig_arena_alloc(d->st->arena, offsetof(struct mig_file_handle, bytes) + size);
	if (!h)
		return -ENOMEM;
	h->handle_type = (int32_t)mig_get32(*pp);
	h->mount_id = mig_get64(*pp + 4);
	h->size = size;
	memcpy(h->bytes, *pp + MIG_INODE_FILE_HANDLE_FIXED, size);
	in->file_handle = h;
	*pp += MIG_INODE_FILE_HANDLE_FIXED + size;
	*rem -= MIG_INODE_FILE_HANDLE_FIXED + (uint32_t)size;
	return 0;
}

static int rec_inode(struct dec *d, const unsigned char *p, uint32_t len)
{
	struct mig_state *st = d->st;
	struct mig_inode in;
	uint32_t rem = len;
	uint32_t idx = (uint32_t)st->n_inodes;
	uint64_t hpath = 0, hhandle = 0;
	int rc;

	if (st->n_inodes >= d->lim->max_inodes)
		return fail(d, -E2BIG, "more than %zu inodes", d->lim->max_inodes);
	if (len < MIG_INODE_FIXED)
		return fail(d, -EBADMSG, "inode record of %u bytes", len);
	memset(&in, 0, sizeof(in));
	in.nodeid = mig_get64(p);
	in.nlookup = mig_get64(p + 8);
	in.generation = mig_get64(p + 16);
	in.type = mig_get32(p + 24);
	in.flags = mig_get32(p + 28);
	p += MIG_INODE_FIXED;
	rem -= MIG_INODE_FIXED;
	rc = inode_identity(d, &in);
	if (!rc && (in.flags & MIG_INODE_PATH))
		rc = inode_path(d, &in, &p, &rem);
	if (!rc && (in.flags & MIG_INODE_FILE_HANDLE))
		rc = inode_handle(d, &in, &p, &rem);
	if (!rc && rem)
		rc = fail(d, -EBADMSG, "%u bytes left over in an inode record", rem);
	if (rc)
		return rc;
	if (in.flags & MIG_INODE_PATH) {
		struct path_key k = { st, in.parent, in.name, in.name_len };
		long other;

		hpath = mig_path_hash(in.parent, in.name, in.name_len);
		other = mig_index_find(st->by_path, hpath, path_eq, &k);
		if (other >= 0)
			return fail(d, -EINVAL, "nodes %llu and %llu have the same parent and name",
				    (unsigned long long)st->inodes[other].nodeid,
				    (unsigned long long)in.nodeid);
	}
	if (in.flags & MIG_INODE_FILE_HANDLE) {
		struct fhandle_key k = { st, in.file_handle };
		long other;

		hhandle = mig_fhandle_hash(in.file_handle);
		other = mig_index_find(st->by_fhandle, hhandle, fhandle_eq, &k);
		if (other >= 0)
			return fail(d, -EINVAL, "nodes %llu and %llu have the same file handle "
				    "(two node ids for one host inode)",
				    (unsigned long long)st->inodes[other].nodeid,
				    (unsigned long long)in.nodeid);
	}
	rc = grow((void **)&st->inodes, &st->cap_inodes, st->n_inodes, sizeof(in),
		  d->lim->max_inodes);
	if (rc)
		return rc;
	rc = mig_index_add(st->by_nodeid, ferry_mix64(in.nodeid), idx);
	if (!rc && (in.flags & MIG_INODE_PATH))
		rc = mig_index_add(st->by_path, hpath, idx);
	if (!rc && (in.flags & MIG_INODE_FILE_HANDLE))
		rc = mig_index_add(st->by_fhandle, hhandle, idx);
	/* An index may now name idx: store it even on failure, so that the
	 * state freed on the way out is consistent; nothing reads it then. */
	st->inodes[idx] = in;
	st->n_inodes++;
	return rc;
}

/* ---- handles and locks ---------------------------------------------------- */

static int rec_handle(struct dec *d, const unsigned char *p, uint32_t len)
{
	struct mig_state *st = d->st;
	const struct mig_inode *in;
	struct mig_open_file h;
	int rc;

	if (st->n_open_files >= d->lim->max_open_files)
		return fail(d, -E2BIG, "more than %zu handles", d->lim->max_open_files);
	h.fh = mig_get64(p);
	h.nodeid = mig_get64(p + 8);
	h.open_flags = mig_get32(p + 16);
	h.kind = mig_get32(p + 20);
	if (h.fh == 0 || h.fh >= st->counters.next_fh)
		return fail(d, -EINVAL, "fh %llu is 0 or not below the next fh %llu",
			    (unsigned long long)h.fh, (unsigned long long)st->counters.next_fh);
	if (mig_state_handle(st, h.fh))
		return fail(d, -EINVAL, "fh %llu appears twice", (unsigned long long)h.fh);
	in = mig_state_inode(st, h.nodeid);
	if (!in)
		return fail(d, -EINVAL, "fh %llu names unknown node %llu",
			    (unsigned long long)h.fh, (unsigned long long)h.nodeid);
	if (h.open_flags & MIG_BAD_OPEN_FLAGS)
		return fail(d, -EINVAL, "fh %llu: open flags 0%o would create or truncate on reopen",
			    (unsigned long long)h.fh, h.open_flags);
	if ((h.open_flags & O_ACCMODE) == O_ACCMODE)
		return fail(d, -EINVAL, "fh %llu: access mode 3", (unsigned long long)h.fh);
	if (!((h.kind == MIG_OPEN_REGULAR && in->type == S_IFREG) ||
	      (h.kind == MIG_OPEN_DIR && in->type == S_IFDIR)))
		return fail(d, -EINVAL, "fh %llu: kind %u does not fit node %llu's type 0%o",
			    (unsigned long long)h.fh, h.kind, (unsigned long long)h.nodeid,
			    in->type);
	rc = grow((void **)&st->open_files, &st->cap_open_files, st->n_open_files, sizeof(h),
		  d->lim->max_open_files);
	if (rc)
		return rc;
	st->open_files[st->n_open_files] = h;
	rc = mig_index_add(st->by_fh, ferry_mix64(h.fh), (uint32_t)st->n_open_files);
	st->n_open_files++;
	return rc;
}

static int rec_lock(struct dec *d, const unsigned char *p, uint32_t len)
{
	struct mig_state *st = d->st;
	const struct mig_open_file *h;
	struct mig_lock l;
	int rc;

	if (st->n_locks >= d->lim->max_locks)
		return fail(d, -E2BIG, "more than %zu locks", d->lim->max_locks);
	memset(&l, 0, sizeof(l));
	l.nodeid = mig_get64(p);
	l.owner = mig_get64(p + 8);
	l.start = mig_get64(p + 16);
	l.end = mig_get64(p + 24);
	l.pid = mig_get32(p + 32);
	l.kind = p[36];
	l.type = p[37];
	if (!all_zero(p + 38, 10))
		return fail(d, -EINVAL, "reserved lock bytes set");
	if (!mig_state_inode(st, l.nodeid))
		return fail(d, -EINVAL, "lock on unknown node %llu", (unsigned long long)l.nodeid);
	if ((l.kind != MIG_LOCK_POSIX && l.kind != MIG_LOCK_FLOCK) ||
	    (l.type != MIG_LOCK_READ && l.type != MIG_LOCK_WRITE))
		return fail(d, -EINVAL, "lock kind %u type %u unknown", l.kind, l.type);
	if (l.start > l.end)
		return fail(d, -EINVAL, "lock range %llu..%llu backwards",
			    (unsigned long long)l.start, (unsigned long long)l.end);
	if (l.kind == MIG_LOCK_FLOCK) {
		h = mig_state_handle(st, l.owner);
		if (!h || h->nodeid != l.nodeid)
			return fail(d, -EINVAL, "flock on node %llu through fh %llu, not its handle",
				    (unsigned long long)l.nodeid, (unsigned long long)l.owner);
	}
	rc = grow((void **)&st->locks, &st->cap_locks, st->n_locks, sizeof(l),
		  d->lim->max_locks);
	if (rc)
		return rc;
	st->locks[st->n_locks++] = l;
	return 0;
}

/* ---- the record loop ------------------------------------------------------ */

/* SESSION, OPTIONS, COUNTERS once each and in that order, then inodes,
 * handles and locks, each kind after the ones before it. */
static int check_order(struct dec *d, unsigned type)
{
	if (type <= MIG_REC_COUNTERS) {
		if ((int)type <= d->stage)
			return fail(d, -EBADMSG, "a second %s record", type_name(type));
		if ((int)type != d->stage + 1)
			return fail(d, -EBADMSG, "%s record before the %s record",
				    type_name(type), type_name((unsigned)d->stage + 1));
	} else if (d->stage < MIG_REC_COUNTERS) {
		return fail(d, -EBADMSG, "%s record before the %s record", type_name(type),
			    type_name((unsigned)d->stage + 1));
	} else if ((int)type < d->stage) {
		return fail(d, -EBADMSG, "%s record after a %s record", type_name(type),
			    type_name((unsigned)d->stage));
	}
	d->stage = (int)type;
	return 0;
}

/* How each known record is read, and the size of the fixed ones (0: the
 * reader checks a variable size itself). */
struct record_kind {
	int (*read)(struct dec *d, const unsigned char *p, uint32_t len);
	uint32_t size;
};

static const struct record_kind record_kinds[] = {
	[MIG_REC_SESSION] = { rec_session, MIG_SESSION_SIZE },
	[MIG_REC_OPTIONS] = { rec_options, MIG_OPTIONS_SIZE },
	[MIG_REC_COUNTERS] = { rec_counters, 0 },
	[MIG_REC_INODE] = { rec_inode, 0 },
	[MIG_REC_OPEN_FILE] = { rec_handle, MIG_OPEN_FILE_SIZE },
	[MIG_REC_LOCK] = { rec_lock, MIG_LOCK_SIZE },
};

static int records(struct dec *d)
{
	int rc = 0;

	for (d->pos = MIG_HEADER_SIZE; !rc && d->pos < d->end;) {
		const unsigned char *p = d->buf + d->pos;
		unsigned type, flags;
		uint32_t len;
		const struct record_kind *kind;

		d->rec_no++;
		if (d->end - d->pos < MIG_RECORD_HEADER_SIZE)
			return fail(d, -EBADMSG, "record header past the end of the stream");
		type = mig_get16(p);
		flags = mig_get16(p + 2);
		len = mig_get32(p + 4);
		if (len > d->end - d->pos - MIG_RECORD_HEADER_SIZE)
			return fail(d, -EBADMSG, "%s record of %u bytes past the end of the stream",
				    type_name(type), len);
		p += MIG_RECORD_HEADER_SIZE;
		if (flags & ~MIG_REC_OPTIONAL)
			return fail(d, -EINVAL, "unknown record flags 0x%x", flags);
		if (type == MIG_REC_END)
			return fail(d, -EBADMSG, "end record before the end of the stream");
		if (type < MIG_REC_SESSION || type > MIG_REC_LOCK) {
			if (!(flags & MIG_REC_OPTIONAL))
				return fail(d, -EINVAL, "unknown record type %u not flagged optional",
					    type);
			d->pos += MIG_RECORD_HEADER_SIZE + len;
			continue;
		}
		if (flags & MIG_REC_OPTIONAL)
			return fail(d, -EINVAL, "%s record flagged optional", type_name(type));
		rc = check_order(d, type);
		if (rc)
			break;
		kind = &record_kinds[type];
		if (kind->size && len != kind->size)
			rc = fail(d, -EBADMSG, "%s record of %u bytes, expected %u",
				  type_name(type), len, kind->size);
		else
			rc = kind->read(d, p, len);
		d->pos += MIG_RECORD_HEADER_SIZE + len;
	}
	if (rc)
		return rc;
	d->rec_no = 0;
	if (d->stage < MIG_REC_INODE)
		return fail(d, -EBADMSG, "the stream ends before its %s record",
			    d->stage < MIG_REC_COUNTERS ?
			    type_name((unsigned)d->stage + 1) : "root inode");
	return 0;
}

static int state_new(struct mig_state **out)
{
	struct mig_state *st = calloc(1, sizeof(*st));
	int rc = -ENOMEM;

	if (!st)
		goto out;
	rc = mig_arena_new(&st->arena);
	if (!rc)
		rc = mig_index_new(&st->by_nodeid);
	if (!rc)
		rc = mig_index_new(&st->by_fh);
	if (!rc)
		rc = mig_index_new(&st->by_path);
	if (!rc)
		rc = mig_index_new(&st->by_fhandle);
	if (rc) {
		mig_state_free(st);
		st = NULL;
	}
out:
	*out = st;
	return rc;
}

int mig_decode(const void *buf, size_t len, const struct mig_limits *lim,
	       struct mig_state **out, char *reason, size_t reason_size)
{
	struct mig_limits def;
	struct dec d = { .buf = buf, .reason = reason, .reason_size = reason_size };
	int rc;

	*out = NULL;
	if (reason_size)
		reason[0] = '\0';
	if (lim)
		def = *lim;
	else
		mig_limits_default(&def);
	/* Item indexes are 32-bit: a cap past that is a caller's mistake the
	 * stream must not get to exploit. */
	if (def.max_inodes > UINT32_MAX - 1)
		def.max_inodes = UINT32_MAX - 1;
	if (def.max_open_files > UINT32_MAX - 1)
		def.max_open_files = UINT32_MAX - 1;
	d.lim = &def;
	rc = check_frame(&d, len);
	if (rc)
		goto out;
	rc = state_new(&d.st);
	if (rc)
		goto out;
	rc = records(&d);
	if (rc == -ENOMEM && reason_size && !reason[0])
		fail(&d, rc, "out of memory");
out:
	if (rc) {
		mig_state_free(d.st);
		d.st = NULL;
	}
	*out = d.st;
	return rc;
}
