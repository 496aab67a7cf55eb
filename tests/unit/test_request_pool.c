/* The request pool (src/daemon/request_pool.c): requests of one queue on storage that is slow really run at once, each answered through its channel; quick ones and those that must stay in order run on the queue's thread. */
#include <errno.h>
#include <linux/fuse.h>
#include <linux/magic.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/check.h"
#include "common/ferry_req.h"
#include "daemon/pool_policy.h"
#include "daemon/request_pool.h"
#include "protocol/fuse_ops.h"
#include "protocol/fuse_server.h"

/* Requests of one queue that must be in flight at once. */
#define N_AT_ONCE 8
/* How long a blocked GETATTR waits for the others before it gives up: only
 * a failing test ever waits this long; nothing is timed. */
#define GIVE_UP_S 10

static struct {
	pthread_mutex_t lock;
	pthread_cond_t changed;
	enum { GA_QUICK, GA_SLOW, GA_WAIT_FOR_ALL } mode;
	unsigned in_flight, max_in_flight, gave_up;
	unsigned replies, reply_errors;
	void *tokens_seen[N_AT_ONCE];
} t = { .lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER };

static int t_getattr(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		     const struct fuse_getattr_in *in, struct fuse_attr_out *out)
{
	struct timespec until;

	(void)fs, (void)ctx, (void)in;
	out->attr.ino = nodeid;
	out->attr.mode = 040755;
	if (t.mode == GA_QUICK)
		return 0;
	if (t.mode == GA_SLOW) {
		/* Slower than the pool's threshold, however fast the machine. */
		nanosleep(&(struct timespec){ .tv_nsec = 1000 * 1000 }, NULL);
		return 0;
	}
	/* Each waits until all N_AT_ONCE are in here together: only possible
	 * if the queue's requests really run at once. */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += GIVE_UP_S;
	pthread_mutex_lock(&t.lock);
	t.in_flight++;
	if (t.in_flight > t.max_in_flight)
		t.max_in_flight = t.in_flight;
	pthread_cond_broadcast(&t.changed);
	while (t.max_in_flight < N_AT_ONCE) {
		if (pthread_cond_timedwait(&t.changed, &t.lock, &until) == ETIMEDOUT) {
			t.gave_up++;
			break;
		}
	}
	t.in_flight--;
	pthread_mutex_unlock(&t.lock);
	return 0;
}

static const struct fs_ops t_ops = { .getattr = t_getattr };

static void t_complete(struct ferry_chan *chan, void *token, const void *reply, uint32_t len,
		       void *data, uint32_t data_len)
{
	struct fuse_out_header out;

	(void)chan;
	memcpy(&out, reply, sizeof(out));
	pthread_mutex_lock(&t.lock);
	if (len != sizeof(out) || out.error != 0 || data_len != sizeof(struct fuse_attr_out) ||
	    out.len != len + data_len)
		t.reply_errors++;
	if (t.replies < N_AT_ONCE)
		t.tokens_seen[t.replies] = token;
	t.replies++;
	pthread_cond_broadcast(&t.changed);
	pthread_mutex_unlock(&t.lock);
	free(data);
}

static struct ferry_chan chan = { .complete = t_complete };

/* One request of opcode with arg, its reply into reply; served by q. */
static uint32_t send_req(struct request_pool_queue *q, uint32_t opcode, uint64_t unique,
			 const void *arg, size_t arg_len, void *reply, size_t reply_len,
			 unsigned behind, struct ferry_chan *ch, void *token)
{
	unsigned char buf[256];
	struct fuse_in_header h = { .len = (uint32_t)(sizeof(h) + arg_len), .opcode = opcode,
				    .unique = unique, .nodeid = 1 };
	struct iovec rd = { buf, sizeof(h) + arg_len }, wr = { reply, reply_len };

	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), arg, arg_len);
	return request_pool_serve(q, &(struct ferry_req){ .rd = &rd, .rd_cnt = 1, .wr = &wr,
							  .wr_cnt = 1, .queued_behind = behind,
							  .chan = ch, .token = token });
}

static void test_policy(void)
{
	CHECK(pool_policy_storage_remote(0x65735546ul));   /* FUSE */
	CHECK(pool_policy_storage_remote(NFS_SUPER_MAGIC));
	CHECK(!pool_policy_storage_remote(TMPFS_MAGIC));
	CHECK(!pool_policy_storage_remote(EXT4_SUPER_MAGIC));
	CHECK(!pool_policy_storage_remote(0));
	CHECK(pool_policy_opcode_pooled(FUSE_LOOKUP) && pool_policy_opcode_pooled(FUSE_GETATTR));
	/* READ and WRITE have their own ways (pool_policy.h). */
	CHECK(!pool_policy_opcode_pooled(FUSE_READ) && !pool_policy_opcode_pooled(FUSE_WRITE));
	CHECK(!pool_policy_opcode_pooled(FUSE_FORGET) && !pool_policy_opcode_pooled(FUSE_INIT) &&
	      !pool_policy_opcode_pooled(FUSE_SETLKW) && !pool_policy_opcode_pooled(FUSE_INTERRUPT));
	/* Alone on an idle queue, even a slow request stays. */
	CHECK(!pool_policy_wants(UINT32_MAX, 0, 0));
	CHECK(pool_policy_wants(POOL_SLOW_NS, 1, 0) && pool_policy_wants(POOL_SLOW_NS, 0, 1));
	CHECK(!pool_policy_wants(POOL_SLOW_NS - 1, 5, 5));
}

/* n candidates step_ns apart from *now on: how many went to the pool. */
static unsigned trial_feed(struct pool_trial *tr, uint64_t *now, unsigned n, uint64_t step_ns)
{
	unsigned pooled = 0;

	for (unsigned i = 0; i < n; i++, *now += step_ns)
		pooled += pool_trial_next(tr, *now);
	return pooled;
}

/* Candidates step_ns apart until the trial's phase changes: how many
 * there were, the one that changed it included; *pooled how many of them
 * went to the pool. */
static unsigned trial_phase(struct pool_trial *tr, uint64_t *now, uint64_t step_ns,
			    unsigned *pooled)
{
	enum pool_trial_phase phase = tr->phase;
	unsigned n = 0;

	*pooled = 0;
	while (tr->phase == phase && n < 10000000) {
		*now += step_ns;
		*pooled += pool_trial_next(tr, *now);
		n++;
	}
	return n;
}

/* How many candidates step_ns apart a phase after the first lasts: at
 * least count of them and min_ns. */
static unsigned phase_len(unsigned count, uint64_t min_ns, uint64_t step_ns)
{
	uint64_t by_time = (min_ns + step_ns - 1) / step_ns;

	return by_time > count ? (unsigned)by_time : count;
}

/* The trial on a clock of its own: what it keeps follows from the times. */
static void test_trial(void)
{
	struct pool_trial tr = { 0 };
	uint64_t now = 1000000;
	unsigned n, pooled;

	/* The inline probe (one candidate every 1 ms: its count is the
	 * longer), then the pooled one (every 100 us: its time is): the
	 * pool, quicker, is kept, for at least its count and time. */
	n = trial_phase(&tr, &now, 1000000, &pooled);
	CHECK_MSG(n == POOL_TRIAL_PROBE + 1 && pooled == 1,
		  "the inline probe: %u candidates on the queue thread", n - 1);
	n = trial_phase(&tr, &now, 100000, &pooled);
	CHECK_MSG(n == phase_len(POOL_TRIAL_PROBE, POOL_TRIAL_PROBE_MIN_NS, 100000) && pooled == n,
		  "the pooled probe: %u candidates, %u on the pool", n, pooled);
	CHECK_MSG(tr.phase == POOL_TRIAL_KEPT && tr.pooled, "the pool, quicker, is kept");
	n = trial_phase(&tr, &now, 100000, &pooled);
	CHECK_MSG(n == phase_len(POOL_TRIAL_SETTLED, POOL_TRIAL_SETTLED_MIN_NS, 100000) &&
		  pooled == n - 1, "for %u candidates (%u on the pool)", n, pooled);
	/* Then both are tried again; this time the pool is slower. */
	n = trial_phase(&tr, &now, 1000000, &pooled);
	CHECK_MSG(n == POOL_TRIAL_PROBE && pooled == 1, "the inline probe again (%u, %u)", n, pooled);
	n = trial_phase(&tr, &now, 1200000, &pooled);
	CHECK_MSG(pooled == n - 1 && tr.phase == POOL_TRIAL_KEPT && !tr.pooled,
		  "a pool slower than the queue thread is not kept");
	n = trial_phase(&tr, &now, 1000000, &pooled);
	CHECK_MSG(n == POOL_TRIAL_SETTLED && pooled == 0, "the queue thread is kept for %u", n);
	/* A gain within POOL_TRIAL_KEEP_PERCENT is no gain. */
	trial_phase(&tr, &now, 1000000, &pooled);
	trial_phase(&tr, &now, 1000000 * (POOL_TRIAL_KEEP_PERCENT + 5) / 100, &pooled);
	CHECK_MSG(tr.phase == POOL_TRIAL_KEPT && !tr.pooled,
		  "a pool only a little quicker is not kept");
	/* A pause of the guest inside an inline probe does not count
	 * against it: the probe starts over. */
	trial_phase(&tr, &now, 1000000, &pooled);
	CHECK(tr.phase == POOL_TRIAL_INLINE);
	trial_feed(&tr, &now, POOL_TRIAL_PROBE / 2, 10000);
	now += POOL_TRIAL_GAP_NS + 1;
	trial_feed(&tr, &now, POOL_TRIAL_PROBE, 10000);
	CHECK_MSG(tr.phase == POOL_TRIAL_INLINE && tr.count == POOL_TRIAL_PROBE,
		  "a pause starts the probe over");
}

static void test_overlap(void)
{
	struct fuse_server_opts opts = { 0 };
	struct fuse_init_in init = { .major = 7, .minor = 38 };
	struct fuse_getattr_in ga = { 0 };
	unsigned char reply[256];
	struct fuse_server *se;
	struct request_pool *pool;
	struct request_pool_queue *q;
	void *tokens[N_AT_ONCE];
	struct timespec until;
	uint32_t len;

	CHECK(fuse_server_new(&se, &opts, &t_ops, NULL) == 0);
	CHECK(request_pool_new(&pool, se, 1u << 20) == 0);
	CHECK(request_pool_queue_new(pool, &q) == 0);
	CHECK(send_req(q, FUSE_INIT, 1, &init, sizeof(init), reply, sizeof(reply), 0, NULL, NULL) >
	      sizeof(struct fuse_out_header));

	/* Quick requests stay on the queue thread, even with others behind. */
	t.mode = GA_QUICK;
	for (unsigned i = 0; i < 4; i++) {
		len = send_req(q, FUSE_GETATTR, 2, &ga, sizeof(ga), reply, sizeof(reply), 3, &chan,
			       &tokens[0]);
		CHECK_EQ(len, sizeof(struct fuse_out_header) + sizeof(struct fuse_attr_out));
	}
	/* Slow GETATTRs, alone: answered here, and after a few GETATTR is
	 * known to be slow on this queue; one slow one among quick ones is
	 * not enough. */
	t.mode = GA_SLOW;
	len = send_req(q, FUSE_GETATTR, 3, &ga, sizeof(ga), reply, sizeof(reply), 0, &chan, &tokens[0]);
	CHECK_EQ(len, sizeof(struct fuse_out_header) + sizeof(struct fuse_attr_out));
	t.mode = GA_QUICK;
	len = send_req(q, FUSE_GETATTR, 4, &ga, sizeof(ga), reply, sizeof(reply), 3, &chan, &tokens[0]);
	CHECK_MSG(len != FERRY_DEFERRED, "one slow GETATTR among quick ones leaves GETATTR here");
	t.mode = GA_SLOW;
	for (unsigned i = 0; i < 16; i++)
		len = send_req(q, FUSE_GETATTR, 5, &ga, sizeof(ga), reply, sizeof(reply), 0, &chan,
			       &tokens[0]);

	/* The trial first serves its probe of candidates (slow, with one
	 * behind) here, then the next ones on the pool. (A pause of this
	 * thread longer than POOL_TRIAL_GAP_NS starts the probe over, so it
	 * may take more than one probe's worth.) */
	for (unsigned i = 0; i < 4 * POOL_TRIAL_PROBE; i++) {
		len = send_req(q, FUSE_GETATTR, 6, &ga, sizeof(ga), reply, sizeof(reply), 1, &chan,
			       &tokens[0]);
		if (len == FERRY_DEFERRED) {
			CHECK_MSG(i >= POOL_TRIAL_PROBE, "the trial's first %u slow requests stay on "
				  "the queue thread (%u did)", POOL_TRIAL_PROBE, i);
			break;
		}
	}
	CHECK_MSG(len == FERRY_DEFERRED, "then the trial sends them to the pool");
	/* That one's reply, before the blocking ones start. */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += GIVE_UP_S;
	pthread_mutex_lock(&t.lock);
	while (t.replies < 1 && pthread_cond_timedwait(&t.changed, &t.lock, &until) != ETIMEDOUT)
		;
	t.replies = 0;
	pthread_mutex_unlock(&t.lock);

	/* N_AT_ONCE queued one behind the other: each goes to the pool, and
	 * each one's op only returns once all are running together. */
	t.mode = GA_WAIT_FOR_ALL;
	for (unsigned i = 0; i < N_AT_ONCE; i++) {
		len = send_req(q, FUSE_GETATTR, 10 + i, &ga, sizeof(ga), reply, sizeof(reply),
			       N_AT_ONCE - 1 - i, &chan, &tokens[i]);
		CHECK_MSG(len == FERRY_DEFERRED, "GETATTR %u of %u queued goes to the pool", i + 1,
			  N_AT_ONCE);
	}
	/* A FORGET is never pooled: it is served here, without a reply. */
	{
		struct fuse_forget_in fi = { .nlookup = 0 };

		CHECK_EQ(send_req(q, FUSE_FORGET, 99, &fi, sizeof(fi), reply, sizeof(reply), 5,
				  &chan, &tokens[0]), 0u);
	}
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += GIVE_UP_S + 5;
	pthread_mutex_lock(&t.lock);
	while (t.replies < N_AT_ONCE)
		if (pthread_cond_timedwait(&t.changed, &t.lock, &until) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&t.lock);
	CHECK_MSG(t.max_in_flight == N_AT_ONCE, "%u requests of one queue in flight at once (want %u)",
		  t.max_in_flight, N_AT_ONCE);
	CHECK_MSG(t.replies == N_AT_ONCE && t.reply_errors == 0 && t.gave_up == 0,
		  "each answered once through its channel with its attributes (%u replies, %u bad, %u gave up)",
		  t.replies, t.reply_errors, t.gave_up);
	for (unsigned i = 0; i < N_AT_ONCE && i < t.replies; i++) {
		bool known = false;

		for (unsigned j = 0; j < N_AT_ONCE; j++)
			known |= t.tokens_seen[i] == &tokens[j];
		CHECK(known);
	}
	CHECK_EQ(request_pool_served(pool), (uint64_t)N_AT_ONCE + 1);
	request_pool_queue_free(q);
	request_pool_free(pool);
	fuse_server_free(se);
}

int main(void)
{
	test_policy();
	test_trial();
	test_overlap();
	return check_result();
}
