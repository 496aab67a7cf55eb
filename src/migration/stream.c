/* The migration stream's shared pieces: CRC32C, hashing, the index and arena, state look-ups, fd I/O. */
#include "migration/stream_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd_io.h"

#define ARENA_CHUNK 65536u
#define INDEX_MIN_CAP 64u
/* Reads go in chunks the size QEMU itself stores the stream in, so that a
 * big state never needs one huge syscall (ferry_write_all writes so too). */
#define IO_CHUNK ((size_t)1 << 20)

void mig_limits_default(struct mig_limits *lim)
{
	lim->max_stream_bytes = MIG_DEFAULT_MAX_STREAM_BYTES;
	lim->max_inodes = MIG_DEFAULT_MAX_INODES;
	lim->max_open_files = MIG_DEFAULT_MAX_OPEN_FILES;
	lim->max_locks = MIG_DEFAULT_MAX_LOCKS;
}

/* ---- CRC32C ------------------------------------------------------------ */

/* Castagnoli, reflected polynomial 0x82f63b78; slicing by 8 so that a
 * stream of 100,000 inodes costs milliseconds, not tens of them. */
static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		crc_table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^
					  crc_table[0][crc_table[t - 1][i] & 0xff];
}

uint32_t mig_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	pthread_once(&crc_once, crc_init);
	crc = ~crc;
	while (len >= 8) {
		uint32_t lo = crc ^ mig_get32(p);
		uint32_t hi = mig_get32(p + 4);

		crc = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
		      crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^
		      crc_table[3][hi & 0xff] ^ crc_table[2][(hi >> 8) & 0xff] ^
		      crc_table[1][(hi >> 16) & 0xff] ^ crc_table[0][hi >> 24];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
	return ~crc;
}

int mig_fix_checksum(unsigned char *buf, size_t len)
{
	if (len < MIG_HEADER_SIZE + MIG_END_SIZE)
		return -EBADMSG;
	mig_put64(buf + 16, len);
	mig_put32(buf + len - 4, mig_crc32c(0, buf, len - 4));
	return 0;
}

/* ---- hashing ------------------------------------------------------------ */

/* FNV-1a folded through mig_hash64: names are short, and the stream is
 * hostile, but a collision only costs a comparison, never correctness. */
uint64_t mig_hash_bytes(uint64_t seed, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	uint64_t h = 0xcbf29ce484222325ULL ^ ferry_mix64(seed);

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return ferry_mix64(h ^ len);
}

uint64_t mig_path_hash(uint64_t parent, const char *name, size_t len)
{
	return mig_hash_bytes(parent, name, len);
}

uint64_t mig_fhandle_hash(const struct mig_file_handle *h)
{
	return mig_hash_bytes(ferry_mix64(h->mount_id) ^ (uint32_t)h->handle_type,
			      h->bytes, h->size);
}

bool mig_fhandle_equal(const struct mig_file_handle *a, const struct mig_file_handle *b)
{
	return a->handle_type == b->handle_type && a->mount_id == b->mount_id &&
	       a->size == b->size && !memcmp(a->bytes, b->bytes, a->size);
}

/* ---- index -------------------------------------------------------------- */

int mig_index_new(struct mig_index **out)
{
	struct mig_index *ix = calloc(1, sizeof(*ix));
	int rc = -ENOMEM;

	if (!ix)
		goto out;
	ix->cap = INDEX_MIN_CAP;
	ix->hashes = calloc(ix->cap, sizeof(*ix->hashes));
	ix->slots = calloc(ix->cap, sizeof(*ix->slots));
	if (!ix->hashes || !ix->slots) {
		mig_index_free(ix);
		ix = NULL;
		goto out;
	}
	rc = 0;
out:
	*out = ix;
	return rc;
}

void mig_index_free(struct mig_index *ix)
{
	if (!ix)
		return;
	free(ix->hashes);
	free(ix->slots);
	free(ix);
}

long mig_index_find(const struct mig_index *ix, uint64_t h, mig_eq_fn eq, const void *ctx)
{
	size_t mask = ix->cap - 1;

	for (size_t i = h & mask;; i = (i + 1) & mask) {
		if (!ix->slots[i])
			return -1;
		if (ix->hashes[i] == h && eq(ctx, ix->slots[i] - 1))
			return (long)(ix->slots[i] - 1);
	}
}

static void index_put(uint64_t *hashes, uint32_t *slots, size_t cap, uint64_t h, uint32_t slot)
{
	size_t i = h & (cap - 1);

	while (slots[i])
		i = (i + 1) & (cap - 1);
	hashes[i] = h;
	slots[i] = slot;
}

/* Kept at most half full, so every probe ends at an empty slot. */
int mig_index_add(struct mig_index *ix, uint64_t h, uint32_t idx)
{
	if ((ix->count + 1) * 2 > ix->cap) {
		size_t cap = ix->cap * 2;
		uint64_t *hashes = calloc(cap, sizeof(*hashes));
		uint32_t *slots = calloc(cap, sizeof(*slots));

		if (!hashes || !slots) {
			free(hashes);
			free(slots);
			return -ENOMEM;
		}
		for (size_t i = 0; i < ix->cap; i++)
			if (ix->slots[i])
				index_put(hashes, slots, cap, ix->hashes[i], ix->slots[i]);
		free(ix->hashes);
		free(ix->slots);
		ix->hashes = hashes;
		ix->slots = slots;
		ix->cap = cap;
	}
	index_put(ix->hashes, ix->slots, ix->cap, h, idx + 1);
	ix->count++;
	return 0;
}

/* ---- arena -------------------------------------------------------------- */

struct arena_chunk {
	struct arena_chunk *next;
	size_t used;
	size_t size;
	unsigned char data[];
};

struct mig_arena {
	struct arena_chunk *chunks;
};

int mig_arena_new(struct mig_arena **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void mig_arena_free(struct mig_arena *a)
{
	if (!a)
		return;
	while (a->chunks) {
		struct arena_chunk *c = a->chunks;

		a->chunks = c->next;
		free(c);
	}
	free(a);
}

void *mig_arena_alloc(struct mig_arena *a, size_t size)
{
	struct arena_chunk *c = a->chunks;
	void *p;

	size = (size + 7) & ~(size_t)7;
	if (!c || c->size - c->used < size) {
		size_t csize = size > ARENA_CHUNK ? size : ARENA_CHUNK;

		c = malloc(sizeof(*c) + csize);
		if (!c)
			return NULL;
		c->size = csize;
		c->used = 0;
		c->next = a->chunks;
		a->chunks = c;
	}
	p = c->data + c->used;
	c->used += size;
	return p;
}

/* ---- checks ------------------------------------------------------------- */

const char *mig_check_name(const char *name, size_t len)
{
	if (len == 0)
		return "empty name";
	if (len > MIG_NAME_MAX)
		return "name longer than 255 bytes";
	if (memchr(name, '/', len))
		return "name contains '/'";
	if (memchr(name, '\0', len))
		return "name contains a NUL byte";
	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return "name is '.' or '..'";
	return NULL;
}

const char *mig_check_type(uint32_t type)
{
	switch (type) {
	case S_IFREG: case S_IFDIR: case S_IFLNK: case S_IFCHR:
	case S_IFBLK: case S_IFIFO: case S_IFSOCK:
		return NULL;
	default:
		return "unknown file type";
	}
}

/* ---- state -------------------------------------------------------------- */

void mig_state_free(struct mig_state *st)
{
	if (!st)
		return;
	free(st->inodes);
	free(st->open_files);
	free(st->locks);
	mig_arena_free(st->arena);
	mig_index_free(st->by_nodeid);
	mig_index_free(st->by_fh);
	mig_index_free(st->by_path);
	mig_index_free(st->by_fhandle);
	free(st);
}

struct id_key {
	const struct mig_state *st;
	uint64_t id;
};

static bool nodeid_eq(const void *ctx, uint32_t idx)
{
	const struct id_key *k = ctx;

	return k->st->inodes[idx].nodeid == k->id;
}

static bool fh_eq(const void *ctx, uint32_t idx)
{
	const struct id_key *k = ctx;

	return k->st->open_files[idx].fh == k->id;
}

const struct mig_inode *mig_state_inode(const struct mig_state *st, uint64_t nodeid)
{
	struct id_key k = { st, nodeid };
	long i = mig_index_find(st->by_nodeid, ferry_mix64(nodeid), nodeid_eq, &k);

	return i < 0 ? NULL : &st->inodes[i];
}

const struct mig_open_file *mig_state_handle(const struct mig_state *st, uint64_t fh)
{
	struct id_key k = { st, fh };
	long i = mig_index_find(st->by_fh, ferry_mix64(fh), fh_eq, &k);

	return i < 0 ? NULL : &st->open_files[i];
}

/* Built from the end of buf backwards, since the chain runs child to
 * root; the decoder proved the chain ends at the root without cycles, and
 * the step count bounds it again in case a caller built st by hand. */
int mig_state_path(const struct mig_state *st, uint64_t nodeid, char *buf, size_t size)
{
	const struct mig_inode *in = mig_state_inode(st, nodeid);
	size_t pos = size, steps = 0;
	int rc = -ENAMETOOLONG;

	if (!size)
		goto out;
	if (!in) {
		rc = -ENOENT;
		goto out;
	}
	buf[--pos] = '\0';
	while (!(in->flags & MIG_INODE_ROOT)) {
		const char *comp = "<handle>";
		size_t len;

		if (in->flags & MIG_INODE_PATH)
			comp = in->name;
		else if (in->flags & MIG_INODE_UNLINKED)
			comp = "<unlinked>";
		len = strlen(comp);
		if (pos < len + (pos < size - 1))
			goto out;
		if (pos < size - 1)
			buf[--pos] = '/';
		pos -= len;
		memcpy(buf + pos, comp, len);
		if (!(in->flags & MIG_INODE_PATH))
			break;
		in = mig_state_inode(st, in->parent);
		if (!in || ++steps > st->n_inodes) {
			rc = -EINVAL;
			goto out;
		}
	}
	memmove(buf, buf + pos, size - pos);
	rc = 0;
out:
	return rc;
}

/* The reason for a mode the two sides set differently; -EINVAL. */
static int mode_differs(char *reason, size_t reason_size, const char *what,
			uint32_t src, uint32_t dst)
{
	snprintf(reason, reason_size, "%s %u on the source, %u here", what, src, dst);
	return -EINVAL;
}

int mig_options_compare(const struct mig_options *src, const struct mig_options *dst,
			char *reason, size_t reason_size)
{
	static const char *const names[] = {
		"writeback", "posix-acl", "xattr", "announce-submounts",
		"killpriv-v2", "readdirplus", "security-label", "flock",
		"posix-lock", "cache-symlinks", "allow-mmap", "readonly",
		"allow-direct-io", "preserve-noatime",
	};
	uint32_t diff = src->flags ^ dst->flags;

	if (diff) {
		unsigned bit = (unsigned)__builtin_ctz(diff);

		snprintf(reason, reason_size, "option %s is %s on the source, %s here",
			 bit < sizeof(names) / sizeof(names[0]) ? names[bit] : "(unknown)",
			 (src->flags >> bit) & 1 ? "on" : "off",
			 (dst->flags >> bit) & 1 ? "on" : "off");
		return -EINVAL;
	}
	if (src->cache_mode != dst->cache_mode)
		return mode_differs(reason, reason_size, "cache mode", src->cache_mode,
				    dst->cache_mode);
	if (src->file_handles != dst->file_handles)
		return mode_differs(reason, reason_size, "file-handle mode",
				    src->file_handles, dst->file_handles);
	/* The migration mode is not compared: it is how the source names its
	 * inodes in the stream, and a destination reads either. */
	if (src->config_digest != dst->config_digest) {
		snprintf(reason, reason_size,
			 "id or xattr maps differ (digest %016llx on the source, %016llx here)",
			 (unsigned long long)src->config_digest,
			 (unsigned long long)dst->config_digest);
		return -EINVAL;
	}
	return 0;
}

/* ---- buffers and fds ---------------------------------------------------- */

void mig_buf_free(struct mig_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

int mig_write_fd(int fd, const void *buf, size_t len)
{
	return ferry_write_all(fd, buf, len, false);
}

int mig_read_fd(int fd, const struct mig_limits *lim, struct mig_buf *out)
{
	struct mig_limits def;
	size_t start = out->len;
	int rc;

	if (!lim) {
		mig_limits_default(&def);
		lim = &def;
	}
	for (;;) {
		ssize_t n;

		if (out->cap - out->len < IO_CHUNK) {
			size_t cap = out->cap ? out->cap * 2 : IO_CHUNK;
			unsigned char *d;

			/* One chunk past the limit still fits, so that a
			 * stream over it is seen as such, not cut short. */
			if (out->len - start > lim->max_stream_bytes) {
				rc = -E2BIG;
				goto fail;
			}
			d = realloc(out->data, cap);
			if (!d) {
				rc = -ENOMEM;
				goto fail;
			}
			out->data = d;
			out->cap = cap;
		}
		n = read(fd, out->data + out->len, IO_CHUNK);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			goto fail;
		}
		if (n == 0)
			break;
		out->len += (size_t)n;
	}
	if (out->len - start > lim->max_stream_bytes) {
		rc = -E2BIG;
		goto fail;
	}
	return 0;
fail:
	out->len = start;
	return rc;
}

int mig_refuse(char *reason, size_t reason_size, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (reason_size)
		vsnprintf(reason, reason_size, fmt, ap);
	va_end(ap);
	return err;
}
