/* Requests that would hold up their queue are answered from the offload pool: FSYNC on a slow file system, READ of data not in the page cache. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "../common/pt_session.h"
#include "../common/raw_req.h"
#include "../common/scratch.h"
#include "backend/offload.h"
#include "backend/passthrough.h"
#include "backend/passthrough_test_hooks.h"
#include "common/log.h"
#include "protocol/fuse_server.h"
#include "../common/check.h"

/* /var/tmp, not /tmp: the cold READs need a file system on a disk, and
 * /tmp is a tmpfs on many machines (Debian 13's default). */
static char scratch[] = "/var/tmp/ferry-offload-XXXXXX";
static struct raw_reply rep;
static uint64_t next_unique = 1;

/* What the channel's complete() got, for the test thread to wait on. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned count;
	void *token;
	struct fuse_out_header h;
	uint32_t len;
	uint8_t data[65536];            /* a READ's data after the header */
	uint32_t data_len;
} later = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, NULL, { 0 }, 0, { 0 }, 0 };

static void on_complete(struct ferry_chan *chan, void *token, const void *reply,
			uint32_t len, void *data, uint32_t data_len)
{
	(void)chan;
	pthread_mutex_lock(&later.lock);
	later.count++;
	later.token = token;
	later.len = len;
	memset(&later.h, 0, sizeof(later.h));
	memcpy(&later.h, reply, len < sizeof(later.h) ? len : sizeof(later.h));
	later.data_len = data ? data_len : 0;
	if (later.data_len > sizeof(later.data))
		later.data_len = sizeof(later.data);
	if (data)
		memcpy(later.data, data, later.data_len);
	free(data);
	pthread_cond_broadcast(&later.cond);
	pthread_mutex_unlock(&later.lock);
}

/* The transport's side: every request a test may let be deferred has it. */
static struct ferry_chan test_chan = { .complete = on_complete };

/* Waits up to 30 s for the count-th deferred reply; false if it never came. */
static bool wait_later(unsigned count)
{
	struct timespec deadline;
	bool got;

	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 30;
	pthread_mutex_lock(&later.lock);
	while (later.count < count &&
	       pthread_cond_timedwait(&later.cond, &later.lock, &deadline) == 0)
		;
	got = later.count >= count;
	pthread_mutex_unlock(&later.lock);
	return got;
}

/* Header, a fixed argument and a name; returns what the worker returned. */
static uint32_t send_req(struct fuse_worker *w, uint32_t opcode, uint64_t nodeid,
			 const void *arg, size_t arg_len, const char *name, void *token)
{
	static uint8_t in[sizeof(struct fuse_in_header) + 4096];
	struct fuse_in_header h = { .opcode = opcode, .nodeid = nodeid,
				    .unique = next_unique++ };
	size_t len = raw_req_build(in, sizeof(in), h, arg, arg_len, name,
				   name ? strlen(name) + 1 : 0, NULL, 0);

	/* No token: the request cannot be deferred. */
	return raw_req_run(w, in, len, sizeof(rep.h) + sizeof(rep.arg),
			   token ? &(struct ferry_req){ .chan = &test_chan, .token = token } : NULL,
			   &rep);
}

struct session {
	struct pt_session ps;
	uint64_t nodeid, fh;            /* the file session_open created */
};

static int session_open(struct session *s, const char *dir, bool defer_every_sync,
			bool defer_every_read)
{
	struct passthrough_opts pt_opts = { .shared_dir = dir, .cache = CACHE_NEVER,
					    .timeout = -1 };
	struct fuse_server_opts se_opts = { .max_write = 1024 * 1024, .posix_lock = true };
	struct fuse_init_in init = { .major = FUSE_KERNEL_VERSION,
				     .minor = FUSE_KERNEL_MINOR_VERSION,
				     .max_readahead = 65536,
				     .flags = FUSE_INIT_EXT | FUSE_POSIX_LOCKS };
	struct fuse_create_in ci = { .flags = O_RDWR, .mode = 0600 };
	struct fuse_entry_out e;
	struct fuse_open_out o;

	memset(s, 0, sizeof(*s));
	if (pt_session_open(&s->ps, &pt_opts, &se_opts) < 0)
		return -1;
	passthrough_test_switch(s->ps.pt, PT_DEFER_EVERY_SYNC, defer_every_sync);
	passthrough_test_switch(s->ps.pt, PT_DEFER_EVERY_READ, defer_every_read);
	send_req(s->ps.w, FUSE_INIT, 0, &init, sizeof(init), NULL, NULL);
	if (rep.h.error)
		return -1;
	send_req(s->ps.w, FUSE_CREATE, FUSE_ROOT_ID, &ci, sizeof(ci),
		 defer_every_sync ? "slow" : defer_every_read ? "cold" : "quick", NULL);
	if (rep.h.error || rep.used != sizeof(rep.h) + sizeof(e) + sizeof(o))
		return -1;
	memcpy(&e, rep.arg, sizeof(e));
	memcpy(&o, rep.arg + sizeof(e), sizeof(o));
	s->nodeid = e.nodeid;
	s->fh = o.fh;
	return 0;
}

/* session_open where a failure is a failed check, "session on DIR" and
 * what; false then. */
static bool session_ready(struct session *s, const char *dir, bool defer_every_sync,
			  bool defer_every_read, const char *what)
{
	if (session_open(s, dir, defer_every_sync, defer_every_read) == 0)
		return true;
	CHECK_MSG(0, "session on %s%s", dir, what);
	return false;
}

static void session_close(struct session *s)
{
	struct fuse_release_in rel = { .fh = s->fh };

	if (s->fh)
		send_req(s->ps.w, FUSE_RELEASE, s->nodeid, &rel, sizeof(rel), NULL, NULL);
	pt_session_close(&s->ps);
}

static void test_slow_sync_deferred(void)
{
	struct session s;
	struct fuse_fsync_in fs = { 0 };
	struct fuse_getattr_in ga = { 0 };
	int token1, token2;
	uint64_t unique;
	uint32_t used;

	if (!session_ready(&s, scratch, true, false, " with every sync deferred"))
		return;
	fs.fh = s.fh;
	unique = next_unique;
	used = send_req(s.ps.w, FUSE_FSYNC, s.nodeid, &fs, sizeof(fs), NULL, &token1);
	CHECK_MSG(used == FERRY_DEFERRED, "FSYNC on a slow file system is deferred (%u)", used);
	/* The worker (a queue thread) is free at once for what comes next. */
	used = send_req(s.ps.w, FUSE_GETATTR, s.nodeid, &ga, sizeof(ga), NULL, &token2);
	CHECK_MSG(used == sizeof(rep.h) + sizeof(struct fuse_attr_out) && rep.h.error == 0,
	          "GETATTR behind it is answered on the spot");
	CHECK_MSG(wait_later(1), "the FSYNC reply comes");
	CHECK_MSG(later.token == &token1 && later.h.unique == unique && later.h.error == 0 &&
	          later.len == sizeof(struct fuse_out_header),
	          "it answers the FSYNC's unique with success and a bare header");

	fs.fsync_flags = FUSE_FSYNC_FDATASYNC;
	used = send_req(s.ps.w, FUSE_FSYNCDIR, FUSE_ROOT_ID, &fs, sizeof(fs), NULL, &token1);
	CHECK_MSG(used == sizeof(rep.h) && rep.h.error == -EBADF,
	          "FSYNCDIR with a file's fh on another node: EBADF at once (%d)", rep.h.error);
	unique = next_unique;
	used = send_req(s.ps.w, FUSE_FSYNC, s.nodeid, &fs, sizeof(fs), NULL, &token1);
	CHECK_MSG(used == FERRY_DEFERRED && wait_later(2) && later.h.unique == unique &&
	          later.h.error == 0, "fdatasync the same way");
	fs.fh = s.fh + 1000;
	used = send_req(s.ps.w, FUSE_FSYNC, s.nodeid, &fs, sizeof(fs), NULL, &token1);
	CHECK_MSG(used == sizeof(rep.h) && rep.h.error == -EBADF, "an unknown fh: EBADF at once");

	/* Without a token the request cannot wait: it is synced on the spot. */
	fs.fh = s.fh;
	used = send_req(s.ps.w, FUSE_FSYNC, s.nodeid, &fs, sizeof(fs), NULL, NULL);
	CHECK_MSG(used == sizeof(rep.h) && rep.h.error == 0,
	          "a transport that cannot defer gets it synced inline");

	/* The guest may release the handle while its sync runs: the
	 * job's handle ref keeps the fd open until the sync is done. (The
	 * transport waits for every deferred reply before the session goes,
	 * as vhost-user's queue stop does; passthrough_free waits for the
	 * offload threads' last steps.) */
	fs.fsync_flags = 0;
	unique = next_unique;
	used = send_req(s.ps.w, FUSE_FSYNC, s.nodeid, &fs, sizeof(fs), NULL, &token1);
	CHECK_MSG(used == FERRY_DEFERRED, "one more FSYNC deferred");
	{
		struct fuse_release_in rel = { .fh = s.fh };

		used = send_req(s.ps.w, FUSE_RELEASE, s.nodeid, &rel, sizeof(rel), NULL, NULL);
		CHECK_MSG(used == sizeof(rep.h) && rep.h.error == 0, "RELEASE of its handle meanwhile");
	}
	CHECK_MSG(wait_later(3) && later.h.unique == unique && later.h.error == 0,
	          "the sync still completes and is answered");
	s.fh = 0;
	session_close(&s);
}

static void test_quick_sync_inline(void)
{
	struct session s;
	struct fuse_fsync_in fs = { 0 };
	int token;
	uint32_t used;

	if (!session_ready(&s, scratch, false, false, ""))
		return;
	fs.fh = s.fh;
	/* Until a sync on this file system has taken long, it runs inline. */
	used = send_req(s.ps.w, FUSE_FSYNC, s.nodeid, &fs, sizeof(fs), NULL, &token);
	CHECK_MSG(used == sizeof(rep.h) && rep.h.error == 0,
	          "the first FSYNC on a file system is answered inline");
	session_close(&s);
}

/* ---- SETLKW waits beside the pool ---- */

/* More lock waits than the pool has threads: none of them may keep a sync
 * (or a read) from a pool thread, since a wait may last for ever. */
#define LOCK_WAITERS 70

static void test_lock_waits_leave_pool_free(void)
{
	struct flock host_lock = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	struct fuse_lk_in lk = { .lk = { .type = F_RDLCK, .end = INT64_MAX } };
	struct fuse_fsync_in fs = { 0 };
	unsigned replies = later.count, waiting = 0;
	char path[256];
	int tokens[LOCK_WAITERS], token, host_fd;
	uint64_t unique;
	uint32_t used;
	struct session s;

	/* session_open creates it again (test_slow_sync_deferred made it). */
	snprintf(path, sizeof(path), "%s/slow", scratch);
	unlink(path);
	if (!session_ready(&s, scratch, true, false, " with every sync deferred"))
		return;
	host_fd = open(path, O_RDWR | O_CLOEXEC);
	if (host_fd < 0 || fcntl(host_fd, F_OFD_SETLK, &host_lock) < 0) {
		CHECK_MSG(0, "a host write lock on %s: %s", path, strerror(errno));
		goto out;
	}
	lk.fh = s.fh;
	for (unsigned i = 0; i < LOCK_WAITERS; i++) {
		lk.owner = 1000 + i;
		used = send_req(s.ps.w, FUSE_SETLKW, s.nodeid, &lk, sizeof(lk), NULL, &tokens[i]);
		waiting += used == FERRY_DEFERRED;
	}
	CHECK_MSG(waiting == LOCK_WAITERS, "%u SETLKW behind a host lock wait, deferred (%u)",
	          LOCK_WAITERS, waiting);
	fs.fh = s.fh;
	unique = next_unique;
	used = send_req(s.ps.w, FUSE_FSYNC, s.nodeid, &fs, sizeof(fs), NULL, &token);
	CHECK_MSG(used == FERRY_DEFERRED && wait_later(replies + 1) && later.token == &token &&
	          later.h.unique == unique && later.h.error == 0,
	          "an FSYNC deferred behind them is answered while they all still wait");
	/* As a queue stop does: every wait ends with EINTR. */
	fuse_worker_cancel_deferred(s.ps.w);
	CHECK_MSG(wait_later(replies + 1 + waiting) && later.h.error == -EINTR,
	          "the cancelled waits are answered, with EINTR (%d)", later.h.error);
out:
	if (host_fd >= 0)
		close(host_fd);
	session_close(&s);
}

/* ---- READ of data not in the page cache ---- */

#define COLD_SIZE (256u * 1024u)

static uint8_t pattern_byte(uint64_t off)
{
	return (uint8_t)(off * 7 + (off >> 12));
}

static bool pattern_ok(const uint8_t *p, size_t len, uint64_t off)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != pattern_byte(off + i))
			return false;
	return true;
}

/* Fills dir/name with COLD_SIZE bytes of pattern, written back to disk. */
static int fill_file(const char *dir, const char *name)
{
	static uint8_t buf[COLD_SIZE];
	char path[256];
	int fd, ret = -1;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = pattern_byte(i);
	if (pwrite(fd, buf, sizeof(buf), 0) == (ssize_t)sizeof(buf) && fsync(fd) == 0)
		ret = 0;
	close(fd);
	return ret;
}

/* Whether no page of fd's first len bytes is in the page cache; mincore
 * tells without reading, so it starts no readahead. */
static bool not_resident(int fd, size_t len)
{
	size_t pages = (len + 4095) / 4096;
	unsigned char *vec = malloc(pages);
	void *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	bool none = vec && map != MAP_FAILED && mincore(map, len, vec) == 0;

	for (size_t i = 0; none && i < pages; i++)
		none = !(vec[i] & 1);
	if (map != MAP_FAILED)
		munmap(map, len);
	free(vec);
	return none;
}

/*
 * Drops dir/name from the page cache: 1 once no page of it is cached, 0
 * if the file system cannot tell (RWF_NOWAIT unsupported, as on tmpfs),
 * -1 on error. Readahead that an earlier READ started may still be in
 * flight, and pages being read in can neither be dropped nor show in
 * mincore (it counts only pages whose data is there), so they would turn
 * up cached right after. Reading the whole file first waits for them; then
 * every page is clean and idle, and DONTNEED drops them all.
 */
static int make_cold(const char *dir, const char *name)
{
	static char buf[1 << 20];
	char path[256];
	struct iovec one = { buf, 1 };
	struct stat st;
	off_t off = 0;
	ssize_t n;
	int fd, ret = -1;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	/* Asked of the first byte, cached or not: tmpfs refuses the flag. */
	if (preadv2(fd, &one, 1, 0, RWF_NOWAIT) < 0 && errno == EOPNOTSUPP) {
		ret = 0;
		goto out;
	}
	if (fstat(fd, &st) < 0 || st.st_size == 0)
		goto out;
	while ((n = pread(fd, buf, sizeof(buf), off)) > 0)
		off += n;
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	if (n == 0 && not_resident(fd, (size_t)st.st_size))
		ret = 1;
out:
	close(fd);
	return ret;
}

/* make_cold, tried again while the pages stay: -1 is then a failure. */
static int make_cold_checked(const char *dir, const char *name)
{
	int ret = -1;

	for (int i = 0; i < 3 && ret < 0; i++)
		ret = make_cold(dir, name);
	CHECK_MSG(ret >= 0, "%s/%s dropped from the page cache", dir, name);
	return ret;
}

static uint32_t send_read(struct session *s, uint64_t off, uint32_t size,
			  unsigned queued_behind, void *token)
{
	struct fuse_read_in rd = { .fh = s->fh, .offset = off, .size = size };
	static uint8_t in[sizeof(struct fuse_in_header) + sizeof(rd)];
	struct fuse_in_header h = { .opcode = FUSE_READ, .nodeid = s->nodeid,
				    .unique = next_unique++ };
	size_t len = raw_req_build(in, sizeof(in), h, &rd, sizeof(rd), NULL, 0, NULL, 0);

	return raw_req_run(s->ps.w, in, len, sizeof(rep.h) + size,
			   &(struct ferry_req){ .chan = token ? &test_chan : NULL, .token = token,
						.queued_behind = queued_behind },
			   &rep);
}

/*
 * make_cold, then a READ that should find its data on disk. RWF_NOWAIT
 * does not promise to start no I/O: on a miss the kernel starts readahead
 * and answers from it if the disk finished first. Idle, that is about 1
 * read in 300 here; on a loaded machine, where the reader is preempted
 * between starting the I/O and looking for its pages, nearly all of them.
 * Such a READ is rightly answered inline (its data is checked), so it is
 * tried again; after 5 the kernel's answer is taken as "not cached" by
 * the test hook, so that what follows a miss is still tested.
 */
static uint32_t send_cold_read(struct session *s, const char *dir, uint64_t off,
			       uint32_t size, unsigned queued_behind, void *token)
{
	uint32_t used = 0;

	for (int tries = 0; tries < 5; tries++) {
		make_cold(dir, "cold");
		used = send_read(s, off, size, queued_behind, token);
		if (used == FERRY_DEFERRED)
			return used;
		CHECK_MSG(rep.h.error == 0 && pattern_ok(rep.arg, rep.h.len - sizeof(rep.h), off),
		          "a READ the disk answered within RWF_NOWAIT has the right data");
	}
	printf("note  the disk answered 5 cold READs within RWF_NOWAIT; the next takes "
	       "its data as not cached\n");
	passthrough_test_switch(s->ps.pt, PT_PRETEND_UNCACHED, true);
	used = send_read(s, off, size, queued_behind, token);
	passthrough_test_switch(s->ps.pt, PT_PRETEND_UNCACHED, false);
	return used;
}

static void test_cold_read_deferred(const char *dir)
{
	struct fuse_getattr_in ga = { 0 };
	struct session s;
	unsigned replies = later.count;
	uint64_t unique;
	uint32_t used;
	int token1, token2, cold;

	if (session_open(&s, dir, false, true) < 0 || fill_file(dir, "cold") < 0) {
		CHECK_MSG(0, "session on %s with a file of %u bytes", dir, COLD_SIZE);
		return;
	}
	cold = make_cold_checked(dir, "cold");
	if (cold <= 0) {
		if (cold == 0)
			SKIP_CASE("cold READ deferred: %s takes no RWF_NOWAIT (tmpfs?): "
				  "it cannot tell cached data from data on disk", dir);
		session_close(&s);
		return;
	}
	used = send_cold_read(&s, dir, 4096, 65536, 3, &token1);
	unique = next_unique - 1;
	CHECK_MSG(used == FERRY_DEFERRED,
	          "READ of data on disk with requests behind it is deferred (%u)", used);
	used = send_req(s.ps.w, FUSE_GETATTR, s.nodeid, &ga, sizeof(ga), NULL, &token2);
	CHECK_MSG(used == sizeof(rep.h) + sizeof(struct fuse_attr_out) && rep.h.error == 0,
	          "GETATTR behind it is answered on the spot");
	CHECK_MSG(wait_later(replies + 1), "the READ reply comes");
	CHECK_MSG(later.token == &token1 && later.h.unique == unique && later.h.error == 0 &&
	          later.h.len == sizeof(later.h) + 65536 && later.data_len == 65536 &&
	          pattern_ok(later.data, 65536, 4096),
	          "it carries the 64 KiB at offset 4096 (header len %u, %u data bytes)",
	          later.h.len, later.data_len);

	/* Now cached: the same read is answered inline. */
	used = send_read(&s, 4096, 65536, 3, &token1);
	CHECK_MSG(used == sizeof(rep.h) + 65536 && rep.h.error == 0 &&
	          pattern_ok(rep.arg, 65536, 4096), "the same READ, now cached, is answered inline");

	/* Across EOF: a short reply, still deferred. */
	used = send_cold_read(&s, dir, COLD_SIZE - 4096, 65536, 1, &token1);
	unique = next_unique - 1;
	CHECK_MSG(used == FERRY_DEFERRED && wait_later(replies + 2) &&
	          later.h.unique == unique && later.h.error == 0 && later.data_len == 4096 &&
	          later.h.len == sizeof(later.h) + 4096 &&
	          pattern_ok(later.data, 4096, COLD_SIZE - 4096),
	          "a cold READ across EOF gets the 4096 bytes before it (%u)", later.data_len);
	used = send_read(&s, COLD_SIZE, 4096, 1, &token1);
	CHECK_MSG(used == sizeof(rep.h) && rep.h.error == 0, "a READ at EOF: 0 bytes, inline");

	/* Alone on its queue, or on a transport that cannot defer,
	 * the read waits for the disk where it is. */
	make_cold(dir, "cold");
	used = send_read(&s, 65536, 4096, 0, &token1);
	CHECK_MSG(used == sizeof(rep.h) + 4096 && pattern_ok(rep.arg, 4096, 65536),
	          "a cold READ with nothing behind it is answered inline");
	make_cold(dir, "cold");
	used = send_read(&s, 65536, 4096, 5, NULL);
	CHECK_MSG(used == sizeof(rep.h) + 4096 && pattern_ok(rep.arg, 4096, 65536),
	          "a cold READ that cannot be deferred is answered inline");

	/* The guest may release the handle while its read runs: the job's
	 * handle ref keeps the fd open until the read is done. */
	used = send_cold_read(&s, dir, 8192, 16384, 2, &token1);
	unique = next_unique - 1;
	CHECK_MSG(used == FERRY_DEFERRED, "one more cold READ deferred");
	{
		struct fuse_release_in rel = { .fh = s.fh };

		used = send_req(s.ps.w, FUSE_RELEASE, s.nodeid, &rel, sizeof(rel), NULL, NULL);
		CHECK_MSG(used == sizeof(rep.h) && rep.h.error == 0, "RELEASE of its handle meanwhile");
	}
	CHECK_MSG(wait_later(replies + 3) && later.h.unique == unique && later.h.error == 0 &&
	          later.data_len == 16384 && pattern_ok(later.data, 16384, 8192),
	          "the read still completes with the right data");
	s.fh = 0;
	session_close(&s);
}

/* A READ of 1 MiB, with its own reply buffer (raw_req's holds 64 KiB);
 * returns what the worker returned, the data in big_reply after the header. */
static uint8_t big_reply[sizeof(struct fuse_out_header) + (1u << 20)];

static uint32_t send_read_mib(struct session *s, uint64_t off, unsigned queued_behind,
			      void *token)
{
	struct fuse_read_in rd = { .fh = s->fh, .offset = off, .size = 1u << 20 };
	static uint8_t in[sizeof(struct fuse_in_header) + sizeof(rd)];
	struct fuse_in_header h = { .opcode = FUSE_READ, .nodeid = s->nodeid,
				    .unique = next_unique++ };
	size_t len = raw_req_build(in, sizeof(in), h, &rd, sizeof(rd), NULL, 0, NULL, 0);
	struct iovec riov = { in, len }, wiov = { big_reply, sizeof(big_reply) };

	return fuse_worker_process(s->ps.w, &(struct ferry_req){
		.rd = &riov, .rd_cnt = 1, .wr = &wiov, .wr_cnt = 1, .queued_behind = queued_behind,
		.chan = token ? &test_chan : NULL, .token = token });
}

/* Deferred reads hold buffers of the daemon's own: at most 32 MiB of them
 * at once, whatever the guest sends; past that, reads wait inline. */
static void test_cold_read_budget(const char *dir)
{
	char path[256];
	struct session s;
	unsigned replies = later.count, deferred = 0;
	uint32_t used = 0;
	int token, fd, i, cold;
	bool ok = true;

	/* session_open creates "cold" afresh. */
	snprintf(path, sizeof(path), "%s/cold", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/big", dir);
	if (!session_ready(&s, dir, false, true, ""))
		return;
	/* 34 MiB of pattern, written back to disk. */
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	for (i = 0; fd >= 0 && i < 34 && ok; i++) {
		for (size_t j = 0; j < (1u << 20); j++)
			big_reply[j] = pattern_byte((uint64_t)i * (1u << 20) + j);
		ok = pwrite(fd, big_reply, 1u << 20, (off_t)i << 20) == (ssize_t)(1u << 20);
	}
	if (fd < 0 || !ok || fsync(fd) < 0) {
		CHECK_MSG(0, "34 MiB written to %s", path);
		goto out;
	}
	close(fd);
	fd = -1;
	/* Reopen the session's file as "big" through the guest's view. */
	{
		struct fuse_open_in oi = { .flags = O_RDONLY };
		struct fuse_release_in rel = { .fh = s.fh };
		struct fuse_entry_out e;
		struct fuse_open_out o;

		send_req(s.ps.w, FUSE_RELEASE, s.nodeid, &rel, sizeof(rel), NULL, NULL);
		s.fh = 0;
		send_req(s.ps.w, FUSE_LOOKUP, FUSE_ROOT_ID, NULL, 0, "big", NULL);
		memcpy(&e, rep.arg, sizeof(e));
		send_req(s.ps.w, FUSE_OPEN, e.nodeid, &oi, sizeof(oi), NULL, NULL);
		memcpy(&o, rep.arg, sizeof(o));
		if (rep.h.error) {
			CHECK_MSG(0, "LOOKUP and OPEN of big");
			goto out;
		}
		s.nodeid = e.nodeid;
		s.fh = o.fh;
	}
	cold = make_cold_checked(dir, "big");
	if (cold <= 0) {
		if (cold == 0)
			SKIP_CASE("cold READ budget: %s takes no RWF_NOWAIT (tmpfs?): "
				  "it cannot tell cached data from data on disk", dir);
		goto out;
	}
	/* The budget, not the kernel, is under test here: a READ the disk
	 * answered within RWF_NOWAIT (see send_cold_read) would end the
	 * count early. */
	passthrough_test_switch(s.ps.pt, PT_PRETEND_UNCACHED, true);
	passthrough_test_switch(s.ps.pt, PT_HOLD_OFFLOAD, true);
	for (i = 33; i > 0; i--) {
		used = send_read_mib(&s, (uint64_t)i << 20, 1, &token);
		if (used != FERRY_DEFERRED)
			break;
		deferred++;
	}
	CHECK_MSG(deferred == 32, "32 cold READs of 1 MiB are deferred (%u)", deferred);
	CHECK_MSG(used == sizeof(struct fuse_out_header) + (1u << 20) &&
	          pattern_ok(big_reply + sizeof(struct fuse_out_header), 1u << 20, 1ull << 20),
	          "the 33rd, past 32 MiB of buffers, is read inline (%u bytes)", used);
	passthrough_test_switch(s.ps.pt, PT_HOLD_OFFLOAD, false);
	CHECK_MSG(wait_later(replies + deferred) && later.h.error == 0 && later.data_len <= sizeof(later.data),
	          "the 32 held back are answered once the pool runs");
	used = send_read_mib(&s, 0, 1, &token);
	CHECK_MSG(used == FERRY_DEFERRED && wait_later(replies + deferred + 1) &&
	          later.h.len == sizeof(later.h) + (1u << 20),
	          "their buffers are given back: the next cold READ is deferred again");
	passthrough_test_switch(s.ps.pt, PT_PRETEND_UNCACHED, false);
out:
	if (fd >= 0)
		close(fd);
	session_close(&s);
}

/*
 * A file system that refuses RWF_NOWAIT (tmpfs here, standing in for a
 * FUSE or network mount, whose reads wait for a server) is judged by the
 * time of its reads: once a timed read was slow, reads with requests
 * behind them are deferred; once deferred reads turn quick, they are
 * answered inline again.
 */
static void test_slow_reads_without_nowait(void)
{
	char dir[] = "/dev/shm/ferry-offload-XXXXXX";
	unsigned replies = later.count, sent = 0, deferred = 0;
	struct session s;
	uint32_t used = 0;
	int token;

	if (!mkdtemp(dir)) {
		SKIP_CASE("slow READ without RWF_NOWAIT: no /dev/shm (%s)", strerror(errno));
		return;
	}
	if (session_open(&s, dir, false, true) < 0 || fill_file(dir, "cold") < 0) {
		CHECK_MSG(0, "session on %s", dir);
		rmdir(dir);
		return;
	}
	if (make_cold(dir, "cold") != 0) {
		SKIP_CASE("slow READ without RWF_NOWAIT: tmpfs takes RWF_NOWAIT on this kernel");
		goto out;
	}
	passthrough_test_switch(s.ps.pt, PT_PRETEND_SLOW_READS, true);
	/* The first read learns that RWF_NOWAIT is refused; one of the next
	 * READ_SAMPLE (64) is timed, and slow. */
	while (sent < 70 && used != FERRY_DEFERRED) {
		used = send_read(&s, 4096u * (sent % 16), 4096, 3, &token);
		if (used != FERRY_DEFERRED)
			CHECK_MSG(used == sizeof(rep.h) + 4096 && rep.h.error == 0 &&
				  pattern_ok(rep.arg, 4096, 4096u * (sent % 16)),
				  "READ %u before the slow one: inline, right data", sent);
		sent++;
	}
	CHECK_MSG(used == FERRY_DEFERRED && wait_later(replies + 1),
		  "a timed slow read makes the next READ with requests behind it deferred (after %u)",
		  sent);
	used = send_read(&s, 8192, 4096, 3, &token);
	CHECK_MSG(used == FERRY_DEFERRED && wait_later(replies + 2) && later.h.error == 0 &&
		  later.data_len == 4096 && pattern_ok(later.data, 4096, 8192),
		  "it is answered from an offload thread with the right data (%u)", used);
	used = send_read(&s, 8192, 4096, 0, &token);
	CHECK_MSG(used == sizeof(rep.h) + 4096 && pattern_ok(rep.arg, 4096, 8192),
		  "a READ with nothing behind it stays inline");
	/* A large one is read here with one call (the file is COLD_SIZE). */
	used = send_read_mib(&s, 0, 3, &token);
	CHECK_MSG(used == sizeof(struct fuse_out_header) + COLD_SIZE &&
		  pattern_ok(big_reply + sizeof(struct fuse_out_header), COLD_SIZE, 0),
		  "a READ of 1 MiB with requests behind it stays inline, all %u bytes right (%u)",
		  COLD_SIZE, used);

	/* The data is quick again: each deferred read, timed, takes credit
	 * away until reads are inline again. */
	passthrough_test_switch(s.ps.pt, PT_PRETEND_SLOW_READS, false);
	for (used = FERRY_DEFERRED; used == FERRY_DEFERRED && deferred < 40; deferred++) {
		used = send_read(&s, 12288, 4096, 3, &token);
		if (used == FERRY_DEFERRED)
			CHECK_MSG(wait_later(replies + 3 + deferred) && later.h.error == 0 &&
				  pattern_ok(later.data, 4096, 12288),
				  "quick deferred READ %u: right data", deferred);
	}
	CHECK_MSG(used == sizeof(rep.h) + 4096 && pattern_ok(rep.arg, 4096, 12288) &&
		  deferred > 1 && deferred <= 17,
		  "after %u quick deferred reads, reads are inline again", deferred - 1);
out:
	session_close(&s);
	scratch_finish(dir, 0);
}

/* tmpfs refuses RWF_NOWAIT, or (newer kernels) takes it with all its data
 * in memory, so each READ's try succeeds: either way reads there stay inline
 * and right. */
static void test_read_nowait_unsupported(void)
{
	char dir[] = "/dev/shm/ferry-offload-XXXXXX";
	struct session s;
	uint32_t used;
	int token;
	bool nowait;

	if (!mkdtemp(dir)) {
		SKIP_CASE("READ on tmpfs: no /dev/shm (%s)", strerror(errno));
		return;
	}
	if (session_open(&s, dir, false, true) < 0 || fill_file(dir, "cold") < 0) {
		CHECK_MSG(0, "session on %s", dir);
		rmdir(dir);
		return;
	}
	nowait = make_cold(dir, "cold") != 0;
	for (int i = 0; i < 3; i++) {
		used = send_read(&s, 4096u * (unsigned)i, 4096, 4, &token);
		CHECK_MSG(used == sizeof(rep.h) + 4096 && rep.h.error == 0 &&
		          pattern_ok(rep.arg, 4096, 4096u * (unsigned)i),
		          "READ %d on tmpfs (%s RWF_NOWAIT): inline, right data", i,
		          nowait ? "takes" : "refuses");
	}
	session_close(&s);
	scratch_finish(dir, 0);
}

/* ---- the pool itself ---- */

#define POOL_JOBS 200

static atomic_uint pool_ran, pool_running, pool_most;

struct counted_job {
	struct offload_job job;
};

static void counted_run(struct offload_job *j)
{
	unsigned now = atomic_fetch_add(&pool_running, 1) + 1, most = atomic_load(&pool_most);

	while (now > most && !atomic_compare_exchange_weak(&pool_most, &most, now))
		;
	usleep(2000);
	atomic_fetch_sub(&pool_running, 1);
	atomic_fetch_add(&pool_ran, 1);
	free(j);
}

static void test_pool(void)
{
	struct offload *o;
	int submitted = 0;

	if (offload_new(&o) < 0) {
		CHECK_MSG(0, "offload_new");
		return;
	}
	for (int i = 0; i < POOL_JOBS; i++) {
		struct counted_job *j = calloc(1, sizeof(*j));

		if (!j)
			break;
		j->job.run = counted_run;
		if (offload_submit(o, &j->job) == 0)
			submitted++;
		else
			free(j);
	}
	CHECK_MSG(submitted == POOL_JOBS, "%d of %d jobs submitted", submitted, POOL_JOBS);
	CHECK_MSG(offload_threads(o) <= 64, "at most 64 threads (%u)", offload_threads(o));
	offload_free(o);
	CHECK_MSG(atomic_load(&pool_ran) == POOL_JOBS, "offload_free ran every queued job (%u)",
	          atomic_load(&pool_ran));
	CHECK_MSG(atomic_load(&pool_most) > 1 && atomic_load(&pool_most) <= 64,
	          "jobs that wait ran side by side, at most 64 at once (%u)", atomic_load(&pool_most));
}

int main(void)
{
	ferry_log_init(LOG_LVL_WARN, false);
	if (scratch_start(scratch) != 0)
		return 1;
	test_pool();
	test_slow_sync_deferred();
	test_quick_sync_inline();
	test_lock_waits_leave_pool_free();
	test_cold_read_deferred(scratch);
	test_cold_read_budget(scratch);
	test_slow_reads_without_nowait();
	test_read_nowait_unsupported();
	return scratch_finish(scratch, check_result());
}
