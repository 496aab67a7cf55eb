/* FSYNC on a slow file system is answered from the offload pool: the requests behind it on the queue are not held up. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "../common/raw_req.h"
#include "../common/scratch.h"
#include "backend/offload.h"
#include "backend/passthrough.h"
#include "common/log.h"
#include "protocol/fuse_server.h"

static int failures;

#define CHECK(cond, ...) do { \
	if (cond) { printf("ok    "); } else { printf("FAIL  "); failures++; } \
	printf(__VA_ARGS__); printf("\n"); } while (0)

static char scratch[] = "/tmp/ferry-sync-XXXXXX";
static struct raw_reply rep;
static uint64_t next_unique = 1;

/* What reply_later got, for the test thread to wait on. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned count;
	void *token;
	struct fuse_out_header h;
	uint32_t len;
} later = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, NULL, { 0 }, 0 };

static void on_reply_later(void *token, const void *reply, uint32_t len,
			   void *data, uint32_t data_len)
{
	(void)data_len;
	free(data);
	pthread_mutex_lock(&later.lock);
	later.count++;
	later.token = token;
	later.len = len;
	memset(&later.h, 0, sizeof(later.h));
	memcpy(&later.h, reply, len < sizeof(later.h) ? len : sizeof(later.h));
	pthread_cond_broadcast(&later.cond);
	pthread_mutex_unlock(&later.lock);
}

/* Waits up to 30 s for the count-th later reply; false if it never came. */
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

	return raw_req_run(w, in, len, sizeof(rep.h) + sizeof(rep.arg), token, &rep);
}

struct session {
	struct passthrough *pt;
	struct fuse_session *se;
	struct fuse_worker *w;
	uint64_t nodeid, fh;
};

static int session_open(struct session *s, bool defer_every_sync)
{
	struct passthrough_opts pt_opts = { .shared_dir = scratch, .cache = CACHE_NEVER,
					    .timeout = -1, .defer_every_sync = defer_every_sync };
	struct fuse_session_opts se_opts = { .max_write = 128 * 1024,
					     .reply_later = on_reply_later };
	struct fuse_init_in init = { .major = FUSE_KERNEL_VERSION,
				     .minor = FUSE_KERNEL_MINOR_VERSION,
				     .max_readahead = 65536, .flags = FUSE_INIT_EXT };
	struct fuse_create_in ci = { .flags = O_RDWR, .mode = 0600 };
	struct fuse_entry_out e;
	struct fuse_open_out o;

	memset(s, 0, sizeof(*s));
	if (passthrough_new(&s->pt, &pt_opts) < 0 ||
	    fuse_session_new(&s->se, &se_opts, &passthrough_ops, s->pt) < 0 ||
	    fuse_worker_new(s->se, &s->w) < 0)
		return -1;
	send_req(s->w, FUSE_INIT, 0, &init, sizeof(init), NULL, NULL);
	if (rep.h.error)
		return -1;
	send_req(s->w, FUSE_CREATE, FUSE_ROOT_ID, &ci, sizeof(ci),
		 defer_every_sync ? "slow" : "quick", NULL);
	if (rep.h.error || rep.used != sizeof(rep.h) + sizeof(e) + sizeof(o))
		return -1;
	memcpy(&e, rep.arg, sizeof(e));
	memcpy(&o, rep.arg + sizeof(e), sizeof(o));
	s->nodeid = e.nodeid;
	s->fh = o.fh;
	return 0;
}

static void session_close(struct session *s)
{
	struct fuse_release_in rel = { .fh = s->fh };

	if (s->fh)
		send_req(s->w, FUSE_RELEASE, s->nodeid, &rel, sizeof(rel), NULL, NULL);
	fuse_worker_free(s->w);
	fuse_session_free(s->se);
	passthrough_free(s->pt);
}

static void test_slow_sync_answered_later(void)
{
	struct session s;
	struct fuse_fsync_in fs = { 0 };
	struct fuse_getattr_in ga = { 0 };
	int token1, token2;
	uint64_t unique;
	uint32_t used;

	if (session_open(&s, true) < 0) {
		CHECK(0, "session on %s with every sync deferred", scratch);
		return;
	}
	fs.fh = s.fh;
	unique = next_unique;
	used = send_req(s.w, FUSE_FSYNC, s.nodeid, &fs, sizeof(fs), NULL, &token1);
	CHECK(used == FUSE_REPLY_DEFERRED, "FSYNC on a slow file system is taken for later (%u)", used);
	/* The worker (a queue thread) is free at once for what comes next. */
	used = send_req(s.w, FUSE_GETATTR, s.nodeid, &ga, sizeof(ga), NULL, &token2);
	CHECK(used == sizeof(rep.h) + sizeof(struct fuse_attr_out) && rep.h.error == 0,
	      "GETATTR behind it is answered on the spot");
	CHECK(wait_later(1), "the FSYNC reply comes");
	CHECK(later.token == &token1 && later.h.unique == unique && later.h.error == 0 &&
	      later.len == sizeof(struct fuse_out_header),
	      "it answers the FSYNC's unique with success and a bare header");

	fs.fsync_flags = FUSE_FSYNC_FDATASYNC;
	used = send_req(s.w, FUSE_FSYNCDIR, FUSE_ROOT_ID, &fs, sizeof(fs), NULL, &token1);
	CHECK(used == sizeof(rep.h) && rep.h.error == -EBADF,
	      "FSYNCDIR with a file's fh on another node: EBADF at once (%d)", rep.h.error);
	unique = next_unique;
	used = send_req(s.w, FUSE_FSYNC, s.nodeid, &fs, sizeof(fs), NULL, &token1);
	CHECK(used == FUSE_REPLY_DEFERRED && wait_later(2) && later.h.unique == unique &&
	      later.h.error == 0, "fdatasync the same way");
	fs.fh = s.fh + 1000;
	used = send_req(s.w, FUSE_FSYNC, s.nodeid, &fs, sizeof(fs), NULL, &token1);
	CHECK(used == sizeof(rep.h) && rep.h.error == -EBADF, "an unknown fh: EBADF at once");

	/* Without a token the request cannot wait: it is synced on the spot. */
	fs.fh = s.fh;
	used = send_req(s.w, FUSE_FSYNC, s.nodeid, &fs, sizeof(fs), NULL, NULL);
	CHECK(used == sizeof(rep.h) && rep.h.error == 0,
	      "a transport that cannot answer later gets it synced inline");

	/* The guest may release the handle while its sync runs: the
	 * job's handle ref keeps the fd open until the sync is done. (The
	 * transport waits for every deferred reply before the session goes,
	 * as vhost-user's queue stop does; passthrough_free waits for the
	 * offload threads' last steps.) */
	fs.fsync_flags = 0;
	unique = next_unique;
	used = send_req(s.w, FUSE_FSYNC, s.nodeid, &fs, sizeof(fs), NULL, &token1);
	CHECK(used == FUSE_REPLY_DEFERRED, "one more FSYNC taken for later");
	{
		struct fuse_release_in rel = { .fh = s.fh };

		used = send_req(s.w, FUSE_RELEASE, s.nodeid, &rel, sizeof(rel), NULL, NULL);
		CHECK(used == sizeof(rep.h) && rep.h.error == 0, "RELEASE of its handle meanwhile");
	}
	CHECK(wait_later(3) && later.h.unique == unique && later.h.error == 0,
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

	if (session_open(&s, false) < 0) {
		CHECK(0, "session on %s", scratch);
		return;
	}
	fs.fh = s.fh;
	/* Until a sync on this file system has taken long, it runs inline. */
	used = send_req(s.w, FUSE_FSYNC, s.nodeid, &fs, sizeof(fs), NULL, &token);
	CHECK(used == sizeof(rep.h) && rep.h.error == 0,
	      "the first FSYNC on a file system is answered inline");
	session_close(&s);
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
		CHECK(0, "offload_new");
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
	CHECK(submitted == POOL_JOBS, "%d of %d jobs submitted", submitted, POOL_JOBS);
	CHECK(offload_threads(o) <= 64, "at most 64 threads (%u)", offload_threads(o));
	offload_free(o);
	CHECK(atomic_load(&pool_ran) == POOL_JOBS, "offload_free ran every queued job (%u)",
	      atomic_load(&pool_ran));
	CHECK(atomic_load(&pool_most) > 1 && atomic_load(&pool_most) <= 64,
	      "jobs that wait ran side by side, at most 64 at once (%u)", atomic_load(&pool_most));
}

int main(void)
{
	ferry_log_init(LOG_LVL_WARN, false);
	if (!mkdtemp(scratch)) {
		perror("mkdtemp");
		return 1;
	}
	test_pool();
	test_slow_sync_answered_later();
	test_quick_sync_inline();
	return scratch_finish(scratch, failures);
}
