/* Runs of requests served together: adjacent WRITEs in one system call, every reply as if each had been served alone. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../common/pt_session.h"
#include "../common/raw_req.h"
#include "../common/scratch.h"
#include "backend/passthrough.h"
#include "common/log.h"
#include "protocol/fuse_server.h"
#include "../common/check.h"

/*
 * The oracle: each run goes to one file through fuse_worker_process_run,
 * and the same requests to a second file one at a time through
 * fuse_worker_process. Replies (error and size) and the files' bytes must
 * be the same. /proc/self/io's syscw counts the write system calls, which
 * shows the run took fewer.
 */

#define RUN_MAX 24
#define REPLY_ROOM 64

static char scratch[] = "/tmp/ferry-write-runs-XXXXXX";
static struct raw_reply rep;
static uint64_t next_unique = 1;

struct file {
	uint64_t nodeid, fh;
	int host_fd;                    /* the same file, for the checks */
};

/* One request of a run: its bytes in odd-sized segments, its reply room. */
struct req {
	uint8_t *buf;
	size_t len;
	struct iovec rd[8];
	unsigned rd_cnt;
	uint8_t reply[REPLY_ROOM];
	struct iovec wr;
	struct ferry_req treq;
	uint64_t unique;
};

static struct req reqs[RUN_MAX];
static unsigned nreqs;

/* A reply as the test reads it: the error, and a WRITE's size. */
struct answer {
	uint32_t len;
	int32_t error;
	uint32_t size;
	uint64_t unique;
};

static uint32_t send_simple(struct fuse_worker *w, uint32_t opcode, uint64_t nodeid,
			    const void *arg, size_t arg_len, const char *name)
{
	static uint8_t in[sizeof(struct fuse_in_header) + 4096];
	struct fuse_in_header h = { .opcode = opcode, .nodeid = nodeid,
				    .unique = next_unique++ };
	size_t len = raw_req_build(in, sizeof(in), h, arg, arg_len, name,
				   name ? strlen(name) + 1 : 0, NULL, 0);

	return raw_req_run(w, in, len, sizeof(rep.h) + sizeof(rep.arg), NULL, &rep);
}

static bool open_file(struct pt_session *ps, const char *name, struct file *f)
{
	struct fuse_create_in ci = { .flags = O_RDWR, .mode = 0600 };
	char path[512];
	struct fuse_entry_out e;
	struct fuse_open_out o;

	send_simple(ps->w, FUSE_CREATE, FUSE_ROOT_ID, &ci, sizeof(ci), name);
	if (rep.h.error || rep.used != sizeof(rep.h) + sizeof(e) + sizeof(o))
		return false;
	memcpy(&e, rep.arg, sizeof(e));
	memcpy(&o, rep.arg + sizeof(e), sizeof(o));
	f->nodeid = e.nodeid;
	f->fh = o.fh;
	snprintf(path, sizeof(path), "%s/%s", scratch, name);
	f->host_fd = open(path, O_RDWR);
	return f->host_fd >= 0;
}

/* Frees the requests of the last run and starts a new one. */
static void run_reset(void)
{
	for (unsigned i = 0; i < nreqs; i++)
		free(reqs[i].buf);
	memset(reqs, 0, sizeof(reqs));
	nreqs = 0;
}

/* Lays out a request in segments of 7, then 100, then the rest (a
 * WRITE's payload across segment ends, as a guest's may be). */
static void add_req(struct fuse_in_header h, const void *a, size_t a_len, const void *b,
		    size_t b_len)
{
	struct req *r = &reqs[nreqs++];
	size_t cuts[] = { 7, 100 };
	size_t off = 0;

	h.unique = next_unique++;
	r->unique = h.unique;
	r->buf = malloc(sizeof(h) + a_len + b_len);
	r->len = raw_req_build(r->buf, sizeof(h) + a_len + b_len, h, a, a_len, b, b_len,
			       NULL, 0);
	for (unsigned i = 0; i < 2 && off + cuts[i] < r->len; i++) {
		r->rd[r->rd_cnt++] = (struct iovec){ r->buf + off, cuts[i] };
		off += cuts[i];
	}
	r->rd[r->rd_cnt++] = (struct iovec){ r->buf + off, r->len - off };
	memset(r->reply, 0xA5, sizeof(r->reply));
	r->wr = (struct iovec){ r->reply, sizeof(r->reply) };
	r->treq = (struct ferry_req){ .rd = r->rd, .rd_cnt = r->rd_cnt, .wr = &r->wr,
				      .wr_cnt = 1 };
}

/* A WRITE of size bytes of fill at offset; a payload short of size
 * (missing > 0) makes it invalid. */
static void add_write(const struct file *f, uint64_t offset, uint32_t size, uint8_t fill,
		      uint32_t flags, uint32_t missing)
{
	struct fuse_in_header h = { .opcode = FUSE_WRITE, .nodeid = f->nodeid,
				    .uid = 0, .gid = 0, .pid = 42 };
	struct fuse_write_in in = { .fh = f->fh, .offset = offset, .size = size,
				    .write_flags = flags };
	uint8_t *data = malloc(size);

	memset(data, fill, size);
	add_req(h, &in, sizeof(in), data, size - missing);
	free(data);
}

static void add_read(const struct file *f, uint64_t offset, uint32_t size)
{
	struct fuse_in_header h = { .opcode = FUSE_READ, .nodeid = f->nodeid };
	struct fuse_read_in in = { .fh = f->fh, .offset = offset, .size = size };

	add_req(h, &in, sizeof(in), NULL, 0);
	/* Room for the data: the reply's own buffer is only REPLY_ROOM. */
	reqs[nreqs - 1].wr.iov_len = sizeof(reqs[nreqs - 1].reply);
}

static struct answer answer_of(const struct req *r, uint32_t len)
{
	struct answer a = { .len = len };
	struct fuse_out_header h;
	struct fuse_write_out wo;

	memcpy(&h, r->reply, sizeof(h));
	a.error = h.error;
	a.unique = h.unique;
	if (len == sizeof(h) + sizeof(wo)) {
		memcpy(&wo, r->reply + sizeof(h), sizeof(wo));
		a.size = wo.size;
	}
	return a;
}

/* Write system calls this process made so far, or -1 if unknown. */
static long write_syscalls(void)
{
	FILE *fp = fopen("/proc/self/io", "r");
	char line[128];
	long n = -1;

	if (!fp)
		return -1;
	while (fgets(line, sizeof(line), fp))
		if (sscanf(line, "syscw: %ld", &n) == 1)
			break;
	fclose(fp);
	return n;
}

/* Serves the requests as a transport offers them: all it has, then what
 * the last call left; their answers into out. Returns the write system
 * calls it took (-1 if unknown). */
static long serve_run(struct fuse_worker *w, struct answer *out)
{
	const struct ferry_req *list[RUN_MAX];
	uint32_t lens[RUN_MAX];
	long before = write_syscalls(), after;
	unsigned served;

	for (unsigned i = 0; i < nreqs; i++)
		list[i] = &reqs[i].treq;
	for (unsigned i = 0; i < nreqs; i += served) {
		served = fuse_worker_process_run(w, list + i, nreqs - i, lens + i);
		if (served == 0 || served > nreqs - i) {
			CHECK_MSG(0, "a run serves 1 to %u requests, not %u", nreqs - i, served);
			return -1;
		}
	}
	after = write_syscalls();
	for (unsigned i = 0; i < nreqs; i++)
		out[i] = answer_of(&reqs[i], lens[i]);
	return before < 0 || after < 0 ? -1 : after - before;
}

/* Serves the same requests one at a time. */
static void serve_alone(struct fuse_worker *w, struct answer *out)
{
	for (unsigned i = 0; i < nreqs; i++) {
		memset(reqs[i].reply, 0xA5, sizeof(reqs[i].reply));
		out[i] = answer_of(&reqs[i], fuse_worker_process(w, &reqs[i].treq));
	}
}

/* Points every WRITE and READ of the run at f instead. */
static void retarget(const struct file *from, const struct file *to)
{
	for (unsigned i = 0; i < nreqs; i++) {
		struct fuse_in_header h;
		struct fuse_write_in in;   /* fh first, as in fuse_read_in */

		memcpy(&h, reqs[i].buf, sizeof(h));
		memcpy(&in, reqs[i].buf + sizeof(h), sizeof(in.fh));
		if (h.nodeid == from->nodeid && in.fh == from->fh) {
			h.nodeid = to->nodeid;
			memcpy(reqs[i].buf, &h, sizeof(h));
			memcpy(reqs[i].buf + sizeof(h), &to->fh, sizeof(to->fh));
		}
	}
}

static bool same_bytes(int fd_a, int fd_b)
{
	static uint8_t a[256 * 1024], b[256 * 1024];
	struct stat sa, sb;

	if (fstat(fd_a, &sa) < 0 || fstat(fd_b, &sb) < 0 || sa.st_size != sb.st_size ||
	    sa.st_size > (off_t)sizeof(a))
		return false;
	return pread(fd_a, a, sa.st_size, 0) == sa.st_size &&
	       pread(fd_b, b, sb.st_size, 0) == sb.st_size && memcmp(a, b, sa.st_size) == 0;
}

/*
 * Serves the requests built for run_f as a run on run_f, then the same
 * ones alone on alone_f; checks every answer and the files against each
 * other, and the write system calls against want_calls (-1: not checked).
 */
static void check_against_alone(struct fuse_worker *w, const struct file *run_f,
				const struct file *alone_f, long want_calls, const char *what)
{
	struct answer in_run[RUN_MAX], alone[RUN_MAX];
	long calls = serve_run(w, in_run);
	bool same = true;

	retarget(run_f, alone_f);
	serve_alone(w, alone);
	for (unsigned i = 0; i < nreqs; i++) {
		if (in_run[i].len != alone[i].len || in_run[i].error != alone[i].error ||
		    in_run[i].size != alone[i].size || in_run[i].unique != reqs[i].unique ||
		    alone[i].unique != reqs[i].unique) {
			fprintf(stderr, "  %s: request %u: run len %u error %d size %u, alone len %u error %d size %u\n",
				what, i, in_run[i].len, in_run[i].error, in_run[i].size,
				alone[i].len, alone[i].error, alone[i].size);
			same = false;
		}
	}
	CHECK_MSG(same, "%s: every reply as if served alone", what);
	CHECK_MSG(same_bytes(run_f->host_fd, alone_f->host_fd), "%s: the same bytes in the file",
		  what);
	if (want_calls >= 0 && calls >= 0)
		CHECK_MSG(calls == want_calls, "%s: %ld write system calls, want %ld", what, calls,
			  want_calls);
	run_reset();
}

static void truncate_both(const struct file *a, const struct file *b)
{
	CHECK(ftruncate(a->host_fd, 0) == 0);
	CHECK(ftruncate(b->host_fd, 0) == 0);
}

int main(void)
{
	struct passthrough_opts pt_opts = { .cache = CACHE_NEVER, .timeout = -1 };
	struct fuse_server_opts se_opts = { .max_write = 1024 * 1024 };
	struct fuse_init_in init = { .major = FUSE_KERNEL_VERSION,
				     .minor = FUSE_KERNEL_MINOR_VERSION,
				     .max_readahead = 65536, .flags = FUSE_INIT_EXT };
	struct pt_session ps;
	struct file fa, fb, fc;
	long counted;
	struct rlimit old_fsize, fsize;

	ferry_log_init(LOG_LVL_WARN, false);
	if (scratch_start(scratch) != 0)
		return 1;
	pt_opts.shared_dir = scratch;
	if (pt_session_open(&ps, &pt_opts, &se_opts) < 0) {
		fprintf(stderr, "no session on %s\n", scratch);
		return scratch_finish(scratch, 1);
	}
	send_simple(ps.w, FUSE_INIT, 0, &init, sizeof(init), NULL);
	CHECK_MSG(rep.h.error == 0, "INIT");
	if (!open_file(&ps, "run", &fa) || !open_file(&ps, "alone", &fb) ||
	    !open_file(&ps, "other", &fc)) {
		CHECK_MSG(0, "three files created");
		pt_session_close(&ps);
		return scratch_finish(scratch, check_result());
	}
	counted = write_syscalls();
	if (counted < 0)
		SKIP_CASE("system call counts: no /proc/self/io here (a kernel without task I/O accounting)");

	/* 16 adjacent 4 KiB WRITEs: one system call. */
	for (unsigned i = 0; i < 16; i++)
		add_write(&fa, i * 4096ull, 4096, (uint8_t)('a' + i), 0, 0);
	check_against_alone(ps.w, &fa, &fb, 1, "16 adjacent 4 KiB writes");

	/* More than a run holds (FUSE_RUN_MAX, 16): two system calls. */
	truncate_both(&fa, &fb);
	for (unsigned i = 0; i < 20; i++)
		add_write(&fa, i * 1000ull, 1000, (uint8_t)i, 0, 0);
	check_against_alone(ps.w, &fa, &fb, 2, "20 adjacent writes");

	/* A READ in the middle sees the writes before it: they are written
	 * before it runs; the ones after it form a run of their own. */
	truncate_both(&fa, &fb);
	add_write(&fa, 0, 4096, 'A', 0, 0);
	add_write(&fa, 4096, 4096, 'B', 0, 0);
	add_read(&fa, 4000, 40);
	add_write(&fa, 8192, 4096, 'C', 0, 0);
	add_write(&fa, 12288, 4096, 'D', 0, 0);
	{
		struct answer in_run[RUN_MAX];
		long calls = serve_run(ps.w, in_run);
		const uint8_t *data = reqs[2].reply + sizeof(struct fuse_out_header);
		bool ab = in_run[2].error == 0 &&
			  in_run[2].len == sizeof(struct fuse_out_header) + 40;

		for (unsigned i = 0; ab && i < 40; i++)
			ab = data[i] == (4000 + i < 4096 ? 'A' : 'B');
		CHECK_MSG(ab, "the READ behind two held WRITEs reads their bytes");
		if (calls >= 0)
			CHECK_MSG(calls == 2, "two runs around the READ: %ld write calls", calls);
		run_reset();
	}

	/* Not adjacent, another file, another writer, a kill-suid write, an
	 * invalid one: each breaks the run, and nothing is lost. */
	truncate_both(&fa, &fb);
	add_write(&fa, 0, 4096, '1', 0, 0);
	add_write(&fa, 8192, 4096, '2', 0, 0);       /* a hole before it */
	add_write(&fa, 4096, 4096, '3', 0, 0);       /* backwards */
	add_write(&fa, 8192, 100, '4', 0, 0);
	add_write(&fa, 8292, 100, '5', 0, 10);       /* payload short: EINVAL */
	add_write(&fa, 8292, 100, '6', FUSE_WRITE_KILL_SUIDGID, 0);
	add_write(&fa, 8392, 100, '7', 0, 0);
	add_write(&fa, 8492, 0, '8', 0, 0);          /* empty */
	add_write(&fa, 8492, 100, '9', 0, 0);
	check_against_alone(ps.w, &fa, &fb, -1, "writes that do not continue the run");
	{
		/* Writes to another file between two of this one's. */
		struct answer in_run[RUN_MAX];

		truncate_both(&fa, &fc);
		add_write(&fa, 0, 512, 'x', 0, 0);
		add_write(&fc, 0, 512, 'y', 0, 0);
		add_write(&fa, 512, 512, 'z', 0, 0);
		serve_run(ps.w, in_run);
		CHECK_MSG(in_run[0].size == 512 && in_run[1].size == 512 && in_run[2].size == 512,
			  "interleaved files: every write whole");
		run_reset();
	}

	/*
	 * A file size limit the run crosses (RLIMIT_FSIZE, SIGXFSZ ignored):
	 * the member it stops in gets a short count, those after it EFBIG,
	 * each as alone; and a run that starts past it fails whole.
	 */
	signal(SIGXFSZ, SIG_IGN);
	CHECK(getrlimit(RLIMIT_FSIZE, &old_fsize) == 0);
	fsize = old_fsize;
	fsize.rlim_cur = 10000;
	truncate_both(&fa, &fb);
	CHECK(setrlimit(RLIMIT_FSIZE, &fsize) == 0);
	for (unsigned i = 0; i < 4; i++)
		add_write(&fa, i * 4096ull, 4096, (uint8_t)('p' + i), 0, 0);
	add_write(&fa, 16384, 4096, 'q', 0, 0);
	{
		struct answer in_run[RUN_MAX];

		serve_run(ps.w, in_run);
		CHECK_MSG(in_run[0].size == 4096 && in_run[1].size == 4096 &&
			  in_run[2].error == 0 && in_run[2].size == 10000 - 8192 &&
			  in_run[3].error == -EFBIG && in_run[4].error == -EFBIG,
			  "over the size limit: 4096, 4096, short %u, EFBIG, EFBIG (got %u %u %u/%d %d %d)",
			  10000 - 8192, in_run[0].size, in_run[1].size, in_run[2].size,
			  in_run[2].error, in_run[3].error, in_run[4].error);
		run_reset();
	}
	for (unsigned i = 0; i < 4; i++)
		add_write(&fa, i * 4096ull, 4096, (uint8_t)('p' + i), 0, 0);
	check_against_alone(ps.w, &fa, &fb, -1, "a run over the size limit");
	for (unsigned i = 0; i < 3; i++)
		add_write(&fa, 12288 + i * 4096ull, 4096, 's', 0, 0);
	check_against_alone(ps.w, &fa, &fb, -1, "a run that starts past the size limit");
	CHECK(setrlimit(RLIMIT_FSIZE, &old_fsize) == 0);
	signal(SIGXFSZ, SIG_DFL);

	/* A run of one and a run of none of the kind: as alone. */
	truncate_both(&fa, &fb);
	add_write(&fa, 0, 4096, 'o', 0, 0);
	check_against_alone(ps.w, &fa, &fb, 1, "a run of one write");
	add_read(&fa, 0, 10);
	add_read(&fa, 10, 10);
	check_against_alone(ps.w, &fa, &fb, 0, "a run of reads");

	close(fa.host_fd);
	close(fb.host_fd);
	close(fc.host_fd);
	pt_session_close(&ps);
	return scratch_finish(scratch, check_result());
}
