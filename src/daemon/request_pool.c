/* The request pool: a queue's requests served on threads of a pool, up to as many at once as the guest queued, each answered when its host call returns (request_pool.h says how, pool_policy.h when). */
#include "daemon/request_pool.h"

#include <errno.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "backend/offload.h"
#include "common/clock.h"
#include "common/iov.h"
#include "common/log.h"
#include "daemon/pool_policy.h"

/* A FUSE worker of the pool's; one per job running at once. */
struct pool_member {
	struct fuse_worker *w;
	struct pool_member *next_spare;
	struct pool_member *next_all;
};

struct request_pool {
	struct fuse_server *se;
	struct offload *exec;            /* the executor's pool of threads */
	pthread_mutex_t lock;            /* spares, members */
	struct pool_member *spares;      /* workers no job uses now */
	struct pool_member *all;         /* every member, for the end */
	size_t job_bytes_max;            /* one request's copy or reply */
	atomic_size_t bytes;             /* of jobs not yet answered */
	atomic_uint_fast64_t served;
};

struct request_pool_queue {
	struct request_pool *pool;
	struct fuse_worker *w;           /* what runs on the queue thread */
	atomic_uint outstanding;         /* pooled requests not yet answered */
	struct pool_trial trial;         /* whether the pool pays here */
	unsigned served_here;            /* requests of pooled opcodes run here */
	/* Per opcode: how long its requests took lately; written by the
	 * queue thread and the pool's, an estimate that may lose an update. */
	_Atomic uint32_t estimate_ns[POOL_OPCODES];
};

struct pool_job {
	struct offload_job job;          /* first: run() gets it */
	struct request_pool_queue *q;
	struct ferry_chan *chan;         /* the request's way back */
	void *token;
	uint32_t opcode;
	size_t bytes;                    /* counted in pool->bytes */
	struct iovec rd, wr[2];
	struct ferry_req req;            /* the copy, as a transport's request */
	struct fuse_out_header out;      /* the reply's header... */
	void *reply;                     /* ...and the rest: goes with it */
	unsigned char copy[];            /* the request as the guest sent it */
};

int request_pool_new(struct request_pool **out, struct fuse_server *se, size_t max_write)
{
	struct request_pool *p = calloc(1, sizeof(*p));
	int ret;

	if (!p)
		return -ENOMEM;
	ret = offload_new(&p->exec);
	if (ret < 0) {
		free(p);
		return ret;
	}
	pthread_mutex_init(&p->lock, NULL);
	p->se = se;
	/* The largest argument a pooled request carries (a SETXATTR's value,
	 * names) or reply it gets (a GETXATTR's value, a LISTXATTR's list),
	 * and room for any header beside it. */
	p->job_bytes_max = max_write + (256u << 10);
	atomic_init(&p->bytes, 0);
	atomic_init(&p->served, 0);
	*out = p;
	return 0;
}

void request_pool_free(struct request_pool *p)
{
	struct pool_member *m, *next;

	if (!p)
		return;
	/* Every job's run() has returned once the executor is gone. */
	offload_free(p->exec);
	for (m = p->all; m; m = next) {
		next = m->next_all;
		fuse_worker_free(m->w);
		free(m);
	}
	pthread_mutex_destroy(&p->lock);
	free(p);
}

uint64_t request_pool_served(struct request_pool *p)
{
	return atomic_load_explicit(&p->served, memory_order_relaxed);
}

int request_pool_queue_new(struct request_pool *p, struct request_pool_queue **out)
{
	struct request_pool_queue *q = calloc(1, sizeof(*q));
	int ret;

	if (!q)
		return -ENOMEM;
	ret = fuse_worker_new(p->se, &q->w);
	if (ret < 0) {
		free(q);
		return ret;
	}
	q->pool = p;
	atomic_init(&q->outstanding, 0);
	for (unsigned i = 0; i < POOL_OPCODES; i++)
		atomic_init(&q->estimate_ns[i], POOL_ESTIMATE_START_NS);
	*out = q;
	return 0;
}

void request_pool_queue_free(struct request_pool_queue *q)
{
	if (!q)
		return;
	fuse_worker_free(q->w);
	free(q);
}

struct fuse_worker *request_pool_queue_fuse(struct request_pool_queue *q)
{
	return q->w;
}

static void estimate_add(struct request_pool_queue *q, uint32_t opcode, uint64_t ns)
{
	_Atomic uint32_t *e = &q->estimate_ns[opcode];

	atomic_store_explicit(e, pool_policy_estimate(atomic_load_explicit(e, memory_order_relaxed), ns),
			      memory_order_relaxed);
}

/* A spare FUSE worker of the pool, or a new one; NULL without memory. */
static struct pool_member *member_take(struct request_pool *p)
{
	struct pool_member *m;

	pthread_mutex_lock(&p->lock);
	m = p->spares;
	if (m)
		p->spares = m->next_spare;
	pthread_mutex_unlock(&p->lock);
	if (m)
		return m;
	m = calloc(1, sizeof(*m));
	if (!m || fuse_worker_new(p->se, &m->w) < 0) {
		free(m);
		return NULL;
	}
	pthread_mutex_lock(&p->lock);
	m->next_all = p->all;
	p->all = m;
	pthread_mutex_unlock(&p->lock);
	return m;
}

static void member_give(struct request_pool *p, struct pool_member *m)
{
	pthread_mutex_lock(&p->lock);
	m->next_spare = p->spares;
	p->spares = m;
	pthread_mutex_unlock(&p->lock);
}

/* The reply of a request that could not be served: header only. */
static uint32_t reply_error(struct pool_job *job, int err)
{
	const struct fuse_in_header *in = (const struct fuse_in_header *)job->copy;

	job->out.unique = in->unique;
	job->out.error = err;
	job->out.len = sizeof(job->out);
	return sizeof(job->out);
}

/* On a pool thread: serves the copy, updates the estimate, answers. */
static void job_run(struct offload_job *oj)
{
	struct pool_job *job = (struct pool_job *)oj;
	struct request_pool_queue *q = job->q;
	struct request_pool *p = q->pool;
	struct pool_member *m = member_take(p);
	uint64_t start = ferry_monotonic_ns();
	uint32_t len;

	len = m ? fuse_worker_process(m->w, &job->req) : reply_error(job, -ENOMEM);
	if (m)
		member_give(p, m);
	/* Without a channel nothing defers; this only guards the rule. */
	if (len == FERRY_DEFERRED) {
		log_err("request pool: opcode %u deferred on a pool thread", job->opcode);
		len = reply_error(job, -EIO);
	}
	estimate_add(q, job->opcode, ferry_monotonic_ns() - start);
	atomic_fetch_add_explicit(&p->served, 1, memory_order_relaxed);
	atomic_fetch_sub_explicit(&p->bytes, job->bytes, memory_order_relaxed);
	/* Last use of q: once complete() is called the queue may stop. */
	atomic_fetch_sub_explicit(&q->outstanding, 1, memory_order_release);
	if (len > sizeof(job->out)) {
		job->chan->complete(job->chan, job->token, &job->out, sizeof(job->out),
				    job->reply, len - (uint32_t)sizeof(job->out));
	} else {
		free(job->reply);
		job->chan->complete(job->chan, job->token, &job->out,
				    len < sizeof(job->out) ? 0 : len, NULL, 0);
	}
	free(job);
}

/* Hands req to the pool: FERRY_DEFERRED, or -errno when it stays here
 * (too large, the byte budget spent, no memory, no thread). */
static int pool_submit(struct request_pool_queue *q, const struct ferry_req *req, uint32_t opcode)
{
	struct request_pool *p = q->pool;
	size_t rd_len = iov_length(req->rd, req->rd_cnt);
	size_t wr_len = iov_length(req->wr, req->wr_cnt);
	size_t bytes = rd_len + wr_len;
	struct pool_job *job;
	int ret = -E2BIG;

	if (wr_len < sizeof(struct fuse_out_header) || rd_len > p->job_bytes_max ||
	    wr_len > p->job_bytes_max)
		return ret;
	ret = -ENOBUFS;
	if (atomic_fetch_add_explicit(&p->bytes, bytes, memory_order_relaxed) + bytes > POOL_BYTES_MAX)
		goto err_budget;
	ret = -ENOMEM;
	job = calloc(1, sizeof(*job) + rd_len);
	if (!job)
		goto err_budget;
	if (wr_len > sizeof(job->out)) {
		job->reply = malloc(wr_len - sizeof(job->out));
		if (!job->reply)
			goto err;
	}
	iov_copy_from(job->copy, req->rd, req->rd_cnt, 0, rd_len);
	job->job.run = job_run;
	job->q = q;
	job->chan = req->chan;
	job->token = req->token;
	job->opcode = opcode;
	job->bytes = bytes;
	job->rd = (struct iovec){ .iov_base = job->copy, .iov_len = rd_len };
	job->wr[0] = (struct iovec){ .iov_base = &job->out, .iov_len = sizeof(job->out) };
	job->wr[1] = (struct iovec){ .iov_base = job->reply, .iov_len = wr_len - sizeof(job->out) };
	/* No channel: on the pool thread the request is served to its end. */
	job->req = (struct ferry_req){
		.rd = &job->rd, .rd_cnt = 1,
		.wr = job->wr, .wr_cnt = job->reply ? 2 : 1,
	};
	atomic_fetch_add_explicit(&q->outstanding, 1, memory_order_relaxed);
	ret = offload_submit(p->exec, &job->job);
	if (ret == 0)
		return FERRY_DEFERRED;
	atomic_fetch_sub_explicit(&q->outstanding, 1, memory_order_relaxed);
err:
	free(job->reply);
	free(job);
err_budget:
	atomic_fetch_sub_explicit(&p->bytes, bytes, memory_order_relaxed);
	return ret;
}

/* The opcode of req if the pool may serve it (a pooled opcode with a
 * channel for its reply), else UINT32_MAX. */
static uint32_t pooled_opcode(const struct ferry_req *req)
{
	struct fuse_in_header h;

	if (!req->chan)
		return UINT32_MAX;
	if (iov_copy_from(&h, req->rd, req->rd_cnt, 0, sizeof(h)) < sizeof(h) ||
	    h.opcode >= POOL_OPCODES || !pool_policy_opcode_pooled(h.opcode))
		return UINT32_MAX;
	return h.opcode;
}

/* FERRY_DEFERRED when req went to the pool, else 0 (serve it here); 1
 * when it is a candidate the trial has served here (pool_policy.h). */
static int pool_try(struct request_pool_queue *q, const struct ferry_req *req, uint32_t opcode)
{
	uint32_t estimate;

	if (opcode == UINT32_MAX)
		return 0;
	estimate = atomic_load_explicit(&q->estimate_ns[opcode], memory_order_relaxed);
	if (!pool_policy_wants(estimate, req->queued_behind,
			       atomic_load_explicit(&q->outstanding, memory_order_relaxed)))
		return 0;
	if (!pool_trial_next(&q->trial, ferry_monotonic_ns()))
		return 1;
	return pool_submit(q, req, opcode) == FERRY_DEFERRED ? FERRY_DEFERRED : 0;
}

uint32_t request_pool_serve(struct request_pool_queue *q, const struct ferry_req *req)
{
	uint32_t opcode = pooled_opcode(req), len;
	uint64_t start, end;
	int tried;

	if (opcode == UINT32_MAX)
		return fuse_worker_process(q->w, req);
	tried = pool_try(q, req, opcode);
	if (tried == FERRY_DEFERRED)
		return FERRY_DEFERRED;
	/* A quick opcode's estimate only needs a sample now and then. */
	if (tried == 0 && !pool_policy_sample(atomic_load_explicit(&q->estimate_ns[opcode],
								    memory_order_relaxed),
					      ++q->served_here))
		return fuse_worker_process(q->w, req);
	start = ferry_monotonic_ns();
	len = fuse_worker_process(q->w, req);
	end = ferry_monotonic_ns();
	if (len != FERRY_DEFERRED)
		estimate_add(q, opcode, end - start);
	if (tried == 1)
		pool_trial_served(&q->trial, end);
	return len;
}

/*
 * Whether reqs[0] and reqs[1] are WRITEs of one file, the second starting
 * where the first ends: the protocol then writes them with one system call
 * (fuse_write_run.c), one round trip to the storage for the run, which
 * beats a round trip each even in parallel.
 */
static bool writes_continue(const struct ferry_req *const *reqs)
{
	struct {
		struct fuse_in_header h;
		struct fuse_write_in w;
	} a, b;
	size_t len = sizeof(a);

	if (iov_copy_from(&a, reqs[0]->rd, reqs[0]->rd_cnt, 0, len) < len ||
	    iov_copy_from(&b, reqs[1]->rd, reqs[1]->rd_cnt, 0, len) < len)
		return false;
	return a.h.opcode == FUSE_WRITE && b.h.opcode == FUSE_WRITE && a.h.nodeid == b.h.nodeid &&
	       a.w.fh == b.w.fh && a.w.offset + a.w.size == b.w.offset;
}

unsigned request_pool_serve_run(struct request_pool_queue *q, const struct ferry_req *const *reqs,
				unsigned n, uint32_t *lens)
{
	if (n > 1 && writes_continue(reqs))
		return fuse_worker_process_run(q->w, reqs, n, lens);
	lens[0] = request_pool_serve(q, reqs[0]);
	return 1;
}
