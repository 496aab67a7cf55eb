/* libFuzzer target: FUSE request sequences through the real protocol and passthrough backend on a scratch directory. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/capability.h>
#include <linux/fuse.h>
#include <sched.h>
#include <stdatomic.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "backend/passthrough.h"
#include "common/log.h"
#include "../tests/common/canary.h"
#include "../tests/common/fd_count.h"
#include "../tests/common/pt_session.h"
#include "fuzz_common.h"
#include "protocol/fuse_server.h"

/*
 * Layout (tests/common/canary.c): BASE/share is served, BASE/canary sits
 * next to it and must never change, and BASE holds nothing else. BASE lies
 * on a private 64 MiB tmpfs when we may mount one (root, in our own mount
 * namespace), so FALLOCATE and big WRITEs cannot fill the host disk;
 * otherwise RLIMIT_FSIZE bounds them.
 *
 * Input: byte 0 picks the session (bit 0: send a valid INIT first, bit 1
 * xattr, bit 2 readdirplus, bit 3 writeback, bit 4 security labels, bit 5
 * locks, bit 6 killpriv_v2, bit 7 read-only share; bits 1-2 also pick the
 * cache mode). Then records:
 *   ctl, wrcode, len (u16 le), len bytes of request
 * ctl bits 0-2: the request is split into 1-8 readable iovecs; bits 3-4:
 * the reply room into 1-4 writable iovecs; bit 5: an empty iovec leads
 * each side; bit 7: the harness sets in.len to the record length. wrcode
 * 255 gives 1 MiB + a page of reply room, else wrcode * 64 bytes.
 * Each iovec is its own heap block of exactly its size, so ASan sees any
 * read or write past it.
 *
 * Nodeids and fhs depend on host inode numbers, so the fuzzer cannot
 * guess them: a u64 in the header's nodeid or the first 16 argument bytes
 * of the form 0xfefe..NN is replaced by the NN-th nodeid (bit 7 of NN
 * clear) or fh (set) seen in an earlier reply.
 */
#define MAX_RECORDS 64
#define ID_SLOTS 16
#define ID_MARK 0xfefe000000000000ull
#define ID_MARK_MASK 0xffff000000000000ull

static char outer[4096];     /* the private tmpfs, when we have one */
static struct canary cy;
static char canary_before[4096];

/* Deferred requests (SETLKW, FSYNC, READ); each gets its own token. */
static _Atomic int deferred_outstanding;

static uint64_t nodeids[ID_SLOTS], fhs[ID_SLOTS];
static unsigned n_nodeids, n_fhs;

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	if (ftw->level == 0)
		return 0;
	if (remove(path) < 0)
		fuzz_fail("cannot clean %s: %s", path, strerror(errno));
	return 0;
}

static void populate_share(void)
{
	char path[4096 + 16];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (nftw(cy.share, remove_entry, 16, FTW_DEPTH | FTW_PHYS) < 0)
		fuzz_fail("cannot clean the share");
	if (chmod(cy.share, 0755) < 0 || chown(cy.share, 0, 0) < 0)
		fuzz_fail("share: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/f", cy.share);
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	if (fd < 0 || write(fd, "0123456789abcdef", 16) != 16)
		fuzz_fail("cannot create %s", path);
	close(fd);
	snprintf(path, sizeof(path), "%s/d", cy.share);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/d/g", cy.share);
	close(open(path, O_CREAT | O_WRONLY, 0600));
	snprintf(path, sizeof(path), "%s/p", cy.share);
	mkfifo(path, 0666);
	snprintf(path, sizeof(path), "%s/up", cy.share);
	symlink("../canary/secret", path);
	snprintf(path, sizeof(path), "%s/abs", cy.share);
	symlink(cy.canary, path);
	snprintf(path, sizeof(path), "%s/null", cy.share);
	mknod(path, S_IFCHR | 0666, makedev(1, 3));
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/s", cy.share);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
		bind(fd, (struct sockaddr *)&sa, sizeof(sa));
		close(fd);
	}
}

static void setup_dirs(void)
{
	const char *tmp = getenv("TMPDIR");
	int ret;

	snprintf(outer, sizeof(outer), "%s/ferry-fuzz-fuse-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(outer))
		fuzz_fail("mkdtemp: %s", strerror(errno));
	if (unshare(CLONE_NEWNS) == 0 &&
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
	    mount("ferry-fuzz", outer, "tmpfs", 0, "size=64m,mode=0755") == 0) {
		/* The mount vanishes with our namespace. */
	} else {
		struct rlimit fsize = { 64 << 20, 64 << 20 };

		signal(SIGXFSZ, SIG_IGN);
		setrlimit(RLIMIT_FSIZE, &fsize);
	}
	ret = canary_setup(&cy, outer, "fuse");
	if (ret < 0)
		fuzz_fail("canary_setup: %s", strerror(-ret));
}

static void remove_dirs(void)
{
	canary_remove(&cy);
	umount2(outer, MNT_DETACH);
	rmdir(outer);
}

static void write_seeds(const char *dir);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_init_log();
	if (fuzz_seed_dir()) {
		write_seeds(fuzz_seed_dir());
		exit(0);
	}
	setup_dirs();
	atexit(remove_dirs);
	populate_share();
	if (canary_snapshot(&cy, canary_before, sizeof(canary_before)) < 0)
		fuzz_fail("canary snapshot");
	return 0;
}

static void substitute_ids(uint8_t *req, size_t len)
{
	static const size_t offsets[] = {
		offsetof(struct fuse_in_header, nodeid),
		sizeof(struct fuse_in_header), sizeof(struct fuse_in_header) + 8,
	};

	for (unsigned i = 0; i < 3; i++) {
		uint64_t v;
		unsigned slot;

		if (offsets[i] + 8 > len)
			break;
		memcpy(&v, req + offsets[i], 8);
		if ((v & ID_MARK_MASK) != ID_MARK)
			continue;
		slot = v & 0xff;
		if (slot & 0x80)
			v = n_fhs ? fhs[(slot & 0x7f) % n_fhs] : 0;
		else
			v = n_nodeids ? nodeids[slot % n_nodeids] : 0;
		memcpy(req + offsets[i], &v, 8);
	}
}

static void record_ids(uint32_t opcode, const uint8_t *reply, uint32_t len)
{
	struct fuse_out_header out;
	uint64_t id;

	memcpy(&out, reply, sizeof(out));
	if (out.error != 0)
		return;
	switch (opcode) {
	case FUSE_LOOKUP: case FUSE_MKNOD: case FUSE_MKDIR: case FUSE_SYMLINK:
	case FUSE_LINK: case FUSE_CREATE:
		if (len < sizeof(out) + sizeof(struct fuse_entry_out))
			return;
		memcpy(&id, reply + sizeof(out), 8);
		nodeids[n_nodeids++ % ID_SLOTS] = id;
		if (opcode == FUSE_CREATE &&
		    len >= sizeof(out) + sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out)) {
			memcpy(&id, reply + sizeof(out) + sizeof(struct fuse_entry_out), 8);
			fhs[n_fhs++ % ID_SLOTS] = id;
		}
		break;
	case FUSE_OPEN: case FUSE_OPENDIR:
		if (len < sizeof(out) + sizeof(struct fuse_open_out))
			return;
		memcpy(&id, reply + sizeof(out), 8);
		fhs[n_fhs++ % ID_SLOTS] = id;
		break;
	}
	if (n_nodeids > ID_SLOTS)
		n_nodeids = ID_SLOTS;
	if (n_fhs > ID_SLOTS)
		n_fhs = ID_SLOTS;
}

/* Splits [buf, buf + len) into n exact-size heap blocks (plus a leading
 * empty iovec if asked). */
static unsigned split(const uint8_t *buf, size_t len, unsigned n, bool lead_empty,
		      struct iovec *iov)
{
	unsigned cnt = 0;
	size_t at = 0;

	if (lead_empty)
		iov[cnt++] = (struct iovec){ .iov_base = malloc(1), .iov_len = 0 };
	for (unsigned i = 1; i <= n; i++) {
		size_t end = len * i / n;

		iov[cnt].iov_len = end - at;
		iov[cnt].iov_base = malloc(end - at ? end - at : 1);
		if (!iov[cnt].iov_base)
			fuzz_fail("malloc");
		if (buf)
			memcpy(iov[cnt].iov_base, buf + at, end - at);
		cnt++;
		at = end;
	}
	return cnt;
}

static void gather(const struct iovec *iov, unsigned cnt, uint8_t *out, size_t max)
{
	size_t at = 0;

	for (unsigned i = 0; i < cnt && at < max; i++) {
		size_t n = iov[i].iov_len < max - at ? iov[i].iov_len : max - at;

		memcpy(out + at, iov[i].iov_base, n);
		at += n;
	}
}

/* reply holds at least the out header; len is the used length. */
static void check_reply_header(const void *reply, uint32_t len, uint64_t unique)
{
	struct fuse_out_header out;

	FUZZ_ASSERT(len >= sizeof(out), "reply of %u bytes, shorter than a header", len);
	memcpy(&out, reply, sizeof(out));
	FUZZ_ASSERT(out.len == len, "out.len %u, used length %u", out.len, len);
	FUZZ_ASSERT(out.unique == unique, "unique not echoed");
	FUZZ_ASSERT(out.error <= 0 && out.error > -4096, "error %d", out.error);
	FUZZ_ASSERT(out.error == 0 || len == sizeof(out), "error reply with %u bytes", len);
}

/* The token is a heap copy of the request's unique: ASan catches a reply
 * given twice (use after free) or never (leak). */
static void complete_deferred(struct ferry_chan *chan, void *token, const void *reply,
			      uint32_t len, void *data, uint32_t data_len)
{
	uint64_t *unique = token;
	struct fuse_out_header out;

	if (data_len == 0) {
		check_reply_header(reply, len, *unique);
	} else {
		/* A READ's data follows the bare header; out.len counts both. */
		FUZZ_ASSERT(data && len == sizeof(out), "data after a %u-byte reply", len);
		memcpy(&out, reply, sizeof(out));
		FUZZ_ASSERT(out.len == len + data_len && out.error == 0 && out.unique == *unique,
			    "reply with data: out.len %u, error %d", out.len, out.error);
	}
	free(data);
	free(unique);
	atomic_fetch_sub(&deferred_outstanding, 1);
}

/* The thread's effective capability set: a request that takes on a
 * caller's role (creds.h) must leave it as it found it. */
static uint64_t caps_at_start;

static uint64_t effective_caps(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d) < 0)
		fuzz_fail("capget");
	return d[0].effective | (uint64_t)d[1].effective << 32;
}

/* The transport's side: every request may be deferred. */
static struct ferry_chan fuzz_chan = { .complete = complete_deferred };

static void run_request(struct fuse_worker *w, uint8_t ctl, uint8_t wrcode,
			uint8_t *req, size_t len)
{
	struct iovec rd[9], wr[5];
	unsigned rd_cnt, wr_cnt;
	size_t wr_len = wrcode == 255 ? (1u << 20) + 4096 : (size_t)wrcode * 64;
	struct fuse_in_header in = { 0 };
	uint8_t head[sizeof(struct fuse_out_header) + sizeof(struct fuse_entry_out) +
		     sizeof(struct fuse_open_out)];
	uint64_t *token;
	uint32_t ret;

	if ((ctl & 0x80) && len >= 4) {
		uint32_t l = (uint32_t)len;

		memcpy(req, &l, 4);
	}
	substitute_ids(req, len);
	memcpy(&in, req, len < sizeof(in) ? len : sizeof(in));
	rd_cnt = split(req, len, (ctl & 7) + 1, ctl & 0x20, rd);
	wr_cnt = split(NULL, wr_len, ((ctl >> 3) & 3) + 1, ctl & 0x20, wr);

	token = malloc(sizeof(*token));
	if (!token)
		fuzz_fail("malloc");
	*token = in.unique;
	ret = fuse_worker_process(w, &(struct ferry_req){
		.rd = rd, .rd_cnt = rd_cnt, .wr = wr, .wr_cnt = wr_cnt,
		.chan = &fuzz_chan, .token = token });
	if (ret == FERRY_DEFERRED) {
		atomic_fetch_add(&deferred_outstanding, 1);
		ret = 0;
	} else {
		free(token);
	}

	FUZZ_ASSERT(ret <= wr_len, "reply of %u bytes in %zu of room", ret, wr_len);
	FUZZ_ASSERT(geteuid() == 0 && getegid() == 0 && getgroups(0, NULL) == 0,
		    "credentials not restored after opcode %u", in.opcode);
	FUZZ_ASSERT(effective_caps() == caps_at_start,
		    "capabilities not restored after opcode %u", in.opcode);
	if (ret > 0) {
		memset(head, 0, sizeof(head));
		gather(wr, wr_cnt, head, sizeof(head));
		check_reply_header(head, ret, in.unique);
		record_ids(in.opcode, head, ret);
	}
	for (unsigned i = 0; i < rd_cnt; i++)
		free(rd[i].iov_base);
	for (unsigned i = 0; i < wr_cnt; i++)
		free(wr[i].iov_base);
}

struct init_req {
	struct fuse_in_header h;
	struct fuse_init_in in;
};

static void init_request(struct init_req *r)
{
	memset(r, 0, sizeof(*r));
	r->h.len = sizeof(*r);
	r->h.opcode = FUSE_INIT;
	r->h.unique = 1;
	r->in.major = FUSE_KERNEL_VERSION;
	r->in.minor = 38;
	r->in.max_readahead = 1 << 20;
	r->in.flags = 0xffffffffu;
	r->in.flags2 = 0xffffffffu;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct passthrough_opts pt_opts = { .shared_dir = cy.share, .timeout = -1 };
	struct fuse_server_opts se_opts = {
		.max_write = 128 * 1024,
	};
	struct pt_session ses;
	char now[sizeof(canary_before)];
	size_t at = 1;
	int fds, fd_baseline;

	/* Counted per run: between runs libFuzzer opens fds of its own (the
	 * symbolizer's pipes). */
	fd_baseline = fd_count();
	if (size < 1)
		return 0;
	pt_opts.xattr = se_opts.xattr = data[0] & 2;
	se_opts.readdirplus = data[0] & 4;
	pt_opts.writeback = se_opts.writeback = data[0] & 8;
	se_opts.security_label = data[0] & 0x10;
	se_opts.flock = se_opts.posix_lock = data[0] & 0x20;
	se_opts.killpriv_v2 = data[0] & 0x40;
	pt_opts.readonly = data[0] & 0x80;
	pt_opts.cache = (enum cache_mode)((data[0] >> 1) & 3);
	n_nodeids = n_fhs = 0;

	populate_share();
	if (pt_session_open(&ses, &pt_opts, &se_opts) < 0)
		fuzz_fail("cannot set up the session");
	caps_at_start = effective_caps();

	if (data[0] & 1) {
		struct init_req init;

		init_request(&init);
		run_request(ses.w, 0, 2, (uint8_t *)&init, sizeof(init));
	}
	for (unsigned n = 0; n < MAX_RECORDS && at + 4 <= size; n++) {
		uint8_t ctl = data[at], wrcode = data[at + 1];
		size_t len = (size_t)(data[at + 2] | data[at + 3] << 8);
		uint8_t *req;

		at += 4;
		if (len > size - at)
			len = size - at;
		req = malloc(len ? len : 1);
		if (!req)
			fuzz_fail("malloc");
		memcpy(req, data + at, len);
		run_request(ses.w, ctl, wrcode, req, len);
		free(req);
		at += len;
	}

	/* A queue stopping cancels what waits; every deferred request must
	 * then be answered, promptly. */
	fuse_worker_cancel_deferred(ses.w);
	for (int i = 0; atomic_load(&deferred_outstanding) > 0; i++) {
		FUZZ_ASSERT(i < 10000, "%d deferred requests never answered",
			    atomic_load(&deferred_outstanding));
		usleep(1000);
	}
	pt_session_close(&ses);

	fds = fd_count();
	FUZZ_ASSERT(fds == fd_baseline, "%d fds open after the run, %d before", fds, fd_baseline);
	FUZZ_ASSERT(canary_snapshot(&cy, now, sizeof(now)) == 0 &&
		    strcmp(now, canary_before) == 0,
		    "outside the share changed:\nbefore %s\nafter  %s", canary_before, now);
	return 0;
}

/* ---- Seeds: valid request sequences ---- */

struct seed_buf {
	uint8_t b[8192];
	size_t len;
};

static void put(struct seed_buf *s, const void *p, size_t len)
{
	if (s->len + len > sizeof(s->b))
		fuzz_fail("seed too long");
	memcpy(s->b + s->len, p, len);
	s->len += len;
}

/* One record: header with the nodeid given, then args and an optional
 * NUL-terminated name (or two). */
static void put_req(struct seed_buf *s, uint8_t ctl, uint8_t wrcode, uint32_t opcode,
		    uint64_t nodeid, const void *arg, size_t arg_len,
		    const char *name, const char *name2)
{
	struct fuse_in_header h = { .opcode = opcode, .nodeid = nodeid };
	size_t nlen = name ? strlen(name) + 1 : 0, n2len = name2 ? strlen(name2) + 1 : 0;
	uint16_t total = (uint16_t)(sizeof(h) + arg_len + nlen + n2len);
	uint8_t rec[4] = { ctl, wrcode, (uint8_t)total, (uint8_t)(total >> 8) };
	static uint64_t unique = 2;

	h.len = total;
	h.unique = unique++;
	put(s, rec, 4);
	put(s, &h, sizeof(h));
	if (arg_len)
		put(s, arg, arg_len);
	if (name)
		put(s, name, nlen);
	if (name2)
		put(s, name2, n2len);
}

#define NODE(n) (ID_MARK | (n))
#define FH(n) (ID_MARK | 0x80 | (n))

static void write_seeds(const char *dir)
{
	struct seed_buf s;
	uint8_t opts;

	/* INIT, LOOKUP f, OPEN, READ, RELEASE, GETATTR root. */
	memset(&s, 0, sizeof(s));
	opts = 1 | 2;
	put(&s, &opts, 1);
	put_req(&s, 0, 4, FUSE_LOOKUP, FUSE_ROOT_ID, NULL, 0, "f", NULL);
	{
		struct fuse_open_in o = { .flags = O_RDWR };
		struct fuse_read_in r = { .fh = FH(0), .size = 16 };
		struct fuse_release_in rel = { .fh = FH(0) };
		struct fuse_getattr_in g = { 0 };

		put_req(&s, 0, 1, FUSE_OPEN, NODE(0), &o, sizeof(o), NULL, NULL);
		put_req(&s, 2, 2, FUSE_READ, NODE(0), &r, sizeof(r), NULL, NULL);
		put_req(&s, 0, 1, FUSE_RELEASE, NODE(0), &rel, sizeof(rel), NULL, NULL);
		put_req(&s, 0, 4, FUSE_GETATTR, FUSE_ROOT_ID, &g, sizeof(g), NULL, NULL);
	}
	fuzz_write_seed(dir, "init-lookup-read", s.b, s.len);

	/* INIT, CREATE, WRITE split over iovecs, MKDIR, RENAME into it,
	 * SYMLINK, LINK, READDIRPLUS. */
	memset(&s, 0, sizeof(s));
	opts = 1 | 2 | 4;
	put(&s, &opts, 1);
	{
		struct fuse_create_in c = { .flags = O_RDWR | O_CREAT, .mode = 0100644 };
		struct {
			struct fuse_write_in w;
			char data[32];
		} wr = { .w = { .fh = FH(0), .size = 32 }, .data = "written by the seed corpus" };
		struct fuse_mkdir_in md = { .mode = 0755 };
		struct fuse_rename_in rn = { .newdir = NODE(1) };
		struct fuse_link_in ln = { .oldnodeid = NODE(0) };
		struct fuse_open_in od = { .flags = O_RDONLY | O_DIRECTORY };
		struct fuse_read_in rd = { .fh = FH(1), .size = 4096 };

		put_req(&s, 0, 4, FUSE_CREATE, FUSE_ROOT_ID, &c, sizeof(c), "new", NULL);
		put_req(&s, 3, 1, FUSE_WRITE, NODE(0), &wr, sizeof(wr), NULL, NULL);
		put_req(&s, 0, 4, FUSE_MKDIR, FUSE_ROOT_ID, &md, sizeof(md), "dir", NULL);
		put_req(&s, 0, 1, FUSE_RENAME, FUSE_ROOT_ID, &rn, sizeof(rn), "new", "moved");
		put_req(&s, 0, 4, FUSE_SYMLINK, NODE(1), NULL, 0, "sl", "/etc/passwd");
		put_req(&s, 0, 4, FUSE_LINK, NODE(1), &ln, sizeof(ln), "hard", NULL);
		put_req(&s, 0, 1, FUSE_OPENDIR, NODE(1), &od, sizeof(od), NULL, NULL);
		put_req(&s, 0, 80, FUSE_READDIRPLUS, NODE(1), &rd, sizeof(rd), NULL, NULL);
	}
	fuzz_write_seed(dir, "init-create-write-rename", s.b, s.len);

	/* INIT, LOOKUPs of the special files, OPEN of the FIFO, SETATTR
	 * truncate of the device node, GETXATTR, FORGET, BATCH_FORGET. */
	memset(&s, 0, sizeof(s));
	opts = 1 | 2;
	put(&s, &opts, 1);
	{
		struct fuse_open_in o = { .flags = O_RDONLY };
		struct fuse_setattr_in sa = { .valid = FATTR_SIZE, .size = 0 };
		struct fuse_getxattr_in gx = { .size = 64 };
		struct fuse_forget_in fg = { .nlookup = 1ull << 40 };
		struct {
			struct fuse_batch_forget_in b;
			struct fuse_forget_one one[2];
		} bf = { .b = { .count = 2 },
			 .one = { { NODE(1), 5 }, { NODE(2), ~0ull } } };

		put_req(&s, 0, 4, FUSE_LOOKUP, FUSE_ROOT_ID, NULL, 0, "p", NULL);
		put_req(&s, 0, 4, FUSE_LOOKUP, FUSE_ROOT_ID, NULL, 0, "null", NULL);
		put_req(&s, 0, 4, FUSE_LOOKUP, FUSE_ROOT_ID, NULL, 0, "s", NULL);
		put_req(&s, 0, 1, FUSE_OPEN, NODE(0), &o, sizeof(o), NULL, NULL);
		put_req(&s, 0, 4, FUSE_SETATTR, NODE(1), &sa, sizeof(sa), NULL, NULL);
		put_req(&s, 0, 4, FUSE_GETXATTR, NODE(2), &gx, sizeof(gx), "user.x", NULL);
		put_req(&s, 0, 0, FUSE_FORGET, NODE(0), &fg, sizeof(fg), NULL, NULL);
		put_req(&s, 0, 0, FUSE_BATCH_FORGET, 0, &bf, sizeof(bf), NULL, NULL);
		put_req(&s, 0, 4, FUSE_LOOKUP, FUSE_ROOT_ID, NULL, 0, "..", NULL);
		put_req(&s, 0, 4, FUSE_LOOKUP, FUSE_ROOT_ID, NULL, 0, "up", NULL);
	}
	fuzz_write_seed(dir, "init-special-files-forget", s.b, s.len);

	/* Locks on: a write lock, then a conflicting SETLKW from another
	 * owner, which is deferred (cancelled at the end of the run). */
	memset(&s, 0, sizeof(s));
	opts = 1 | 0x20;
	put(&s, &opts, 1);
	{
		struct fuse_open_in o = { .flags = O_RDWR };
		struct fuse_lk_in lk = {
			.fh = FH(0), .owner = 1,
			.lk = { .start = 0, .end = 100, .type = F_WRLCK, .pid = 1 },
		};

		put_req(&s, 0, 4, FUSE_LOOKUP, FUSE_ROOT_ID, NULL, 0, "f", NULL);
		put_req(&s, 0, 1, FUSE_OPEN, NODE(0), &o, sizeof(o), NULL, NULL);
		put_req(&s, 0, 2, FUSE_SETLK, NODE(0), &lk, sizeof(lk), NULL, NULL);
		lk.owner = 2;
		lk.lk.pid = 2;
		put_req(&s, 0, 2, FUSE_SETLKW, NODE(0), &lk, sizeof(lk), NULL, NULL);
		lk.owner = 3;
		put_req(&s, 0, 2, FUSE_GETLK, NODE(0), &lk, sizeof(lk), NULL, NULL);
	}
	fuzz_write_seed(dir, "init-locks-setlkw", s.b, s.len);

	/* No INIT: everything must get EIO. */
	memset(&s, 0, sizeof(s));
	opts = 0;
	put(&s, &opts, 1);
	put_req(&s, 0, 4, FUSE_LOOKUP, FUSE_ROOT_ID, NULL, 0, "f", NULL);
	fuzz_write_seed(dir, "no-init", s.b, s.len);
}
