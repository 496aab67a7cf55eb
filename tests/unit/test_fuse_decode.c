/* Decoding, validation and replies of the FUSE server against hostile and well-formed requests. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "protocol/fuse_ops.h"
#include "protocol/fuse_server.h"
#include "protocol/fuse_internal.h"
#include "../common/check.h"


/* ------------------------------------------------ recording test backend */

enum call {
	C_INIT, C_DESTROY, C_LOOKUP, C_FORGET, C_GETATTR, C_SETATTR, C_READLINK,
	C_SYMLINK, C_MKNOD, C_MKDIR, C_UNLINK, C_RMDIR, C_RENAME, C_LINK, C_OPEN,
	C_READ, C_WRITE, C_STATFS, C_RELEASE, C_FSYNC, C_FLUSH, C_OPENDIR,
	C_READDIR, C_RELEASEDIR, C_FSYNCDIR, C_SETXATTR, C_GETXATTR, C_LISTXATTR,
	C_REMOVEXATTR, C_ACCESS, C_CREATE, C_FALLOCATE, C_LSEEK, C_COPY, C_SYNCFS,
	C_TMPFILE, C_GETLK, C_SETLK, C_STATX, C_NCALLS
};

static struct recorder {
	int calls[C_NCALLS];
	uint64_t nodeid, nodeid2;
	char name[PATH_MAX + 1], name2[PATH_MAX + 1];
	uint32_t flags, mode, umask;
	bool plus, sleep;
	struct fuse_conn_params conn;
	unsigned char data[1 << 17];
	size_t data_len;
	uint64_t forget_nlookup_sum;
	uint32_t xattr_flags2;
	char secctx_name[256];
	char secctx_value[64];
	size_t secctx_size;
	bool has_supp_gid;
	uint32_t supp_gid;
} rec;

static int total_calls(void)
{
	int n = 0;

	for (int i = 0; i < C_NCALLS; i++)
		n += rec.calls[i];
	return n;
}

static void rec_reset(void)
{
	memset(&rec, 0, sizeof(rec));
}

static void fill_entry(struct fuse_entry_out *e, uint64_t nodeid)
{
	e->nodeid = nodeid;
	e->attr.ino = nodeid;
	e->attr.mode = 040755;
}

static int fill_open(struct fuse_open_out *out, uint64_t fh)
{
	out->fh = fh;
	return 0;
}

/* Set by a test: t_init withdraws FUSE_ALLOW_IDMAP, as a backend whose id
 * options must know every caller does. Outside rec, which tests reset. */
static bool backend_withdraws_idmap;

static int t_init(void *fs, struct fuse_conn_params *conn)
{
	rec.calls[C_INIT]++;
	if (backend_withdraws_idmap)
		conn->flags &= ~FUSE_ALLOW_IDMAP;
	rec.conn = *conn;
	return 0;
}

static void t_destroy(void *fs)
{
	rec.calls[C_DESTROY]++;
}

static int t_lookup(void *fs, const struct fuse_request_ctx *ctx, uint64_t parent,
		    const char *name, struct fuse_entry_out *out)
{
	rec.calls[C_LOOKUP]++;
	rec.nodeid = parent;
	snprintf(rec.name, sizeof(rec.name), "%s", name);
	fill_entry(out, 42);
	return 0;
}

static void t_forget(void *fs, uint64_t nodeid, uint64_t nlookup)
{
	rec.calls[C_FORGET]++;
	rec.forget_nlookup_sum += nlookup;
}

static int t_getattr(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		     const struct fuse_getattr_in *in, struct fuse_attr_out *out)
{
	rec.calls[C_GETATTR]++;
	rec.nodeid = nodeid;
	out->attr.ino = nodeid;
	out->attr.size = 1234;
	return 0;
}

static int t_statx(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		   const struct fuse_statx_in *in, struct fuse_statx_out *out)
{
	rec.calls[C_STATX]++;
	rec.nodeid = nodeid;
	rec.flags = in->sx_mask;
	rec.mode = in->getattr_flags;
	out->stat.mask = in->sx_mask;
	out->stat.ino = nodeid;
	out->stat.size = 4321;
	out->stat.btime.tv_sec = 1700000000;
	return 0;
}

static int t_setattr(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		     const struct fuse_setattr_in *in, struct fuse_attr_out *out)
{
	rec.calls[C_SETATTR]++;
	out->attr.size = in->size;
	return 0;
}

static ssize_t t_readlink(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
			  char *buf, size_t size)
{
	static const char target[] = "some/where";

	rec.calls[C_READLINK]++;
	if (size < sizeof(target) - 1)
		return -ENAMETOOLONG;
	memcpy(buf, target, sizeof(target) - 1);
	return sizeof(target) - 1;
}

static int t_symlink(void *fs, const struct fuse_request_ctx *ctx, uint64_t parent,
		     const char *name, const char *target, struct fuse_entry_out *out)
{
	rec.calls[C_SYMLINK]++;
	snprintf(rec.name, sizeof(rec.name), "%s", name);
	snprintf(rec.name2, sizeof(rec.name2), "%s", target);
	fill_entry(out, 43);
	return 0;
}

/* What a creating op was handed (name, the caller's group and security
 * context, mode and umask); the entry it makes is nodeid. */
static int record_new(const struct fuse_request_ctx *ctx, const char *name, uint32_t mode,
		      uint32_t umask, struct fuse_entry_out *out, uint64_t nodeid)
{
	snprintf(rec.name, sizeof(rec.name), "%s", name);
	rec.has_supp_gid = ctx->has_supp_gid;
	rec.supp_gid = ctx->supp_gid;
	if (ctx->secctx_name) {
		snprintf(rec.secctx_name, sizeof(rec.secctx_name), "%s", ctx->secctx_name);
		rec.secctx_size = ctx->secctx_size;
		if (ctx->secctx_size < sizeof(rec.secctx_value))
			memcpy(rec.secctx_value, ctx->secctx_value, ctx->secctx_size);
	}
	rec.mode = mode;
	rec.umask = umask;
	fill_entry(out, nodeid);
	return 0;
}

static int t_mknod(void *fs, const struct fuse_request_ctx *ctx, uint64_t parent,
		   const char *name, const struct fuse_mknod_in *in,
		   struct fuse_entry_out *out)
{
	rec.calls[C_MKNOD]++;
	return record_new(ctx, name, in->mode, in->umask, out, 44);
}

static int t_mkdir(void *fs, const struct fuse_request_ctx *ctx, uint64_t parent,
		   const char *name, const struct fuse_mkdir_in *in,
		   struct fuse_entry_out *out)
{
	rec.calls[C_MKDIR]++;
	return record_new(ctx, name, in->mode, in->umask, out, 45);
}

static int t_unlink(void *fs, const struct fuse_request_ctx *ctx, uint64_t parent,
		    const char *name)
{
	rec.calls[C_UNLINK]++;
	snprintf(rec.name, sizeof(rec.name), "%s", name);
	return -ENOENT;
}

/* Backend ops the tests only count: each records its call and succeeds. */
#define COUNTING_OP(fn, call, arg_type) \
	static int fn(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid, \
		      arg_type arg) \
	{ \
		rec.calls[call]++; \
		return 0; \
	}

COUNTING_OP(t_rmdir, C_RMDIR, const char *)
COUNTING_OP(t_release, C_RELEASE, const struct fuse_release_in *)
COUNTING_OP(t_fsync, C_FSYNC, const struct fuse_fsync_in *)
COUNTING_OP(t_flush, C_FLUSH, const struct fuse_flush_in *)
COUNTING_OP(t_releasedir, C_RELEASEDIR, const struct fuse_release_in *)
COUNTING_OP(t_fsyncdir, C_FSYNCDIR, const struct fuse_fsync_in *)
COUNTING_OP(t_removexattr, C_REMOVEXATTR, const char *)
COUNTING_OP(t_fallocate, C_FALLOCATE, const struct fuse_fallocate_in *)

static int t_rename(void *fs, const struct fuse_request_ctx *ctx, uint64_t parent,
		    const char *name, uint64_t newparent, const char *newname,
		    uint32_t flags)
{
	rec.calls[C_RENAME]++;
	rec.nodeid = parent;
	rec.nodeid2 = newparent;
	snprintf(rec.name, sizeof(rec.name), "%s", name);
	snprintf(rec.name2, sizeof(rec.name2), "%s", newname);
	rec.flags = flags;
	return 0;
}

static int t_link(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		  uint64_t newparent, const char *newname, struct fuse_entry_out *out)
{
	rec.calls[C_LINK]++;
	rec.nodeid = nodeid;
	rec.nodeid2 = newparent;
	snprintf(rec.name, sizeof(rec.name), "%s", newname);
	fill_entry(out, nodeid);
	return 0;
}

/* OPEN and OPENDIR hand out fh 7 and 8, so a reply shows which op ran. */
static int t_open(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		  const struct fuse_open_in *in, struct fuse_open_out *out)
{
	rec.calls[C_OPEN]++;
	return fill_open(out, 7);
}

/* Fills dst with a counting pattern, as much as the iovecs hold. */
static ssize_t t_read(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		      const struct fuse_read_in *in, const struct iovec *dst,
		      unsigned dst_cnt)
{
	size_t done = 0;

	rec.calls[C_READ]++;
	rec.data_len = in->size;
	for (unsigned i = 0; i < dst_cnt; i++) {
		for (size_t j = 0; j < dst[i].iov_len; j++)
			((unsigned char *)dst[i].iov_base)[j] = (unsigned char)(done + j);
		done += dst[i].iov_len;
	}
	return (ssize_t)done;
}

static ssize_t t_write(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		       const struct fuse_write_in *in, const struct iovec *src,
		       unsigned src_cnt)
{
	size_t done = 0;

	rec.calls[C_WRITE]++;
	for (unsigned i = 0; i < src_cnt; i++) {
		if (done + src[i].iov_len <= sizeof(rec.data))
			memcpy(rec.data + done, src[i].iov_base, src[i].iov_len);
		done += src[i].iov_len;
	}
	rec.data_len = done;
	return (ssize_t)done;
}

static int t_statfs(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		    struct fuse_kstatfs *out)
{
	rec.calls[C_STATFS]++;
	out->bsize = 4096;
	return 0;
}

static int t_opendir(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		     const struct fuse_open_in *in, struct fuse_open_out *out)
{
	rec.calls[C_OPENDIR]++;
	return fill_open(out, 8);
}

static const char *const dir_names[] = { ".", "..", "a", "bcdefghi", "j2345678901" };

static int t_readdir(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		     const struct fuse_read_in *in, bool plus, struct fuse_dirbuf *db)
{
	rec.calls[C_READDIR]++;
	rec.plus = plus;
	for (size_t i = in->offset; i < sizeof(dir_names) / sizeof(dir_names[0]); i++) {
		struct fuse_entry_out e;
		int rc;

		memset(&e, 0, sizeof(e));
		fill_entry(&e, 100 + i);
		if (plus)
			rc = fuse_dirbuf_add_plus(db, dir_names[i], strlen(dir_names[i]),
						  &e, 4, i + 1);
		else
			rc = fuse_dirbuf_add(db, dir_names[i], strlen(dir_names[i]),
					     100 + i, 4, i + 1);
		if (rc == -ENOSPC)
			break;
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int t_setxattr(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		      const char *name, const void *value, size_t size,
		      uint32_t flags, uint32_t setxattr_flags)
{
	rec.calls[C_SETXATTR]++;
	snprintf(rec.name, sizeof(rec.name), "%s", name);
	memcpy(rec.data, value, size);
	rec.data_len = size;
	rec.flags = flags;
	rec.xattr_flags2 = setxattr_flags;
	return 0;
}

static const char xattr_value[] = "0123456789";

static ssize_t t_getxattr(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
			  const char *name, void *value, size_t size)
{
	rec.calls[C_GETXATTR]++;
	snprintf(rec.name, sizeof(rec.name), "%s", name);
	if (size == 0)
		return sizeof(xattr_value) - 1;
	if (size < sizeof(xattr_value) - 1)
		return -ERANGE;
	memcpy(value, xattr_value, sizeof(xattr_value) - 1);
	return sizeof(xattr_value) - 1;
}

static ssize_t t_listxattr(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
			   char *list, size_t size)
{
	static const char names[] = "user.a\0user.b";

	rec.calls[C_LISTXATTR]++;
	if (size == 0)
		return sizeof(names);
	if (size < sizeof(names))
		return -ERANGE;
	memcpy(list, names, sizeof(names));
	return sizeof(names);
}

static int t_access(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		    uint32_t mask)
{
	rec.calls[C_ACCESS]++;
	rec.flags = mask;
	return 0;
}

static int t_create(void *fs, const struct fuse_request_ctx *ctx, uint64_t parent,
		    const char *name, const struct fuse_create_in *in,
		    struct fuse_entry_out *entry, struct fuse_open_out *open)
{
	rec.calls[C_CREATE]++;
	open->fh = 9;
	return record_new(ctx, name, in->mode, in->umask, entry, 46);
}

static int t_lseek(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		   const struct fuse_lseek_in *in, struct fuse_lseek_out *out)
{
	rec.calls[C_LSEEK]++;
	out->offset = in->offset + 1;
	return 0;
}

static ssize_t t_copy(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		      const struct fuse_copy_file_range_in *in)
{
	rec.calls[C_COPY]++;
	return (ssize_t)in->len;
}

static int t_syncfs(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid)
{
	rec.calls[C_SYNCFS]++;
	return 0;
}

static int t_tmpfile(void *fs, const struct fuse_request_ctx *ctx, uint64_t parent,
		     const struct fuse_create_in *in, struct fuse_entry_out *entry,
		     struct fuse_open_out *open)
{
	rec.calls[C_TMPFILE]++;
	fill_entry(entry, 47);
	open->fh = 10;
	return 0;
}

static int t_getlk(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		   const struct fuse_lk_in *in, struct fuse_lk_out *out)
{
	rec.calls[C_GETLK]++;
	out->lk = in->lk;
	return 0;
}

static int t_setlk(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		   const struct fuse_lk_in *in, bool sleep)
{
	rec.calls[C_SETLK]++;
	rec.sleep = sleep;
	return 0;
}

static const struct fs_ops test_ops = {
	.init = t_init, .destroy = t_destroy, .lookup = t_lookup,
	.forget = t_forget, .getattr = t_getattr, .statx = t_statx, .setattr = t_setattr,
	.readlink = t_readlink, .symlink = t_symlink, .mknod = t_mknod,
	.mkdir = t_mkdir, .unlink = t_unlink, .rmdir = t_rmdir,
	.rename = t_rename, .link = t_link, .open = t_open, .read = t_read,
	.write = t_write, .statfs = t_statfs, .release = t_release,
	.fsync = t_fsync, .flush = t_flush, .opendir = t_opendir,
	.readdir = t_readdir, .releasedir = t_releasedir,
	.fsyncdir = t_fsyncdir, .setxattr = t_setxattr,
	.getxattr = t_getxattr, .listxattr = t_listxattr,
	.removexattr = t_removexattr, .access = t_access, .create = t_create,
	.fallocate = t_fallocate, .lseek = t_lseek, .copy_file_range = t_copy,
	.syncfs = t_syncfs, .tmpfile = t_tmpfile, .getlk = t_getlk,
	.setlk = t_setlk,
};

/* ------------------------------------------------------ request builder */

struct rq {
	unsigned char b[256 * 1024];
	size_t len;
};

static struct rq rq;
static uint64_t next_unique = 1000;

static struct fuse_in_header *rq_hdr(void)
{
	return (struct fuse_in_header *)rq.b;
}

static void rq_start(uint32_t opcode, uint64_t nodeid)
{
	struct fuse_in_header h = { .opcode = opcode, .unique = next_unique++,
				    .nodeid = nodeid, .uid = 1, .gid = 2, .pid = 3 };

	memset(rq.b, 0, sizeof(rq.b));
	memcpy(rq.b, &h, sizeof(h));
	rq.len = sizeof(h);
	rq_hdr()->len = (uint32_t)rq.len;
}

static void rq_add(const void *p, size_t n)
{
	memcpy(rq.b + rq.len, p, n);
	rq.len += n;
	rq_hdr()->len = (uint32_t)rq.len;
}

static void rq_str(const char *s)
{
	rq_add(s, strlen(s) + 1);
}

static void rq_fill(unsigned char c, size_t n)
{
	memset(rq.b + rq.len, c, n);
	rq.len += n;
	rq_hdr()->len = (uint32_t)rq.len;
}

/* ---------------------------------------------------------- the runner */

static struct res {
	uint32_t ret;
	struct fuse_out_header out;
	unsigned char body[256 * 1024];
	size_t wr_len;
} res;

#define MAX_SEGS 4096

/* The transport's token for every request run here. */
/* The channel run() hands requests over with; NULL: they cannot be
 * deferred. test_deferred sets it; its token is deferred_token_dummy. */
static struct ferry_chan *run_chan;
static int deferred_token_dummy;

/* Every segment is its own allocation of exactly its size, so ASan catches
 * any read or write past the chain. */
static unsigned split(struct iovec *iov, const unsigned char *src, size_t len,
		      size_t chunk)
{
	unsigned n = 0;

	for (size_t off = 0; off < len; off += chunk) {
		size_t seg = len - off < chunk ? len - off : chunk;

		iov[n].iov_base = malloc(seg);
		iov[n].iov_len = seg;
		if (src)
			memcpy(iov[n].iov_base, src + off, seg);
		else
			memset(iov[n].iov_base, 0xEE, seg);
		n++;
	}
	return n;
}

static void run_raw(struct fuse_worker *w, size_t rd_len, size_t rd_chunk,
		    size_t wr_len, size_t wr_chunk)
{
	static struct iovec rd[MAX_SEGS], wr[MAX_SEGS];
	unsigned rd_cnt = split(rd, rq.b, rd_len, rd_chunk);
	unsigned wr_cnt = split(wr, NULL, wr_len, wr_chunk);
	size_t off = 0;

	memset(&res, 0, sizeof(res));
	res.wr_len = wr_len;
	res.ret = fuse_worker_process(w, &(struct ferry_req){
		.rd = rd, .rd_cnt = rd_cnt, .wr = wr, .wr_cnt = wr_cnt,
		.chan = run_chan, .token = &deferred_token_dummy });
	for (unsigned i = 0; i < wr_cnt; i++) {
		if (off < sizeof(struct fuse_out_header)) {
			size_t n = wr[i].iov_len;

			if (n > sizeof(struct fuse_out_header) - off)
				n = sizeof(struct fuse_out_header) - off;
			memcpy((char *)&res.out + off, wr[i].iov_base, n);
			memcpy(res.body, (char *)wr[i].iov_base + n, wr[i].iov_len - n);
			off += wr[i].iov_len;
			continue;
		}
		memcpy(res.body + off - sizeof(struct fuse_out_header), wr[i].iov_base,
		       wr[i].iov_len);
		off += wr[i].iov_len;
	}
	for (unsigned i = 0; i < rd_cnt; i++)
		free(rd[i].iov_base);
	for (unsigned i = 0; i < wr_cnt; i++)
		free(wr[i].iov_base);
}

/* The usual shape: the request split into 7-byte pieces, a roomy reply. */
static void run(struct fuse_worker *w)
{
	run_raw(w, rq.len, 7, 4096 + 256, 13);
}

/* The usual request: opcode on nodeid with a fixed argument (size bytes;
 * none when 0) and tail_len bytes after it, run as run() does. */
static void send_req_tail(struct fuse_worker *w, uint32_t opcode, uint64_t nodeid,
			  const void *arg, size_t size, const void *tail, size_t tail_len)
{
	rq_start(opcode, nodeid);
	if (size)
		rq_add(arg, size);
	if (tail_len)
		rq_add(tail, tail_len);
	run(w);
}

/* The same with a name (or nothing, NULL) after the fixed argument. */
static void send_req(struct fuse_worker *w, uint32_t opcode, uint64_t nodeid,
		     const void *arg, size_t size, const char *name)
{
	send_req_tail(w, opcode, nodeid, arg, size, name, name ? strlen(name) + 1 : 0);
}

static uint64_t last_unique(void)
{
	return rq_hdr()->unique;
}

static void expect_err_at(int line, int err)
{
	if (res.ret != 16 || res.out.len != 16 || res.out.error != -err ||
	    res.out.unique != last_unique()) {
		fprintf(stderr, "FAIL  line %d: want error %d, got ret %u len %u error %d unique %llu/%llu\n",
			line, -err, res.ret, res.out.len, res.out.error,
			(unsigned long long)res.out.unique,
			(unsigned long long)last_unique());
		failures++;
	}
}

static void expect_ok_at(int line, size_t body)
{
	if (res.ret != 16 + body || res.out.len != 16 + body || res.out.error != 0 ||
	    res.out.unique != last_unique()) {
		fprintf(stderr, "FAIL  line %d: want ok with %zu bytes, got ret %u len %u error %d\n",
			line, body, res.ret, res.out.len, res.out.error);
		failures++;
	}
}

#define EXPECT_ERR(e) expect_err_at(__LINE__, (e))
#define EXPECT_OK(n) expect_ok_at(__LINE__, (n))
/* A rejected request must not have reached the backend. */
#define EXPECT_NO_CALLS() do { int n_ = total_calls(); if (n_) { \
	fprintf(stderr, "FAIL  line %d: backend called %d times\n", __LINE__, n_); \
	failures++; } } while (0)

/* --------------------------------------------------------------- setup */

static struct fuse_server_opts default_opts(void)
{
	struct fuse_server_opts o = {
		.max_write = 64 * 1024, .xattr = true, .readdirplus = true,
		.posix_lock = true, .flock = true, .security_label = true,
		.killpriv_v2 = true,
	};
	return o;
}

static void send_init(struct fuse_worker *w, uint32_t major, uint32_t minor,
		      uint32_t flags, uint32_t flags2)
{
	struct fuse_init_in in = { .major = major, .minor = minor,
				   .max_readahead = 131072, .flags = flags,
				   .flags2 = flags2 };

	send_req(w, FUSE_INIT, 0, &in, sizeof(in), NULL);
}

#define ALL_FLAGS 0xffffffffu

/* A session a client of protocol 7.minor opened, offering every flag of
 * flags and flags2. */
static void open_session_as(struct fuse_server **se, struct fuse_worker **w,
			    const struct fuse_server_opts *opts, uint32_t minor,
			    uint32_t flags2)
{
	CHECK(fuse_server_new(se, opts, &test_ops, &rec) == 0);
	CHECK(fuse_worker_new(*se, w) == 0);
	send_init(*w, 7, minor, ALL_FLAGS, flags2);
	EXPECT_OK(sizeof(struct fuse_init_out));
	rec_reset();
}

static void open_session(struct fuse_server **se, struct fuse_worker **w,
			 const struct fuse_server_opts *opts)
{
	open_session_as(se, w, opts, 38, ALL_FLAGS);
}

/* ---------------------------------------------------------------- tests */

static void test_before_init_and_init(void)
{
	struct fuse_server_opts opts = default_opts();
	struct fuse_server *se;
	struct fuse_worker *w;
	struct fuse_getattr_in ga = { 0 };
	struct fuse_init_out out;

	CHECK(fuse_server_new(&se, &opts, &test_ops, &rec) == 0);
	CHECK(fuse_worker_new(se, &w) == 0);
	rec_reset();

	send_req(w, FUSE_GETATTR, 1, &ga, sizeof(ga), NULL);
	EXPECT_ERR(EIO);
	EXPECT_NO_CALLS();

	/* virtio-fs needs 7.31. */
	send_init(w, 7, 30, ALL_FLAGS, 0);
	EXPECT_ERR(EPROTO);
	send_init(w, 6, 40, ALL_FLAGS, 0);
	EXPECT_ERR(EPROTO);
	EXPECT_NO_CALLS();

	/* A newer major gets our version only, and the session still waits. */
	send_init(w, 8, 0, ALL_FLAGS, 0);
	EXPECT_OK(sizeof(out));
	memcpy(&out, res.body, sizeof(out));
	CHECK(out.major == 7 && out.minor == 41 && out.flags == 0 && out.max_write == 0);
	EXPECT_NO_CALLS();
	send_req(w, FUSE_GETATTR, 1, &ga, sizeof(ga), NULL);
	EXPECT_ERR(EIO);

	/* INIT shorter than the 16-byte compat struct. */
	rq_start(FUSE_INIT, 0);
	rq_fill(0, 12);
	run(w);
	EXPECT_ERR(EINVAL);

	send_init(w, 7, 36, ALL_FLAGS, ALL_FLAGS);
	EXPECT_OK(sizeof(out));
	memcpy(&out, res.body, sizeof(out));
	CHECK(out.major == 7 && out.minor == 36);
	CHECK(out.max_write == 64 * 1024 && out.max_pages == 16);
	CHECK(out.max_readahead == 131072 && out.time_gran == 1);
	/* Not the kernel's 12 and 9 (what 0 leaves): the rings bound what is in flight. */
	CHECK(out.max_background == UINT16_MAX && out.congestion_threshold == UINT16_MAX / 4 * 3);
	CHECK(out.flags & FUSE_INIT_EXT);
	CHECK(out.flags & FUSE_DO_READDIRPLUS);
	CHECK(out.flags & FUSE_SETXATTR_EXT);
	CHECK(out.flags & FUSE_POSIX_LOCKS);
	CHECK(out.flags & FUSE_HANDLE_KILLPRIV_V2);
	CHECK(!(out.flags & FUSE_WRITEBACK_CACHE));
	CHECK(!(out.flags & FUSE_POSIX_ACL));
	CHECK(out.flags2 == (uint32_t)(FUSE_SECURITY_CTX >> 32));
	CHECK(rec.calls[C_INIT] == 1);
	CHECK(rec.conn.proto_minor == 36 && rec.conn.max_write == 64 * 1024);
	CHECK(rec.conn.flags == ((uint64_t)out.flags | ((uint64_t)out.flags2 << 32)));

	rec_reset();
	send_init(w, 7, 38, ALL_FLAGS, 0);
	EXPECT_ERR(EIO);
	EXPECT_NO_CALLS();

	send_req(w, FUSE_GETATTR, 5, &ga, sizeof(ga), NULL);
	EXPECT_OK(sizeof(struct fuse_attr_out));
	CHECK(rec.calls[C_GETATTR] == 1 && rec.nodeid == 5);

	/* DESTROY: backend told, session back to waiting for INIT. */
	rec_reset();
	send_req(w, FUSE_DESTROY, 0, NULL, 0, NULL);
	EXPECT_OK(0);
	CHECK(rec.calls[C_DESTROY] == 1);
	send_req(w, FUSE_GETATTR, 5, &ga, sizeof(ga), NULL);
	EXPECT_ERR(EIO);

	/* A guest reboot: the transport resets the session without DESTROY;
	 * the backend is told once and the new kernel's INIT is accepted. */
	send_init(w, 7, 38, ALL_FLAGS, 0);
	EXPECT_OK(sizeof(out));
	rec_reset();
	fuse_server_reset(se);
	CHECK(rec.calls[C_DESTROY] == 1);
	fuse_server_reset(se);
	CHECK(rec.calls[C_DESTROY] == 1);
	send_req(w, FUSE_GETATTR, 5, &ga, sizeof(ga), NULL);
	EXPECT_ERR(EIO);
	send_init(w, 7, 38, ALL_FLAGS, 0);
	EXPECT_OK(sizeof(out));
	CHECK(rec.calls[C_INIT] == 1);
	rec_reset();

	fuse_worker_free(w);
	fuse_server_free(se);
	CHECK(rec.calls[C_DESTROY] == 1);
}

/* What default_opts() agrees with a client that offers every flag, before
 * 7.41: written out, so that a flag the session starts to agree with older
 * guests shows here. */
#define AGREED_BEFORE_741 (FUSE_ASYNC_READ | FUSE_POSIX_LOCKS | FUSE_ATOMIC_O_TRUNC | \
	FUSE_EXPORT_SUPPORT | FUSE_BIG_WRITES | FUSE_FLOCK_LOCKS | FUSE_AUTO_INVAL_DATA | \
	FUSE_DO_READDIRPLUS | FUSE_READDIRPLUS_AUTO | FUSE_ASYNC_DIO | FUSE_PARALLEL_DIROPS | \
	FUSE_MAX_PAGES | FUSE_HANDLE_KILLPRIV_V2 | FUSE_SETXATTR_EXT | FUSE_INIT_EXT | \
	FUSE_SECURITY_CTX | FUSE_CREATE_SUPP_GROUP)

static uint64_t init_flags(const struct fuse_init_out *out)
{
	return out->flags | ((uint64_t)out->flags2 << 32);
}

/* INIT of a 7.minor client offering every flag in both words, to a session
 * with default_opts() and --allow-idmap or not; the reply. */
static struct fuse_init_out init_as(uint32_t minor, bool allow_idmap)
{
	struct fuse_server_opts opts = default_opts();
	struct fuse_server *se;
	struct fuse_worker *w;
	struct fuse_init_out out;

	memset(&out, 0, sizeof(out));
	opts.allow_idmap = allow_idmap;
	CHECK(fuse_server_new(&se, &opts, &test_ops, &rec) == 0);
	CHECK(fuse_worker_new(se, &w) == 0);
	rec_reset();
	send_init(w, 7, minor, ALL_FLAGS, ALL_FLAGS);
	EXPECT_OK(sizeof(out));
	memcpy(&out, res.body, sizeof(out));
	fuse_worker_free(w);
	fuse_server_free(se);
	return out;
}

/*
 * Protocol 7.41: a 7.41 client (Linux 6.12) gets 7.41, and FUSE_ALLOW_IDMAP
 * with --allow-idmap only; a 7.38 one (Linux 6.1) gets what it got when 7.38
 * was the session's newest, whatever bits it sets and options say; a newer
 * one gets 7.41. A backend may take ALLOW_IDMAP back and nothing else.
 */
static void test_init_minor_41(void)
{
	struct fuse_init_out out;

	out = init_as(41, false);
	CHECK(out.major == 7 && out.minor == 41);
	CHECK(init_flags(&out) == AGREED_BEFORE_741);
	out = init_as(41, true);
	CHECK(out.major == 7 && out.minor == 41);
	CHECK(init_flags(&out) == (AGREED_BEFORE_741 | FUSE_ALLOW_IDMAP));
	CHECK(rec.conn.proto_minor == 41 && rec.conn.flags == init_flags(&out));

	for (int allow = 0; allow < 2; allow++) {
		out = init_as(38, allow);
		CHECK(out.major == 7 && out.minor == 38);
		CHECK(init_flags(&out) == AGREED_BEFORE_741);
		CHECK(out.max_write == 64 * 1024 && out.max_pages == 16 && out.time_gran == 1);
		CHECK(out.max_readahead == 131072);
		CHECK(rec.conn.proto_minor == 38 && rec.conn.flags == AGREED_BEFORE_741);
	}

	out = init_as(40, true);
	CHECK(out.minor == 40 && !(init_flags(&out) & FUSE_ALLOW_IDMAP));
	out = init_as(45, true);
	CHECK(out.minor == 41 && (init_flags(&out) & FUSE_ALLOW_IDMAP));

	backend_withdraws_idmap = true;
	out = init_as(41, true);
	backend_withdraws_idmap = false;
	CHECK(out.minor == 41 && init_flags(&out) == AGREED_BEFORE_741);
	CHECK(rec.conn.flags == AGREED_BEFORE_741);
}

static void test_old_init_and_defaults(void)
{
	struct fuse_server_opts opts = { 0 };
	struct fuse_server *se;
	struct fuse_worker *w;
	struct fuse_init_out out;
	/* Before 7.36 INIT is major, minor, max_readahead, flags. */
	uint32_t old[4] = { 7, 31, 65536, ALL_FLAGS };

	CHECK(fuse_server_new(&se, &opts, &test_ops, &rec) == 0);
	CHECK(fuse_worker_new(se, &w) == 0);
	rec_reset();
	send_req(w, FUSE_INIT, 0, old, sizeof(old), NULL);
	EXPECT_OK(sizeof(out));
	memcpy(&out, res.body, sizeof(out));
	CHECK(out.minor == 31);
	CHECK(out.max_write == 1024 * 1024 && out.max_pages == 256);
	CHECK(out.flags2 == 0);
	CHECK(!(out.flags & (FUSE_DO_READDIRPLUS | FUSE_SETXATTR_EXT | FUSE_POSIX_LOCKS |
			     FUSE_FLOCK_LOCKS | FUSE_WRITEBACK_CACHE)));
	CHECK(out.flags & FUSE_ASYNC_READ && out.flags & FUSE_MAX_PAGES);

	/* Without opts->xattr the xattr ops are ENOSYS and never reach us. */
	rec_reset();
	{
		struct fuse_setxattr_in sx = { .size = 1 };

		rq_start(FUSE_SETXATTR, 1);
		rq_add(&sx, 8);
		rq_str("user.x");
		rq_add("v", 1);
		run(w);
		EXPECT_ERR(ENOSYS);
	}
	/* READDIRPLUS was not negotiated. */
	{
		struct fuse_read_in rin = { .size = 4096 };

		send_req(w, FUSE_READDIRPLUS, 1, &rin, sizeof(rin), NULL);
		EXPECT_ERR(ENOSYS);
	}
	EXPECT_NO_CALLS();
	fuse_worker_free(w);
	fuse_server_free(se);
}

static void test_lengths(struct fuse_worker *w)
{
	/* Headers that lie about the request: in.len set to len, or to the
	 * request's true length plus len_delta; total_extlen to extlen. */
	static const struct { uint32_t len; int len_delta; uint16_t extlen; } lies[] = {
		{ .len_delta = 1 },   /* in.len larger than the chain */
		{ .len = sizeof(struct fuse_in_header) - 1 },   /* shorter than the header */
		{ .len_delta = -1 },  /* in.len cutting into the arguments */
		{ .extlen = 3 },      /* extensions longer than the request */
	};
	struct fuse_getattr_in ga = { 0 };

	rec_reset();
	/* Shorter than the in-header: nothing to answer to. */
	rq_start(FUSE_GETATTR, 1);
	rq_add(&ga, sizeof(ga));
	run_raw(w, sizeof(struct fuse_in_header) - 1, 5, 4096, 4096);
	CHECK(res.ret == 0);
	CHECK(res.out.len == 0xEEEEEEEE);

	for (size_t i = 0; i < sizeof(lies) / sizeof(lies[0]); i++) {
		rq_start(FUSE_GETATTR, 1);
		rq_add(&ga, sizeof(ga));
		rq_hdr()->len = lies[i].len ? lies[i].len
					    : (uint32_t)((int)rq.len + lies[i].len_delta);
		rq_hdr()->total_extlen = lies[i].extlen;
		run(w);
		EXPECT_ERR(EINVAL);
		if (res.out.error != -EINVAL)
			fprintf(stderr, "FAIL  (the line above is lies[%zu]'s)\n", i);
	}
	EXPECT_NO_CALLS();

	/* in.len smaller than the chain: the tail is ignored, so a name that
	 * is only terminated past in.len is not terminated. */
	rq_start(FUSE_LOOKUP, 1);
	rq_str("abc");
	rq_fill('x', 20);
	run(w);
	EXPECT_OK(sizeof(struct fuse_entry_out));
	CHECK(strcmp(rec.name, "abc") == 0);
	rec_reset();
	rq_start(FUSE_LOOKUP, 1);
	rq_str("abc");
	rq_hdr()->len -= 1;
	run(w);
	EXPECT_ERR(EINVAL);
	EXPECT_NO_CALLS();

	/* Unknown and unimplemented opcodes. */
	send_req(w, 9999, 1, NULL, 0, NULL);
	EXPECT_ERR(ENOSYS);
	send_req(w, 7, 1, NULL, 0, NULL);
	EXPECT_ERR(ENOSYS);
	rq_start(FUSE_BMAP, 1);
	rq_fill(0, 16);
	run(w);
	EXPECT_ERR(ENOSYS);
	rq_start(FUSE_SETUPMAPPING, 1);
	rq_fill(0, 40);
	run(w);
	EXPECT_ERR(ENOSYS);
	rq_start(FUSE_IOCTL, 1);
	rq_fill(0, 32);
	run(w);
	EXPECT_ERR(ENOSYS);
	EXPECT_NO_CALLS();

	/* Writable part smaller than the out-header: no reply at all. */
	rq_start(FUSE_GETATTR, 1);
	rq_add(&ga, sizeof(ga));
	run_raw(w, rq.len, 7, 15, 4);
	CHECK(res.ret == 0);
	EXPECT_NO_CALLS();
	rq_start(FUSE_GETATTR, 1);
	rq_add(&ga, sizeof(ga));
	run_raw(w, rq.len, 7, 0, 4);
	CHECK(res.ret == 0);

	/* Room for the header but not the entry: the lookup reference must
	 * not be taken. */
	rq_start(FUSE_LOOKUP, 1);
	rq_str("abc");
	run_raw(w, rq.len, 7, 16 + sizeof(struct fuse_entry_out) - 1, 3);
	EXPECT_ERR(ERANGE);
	EXPECT_NO_CALLS();
	rq_start(FUSE_LOOKUP, 1);
	rq_str("abc");
	run_raw(w, rq.len, 7, 16 + sizeof(struct fuse_entry_out), 3);
	EXPECT_OK(sizeof(struct fuse_entry_out));
	CHECK(rec.calls[C_LOOKUP] == 1);
}

static void test_names(struct fuse_worker *w)
{
	char long_name[300];
	struct fuse_mkdir_in mk = { .mode = 0755, .umask = 022 };

	rec_reset();
	/* Not NUL-terminated within the request. */
	send_req(w, FUSE_LOOKUP, 1, "abc", 3, NULL);
	EXPECT_ERR(EINVAL);
	/* No name at all. */
	send_req(w, FUSE_LOOKUP, 1, NULL, 0, NULL);
	EXPECT_ERR(EINVAL);
	send_req(w, FUSE_LOOKUP, 1, NULL, 0, "");
	EXPECT_ERR(EINVAL);
	send_req(w, FUSE_LOOKUP, 1, NULL, 0, "a/b");
	EXPECT_ERR(EINVAL);
	memset(long_name, 'n', 256);
	long_name[256] = '\0';
	rq_start(FUSE_LOOKUP, 1);
	rq_str(long_name);
	run(w);
	EXPECT_ERR(ENAMETOOLONG);
	EXPECT_NO_CALLS();

	long_name[255] = '\0';
	rq_start(FUSE_LOOKUP, 1);
	rq_str(long_name);
	run(w);
	EXPECT_OK(sizeof(struct fuse_entry_out));
	CHECK(strlen(rec.name) == 255);

	/* LOOKUP passes "." and ".." on; everything else refuses them. */
	send_req(w, FUSE_LOOKUP, 9, NULL, 0, "..");
	EXPECT_OK(sizeof(struct fuse_entry_out));
	CHECK(strcmp(rec.name, "..") == 0 && rec.nodeid == 9);
	send_req(w, FUSE_LOOKUP, 9, NULL, 0, ".");
	EXPECT_OK(sizeof(struct fuse_entry_out));

	rec_reset();
	send_req(w, FUSE_MKDIR, 1, &mk, sizeof(mk), ".");
	EXPECT_ERR(EINVAL);
	send_req(w, FUSE_MKDIR, 1, &mk, sizeof(mk), "..");
	EXPECT_ERR(EINVAL);
	send_req(w, FUSE_UNLINK, 1, NULL, 0, "..");
	EXPECT_ERR(EINVAL);
	send_req(w, FUSE_RMDIR, 1, NULL, 0, "x/..");
	EXPECT_ERR(EINVAL);
	/* MKDIR whose fixed part is short. */
	send_req(w, FUSE_MKDIR, 1, &mk, 4, NULL);
	EXPECT_ERR(EINVAL);
	EXPECT_NO_CALLS();
	{
		struct fuse_rename2_in rn = { .newdir = 3 };

		/* The second name of a rename is checked too. */
		rq_start(FUSE_RENAME2, 1);
		rq_add(&rn, sizeof(rn));
		rq_str("a");
		rq_str("..");
		run(w);
		EXPECT_ERR(EINVAL);
		rq_start(FUSE_RENAME2, 1);
		rq_add(&rn, sizeof(rn));
		rq_str("a");
		rq_add("b", 1);
		run(w);
		EXPECT_ERR(EINVAL);
		rn.flags = 1u << 7;
		rq_start(FUSE_RENAME2, 1);
		rq_add(&rn, sizeof(rn));
		rq_str("a");
		rq_str("b");
		run(w);
		EXPECT_ERR(EINVAL);
	}
	{
		char target[PATH_MAX + 1];

		memset(target, 't', PATH_MAX);
		target[PATH_MAX] = '\0';
		rq_start(FUSE_SYMLINK, 1);
		rq_str("l");
		rq_str(target);
		run(w);
		EXPECT_ERR(ENAMETOOLONG);
		send_req(w, FUSE_SYMLINK, 1, NULL, 0, "l");
		EXPECT_ERR(EINVAL);
	}
	EXPECT_NO_CALLS();
}

static void test_write(struct fuse_worker *w)
{
	struct fuse_write_in wi = { .fh = 1, .offset = 0 };
	struct fuse_write_out wo;
	static unsigned char payload[64 * 1024 + 1];

	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (unsigned char)(i * 7);
	rec_reset();

	/* More than max_write (64 KiB in these sessions), even if present. */
	wi.size = 64 * 1024 + 1;
	rq_start(FUSE_WRITE, 2);
	rq_add(&wi, sizeof(wi));
	rq_add(payload, wi.size);
	run_raw(w, rq.len, 4096, 64, 64);
	EXPECT_ERR(EINVAL);
	/* More than the request holds. */
	wi.size = 100;
	send_req_tail(w, FUSE_WRITE, 2, &wi, sizeof(wi), payload, 99);
	EXPECT_ERR(EINVAL);
	/* The compat 24-byte fuse_write_in is pre-7.9 only. */
	send_req(w, FUSE_WRITE, 2, &wi, 24, NULL);
	EXPECT_ERR(EINVAL);
	EXPECT_NO_CALLS();

	/* Payload scattered over odd-sized pieces, with the fuse_write_in
	 * split across segments; the backend sees exactly size bytes. */
	wi.size = 5000;
	rq_start(FUSE_WRITE, 2);
	rq_add(&wi, sizeof(wi));
	rq_add(payload, wi.size);
	rq_fill(0xAB, 10);  /* readable bytes past size are not data */
	run_raw(w, rq.len, 37, 64, 64);
	EXPECT_OK(sizeof(wo));
	memcpy(&wo, res.body, sizeof(wo));
	CHECK(wo.size == 5000);
	CHECK(rec.calls[C_WRITE] == 1 && rec.data_len == 5000);
	CHECK(memcmp(rec.data, payload, 5000) == 0);

	/* Exactly max_write. */
	wi.size = 64 * 1024;
	rq_start(FUSE_WRITE, 2);
	rq_add(&wi, sizeof(wi));
	rq_add(payload, wi.size);
	run_raw(w, rq.len, 4000, 64, 64);
	EXPECT_OK(sizeof(wo));
	CHECK(rec.data_len == 64 * 1024 && memcmp(rec.data, payload, 64 * 1024) == 0);
}

static void test_read(struct fuse_worker *w)
{
	struct fuse_read_in ri = { .fh = 1, .offset = 0, .size = 3000 };
	bool pattern_ok = true;

	rec_reset();
	/* Reply goes into many small writable segments. */
	rq_start(FUSE_READ, 2);
	rq_add(&ri, sizeof(ri));
	run_raw(w, rq.len, 9, 16 + 3000, 11);
	EXPECT_OK(3000);
	for (size_t i = 0; i < 3000; i++)
		pattern_ok &= res.body[i] == (unsigned char)i;
	CHECK(pattern_ok);

	/* Asking for more than the reply can hold: clipped, never past wr. */
	rec_reset();
	ri.size = 10000;
	rq_start(FUSE_READ, 2);
	rq_add(&ri, sizeof(ri));
	run_raw(w, rq.len, 9, 16 + 500, 100);
	EXPECT_OK(500);
	CHECK(rec.data_len == 500);

	/* And more than max_write: clipped to it. */
	ri.size = 1024 * 1024;
	rq_start(FUSE_READ, 2);
	rq_add(&ri, sizeof(ri));
	run_raw(w, rq.len, 9, 16 + 200 * 1024, 8192);
	EXPECT_OK(64 * 1024);

	/* Short fuse_read_in. */
	rec_reset();
	send_req(w, FUSE_READ, 2, &ri, 24, NULL);
	EXPECT_ERR(EINVAL);
	EXPECT_NO_CALLS();
}

static void test_forget(struct fuse_worker *w)
{
	struct fuse_forget_in fi = { .nlookup = 3 };
	struct fuse_batch_forget_in bf = { .count = 3 };
	struct fuse_forget_one ones[3] = { { 10, 1 }, { 11, 2 }, { 12, 4 } };

	rec_reset();
	send_req(w, FUSE_FORGET, 10, &fi, sizeof(fi), NULL);
	CHECK(res.ret == 0 && res.out.len == 0xEEEEEEEE);
	CHECK(rec.calls[C_FORGET] == 1 && rec.forget_nlookup_sum == 3);
	/* No reply even without any writable part (the hiprio queue). */
	rq_start(FUSE_FORGET, 10);
	rq_add(&fi, sizeof(fi));
	run_raw(w, rq.len, 7, 0, 1);
	CHECK(res.ret == 0 && rec.calls[C_FORGET] == 2);

	/* Malformed FORGET: dropped silently. */
	rec_reset();
	send_req(w, FUSE_FORGET, 10, &fi, 4, NULL);
	CHECK(res.ret == 0);
	/* count beyond the entries present. */
	send_req_tail(w, FUSE_BATCH_FORGET, 0, &bf, sizeof(bf), ones, 2 * sizeof(ones[0]));
	CHECK(res.ret == 0);
	bf.count = 0x20000000; /* count * 16 wraps 32 bits */
	send_req_tail(w, FUSE_BATCH_FORGET, 0, &bf, sizeof(bf), ones, sizeof(ones));
	CHECK(res.ret == 0);
	EXPECT_NO_CALLS();

	bf.count = 3;
	rq_start(FUSE_BATCH_FORGET, 0);
	rq_add(&bf, sizeof(bf));
	rq_add(ones, sizeof(ones));
	run_raw(w, rq.len, 5, 0, 1);
	CHECK(res.ret == 0);
	CHECK(rec.calls[C_FORGET] == 3 && rec.forget_nlookup_sum == 7);

	/* INTERRUPT: nothing in flight, no reply. */
	rec_reset();
	rq_start(FUSE_INTERRUPT, 0);
	rq_fill(0, 8);
	run(w);
	CHECK(res.ret == 0);
	EXPECT_NO_CALLS();
}

static void test_xattr(struct fuse_worker *w)
{
	struct fuse_setxattr_in sx = { .size = 5, .flags = 1, .setxattr_flags = 1 };
	struct fuse_getxattr_in gx = { .size = 0 };
	struct fuse_getxattr_out go;

	rec_reset();
	/* Value larger than present. */
	rq_start(FUSE_SETXATTR, 1);
	rq_add(&sx, sizeof(sx));
	rq_str("user.k");
	rq_add("abcd", 4);
	run(w);
	EXPECT_ERR(EINVAL);
	/* Value larger than Linux allows. */
	sx.size = 65537;
	rq_start(FUSE_SETXATTR, 1);
	rq_add(&sx, sizeof(sx));
	rq_str("user.k");
	rq_fill('v', 65537);
	run_raw(w, rq.len, 4096, 64, 64);
	EXPECT_ERR(E2BIG);
	/* Extended struct negotiated: the 8-byte compat one is too short. */
	send_req(w, FUSE_SETXATTR, 1, &sx, 8, NULL);
	EXPECT_ERR(EINVAL);
	/* Name not terminated. */
	sx.size = 0;
	send_req_tail(w, FUSE_SETXATTR, 1, &sx, sizeof(sx), "user.k", 6);
	EXPECT_ERR(EINVAL);
	EXPECT_NO_CALLS();

	sx.size = 5;
	rq_start(FUSE_SETXATTR, 1);
	rq_add(&sx, sizeof(sx));
	rq_str("user.k/with/slashes");
	rq_add("hello", 5);
	run(w);
	EXPECT_OK(0);
	CHECK(rec.calls[C_SETXATTR] == 1 && strcmp(rec.name, "user.k/with/slashes") == 0);
	CHECK(rec.data_len == 5 && memcmp(rec.data, "hello", 5) == 0);
	CHECK(rec.flags == 1 && rec.xattr_flags2 == 1);

	/* Size 0: the needed size. */
	send_req(w, FUSE_GETXATTR, 1, &gx, sizeof(gx), "user.k");
	EXPECT_OK(sizeof(go));
	memcpy(&go, res.body, sizeof(go));
	CHECK(go.size == 10);
	/* Too small. */
	gx.size = 4;
	send_req(w, FUSE_GETXATTR, 1, &gx, sizeof(gx), "user.k");
	EXPECT_ERR(ERANGE);
	/* Big enough, but the reply room is not. */
	gx.size = 100;
	rq_start(FUSE_GETXATTR, 1);
	rq_add(&gx, sizeof(gx));
	rq_str("user.k");
	run_raw(w, rq.len, 7, 16 + 6, 5);
	EXPECT_ERR(ERANGE);
	send_req(w, FUSE_GETXATTR, 1, &gx, sizeof(gx), "user.k");
	EXPECT_OK(10);
	CHECK(memcmp(res.body, xattr_value, 10) == 0);

	gx.size = 0;
	send_req(w, FUSE_LISTXATTR, 1, &gx, sizeof(gx), NULL);
	EXPECT_OK(sizeof(go));
	memcpy(&go, res.body, sizeof(go));
	CHECK(go.size == 14);
	gx.size = 14;
	send_req(w, FUSE_LISTXATTR, 1, &gx, sizeof(gx), NULL);
	EXPECT_OK(14);
	CHECK(memcmp(res.body, "user.a\0user.b", 14) == 0);

	rec_reset();
	send_req(w, FUSE_REMOVEXATTR, 1, NULL, 0, "");
	EXPECT_ERR(EINVAL);
	EXPECT_NO_CALLS();
	send_req(w, FUSE_REMOVEXATTR, 1, NULL, 0, "user.k");
	EXPECT_OK(0);
	CHECK(rec.calls[C_REMOVEXATTR] == 1);
}

/* Walks a READDIR(PLUS) reply and checks every record is aligned, well
 * formed and zero-padded. */
static int check_dirents(const unsigned char *buf, size_t len, bool plus)
{
	size_t off = 0;
	int n = 0;

	while (off < len) {
		struct fuse_dirent d;
		size_t head = plus ? FUSE_NAME_OFFSET_DIRENTPLUS : FUSE_NAME_OFFSET;
		size_t dirent_at = plus ? offsetof(struct fuse_direntplus, dirent) : 0;
		size_t rec_len;

		CHECK(off % 8 == 0);
		memcpy(&d, buf + off + dirent_at, sizeof(d));
		rec_len = FUSE_DIRENT_ALIGN(head + d.namelen);
		CHECK(off + rec_len <= len);
		CHECK(d.namelen == strlen(dir_names[n]));
		CHECK(memcmp(buf + off + head, dir_names[n], d.namelen) == 0);
		CHECK(d.off == (uint64_t)n + 1 && d.ino == 100 + (uint64_t)n);
		for (size_t i = head + d.namelen; i < rec_len; i++)
			CHECK(buf[off + i] == 0);
		off += rec_len;
		n++;
	}
	return n;
}

static void test_readdir(struct fuse_worker *w)
{
	struct fuse_read_in ri = { .fh = 8, .offset = 0, .size = 4096 };
	unsigned char raw[64];
	struct fuse_dirbuf db = { .buf = (char *)raw, .size = sizeof(raw) };

	/* The encoders alone: padding zeroed, no partial entries. */
	memset(raw, 0xAA, sizeof(raw));
	CHECK(fuse_dirbuf_add(&db, "abc", 3, 5, 4, 1) == 0);
	CHECK(db.len == 32);
	for (size_t i = FUSE_NAME_OFFSET + 3; i < 32; i++)
		CHECK(raw[i] == 0);
	CHECK(fuse_dirbuf_add(&db, "01234567", 8, 6, 8, 2) == 0);
	CHECK(db.len == 64);
	CHECK(fuse_dirbuf_add(&db, "x", 1, 7, 8, 3) == -ENOSPC);
	CHECK(db.len == 64);
	CHECK(!fuse_dirbuf_fits_plus(&db, 1));
	db.len = 0;
	CHECK(!fuse_dirbuf_fits_plus(&db, 1)); /* 152 bytes > 64 */
	CHECK(fuse_dirbuf_add(&db, "", 0, 7, 8, 3) == -EINVAL);

	rec_reset();
	send_req(w, FUSE_READDIR, 1, &ri, sizeof(ri), NULL);
	CHECK(res.ret > 16 && res.out.error == 0 && res.out.len == res.ret);
	CHECK(check_dirents(res.body, res.ret - 16, false) == 5);
	CHECK(rec.calls[C_READDIR] == 1 && !rec.plus);

	/* A small size: whole entries only. */
	ri.size = 70;
	send_req(w, FUSE_READDIR, 1, &ri, sizeof(ri), NULL);
	CHECK(res.ret == 16 + 32 + 32 && res.out.error == 0);
	CHECK(check_dirents(res.body, res.ret - 16, false) == 2);

	ri.size = 4096;
	rq_start(FUSE_READDIRPLUS, 1);
	rq_add(&ri, sizeof(ri));
	run_raw(w, rq.len, 7, 16 + 1000, 33);
	CHECK(res.out.error == 0 && res.out.len == res.ret);
	CHECK(check_dirents(res.body, res.ret - 16, true) == 5);
	CHECK(rec.plus);
}

/*
 * A request with a fixed argument and perhaps a name, and what it must
 * come to: the one backend op it reaches, the reply (or error), one field
 * of the reply the backend set, and what the backend was handed (mode and
 * umask, flags, whether SETLK may sleep; 0 where the op hands none).
 */
struct op_case {
	const char *what;
	uint32_t opcode;
	uint64_t nodeid;
	const void *arg;
	size_t arg_size;
	const char *name;
	int err;
	size_t reply;
	enum call call;
	size_t field_at, field_size;   /* field_size 0: none checked */
	uint64_t field;
	uint32_t mode, umask, flags;
	bool sleep;
};

#define OPC(code) .what = #code, .opcode = (code)
#define ARG(a) .arg = &(a), .arg_size = sizeof(a)
#define REPLY_FIELD(type, member, want) .reply = sizeof(type), \
	.field_at = offsetof(type, member), .field_size = sizeof(((type *)0)->member), \
	.field = (want)

static void run_case(struct fuse_worker *w, const struct op_case *c)
{
	int failures_before = failures;
	uint64_t field = 0;

	rec_reset();
	send_req(w, c->opcode, c->nodeid, c->arg, c->arg_size, c->name);
	if (c->err)
		EXPECT_ERR(c->err);
	else
		EXPECT_OK(c->reply);
	CHECK(rec.calls[c->call] == 1 && total_calls() == 1);
	memcpy(&field, res.body + c->field_at, c->field_size);
	CHECK(field == c->field);
	CHECK(rec.mode == c->mode && rec.umask == c->umask && rec.flags == c->flags);
	CHECK(rec.sleep == c->sleep);
	if (failures != failures_before)
		fprintf(stderr, "FAIL  (the lines above are %s's)\n", c->what);
}

/* RENAME or RENAME2 of "old" in dir to "new" in the fixed struct's newdir;
 * both names must reach the backend. */
static void send_rename(struct fuse_worker *w, uint32_t opcode, uint64_t dir,
			const void *arg, size_t size)
{
	rec_reset();
	send_req(w, opcode, dir, arg, size, "old");
	CHECK(rec.calls[C_RENAME] == 0);   /* "new" missing */
	rq_start(opcode, dir);
	rq_add(arg, size);
	rq_str("old");
	rq_str("new");
	run(w);
	EXPECT_OK(0);
	CHECK(strcmp(rec.name, "old") == 0 && strcmp(rec.name2, "new") == 0);
}

static void test_positive(struct fuse_worker *w)
{
	static const struct fuse_setattr_in sa = { .valid = FATTR_SIZE, .size = 77 };
	static const struct fuse_mknod_in mn = { .mode = 010644, .umask = 022 };
	static const struct fuse_open_in oi = { .flags = 0 };
	static const struct fuse_release_in rl = { .fh = 7 };
	static const struct fuse_fsync_in fs = { .fh = 7 };
	static const struct fuse_flush_in fl = { .fh = 7 };
	static const struct fuse_access_in ac = { .mask = 4 };
	static const struct fuse_fallocate_in fa = { .fh = 7, .length = 10 };
	static const struct fuse_syncfs_in sf = { 0 };
	static const struct fuse_lseek_in ls = { .fh = 7, .offset = 99, .whence = 3 };
	static const struct fuse_copy_file_range_in cf = { .fh_in = 7, .len = 12345 };
	static const struct fuse_lk_in lk = { .fh = 7, .lk = { .start = 1, .end = 9, .type = 1 } };
	static const struct fuse_statx_in sx = { .getattr_flags = FUSE_GETATTR_FH, .fh = 7,
						 .sx_mask = STATX_BASIC_STATS | STATX_BTIME };
	static const struct op_case cases[] = {
		{ OPC(FUSE_SETATTR), .nodeid = 3, ARG(sa), .call = C_SETATTR,
		  REPLY_FIELD(struct fuse_attr_out, attr.size, 77) },
		{ OPC(FUSE_MKNOD), .nodeid = 1, ARG(mn), .name = "fifo", .call = C_MKNOD,
		  REPLY_FIELD(struct fuse_entry_out, nodeid, 44), .mode = 010644, .umask = 022 },
		{ OPC(FUSE_UNLINK), .nodeid = 1, .name = "gone", .call = C_UNLINK, .err = ENOENT },
		{ OPC(FUSE_RMDIR), .nodeid = 1, .name = "dir", .call = C_RMDIR },
		{ OPC(FUSE_OPEN), .nodeid = 3, ARG(oi), .call = C_OPEN,
		  REPLY_FIELD(struct fuse_open_out, fh, 7) },
		{ OPC(FUSE_OPENDIR), .nodeid = 3, ARG(oi), .call = C_OPENDIR,
		  REPLY_FIELD(struct fuse_open_out, fh, 8) },
		{ OPC(FUSE_STATFS), .nodeid = 1, .call = C_STATFS,
		  REPLY_FIELD(struct fuse_statfs_out, st.bsize, 4096) },
		{ OPC(FUSE_FLUSH), .nodeid = 3, ARG(fl), .call = C_FLUSH },
		{ OPC(FUSE_FSYNC), .nodeid = 3, ARG(fs), .call = C_FSYNC },
		{ OPC(FUSE_FSYNCDIR), .nodeid = 3, ARG(fs), .call = C_FSYNCDIR },
		{ OPC(FUSE_RELEASE), .nodeid = 3, ARG(rl), .call = C_RELEASE },
		{ OPC(FUSE_RELEASEDIR), .nodeid = 3, ARG(rl), .call = C_RELEASEDIR },
		{ OPC(FUSE_ACCESS), .nodeid = 3, ARG(ac), .call = C_ACCESS, .flags = 4 },
		{ OPC(FUSE_FALLOCATE), .nodeid = 3, ARG(fa), .call = C_FALLOCATE },
		{ OPC(FUSE_SYNCFS), .nodeid = 1, ARG(sf), .call = C_SYNCFS },
		{ OPC(FUSE_LSEEK), .nodeid = 3, ARG(ls), .call = C_LSEEK,
		  REPLY_FIELD(struct fuse_lseek_out, offset, 100) },
		{ OPC(FUSE_COPY_FILE_RANGE), .nodeid = 3, ARG(cf), .call = C_COPY,
		  REPLY_FIELD(struct fuse_write_out, size, 12345) },
		{ OPC(FUSE_GETLK), .nodeid = 3, ARG(lk), .call = C_GETLK,
		  REPLY_FIELD(struct fuse_lk_out, lk.end, 9) },
		{ OPC(FUSE_SETLKW), .nodeid = 3, ARG(lk), .call = C_SETLK, .sleep = true },
		{ OPC(FUSE_SETLK), .nodeid = 3, ARG(lk), .call = C_SETLK },
		/* The mask and the file handle reach the backend (flags, mode),
		 * its statx comes back whole, birth time included. */
		{ OPC(FUSE_STATX), .nodeid = 3, ARG(sx), .call = C_STATX,
		  REPLY_FIELD(struct fuse_statx_out, stat.size, 4321),
		  .flags = STATX_BASIC_STATS | STATX_BTIME, .mode = FUSE_GETATTR_FH },
		{ OPC(FUSE_STATX), .nodeid = 3, ARG(sx), .call = C_STATX,
		  REPLY_FIELD(struct fuse_statx_out, stat.btime.tv_sec, 1700000000),
		  .flags = STATX_BASIC_STATS | STATX_BTIME, .mode = FUSE_GETATTR_FH },
	};
	struct fuse_entry_out e;
	struct fuse_open_out o;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_case(w, &cases[i]);

	/* STATX's fixed struct cut short. */
	rec_reset();
	send_req(w, FUSE_STATX, 3, &sx, sizeof(sx) - 4, NULL);
	EXPECT_ERR(EINVAL);
	EXPECT_NO_CALLS();

	/* SETATTR's fixed struct cut short. */
	rec_reset();
	send_req(w, FUSE_SETATTR, 3, &sa, sizeof(sa) - 8, NULL);
	EXPECT_ERR(EINVAL);
	EXPECT_NO_CALLS();
	{
		struct fuse_mkdir_in mk = { .mode = 0750, .umask = 027 };

		send_req(w, FUSE_MKDIR, 1, &mk, sizeof(mk), "dir");
		EXPECT_OK(sizeof(e));
		memcpy(&e, res.body, sizeof(e));
		CHECK(e.nodeid == 45 && rec.mode == 0750 && rec.umask == 027);
		CHECK(strcmp(rec.name, "dir") == 0);
	}
	{
		struct fuse_create_in ci = { .flags = 2, .mode = 0600, .umask = 077 };

		rq_start(FUSE_CREATE, 1);
		rq_add(&ci, sizeof(ci));
		rq_str("file");
		/* At 7.38 bytes after the name that are not an extension
		 * (total_extlen 0) are ignored. */
		rq_fill(0x11, 24);
		run(w);
		EXPECT_OK(sizeof(e) + sizeof(o));
		memcpy(&e, res.body, sizeof(e));
		memcpy(&o, res.body + sizeof(e), sizeof(o));
		CHECK(e.nodeid == 46 && o.fh == 9 && rec.umask == 077);
		CHECK(strcmp(rec.name, "file") == 0 && rec.secctx_name[0] == '\0');

		/* O_TMPFILE sends the unnamed dentry's name, "/". */
		send_req(w, FUSE_TMPFILE, 1, &ci, sizeof(ci), "/");
		EXPECT_OK(sizeof(e) + sizeof(o));
		memcpy(&o, res.body + sizeof(e), sizeof(o));
		CHECK(rec.calls[C_TMPFILE] == 1 && o.fh == 10);
	}
	{
		rq_start(FUSE_SYMLINK, 1);
		rq_str("link");
		rq_str("../a/b");
		run(w);
		EXPECT_OK(sizeof(e));
		CHECK(strcmp(rec.name, "link") == 0 && strcmp(rec.name2, "../a/b") == 0);

		send_req(w, FUSE_READLINK, 43, NULL, 0, NULL);
		EXPECT_OK(10);
		CHECK(memcmp(res.body, "some/where", 10) == 0);
	}
	{
		struct fuse_rename_in rn = { .newdir = 5 };
		struct fuse_rename2_in rn2 = { .newdir = 6, .flags = 1 /* NOREPLACE */ };

		send_rename(w, FUSE_RENAME, 1, &rn, sizeof(rn));
		CHECK(rec.nodeid == 1 && rec.nodeid2 == 5 && rec.flags == 0);
		send_rename(w, FUSE_RENAME2, 2, &rn2, sizeof(rn2));
		CHECK(rec.nodeid == 2 && rec.nodeid2 == 6 && rec.flags == 1);
	}
	{
		struct fuse_link_in li = { .oldnodeid = 33 };

		send_req(w, FUSE_LINK, 4, &li, sizeof(li), "hard");
		EXPECT_OK(sizeof(e));
		CHECK(rec.nodeid == 33 && rec.nodeid2 == 4);
	}
}

/* A backend without lock or tmpfile support answers ENOSYS. */
static void test_missing_ops(void)
{
	struct fs_ops ops = test_ops;
	struct fuse_server_opts opts = default_opts();
	struct fuse_server *se;
	struct fuse_worker *w;
	struct fuse_lk_in lk = { 0 };
	struct fuse_init_out out;

	ops.getlk = NULL;
	ops.setlk = NULL;
	ops.tmpfile = NULL;
	CHECK(fuse_server_new(&se, &opts, &ops, &rec) == 0);
	CHECK(fuse_worker_new(se, &w) == 0);
	send_init(w, 7, 38, ALL_FLAGS, ALL_FLAGS);
	memcpy(&out, res.body, sizeof(out));
	CHECK(!(out.flags & (FUSE_POSIX_LOCKS | FUSE_FLOCK_LOCKS)));
	rec_reset();
	send_req(w, FUSE_GETLK, 1, &lk, sizeof(lk), NULL);
	EXPECT_ERR(ENOSYS);
	send_req(w, FUSE_SETLKW, 1, &lk, sizeof(lk), NULL);
	EXPECT_ERR(ENOSYS);
	EXPECT_NO_CALLS();
	fuse_worker_free(w);
	fuse_server_free(se);
	CHECK(rec.calls[C_DESTROY] == 1);
}

/* --readonly: every opcode that always changes something is refused with
 * EROFS before the backend is called; the rest still reach it (the backend
 * judges SETATTR and OPEN by their arguments). */
static void test_readonly(void)
{
	static const uint32_t modifying[] = {
		FUSE_SYMLINK, FUSE_MKNOD, FUSE_MKDIR, FUSE_UNLINK, FUSE_RMDIR,
		FUSE_RENAME, FUSE_RENAME2, FUSE_LINK, FUSE_WRITE, FUSE_SETXATTR,
		FUSE_REMOVEXATTR, FUSE_CREATE, FUSE_FALLOCATE, FUSE_COPY_FILE_RANGE,
		FUSE_TMPFILE,
	};
	struct fuse_server_opts opts = default_opts();
	struct fuse_getattr_in ga = { 0 };
	struct fuse_setattr_in sa = { 0 };
	struct fuse_open_in oi = { .flags = 2 }; /* O_RDWR */
	struct fuse_server *se;
	struct fuse_worker *w;

	opts.readonly = true;
	open_session(&se, &w, &opts);
	for (size_t i = 0; i < sizeof(modifying) / sizeof(modifying[0]); i++) {
		/* Room for any of their fixed parts, then two names. */
		rq_start(modifying[i], 2);
		rq_fill(0, 128);
		rq_str("a");
		rq_str("b");
		run(w);
		EXPECT_ERR(EROFS);
	}
	EXPECT_NO_CALLS();

	send_req(w, FUSE_GETATTR, 2, &ga, sizeof(ga), NULL);
	EXPECT_OK(sizeof(struct fuse_attr_out));
	send_req(w, FUSE_SETATTR, 2, &sa, sizeof(sa), NULL);
	send_req(w, FUSE_OPEN, 2, &oi, sizeof(oi), NULL);
	CHECK(rec.calls[C_GETATTR] == 1 && rec.calls[C_SETATTR] == 1 && rec.calls[C_OPEN] == 1);
	fuse_worker_free(w);
	fuse_server_free(se);
}

/* Appends a security context block: header, one fuse_secctx, name, value,
 * padded to 8 bytes as the client does for extensions. */
static void rq_secctx(const char *name, const char *value, uint32_t hdr_type_or_nr)
{
	size_t name_len = strlen(name) + 1, value_len = strlen(value);
	size_t total = FUSE_REC_ALIGN(sizeof(struct fuse_secctx_header) +
				      sizeof(struct fuse_secctx) + name_len + value_len);
	struct fuse_secctx_header hdr = { .size = (uint32_t)total, .nr_secctx = hdr_type_or_nr };
	struct fuse_secctx one = { .size = (uint32_t)value_len };
	size_t start = rq.len;

	rq_add(&hdr, sizeof(hdr));
	rq_add(&one, sizeof(one));
	rq_add(name, name_len);
	rq_add(value, value_len);
	rq_fill(0, total - (rq.len - start));
}

#define NO_FIELD SIZE_MAX

/* CREATE of "f" in 1 with a security context extension ("label"), its
 * 32-bit field at field_at bytes into the extension overwritten with value
 * (NO_FIELD: as built). No padding before it: the extension is found from
 * the end. */
static void send_create_secctx(struct fuse_worker *w, const struct fuse_create_in *ci,
			       size_t field_at, uint32_t value)
{
	size_t before;

	rq_start(FUSE_CREATE, 1);
	rq_add(ci, sizeof(*ci));
	rq_str("f");
	before = rq.len;
	rq_secctx("security.selinux", "label", 1);
	if (field_at != NO_FIELD)
		memcpy(rq.b + before + field_at, &value, sizeof(value));
	rq_hdr()->total_extlen = (uint16_t)((rq.len - before) / 8);
	run(w);
}

static void test_secctx(void)
{
	struct fuse_server_opts opts = default_opts();
	struct fuse_create_in ci = { .flags = 2, .mode = 0600 };
	struct fuse_server *se;
	struct fuse_worker *w;

	/* 7.38: the context is an extension counted by total_extlen. */
	open_session(&se, &w, &opts);
	send_create_secctx(w, &ci, NO_FIELD, 0);
	EXPECT_OK(sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out));
	CHECK(strcmp(rec.name, "f") == 0);
	CHECK(strcmp(rec.secctx_name, "security.selinux") == 0);
	CHECK(rec.secctx_size == 5 && memcmp(rec.secctx_value, "label", 5) == 0);

	/* An extension claiming more than the request holds. */
	rec_reset();
	send_create_secctx(w, &ci, offsetof(struct fuse_secctx_header, size), 4096);
	EXPECT_ERR(EINVAL);
	/* A context value longer than its block. */
	send_create_secctx(w, &ci, sizeof(struct fuse_secctx_header) + offsetof(struct fuse_secctx, size),
			   1000);
	EXPECT_ERR(EINVAL);
	EXPECT_NO_CALLS();
	fuse_worker_free(w);
	fuse_server_free(se);

	/* 7.37 (Linux 6.1): the context is one more argument after the name. */
	open_session_as(&se, &w, &opts, 37, ALL_FLAGS);
	rq_start(FUSE_CREATE, 1);
	rq_add(&ci, sizeof(ci));
	rq_str("g");
	rq_secctx("security.smack", "xy", 1);
	run(w);
	EXPECT_OK(sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out));
	CHECK(strcmp(rec.name, "g") == 0 && strcmp(rec.secctx_name, "security.smack") == 0);
	CHECK(rec.secctx_size == 2 && memcmp(rec.secctx_value, "xy", 2) == 0);
	/* No context at all (nr_secctx 0) is fine. */
	rec_reset();
	rq_start(FUSE_CREATE, 1);
	rq_add(&ci, sizeof(ci));
	rq_str("h");
	{
		struct fuse_secctx_header none = { .size = 8, .nr_secctx = 0 };

		rq_add(&none, sizeof(none));
	}
	run(w);
	EXPECT_OK(sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out));
	CHECK(rec.calls[C_CREATE] == 1 && rec.secctx_name[0] == '\0');
	fuse_worker_free(w);
	fuse_server_free(se);
}

/* ---------------------------------------------------------- concurrency */

#define N_THREADS 4

static struct {
	atomic_int inits, getattrs, inflight, destroys, destroy_saw_inflight;
	atomic_int init_ok, init_eio, getattr_ok, getattr_eio, other;
	atomic_bool stop;
	pthread_barrier_t barrier;
	struct fuse_server *se;
} cc;

static int c_init(void *fs, struct fuse_conn_params *conn)
{
	atomic_fetch_add(&cc.inits, 1);
	return 0;
}

static void c_destroy(void *fs)
{
	atomic_fetch_add(&cc.destroys, 1);
	if (atomic_load(&cc.inflight) != 0)
		atomic_fetch_add(&cc.destroy_saw_inflight, 1);
}

static int c_getattr(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		     const struct fuse_getattr_in *in, struct fuse_attr_out *out)
{
	atomic_fetch_add(&cc.inflight, 1);
	atomic_fetch_add(&cc.getattrs, 1);
	for (volatile int i = 0; i < 200; i++)
		;
	atomic_fetch_sub(&cc.inflight, 1);
	return 0;
}

static const struct fs_ops conc_ops = {
	.init = c_init, .destroy = c_destroy, .getattr = c_getattr,
};

/* Sends one request from a flat buffer; returns the reply's error field. */
static int conc_call(struct fuse_worker *w, uint32_t opcode, const void *arg,
		     size_t arg_len)
{
	unsigned char req[128], reply[256];
	struct fuse_in_header h = { .len = (uint32_t)(sizeof(h) + arg_len),
				    .opcode = opcode, .unique = 1 };
	struct fuse_out_header out;
	struct iovec rd = { req, sizeof(h) + arg_len };
	struct iovec wr = { reply, sizeof(reply) };

	memcpy(req, &h, sizeof(h));
	if (arg_len)
		memcpy(req + sizeof(h), arg, arg_len);
	if (fuse_worker_process(w, &(struct ferry_req){ .rd = &rd, .rd_cnt = 1,
						.wr = &wr, .wr_cnt = 1 }) < sizeof(out))
		return 1;
	memcpy(&out, reply, sizeof(out));
	return out.error;
}

static void *conc_thread(void *arg)
{
	struct fuse_init_in init = { .major = 7, .minor = 38, .flags = FUSE_INIT_EXT };
	struct fuse_getattr_in ga = { 0 };
	struct fuse_worker *w;
	bool destroyer = arg != NULL;
	int rc;

	if (fuse_worker_new(cc.se, &w))
		return NULL;
	pthread_barrier_wait(&cc.barrier);
	rc = conc_call(w, FUSE_INIT, &init, sizeof(init));
	atomic_fetch_add(rc == 0 ? &cc.init_ok : rc == -EIO ? &cc.init_eio : &cc.other, 1);
	pthread_barrier_wait(&cc.barrier);

	for (int i = 0; i < 2000; i++) {
		rc = conc_call(w, FUSE_GETATTR, &ga, sizeof(ga));
		atomic_fetch_add(rc == 0 ? &cc.getattr_ok : &cc.other, 1);
	}
	pthread_barrier_wait(&cc.barrier);

	/* One thread destroys while the others keep sending. */
	if (destroyer) {
		rc = conc_call(w, FUSE_DESTROY, NULL, 0);
		if (rc != 0)
			atomic_fetch_add(&cc.other, 1);
		atomic_store(&cc.stop, true);
	} else {
		while (!atomic_load(&cc.stop)) {
			rc = conc_call(w, FUSE_GETATTR, &ga, sizeof(ga));
			atomic_fetch_add(rc == 0 ? &cc.getattr_ok :
					 rc == -EIO ? &cc.getattr_eio : &cc.other, 1);
		}
	}
	pthread_barrier_wait(&cc.barrier);
	fuse_worker_free(w);
	return NULL;
}

static void test_concurrency(void)
{
	struct fuse_server_opts opts = { 0 };
	pthread_t th[N_THREADS];

	memset(&cc, 0, sizeof(cc));
	CHECK(fuse_server_new(&cc.se, &opts, &conc_ops, NULL) == 0);
	pthread_barrier_init(&cc.barrier, NULL, N_THREADS);
	for (int i = 0; i < N_THREADS; i++)
		pthread_create(&th[i], NULL, conc_thread, i == 0 ? (void *)1 : NULL);
	for (int i = 0; i < N_THREADS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&cc.barrier);
	/* Exactly one INIT wins the race; the rest see EIO. */
	CHECK(atomic_load(&cc.inits) == 1);
	CHECK(atomic_load(&cc.init_ok) == 1 && atomic_load(&cc.init_eio) == N_THREADS - 1);
	CHECK(atomic_load(&cc.getattr_ok) >= N_THREADS * 2000);
	CHECK(atomic_load(&cc.destroys) == 1);
	CHECK(atomic_load(&cc.destroy_saw_inflight) == 0);
	CHECK(atomic_load(&cc.other) == 0);
	fuse_server_free(cc.se);
	CHECK(atomic_load(&cc.destroys) == 1);
}

/* ------------------------------------------------- deferred SETLKW */

/* Three early requests, a full table of 256 and one refused. */
#define MAX_WAITERS (3 + 256 + 1)

static struct {
	struct fuse_deferred *deferred[MAX_WAITERS];
	uint64_t unique[MAX_WAITERS];
	_Atomic int cancelled[MAX_WAITERS];
	int n;
	/* What the channel's complete() was given. */
	int replies;
	struct ferry_chan *chan;
	void *token;
	struct fuse_out_header out;
	uint32_t len;
} later;

static void t_cancel(void *arg)
{
	atomic_store(&later.cancelled[(intptr_t)arg], 1);
}

static int t_setlk_later(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
			 const struct fuse_lk_in *in, bool sleep)
{
	int i = later.n, rc;

	rec.calls[C_SETLK]++;
	if (!sleep)
		return -EAGAIN;
	rc = fuse_deferred_begin(ctx, t_cancel, (void *)(intptr_t)i, &later.deferred[i]);
	if (rc < 0)
		return rc;
	later.unique[i] = ctx->unique;
	later.n++;
	return FERRY_DEFERRED;
}

static void t_complete(struct ferry_chan *chan, void *token, const void *reply,
		       uint32_t len, void *data, uint32_t data_len)
{
	(void)data_len;
	free(data);
	later.replies++;
	later.chan = chan;
	later.token = token;
	later.len = len;
	memcpy(&later.out, reply, len < sizeof(later.out) ? len : sizeof(later.out));
}

static void send_setlkw(struct fuse_worker *w)
{
	struct fuse_lk_in lk = { .fh = 7, .lk = { .start = 0, .end = 9, .type = 1 } };

	send_req(w, FUSE_SETLKW, 3, &lk, sizeof(lk), NULL);
}

static void send_interrupt(struct fuse_worker *w, uint64_t unique)
{
	struct fuse_interrupt_in in = { .unique = unique };

	send_req(w, FUSE_INTERRUPT, 0, &in, sizeof(in), NULL);
}

static void *finish_when_cancelled(void *arg)
{
	int i = (int)(intptr_t)arg;

	while (!atomic_load(&later.cancelled[i]))
		sched_yield();
	fuse_deferred_finish(later.deferred[i], -EINTR);
	return NULL;
}

static void test_deferred(void)
{
	static struct ferry_chan chan = { .complete = t_complete };
	struct fs_ops ops = test_ops;
	struct fuse_server_opts opts = default_opts();
	struct fuse_server *se;
	struct fuse_worker *w, *w2;
	pthread_t finisher;
	int first;

	ops.setlk = t_setlk_later;
	run_chan = &chan;
	memset(&later, 0, sizeof(later));
	CHECK(fuse_server_new(&se, &opts, &ops, &rec) == 0);
	CHECK(fuse_worker_new(se, &w) == 0);
	CHECK(fuse_worker_new(se, &w2) == 0);
	send_init(w, 7, 38, ALL_FLAGS, ALL_FLAGS);
	rec_reset();

	/* Deferred: the reply buffer is left untouched (0xEE), the queue goes on. */
	send_setlkw(w);
	CHECK(res.ret == FERRY_DEFERRED && res.out.len == 0xEEEEEEEEu && later.n == 1);
	/* INTERRUPT of a unique that does not wait: nothing happens. */
	send_interrupt(w2, later.unique[0] + 1000);
	CHECK(res.ret == 0 && !atomic_load(&later.cancelled[0]));
	send_interrupt(w2, later.unique[0]);
	CHECK(res.ret == 0 && atomic_load(&later.cancelled[0]) && later.replies == 0);
	fuse_deferred_finish(later.deferred[0], -EINTR);
	CHECK(later.replies == 1 && later.chan == &chan && later.token == &deferred_token_dummy &&
	      later.len == sizeof(struct fuse_out_header) &&
	      later.out.len == sizeof(struct fuse_out_header) &&
	      later.out.error == -EINTR && later.out.unique == later.unique[0]);
	/* Finished: a late INTERRUPT finds nothing. */
	atomic_store(&later.cancelled[0], 0);
	send_interrupt(w2, later.unique[0]);
	CHECK(!atomic_load(&later.cancelled[0]));

	/* A stopping queue cancels only its own worker's requests. */
	send_setlkw(w);
	send_setlkw(w2);
	CHECK(later.n == 3);
	fuse_worker_cancel_deferred(w2);
	CHECK(!atomic_load(&later.cancelled[1]) && atomic_load(&later.cancelled[2]));
	fuse_deferred_finish(later.deferred[2], -EINTR);
	fuse_deferred_finish(later.deferred[1], 0);
	CHECK(later.replies == 3 && later.out.error == 0 &&
	      later.out.unique == later.unique[1]);

	/* A full table refuses more with ENOLCK, and frees up again. */
	first = later.n;
	for (int i = 0; i < 256; i++)
		send_setlkw(w);
	CHECK(later.n == first + 256);
	send_setlkw(w);
	EXPECT_ERR(ENOLCK);
	for (int i = first; i < later.n; i++)
		fuse_deferred_finish(later.deferred[i], 0);
	CHECK(later.replies == 3 + 256);

	/* DESTROY cancels what waits and lets it finish first. */
	later.n = 0;
	send_setlkw(w);
	CHECK(res.ret == FERRY_DEFERRED);
	/* Without a waiting request or a finisher, DESTROY would wait forever. */
	if (res.ret != FERRY_DEFERRED ||
	    pthread_create(&finisher, NULL, finish_when_cancelled, (void *)0) != 0) {
		CHECK(!"finisher thread started");
		fuse_worker_free(w2);
		fuse_worker_free(w);
		fuse_server_free(se);
		run_chan = NULL;
		return;
	}
	rq_start(FUSE_DESTROY, 0);
	run(w2);
	EXPECT_OK(0);
	pthread_join(finisher, NULL);
	CHECK(later.replies == 3 + 256 + 1 && later.out.error == -EINTR &&
	      rec.calls[C_DESTROY] == 1);
	fuse_worker_free(w2);
	fuse_worker_free(w);
	fuse_server_free(se);

	/* A transport that cannot defer: ENOLCK, never a stall. */
	run_chan = NULL;
	CHECK(fuse_server_new(&se, &opts, &ops, &rec) == 0);
	CHECK(fuse_worker_new(se, &w) == 0);
	send_init(w, 7, 38, ALL_FLAGS, ALL_FLAGS);
	send_setlkw(w);
	EXPECT_ERR(ENOLCK);
	fuse_worker_free(w);
	fuse_server_free(se);
}

/* Appends a FUSE_EXT_GROUPS extension (header, nr_groups, the groups),
 * padded to 8 bytes; nr may claim more groups than follow. */
static void rq_supp_groups(uint32_t nr, const uint32_t *gids, unsigned n)
{
	size_t total = FUSE_REC_ALIGN(sizeof(struct fuse_ext_header) + 4 + 4 * n);
	struct fuse_ext_header xh = { .size = (uint32_t)total, .type = 32 };
	size_t start = rq.len;

	rq_add(&xh, sizeof(xh));
	rq_add(&nr, sizeof(nr));
	rq_add(gids, 4 * n);
	rq_fill(0, total - (rq.len - start));
}

/* Sends MKDIR "d" with a groups extension (nr claimed, gids[0..n) sent;
 * n 0: no extension at all). */
static void mkdir_with_groups(struct fuse_worker *w, uint32_t nr, const uint32_t *gids,
			      unsigned n)
{
	struct fuse_mkdir_in mi = { .mode = 0755 };
	size_t before;

	rec_reset();
	rq_start(FUSE_MKDIR, 1);
	rq_add(&mi, sizeof(mi));
	rq_str("d");
	before = rq.len;
	if (n > 0)
		rq_supp_groups(nr, gids, n);
	rq_hdr()->total_extlen = (uint16_t)((rq.len - before) / 8);
	run(w);
}

static bool init_agreed_supp_group(void)
{
	struct fuse_init_out out;

	memcpy(&out, res.body, sizeof(out));
	return out.flags2 & (uint32_t)(FUSE_CREATE_SUPP_GROUP >> 32);
}

/* FUSE_CREATE_SUPP_GROUP (Linux 6.4+): the caller's group that owns the
 * parent, sent as an extension next to (or without) a security context. */
static void test_supp_groups(void)
{
	struct fuse_server_opts opts = default_opts();
	struct fuse_create_in ci = { .flags = 2, .mode = 02755 };
	struct fuse_server *se;
	struct fuse_worker *w;
	uint32_t g = 4242, two[2] = { 4242, 77 };
	size_t before;

	open_session(&se, &w, &opts);
	CHECK(init_agreed_supp_group());

	/* After a security context, as Linux orders them. */
	rec_reset();
	rq_start(FUSE_CREATE, 1);
	rq_add(&ci, sizeof(ci));
	rq_str("f");
	before = rq.len;
	rq_secctx("security.selinux", "label", 1);
	rq_supp_groups(1, &g, 1);
	rq_hdr()->total_extlen = (uint16_t)((rq.len - before) / 8);
	run(w);
	EXPECT_OK(sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out));
	CHECK(rec.has_supp_gid && rec.supp_gid == 4242);
	CHECK(strcmp(rec.secctx_name, "security.selinux") == 0);

	/* Alone, on MKDIR; a second group is ignored. */
	mkdir_with_groups(w, 2, two, 2);
	EXPECT_OK(sizeof(struct fuse_entry_out));
	CHECK(rec.calls[C_MKDIR] == 1 && rec.has_supp_gid && rec.supp_gid == 4242);
	/* No extension: no group. nr_groups 0: no group either. */
	mkdir_with_groups(w, 0, NULL, 0);
	EXPECT_OK(sizeof(struct fuse_entry_out));
	CHECK(rec.calls[C_MKDIR] == 1 && !rec.has_supp_gid);
	mkdir_with_groups(w, 0, &g, 1);
	EXPECT_OK(sizeof(struct fuse_entry_out));
	CHECK(rec.calls[C_MKDIR] == 1 && !rec.has_supp_gid);
	/* More groups claimed than the extension holds: refused, unseen; the
	 * biggest count, whose size in bytes must not wrap, too. */
	mkdir_with_groups(w, 3, &g, 1);
	EXPECT_ERR(EINVAL);
	EXPECT_NO_CALLS();
	mkdir_with_groups(w, UINT32_MAX, &g, 1);
	EXPECT_ERR(EINVAL);
	EXPECT_NO_CALLS();
	fuse_worker_free(w);
	fuse_server_free(se);

	/* A client that did not offer the flag: the extension is skipped. */
	open_session_as(&se, &w, &opts, 38, 0);
	CHECK(!init_agreed_supp_group());
	mkdir_with_groups(w, 1, &g, 1);
	EXPECT_OK(sizeof(struct fuse_entry_out));
	CHECK(rec.calls[C_MKDIR] == 1 && !rec.has_supp_gid);
	fuse_worker_free(w);
	fuse_server_free(se);
}

int main(void)
{
	struct fuse_server_opts opts = default_opts();
	struct fuse_server *se;
	struct fuse_worker *w;

	/* FERRY_TEST_DEBUG=1 runs the debug log formatting too. */
	ferry_log_init(getenv("FERRY_TEST_DEBUG") ? LOG_LVL_DEBUG : LOG_LVL_WARN, false);

	test_before_init_and_init();
	test_old_init_and_defaults();
	test_init_minor_41();
	test_missing_ops();
	test_readonly();
	test_concurrency();
	test_secctx();
	test_supp_groups();
	test_deferred();

	open_session(&se, &w, &opts);
	test_lengths(w);
	test_names(w);
	test_write(w);
	test_read(w);
	test_forget(w);
	test_xattr(w);
	test_readdir(w);
	test_positive(w);
	fuse_worker_free(w);
	fuse_server_free(se);

	return check_result();
}
