/* Tests the migration state stream: a realistic round trip, every refusal with its reason, truncation and bit flips. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "migration/stream_internal.h"
#include "migration/stream.h"
#include "migration_model.h"
#include "../common/check.h"

static void test_round_trip(void)
{
	static struct model m;
	struct mig_buf b = { 0 }, again = { 0 };
	struct mig_state *st = NULL;
	char why[256], path[512];
	bool same = true;
	int rc;

	model_build(&m);
	CHECK_MSG(model_encode(&m, &b) == 0, "realistic state encodes (%zu bytes)", b.len);
	rc = mig_decode(b.data, b.len, NULL, &st, why, sizeof(why));
	CHECK_MSG(rc == 0 && st, "and decodes (%d: %s)", rc, why);
	if (!st)
		goto out;
	CHECK_MSG(session_equal(&st->session, &m.session) &&
	          st->options.flags == m.options.flags &&
	          st->options.cache_mode == m.options.cache_mode &&
	          st->options.file_handles == m.options.file_handles &&
	          st->options.migration_mode == m.options.migration_mode &&
	          st->options.config_digest == m.options.config_digest &&
	          !memcmp(&st->counters, &m.counters, sizeof(m.counters)),
	          "session, options and counters come back");
	CHECK_MSG(st->n_inodes == N_INODES && st->n_open_files == m.n_open_files &&
	          st->n_locks == m.n_locks, "%zu inodes, %zu handles, %zu locks",
	          st->n_inodes, st->n_open_files, st->n_locks);
	for (size_t i = 0; i < st->n_inodes && i < N_INODES; i++)
		same = same && inode_equal(&st->inodes[i], &m.inodes[i]);
	for (size_t i = 0; i < st->n_open_files && i < m.n_open_files; i++)
		same = same && !memcmp(&st->open_files[i], &m.open_files[i], sizeof(m.open_files[i]));
	for (size_t i = 0; i < st->n_locks && i < m.n_locks; i++)
		same = same && lock_equal(&st->locks[i], &m.locks[i]);
	CHECK_MSG(same, "every inode, handle and lock comes back as it went");
	CHECK_MSG(mig_state_inode(st, m.inodes[77].nodeid) &&
	          mig_state_inode(st, m.inodes[77].nodeid)->generation == 77 * 3 &&
	          !mig_state_inode(st, 2) && mig_state_handle(st, 3) &&
	          !mig_state_handle(st, 9999), "look-ups by nodeid and fh");
	rc = mig_state_path(st, m.inodes[13].nodeid, path, sizeof(path));
	CHECK_MSG(rc == 0 && !strcmp(path, "dir-1/dir-3/dir-6/dir-13"),
	          "path of a nested directory: %s", path);
	rc = mig_state_path(st, m.inodes[N_DIRS + 1].nodeid, path, sizeof(path));
	CHECK_MSG(rc == 0 && strstr(path, "/file-61"), "path of a file: %s", path);
	rc = mig_state_path(st, m.inodes[68].nodeid, path, sizeof(path));
	CHECK_MSG(rc == 0 && !strcmp(path, "<unlinked>"), "path of an unlinked file: %s", path);
	CHECK_MSG(mig_state_path(st, m.inodes[13].nodeid, path, 10) == -ENAMETOOLONG &&
	          mig_state_path(st, 1, path, sizeof(path)) == 0 && !path[0] &&
	          mig_state_path(st, 2, path, sizeof(path)) == -ENOENT,
	          "path: too long, root, unknown");
	CHECK_MSG(mig_encode_state(st, &again) == 0 && again.len == b.len &&
	          !memcmp(again.data, b.data, b.len), "re-encoding gives the same bytes");
out:
	mig_state_free(st);
	mig_buf_free(&b);
	mig_buf_free(&again);
}

/* ---- raw streams, to build what the encoder never would ---- */

static void raw_header(struct mig_buf *b)
{
	b->len = 0;
	if (b->cap < 65536) {
		b->data = realloc(b->data, 65536);
		b->cap = 65536;
	}
	memcpy(b->data, MIG_MAGIC, 8);
	mig_put32(b->data + 8, MIG_VERSION);
	mig_put32(b->data + 12, 0);
	mig_put64(b->data + 16, 0);
	b->len = MIG_HEADER_SIZE;
}

static void raw_record(struct mig_buf *b, unsigned type, unsigned flags, const void *body,
		       size_t len)
{
	unsigned char *p = b->data + b->len;

	mig_put16(p, (uint16_t)type);
	mig_put16(p + 2, (uint16_t)flags);
	mig_put32(p + 4, (uint32_t)len);
	memcpy(p + 8, body, len);
	b->len += 8 + len;
}

static void raw_finish(struct mig_buf *b)
{
	unsigned char z[4] = { 0 };

	raw_record(b, MIG_REC_END, 0, z, 4);
	mig_fix_checksum(b->data, b->len);
}

static void raw_session(struct mig_buf *b)
{
	unsigned char s[MIG_SESSION_SIZE] = { 0 };

	mig_put32(s, 1);
	mig_put32(s + 4, 7);
	mig_put32(s + 8, 38);
	mig_put32(s + 12, 131072);
	mig_put32(s + 28, 1);
	raw_record(b, MIG_REC_SESSION, 0, s, sizeof(s));
}

static void raw_options(struct mig_buf *b)
{
	unsigned char o[MIG_OPTIONS_SIZE] = { 0 };

	raw_record(b, MIG_REC_OPTIONS, 0, o, sizeof(o));
}

/* One shard: nodeids below 1000, fh below 1000. */
static void raw_counters(struct mig_buf *b)
{
	unsigned char c[MIG_COUNTERS_FIXED + 8] = { 0 };

	mig_put64(c, 1000);
	mig_put64(c + 16, 1000);
	raw_record(b, MIG_REC_COUNTERS, 0, c, sizeof(c));
}

static size_t inode_body(unsigned char *p, uint64_t nodeid, uint32_t type, uint32_t flags,
			 uint64_t parent, const char *name, size_t name_len,
			 const unsigned char *fh, size_t fh_len)
{
	size_t n = MIG_INODE_FIXED;

	memset(p, 0, MIG_INODE_FIXED);
	mig_put64(p, nodeid);
	mig_put64(p + 8, 1);
	mig_put32(p + 24, type);
	mig_put32(p + 28, flags);
	if (flags & MIG_INODE_PATH) {
		mig_put64(p + n, parent);
		mig_put16(p + n + 8, (uint16_t)name_len);
		memcpy(p + n + 10, name, name_len);
		n += 10 + name_len;
	}
	if (flags & MIG_INODE_FILE_HANDLE) {
		mig_put32(p + n, 1);
		mig_put64(p + n + 4, 7);
		mig_put16(p + n + 12, (uint16_t)fh_len);
		memcpy(p + n + 14, fh, fh_len);
		n += 14 + fh_len;
	}
	return n;
}

static void raw_inode(struct mig_buf *b, uint64_t nodeid, uint32_t type, uint32_t flags,
		      uint64_t parent, const char *name, size_t name_len)
{
	unsigned char body[512];

	raw_record(b, MIG_REC_INODE, 0, body,
		   inode_body(body, nodeid, type, flags, parent, name, name_len, NULL, 0));
}

static void raw_handle(struct mig_buf *b, uint64_t fh, uint64_t nodeid, uint32_t flags,
		       uint32_t kind)
{
	unsigned char h[MIG_OPEN_FILE_SIZE];

	mig_put64(h, fh);
	mig_put64(h + 8, nodeid);
	mig_put32(h + 16, flags);
	mig_put32(h + 20, kind);
	raw_record(b, MIG_REC_OPEN_FILE, 0, h, sizeof(h));
}

static void raw_lock(struct mig_buf *b, uint64_t nodeid, uint64_t owner, uint64_t start,
		     uint64_t end, uint8_t kind)
{
	unsigned char l[MIG_LOCK_SIZE] = { 0 };

	mig_put64(l, nodeid);
	mig_put64(l + 8, owner);
	mig_put64(l + 16, start);
	mig_put64(l + 24, end);
	l[36] = kind;
	l[37] = MIG_LOCK_WRITE;
	raw_record(b, MIG_REC_LOCK, 0, l, sizeof(l));
}

/* Session, options, counters, the root, directory 2 "d" and file 3
 * "d/f" with handle 5 on it. */
static void raw_base(struct mig_buf *b)
{
	raw_header(b);
	raw_session(b);
	raw_options(b);
	raw_counters(b);
	raw_inode(b, 1, S_IFDIR, MIG_INODE_ROOT, 0, NULL, 0);
	raw_inode(b, 2, S_IFDIR, MIG_INODE_PATH, 1, "d", 1);
	raw_inode(b, 3, S_IFREG, MIG_INODE_PATH, 2, "f", 1);
}

static void expect(struct mig_buf *b, int want, const char *why_part, const char *what)
{
	struct mig_state *st = (struct mig_state *)1;
	char why[256];
	int rc = mig_decode(b->data, b->len, NULL, &st, why, sizeof(why));

	CHECK_MSG(rc == want && (want ? st == NULL : st != NULL) && strstr(why, why_part),
	          "%s: %d \"%s\"", what, rc, why);
	mig_state_free(rc ? NULL : st);
}

/* Appends one raw record, ends the stream and expects what expect()
 * does. */
static void expect_with_record(struct mig_buf *b, unsigned type, unsigned flags,
			       const void *body, size_t len, int want,
			       const char *why_part, const char *what)
{
	raw_record(b, type, flags, body, len);
	raw_finish(b);
	expect(b, want, why_part, what);
}

/* 300 bytes of 'n', for names and file handles over the limits. */
static char long_name[300];

/*
 * A stream for the decoder: raw_base (with rootless, only the records
 * before the inodes), then these inodes, handles and locks in that order.
 * It must be refused with want and a reason containing why_part, or with
 * want 0 accepted.
 */
struct tree_case {
	bool rootless;
	struct case_inode {
		uint64_t nodeid;
		uint32_t type, flags;
		uint64_t parent;
		const char *name;
		size_t name_len;
	} inodes[2];
	size_t n_inodes;
	struct case_handle {
		uint64_t fh, nodeid;
		uint32_t flags, kind;
	} open_files[2];
	size_t n_open_files;
	struct case_lock {
		uint64_t nodeid, owner, start, end;
		uint8_t kind;
	} locks[1];
	size_t n_locks;
	int want;
	const char *why_part, *what;
};

static const struct tree_case tree_cases[] = {
	{ .open_files = { { 5, 3, O_RDWR, MIG_OPEN_REGULAR } }, .n_open_files = 1,
	  .locks = { { 3, 99, 0, 10, MIG_LOCK_POSIX } }, .n_locks = 1, .want = 0,
	  .why_part = "", .what = "the base stream is accepted" },
	/* Names. */
	{ .inodes = { { 4, S_IFREG, MIG_INODE_PATH, 1, "a/b", 3 } }, .n_inodes = 1,
	  .want = -EINVAL, .why_part = "contains '/'", .what = "a name with '/'" },
	{ .inodes = { { 4, S_IFREG, MIG_INODE_PATH, 1, "a\0b", 3 } }, .n_inodes = 1,
	  .want = -EINVAL, .why_part = "NUL", .what = "a name with NUL" },
	{ .inodes = { { 4, S_IFDIR, MIG_INODE_PATH, 1, ".", 1 } }, .n_inodes = 1,
	  .want = -EINVAL, .why_part = "'.' or '..'", .what = "a name '.'" },
	{ .inodes = { { 4, S_IFDIR, MIG_INODE_PATH, 2, "..", 2 } }, .n_inodes = 1,
	  .want = -EINVAL, .why_part = "'.' or '..'", .what = "a name '..'" },
	{ .inodes = { { 4, S_IFREG, MIG_INODE_PATH, 1, "", 0 } }, .n_inodes = 1,
	  .want = -EINVAL, .why_part = "empty name", .what = "an empty name" },
	{ .inodes = { { 4, S_IFREG, MIG_INODE_PATH, 1, long_name, 256 } }, .n_inodes = 1,
	  .want = -EINVAL, .why_part = "longer than 255", .what = "a 256-byte name" },
	{ .inodes = { { 4, S_IFREG, MIG_INODE_PATH, 1, long_name, 255 } }, .n_inodes = 1,
	  .want = 0, .why_part = "", .what = "a 255-byte name is fine" },
	/* Node ids and the tree. */
	{ .inodes = { { 0, S_IFREG, MIG_INODE_PATH, 1, "x", 1 } }, .n_inodes = 1,
	  .want = -EINVAL, .why_part = "node id 0", .what = "node id 0" },
	{ .inodes = { { 1, S_IFREG, MIG_INODE_PATH, 1, "x", 1 } }, .n_inodes = 1,
	  .want = -EINVAL,
	  .why_part = "node id 1 is the root's", .what = "node id 1 as a file" },
	{ .inodes = { { 4, S_IFDIR, MIG_INODE_ROOT, 0, NULL, 0 } }, .n_inodes = 1,
	  .want = -EINVAL, .why_part = "flagged root", .what = "a second root" },
	{ .rootless = true,
	  .inodes = { { 2, S_IFDIR, MIG_INODE_ROOT, 0, NULL, 0 } }, .n_inodes = 1,
	  .want = -EINVAL,
	  .why_part = "first inode must be the root", .what = "a root that is not node 1" },
	{ .rootless = true,
	  .inodes = { { 2, S_IFDIR, MIG_INODE_PATH, 1, "x", 1 } }, .n_inodes = 1,
	  .want = -EINVAL,
	  .why_part = "first inode must be the root", .what = "a child before the root" },
	{ .inodes = { { 3, S_IFREG, MIG_INODE_PATH, 1, "g", 1 } }, .n_inodes = 1,
	  .want = -EINVAL, .why_part = "node 3 appears twice", .what = "a duplicate node id" },
	{ .inodes = { { 5, S_IFREG, MIG_INODE_PATH, 4, "x", 1 }, { 4, S_IFDIR, MIG_INODE_PATH, 1, "y", 1 } }, .n_inodes = 2,
	  .want = -EINVAL,
	  .why_part = "parent 4 not seen before it", .what = "a child before its parent" },
	{ .inodes = { { 4, S_IFDIR, MIG_INODE_PATH, 4, "x", 1 } }, .n_inodes = 1,
	  .want = -EINVAL, .why_part = "its own parent", .what = "a one-node cycle" },
	/* A longer cycle 4 -> 5 -> 4 cannot be written: 5 must come before 4
	 * and 4 before 5, so one of them names a parent not yet seen. */
	{ .inodes = { { 4, S_IFDIR, MIG_INODE_PATH, 5, "x", 1 }, { 5, S_IFDIR, MIG_INODE_PATH, 4, "y", 1 } }, .n_inodes = 2,
	  .want = -EINVAL, .why_part = "parent 5 not seen", .what = "a two-node cycle" },
	{ .inodes = { { 4, S_IFREG, MIG_INODE_PATH, 3, "x", 1 } }, .n_inodes = 1,
	  .want = -EINVAL, .why_part = "not a directory", .what = "a file as parent" },
	{ .inodes = { { 4, S_IFREG, MIG_INODE_PATH, 2, "f", 1 } }, .n_inodes = 1,
	  .want = -EINVAL,
	  .why_part = "same parent and name", .what = "two nodes for one name" },
	{ .inodes = { { 4, 0170000, MIG_INODE_PATH, 1, "x", 1 } }, .n_inodes = 1,
	  .want = -EINVAL, .why_part = "file type", .what = "an unknown file type" },
	{ .inodes = { { 4, S_IFREG, 0, 0, NULL, 0 } }, .n_inodes = 1, .want = -EINVAL,
	  .why_part = "no location", .what = "no location" },
	{ .inodes = { { 4, S_IFREG, MIG_INODE_PATH | MIG_INODE_UNLINKED, 1, "x", 1 } }, .n_inodes = 1,
	  .want = -EINVAL,
	  .why_part = "unlinked but has a path", .what = "unlinked with a path" },
	{ .inodes = { { 4, S_IFREG, MIG_INODE_UNLINKED, 0, NULL, 0 } }, .n_inodes = 1,
	  .want = 0, .why_part = "", .what = "unlinked without a handle is a placeholder" },
	{ .inodes = { { 4, S_IFREG, MIG_INODE_PATH | 0x100, 1, "x", 1 } }, .n_inodes = 1,
	  .want = -EINVAL, .why_part = "unknown inode flags", .what = "unknown inode flags" },
	{ .inodes = { { 1000, S_IFREG, MIG_INODE_PATH, 1, "x", 1 } }, .n_inodes = 1,
	  .want = -EINVAL,
	  .why_part = "past its shard's counter", .what = "a node id the counters never gave" },
	/* Open handles. */
	{ .open_files = { { 5, 9, O_RDONLY, MIG_OPEN_REGULAR } }, .n_open_files = 1, .want = -EINVAL,
	  .why_part = "names unknown node 9", .what = "a handle on an unknown node" },
	{ .open_files = { { 0, 3, O_RDONLY, MIG_OPEN_REGULAR } }, .n_open_files = 1, .want = -EINVAL,
	  .why_part = "fh 0", .what = "fh 0" },
	{ .open_files = { { 1000, 3, O_RDONLY, MIG_OPEN_REGULAR } }, .n_open_files = 1,
	  .want = -EINVAL,
	  .why_part = "not below the next fh", .what = "an fh the counter never gave" },
	{ .open_files = { { 5, 3, O_RDONLY, MIG_OPEN_REGULAR }, { 5, 2, O_RDONLY, MIG_OPEN_DIR } }, .n_open_files = 2,
	  .want = -EINVAL, .why_part = "fh 5 appears twice", .what = "a duplicate fh" },
	{ .open_files = { { 5, 3, O_WRONLY | O_TRUNC, MIG_OPEN_REGULAR } }, .n_open_files = 1,
	  .want = -EINVAL, .why_part = "create or truncate", .what = "O_TRUNC in a handle" },
	{ .open_files = { { 5, 3, O_RDONLY, MIG_OPEN_DIR } }, .n_open_files = 1, .want = -EINVAL,
	  .why_part = "does not fit", .what = "a directory handle on a file" },
	/* Locks. */
	{ .locks = { { 9, 1, 0, 1, MIG_LOCK_POSIX } }, .n_locks = 1, .want = -EINVAL,
	  .why_part = "unknown node 9", .what = "a lock on an unknown node" },
	{ .locks = { { 3, 1, 5, 1, MIG_LOCK_POSIX } }, .n_locks = 1, .want = -EINVAL,
	  .why_part = "backwards", .what = "a backwards lock range" },
	{ .locks = { { 3, 7, 0, UINT64_MAX, MIG_LOCK_FLOCK } }, .n_locks = 1, .want = -EINVAL,
	  .why_part = "not its handle", .what = "an flock through no handle" },
};

static void expect_case(struct mig_buf *b, const struct tree_case *c)
{
	if (c->rootless) {
		raw_header(b);
		raw_session(b);
		raw_options(b);
		raw_counters(b);
	} else {
		raw_base(b);
	}
	for (size_t i = 0; i < c->n_inodes; i++) {
		const struct case_inode *in = &c->inodes[i];

		raw_inode(b, in->nodeid, in->type, in->flags, in->parent, in->name,
			  in->name_len);
	}
	for (size_t i = 0; i < c->n_open_files; i++) {
		const struct case_handle *h = &c->open_files[i];

		raw_handle(b, h->fh, h->nodeid, h->flags, h->kind);
	}
	for (size_t i = 0; i < c->n_locks; i++) {
		const struct case_lock *l = &c->locks[i];

		raw_lock(b, l->nodeid, l->owner, l->start, l->end, l->kind);
	}
	raw_finish(b);
	expect(b, c->want, c->why_part, c->what);
}

static void test_refusals(void)
{
	struct mig_buf b = { 0 };
	unsigned char body[512];
	size_t n;

	memset(long_name, 'n', sizeof(long_name));
	for (size_t i = 0; i < sizeof(tree_cases) / sizeof(tree_cases[0]); i++)
		expect_case(&b, &tree_cases[i]);

	/* The frame. */
	raw_base(&b); raw_finish(&b);
	memcpy(b.data, "FERRYMIX", 8);
	expect(&b, -EPROTO, "bad magic", "bad magic");
	raw_base(&b); raw_finish(&b);
	mig_put32(b.data + 8, 2);
	expect(&b, -EPROTO, "unsupported stream version 2", "unknown version");
	raw_base(&b); raw_finish(&b);
	mig_put32(b.data + 12, 1);
	expect(&b, -EPROTO, "header flags", "unknown header flags");
	raw_base(&b); raw_finish(&b);
	b.data[b.len - 1] ^= 0x40;
	expect(&b, -EBADMSG, "checksum mismatch", "bad checksum");
	raw_base(&b); raw_finish(&b);
	b.data[40] ^= 1;
	expect(&b, -EBADMSG, "checksum mismatch", "a damaged body");
	raw_base(&b); raw_finish(&b);
	b.data[b.len++] = 0;
	expect(&b, -EBADMSG, "1 trailing bytes", "a trailing byte");
	raw_base(&b); raw_finish(&b);
	b.len -= 1;
	expect(&b, -EBADMSG, "truncated", "one byte short");
	raw_base(&b); raw_finish(&b);
	mig_put64(b.data + 16, (uint64_t)1 << 40);
	expect(&b, -E2BIG, "over the limit", "a header claiming a terabyte");
	raw_base(&b); raw_finish(&b);
	mig_put16(b.data + b.len - MIG_END_SIZE, MIG_REC_LOCK);
	expect(&b, -EBADMSG, "does not end with an end record", "no end record");

	/* Record framing. */
	raw_base(&b);
	n = b.len - (MIG_RECORD_HEADER_SIZE + MIG_INODE_FIXED + MIG_INODE_PATH_FIXED + 1);
	raw_finish(&b);
	mig_put32(b.data + n + 4, 200);   /* the last inode's length */
	mig_fix_checksum(b.data, b.len);
	expect(&b, -EBADMSG, "past the end", "a record length past the end");
	raw_base(&b);
	expect_with_record(&b, MIG_REC_END, 0, "\0\0\0\0", 4,
			   -EBADMSG, "end record before the end", "two end records");
	raw_base(&b);
	expect_with_record(&b, 77, 0, "xx", 2,
			   -EINVAL, "unknown record type 77", "an unknown record type");
	raw_base(&b);
	expect_with_record(&b, 77, MIG_REC_OPTIONAL, "xx", 2,
			   0, "", "an unknown record flagged optional is skipped");
	raw_base(&b);
	expect_with_record(&b, MIG_REC_INODE, MIG_REC_OPTIONAL, body,
			   inode_body(body, 4, S_IFREG, MIG_INODE_PATH, 1, "x", 1, NULL, 0),
			   -EINVAL, "flagged optional", "a known record flagged optional");
	raw_base(&b);
	expect_with_record(&b, MIG_REC_INODE, 4, body,
			   inode_body(body, 4, S_IFREG, MIG_INODE_PATH, 1, "x", 1, NULL, 0),
			   -EINVAL, "unknown record flags", "unknown record flags");
	raw_base(&b);
	raw_session(&b);
	raw_finish(&b);
	expect(&b, -EBADMSG, "a second session", "a duplicate session record");
	raw_header(&b);
	raw_options(&b);
	raw_finish(&b);
	expect(&b, -EBADMSG, "options record before the session", "no session record");
	raw_header(&b);
	raw_session(&b);
	raw_options(&b);
	raw_counters(&b);
	raw_finish(&b);
	expect(&b, -EBADMSG, "before its root inode", "no root");
	raw_base(&b);
	raw_handle(&b, 5, 3, O_RDWR, MIG_OPEN_REGULAR);
	raw_inode(&b, 4, S_IFREG, MIG_INODE_PATH, 1, "x", 1);
	raw_finish(&b);
	expect(&b, -EBADMSG, "inode record after a handle", "an inode after the handles");

	/* Names (the others are in tree_cases): a length past the record. */
	raw_base(&b);
	n = inode_body(body, 4, S_IFREG, MIG_INODE_PATH, 1, "abc", 3, NULL, 0);
	mig_put16(body + MIG_INODE_FIXED + 8, 60);
	expect_with_record(&b, MIG_REC_INODE, 0, body, n,
			   -EBADMSG, "past the record's end", "a name length past its record");

	/* File handles. */
	raw_base(&b);
	expect_with_record(&b, MIG_REC_INODE, 0, body, inode_body(body, 4, S_IFREG,
			   MIG_INODE_UNLINKED | MIG_INODE_FILE_HANDLE, 0, NULL, 0,
			   (const unsigned char *)long_name, 129),
			   -EINVAL, "over 128", "a 129-byte file handle");
	raw_base(&b);
	raw_record(&b, MIG_REC_INODE, 0, body, inode_body(body, 4, S_IFREG,
		   MIG_INODE_UNLINKED | MIG_INODE_FILE_HANDLE, 0, NULL, 0,
		   (const unsigned char *)"abcd", 4));
	expect_with_record(&b, MIG_REC_INODE, 0, body, inode_body(body, 5, S_IFREG,
			   MIG_INODE_PATH | MIG_INODE_FILE_HANDLE, 1, "x", 1,
			   (const unsigned char *)"abcd", 4),
			   -EINVAL, "two node ids for one host inode", "one file handle twice");
	raw_base(&b);
	n = inode_body(body, 4, S_IFREG, MIG_INODE_UNLINKED | MIG_INODE_FILE_HANDLE, 0, NULL, 0,
		       (const unsigned char *)"abcd", 4);
	expect_with_record(&b, MIG_REC_INODE, 0, body, n - 1,
			   -EBADMSG, "past the record's end", "a file handle cut short");
	raw_base(&b);
	expect_with_record(&b, MIG_REC_INODE, 0, body, n + 2,
			   -EBADMSG, "left over", "bytes left over in an inode record");

	/* Session and options values. */
	raw_header(&b);
	memset(body, 0, MIG_SESSION_SIZE);
	mig_put32(body, 1);
	mig_put32(body + 4, 7);
	mig_put32(body + 12, 1u << 30);
	mig_put32(body + 28, 1);
	expect_with_record(&b, MIG_REC_SESSION, 0, body, MIG_SESSION_SIZE,
			   -EINVAL, "max_write", "a gigabyte max_write");
	raw_header(&b);
	memset(body, 0, MIG_SESSION_SIZE);
	mig_put64(body + 16, (uint64_t)1 << 32);   /* flags; byte 20 is 1 */
	expect_with_record(&b, MIG_REC_SESSION, 0, body, MIG_SESSION_SIZE,
			   -EINVAL, "before INIT carries values", "an uninitialised session with flags");
	raw_header(&b);
	expect_with_record(&b, MIG_REC_SESSION, 0, body, MIG_SESSION_SIZE + 1,
			   -EBADMSG, "expected 40", "a session record of the wrong size");
	raw_header(&b);
	raw_session(&b);
	memset(body, 0, MIG_OPTIONS_SIZE);
	body[4] = 9;
	expect_with_record(&b, MIG_REC_OPTIONS, 0, body, MIG_OPTIONS_SIZE,
			   -EINVAL, "unknown cache", "an unknown cache mode");
	raw_header(&b);
	raw_session(&b);
	raw_options(&b);
	memset(body, 0, MIG_COUNTERS_FIXED);
	mig_put64(body, 1);
	mig_put32(body + 8, 9);
	expect_with_record(&b, MIG_REC_COUNTERS, 0, body, MIG_COUNTERS_FIXED,
			   -EINVAL, "shard bits 9", "too many shards");
	mig_buf_free(&b);
}

static void test_limits(void)
{
	static struct model m;
	struct mig_buf b = { 0 };
	struct mig_limits lim;
	struct mig_state *st = NULL;
	char why[256];
	int rc;

	model_build(&m);
	model_encode(&m, &b);
	mig_limits_default(&lim);
	lim.max_inodes = N_INODES - 1;
	rc = mig_decode(b.data, b.len, &lim, &st, why, sizeof(why));
	CHECK_MSG(rc == -E2BIG && !st && strstr(why, "more than"), "inode cap: %s", why);
	mig_limits_default(&lim);
	lim.max_inodes = N_INODES;
	lim.max_open_files = 3;
	rc = mig_decode(b.data, b.len, &lim, &st, why, sizeof(why));
	CHECK_MSG(rc == -E2BIG && !st && strstr(why, "more than 3 handles"), "handle cap: %s", why);
	mig_limits_default(&lim);
	lim.max_stream_bytes = b.len - 1;
	rc = mig_decode(b.data, b.len, &lim, &st, why, sizeof(why));
	CHECK_MSG(rc == -E2BIG && !st, "stream size cap: %s", why);
	mig_buf_free(&b);
}

/* Every truncation and every single flipped bit of a small valid stream
 * is refused; with the checksum then made right, whatever the damage
 * does, the decoder must not crash, and what it accepts re-encodes. */
static void test_damage(void)
{
	struct mig_buf b = { 0 }, again = { 0 };
	struct mig_state *st;
	char why[256];
	size_t len, bad_trunc = 0, bad_flip = 0, accepted = 0, bad_again = 0;

	raw_base(&b);
	raw_handle(&b, 5, 3, O_RDWR, MIG_OPEN_REGULAR);
	raw_lock(&b, 3, 99, 0, 10, MIG_LOCK_POSIX);
	raw_finish(&b);
	len = b.len;
	for (size_t cut = 0; cut < len; cut++) {
		if (mig_decode(b.data, cut, NULL, &st, why, sizeof(why)) == 0 || st) {
			bad_trunc++;
			mig_state_free(st);
		}
	}
	CHECK_MSG(bad_trunc == 0, "truncation at each of %zu offsets refused", len);
	for (size_t i = 0; i < len; i++) {
		for (int bit = 0; bit < 8; bit++) {
			b.data[i] ^= (unsigned char)(1 << bit);
			if (mig_decode(b.data, len, NULL, &st, why, sizeof(why)) == 0 || st) {
				bad_flip++;
				mig_state_free(st);
			}
			if (i >= 24 && i < len - 4) {
				/* The same damage behind a right checksum. */
				unsigned char *copy = malloc(len);

				memcpy(copy, b.data, len);
				mig_fix_checksum(copy, len);
				if (mig_decode(copy, len, NULL, &st, why, sizeof(why)) == 0) {
					accepted++;
					again.len = 0;
					if (mig_encode_state(st, &again) || again.len != len ||
					    memcmp(again.data, copy, len))
						bad_again++;
					mig_state_free(st);
				}
				free(copy);
			}
			b.data[i] ^= (unsigned char)(1 << bit);
		}
	}
	CHECK_MSG(bad_flip == 0, "each of %zu single-bit flips refused", len * 8);
	CHECK_MSG(bad_again == 0, "%zu flips with a fixed checksum still valid re-encode the same",
	          accepted);
	mig_buf_free(&b);
	mig_buf_free(&again);
}

static void test_fd_and_options(void)
{
	static struct model m;
	struct mig_buf b = { 0 }, in = { 0 };
	struct mig_limits lim;
	struct mig_options o1 = { 0 }, o2 = { 0 };
	char why[256];
	int fds[2], rc;

	model_build(&m);
	model_encode(&m, &b);
	if (pipe(fds) == 0) {
		/* Small enough for the pipe's buffer: no second thread needed. */
		CHECK_MSG(b.len < 65536 && mig_write_fd(fds[1], b.data, b.len) == 0,
		          "stream written to a pipe");
		close(fds[1]);
		rc = mig_read_fd(fds[0], NULL, &in);
		close(fds[0]);
		CHECK_MSG(rc == 0 && in.len == b.len && !memcmp(in.data, b.data, b.len),
		          "and read back to EOF");
	}
	if (pipe(fds) == 0) {
		mig_write_fd(fds[1], b.data, b.len);
		close(fds[1]);
		mig_limits_default(&lim);
		lim.max_stream_bytes = 1000;
		in.len = 0;
		rc = mig_read_fd(fds[0], &lim, &in);
		close(fds[0]);
		CHECK_MSG(rc == -E2BIG && in.len == 0, "a stream over the limit is refused while read");
	}
	o1.flags = o2.flags = MIG_OPT_XATTR;
	CHECK_MSG(mig_options_compare(&o1, &o2, why, sizeof(why)) == 0, "equal options agree");
	o2.flags |= MIG_OPT_WRITEBACK;
	rc = mig_options_compare(&o1, &o2, why, sizeof(why));
	CHECK_MSG(rc == -EINVAL && strstr(why, "writeback is off on the source"), "%s", why);
	o2 = o1;
	o2.file_handles = MIG_FH_MANDATORY;
	rc = mig_options_compare(&o1, &o2, why, sizeof(why));
	CHECK_MSG(rc == -EINVAL && strstr(why, "file-handle mode"), "%s", why);
	CHECK_MSG(mig_crc32c(0, "123456789", 9) == 0xe3069283, "CRC32C check value");
	mig_buf_free(&b);
	mig_buf_free(&in);
}

/* The encoder refuses to write what the decoder would refuse record by
 * record, and leaves the buffer as it found it. */
static void test_encoder_refusals(void)
{
	static struct model m;
	struct mig_buf b = { 0 };
	size_t first;

	model_build(&m);
	CHECK_MSG(model_encode(&m, &b) == 0 && b.len > 0, "the model encodes");
	first = b.len;
	m.inodes[5].name = "a/b";
	m.inodes[5].name_len = 3;
	CHECK_MSG(model_encode(&m, &b) == -EINVAL && b.len == first,
	          "a name with '/' is not written, and nothing is appended");
	model_build(&m);
	m.fhandles[3].size = MIG_FILE_HANDLE_MAX + 1;
	CHECK_MSG(model_encode(&m, &b) == -EINVAL, "a file handle over 128 bytes is not written");
	model_build(&m);
	m.open_files[2].open_flags |= O_TRUNC;
	CHECK_MSG(model_encode(&m, &b) == -EINVAL, "an O_TRUNC handle is not written");
	model_build(&m);
	m.counters.shard_bits = 9;
	CHECK_MSG(model_encode(&m, &b) == -EINVAL, "more than 256 shards are not written");
	model_build(&m);
	m.options.cache_mode = MIG_CACHE_COUNT;
	CHECK_MSG(model_encode(&m, &b) == -EINVAL, "an unknown cache mode is not written");
	model_build(&m);
	m.inodes[7].name_len = 0;
	CHECK_MSG(model_encode(&m, &b) == -EINVAL && b.len == first, "an empty name is not written");
	mig_buf_free(&b);
}

int main(void)
{
	test_round_trip();
	test_refusals();
	test_encoder_refusals();
	test_limits();
	test_damage();
	test_fd_and_options();
	return check_result();
}
