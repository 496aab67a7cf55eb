/* --request-timeout: each request that reaches the host's storage runs on a helper thread with a deadline, so a hung host file system costs the guest an error instead of a queue. */
#include "daemon/deadline.h"

#include <errno.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/offload.h"
#include "common/clock.h"
#include "common/iov.h"
#include "common/log.h"

/* What a guest process sees for a request the host did not answer in
 * time. The Linux FUSE client passes a request's error on as it is (it
 * only gives ENOSYS, ENOENT and EINTR meanings of their own), so the
 * caller of stat, open or a direct read gets ETIMEDOUT; a read through the
 * guest's page cache reports a failed page as EIO. */
#define DEADLINE_ERROR (-ETIMEDOUT)

struct deadline {
	struct fuse_server *se;
	struct offload *pool;       /* the jobs' threads */
	uint64_t timeout_ns;
	double seconds;
	size_t max_reply;
	pthread_mutex_t lock;       /* the counts, and each job's state */
	unsigned stuck;
	bool at_cap;                /* said in the log, until below it again */
	uint64_t timed_out, refused, returned_late;
};

struct deadline_job {
	struct offload_job oj;      /* first: run() gets it */
	struct deadline *d;
	struct fuse_worker *w;      /* the job's own: it may outlive the queue's */
	pthread_cond_t done;        /* finished was set */
	/* Under d->lock. started: a thread took it; finished: its reply is
	 * in wr_buf; abandoned: the guest was answered without it. */
	bool started, finished, abandoned;
	uint32_t reply_len;
	void *rd_buf, *wr_buf;
	size_t rd_cap, wr_cap, rd_len, wr_len;
	struct fuse_in_header in;   /* the request's, for the log and the undo */
	uint64_t abandoned_ns;
};

struct deadline_worker {
	struct deadline *d;
	struct fuse_worker *w;
	struct deadline_job *spare; /* the last job, done in time: reused */
};

int deadline_new(struct deadline **out, double seconds, struct fuse_server *se,
		 size_t max_reply)
{
	struct deadline *d = calloc(1, sizeof(*d));
	int ret;

	if (!d)
		return -ENOMEM;
	ret = offload_new(&d->pool);
	if (ret) {
		free(d);
		return ret;
	}
	d->se = se;
	d->seconds = seconds;
	d->timeout_ns = (uint64_t)(seconds * 1e9 + 0.5);
	d->max_reply = max_reply;
	pthread_mutex_init(&d->lock, NULL);
	*out = d;
	return 0;
}

unsigned deadline_free(struct deadline *d)
{
	unsigned stuck;

	if (!d)
		return 0;
	stuck = deadline_stuck(d);
	if (stuck) {
		/* Their threads still use the session and the backend: freeing
		 * under them would be worse than what the exit leaves. */
		log_warn("--request-timeout: %u host call(s) still stuck at exit", stuck);
		return stuck;
	}
	offload_free(d->pool);
	pthread_mutex_destroy(&d->lock);
	free(d);
	return 0;
}

unsigned deadline_stuck(struct deadline *d)
{
	struct deadline_counts c;

	deadline_get_counts(d, &c);
	return c.stuck;
}

void deadline_get_counts(struct deadline *d, struct deadline_counts *out)
{
	pthread_mutex_lock(&d->lock);
	out->seconds = d->seconds;
	out->stuck = d->stuck;
	out->stuck_max = DEADLINE_STUCK_MAX;
	out->timed_out = d->timed_out;
	out->refused = d->refused;
	out->returned_late = d->returned_late;
	pthread_mutex_unlock(&d->lock);
}

/* ---- jobs ------------------------------------------------------------- */

static void job_free(struct deadline_job *job)
{
	if (!job)
		return;
	fuse_worker_free(job->w);
	pthread_cond_destroy(&job->done);
	free(job->rd_buf);
	free(job->wr_buf);
	free(job);
}

static struct deadline_job *job_new(struct deadline *d)
{
	struct deadline_job *job = calloc(1, sizeof(*job));
	pthread_condattr_t attr;

	if (!job)
		return NULL;
	if (fuse_worker_new(d->se, &job->w) < 0) {
		free(job);
		return NULL;
	}
	job->d = d;
	/* Monotonic, as the deadline: a clock step neither fires nor stalls it. */
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&job->done, &attr);
	pthread_condattr_destroy(&attr);
	return job;
}

/* buf holds at least len bytes afterwards: 0 or -ENOMEM. */
static int buf_reserve(void **buf, size_t *cap, size_t len)
{
	void *p;

	if (*cap >= len)
		return 0;
	p = realloc(*buf, len);
	if (!p)
		return -ENOMEM;
	*buf = p;
	*cap = len;
	return 0;
}

/* A request of the job's own through its worker, with its reply dropped:
 * how an abandoned reply's references go back (rule 2 in deadline.h). */
static void job_send(struct deadline_job *job, uint32_t opcode, uint64_t nodeid,
		     const void *arg, size_t arg_len)
{
	struct {
		struct fuse_in_header h;
		union {
			struct fuse_forget_in forget;
			struct fuse_release_in release;
		} a;
	} msg;
	char reply[sizeof(struct fuse_out_header) + 16];
	struct iovec rd = { .iov_base = &msg, .iov_len = sizeof(msg.h) + arg_len };
	struct iovec wr = { .iov_base = reply, .iov_len = sizeof(reply) };
	struct ferry_req req = { .rd = &rd, .rd_cnt = 1, .wr = &wr, .wr_cnt = 1 };

	memset(&msg, 0, sizeof(msg));
	msg.h.len = (uint32_t)rd.iov_len;
	msg.h.opcode = opcode;
	msg.h.nodeid = nodeid;
	memcpy(&msg.a, arg, arg_len);
	fuse_worker_process(job->w, &req);
}

static void job_forget(struct deadline_job *job, uint64_t nodeid)
{
	struct fuse_forget_in in = { .nlookup = 1 };

	if (nodeid)
		job_send(job, FUSE_FORGET, nodeid, &in, sizeof(in));
}

static void job_release(struct deadline_job *job, uint32_t opcode, uint64_t nodeid, uint64_t fh)
{
	struct fuse_release_in in = { .fh = fh };

	job_send(job, opcode, nodeid, &in, sizeof(in));
}

/* Gives back what the dropped reply of len bytes in wr_buf handed the
 * guest. */
static void job_undo(struct deadline_job *job, uint32_t len)
{
	const struct fuse_out_header *out = job->wr_buf;
	const char *arg = (const char *)job->wr_buf + sizeof(*out);
	struct fuse_entry_out entry;
	struct fuse_open_out open;
	size_t arg_len, at;

	if (len < sizeof(*out) || out->error != 0)
		return;
	arg_len = len - sizeof(*out);
	switch (job->in.opcode) {
	case FUSE_LOOKUP:
	case FUSE_MKNOD:
	case FUSE_MKDIR:
	case FUSE_SYMLINK:
	case FUSE_LINK:
		if (arg_len >= sizeof(entry)) {
			memcpy(&entry, arg, sizeof(entry));
			job_forget(job, entry.nodeid);
		}
		break;
	case FUSE_CREATE:
	case FUSE_TMPFILE:
		if (arg_len >= sizeof(entry) + sizeof(open)) {
			memcpy(&entry, arg, sizeof(entry));
			memcpy(&open, arg + sizeof(entry), sizeof(open));
			job_release(job, FUSE_RELEASE, entry.nodeid, open.fh);
			job_forget(job, entry.nodeid);
		}
		break;
	case FUSE_OPEN:
	case FUSE_OPENDIR:
		if (arg_len >= sizeof(open)) {
			memcpy(&open, arg, sizeof(open));
			job_release(job, job->in.opcode == FUSE_OPEN ? FUSE_RELEASE : FUSE_RELEASEDIR,
				    job->in.nodeid, open.fh);
		}
		break;
	case FUSE_READDIRPLUS:
		/* Each entry: fuse_entry_out, fuse_dirent, its name, padded. */
		for (at = 0; at + FUSE_NAME_OFFSET_DIRENTPLUS <= arg_len;) {
			struct fuse_direntplus de;

			memcpy(&de, arg + at, sizeof(de));
			job_forget(job, de.entry_out.nodeid);
			at += FUSE_DIRENTPLUS_SIZE(&de);
		}
		break;
	default:
		break;
	}
}

/* The job's opcode as the stats name it ("LOOKUP"). */
static const char *job_op_name(const struct deadline_job *job)
{
	const char *name = fuse_stats_slot_name(job->in.opcode < FUSE_STATS_SLOTS ?
						job->in.opcode : 0);

	return name ? name : "request";
}

/* An abandoned job's call is over: the count of those still stuck. */
static unsigned stuck_call_returned(struct deadline *d)
{
	unsigned stuck;
	bool below_cap;

	pthread_mutex_lock(&d->lock);
	d->stuck--;
	d->returned_late++;
	stuck = d->stuck;
	below_cap = d->at_cap;
	d->at_cap = false;
	pthread_mutex_unlock(&d->lock);
	if (below_cap)
		log_info("--request-timeout: a stuck host call returned: requests run again");
	return stuck;
}

/* On an offload thread: serves the job's copy of the request, then
 * either hands the reply to the queue thread or, abandoned, drops it. */
static void job_run(struct offload_job *oj)
{
	struct deadline_job *job = (struct deadline_job *)oj;
	struct deadline *d = job->d;
	struct iovec rd = { .iov_base = job->rd_buf, .iov_len = job->rd_len };
	struct iovec wr = { .iov_base = job->wr_buf, .iov_len = job->wr_len };
	struct ferry_req req = { .rd = &rd, .rd_cnt = 1, .wr = &wr, .wr_cnt = 1 };
	uint32_t len;
	unsigned stuck;
	double late_s;

	pthread_mutex_lock(&d->lock);
	if (job->abandoned) {
		/* Answered before any thread was free: it never runs. */
		pthread_mutex_unlock(&d->lock);
		stuck_call_returned(d);
		job_free(job);
		return;
	}
	job->started = true;
	pthread_mutex_unlock(&d->lock);

	len = fuse_worker_process(job->w, &req);

	pthread_mutex_lock(&d->lock);
	if (!job->abandoned) {
		job->reply_len = len;
		job->finished = true;
		pthread_cond_signal(&job->done);
		/* From here the queue thread owns the job. */
		pthread_mutex_unlock(&d->lock);
		return;
	}
	pthread_mutex_unlock(&d->lock);

	job_undo(job, len);
	late_s = (double)(ferry_monotonic_ns() - job->abandoned_ns) / 1e9;
	stuck = stuck_call_returned(d);
	log_info("--request-timeout: the host call of a timed-out %s (unique %llu, node %llu) "
		 "returned %.1f s after its deadline; its result was dropped (%u still stuck)",
		 job_op_name(job), (unsigned long long)job->in.unique, (unsigned long long)job->in.nodeid,
		 late_s, stuck);
	job_free(job);
}

/* ---- the queue thread's side ----------------------------------------- */

int deadline_worker_new(struct deadline *d, struct deadline_worker **out)
{
	struct deadline_worker *dw = calloc(1, sizeof(*dw));
	int ret;

	if (!dw)
		return -ENOMEM;
	ret = fuse_worker_new(d->se, &dw->w);
	if (ret) {
		free(dw);
		return ret;
	}
	dw->d = d;
	*out = dw;
	return 0;
}

void deadline_worker_free(struct deadline_worker *dw)
{
	if (!dw)
		return;
	job_free(dw->spare);
	fuse_worker_free(dw->w);
	free(dw);
}

struct fuse_worker *deadline_worker_fuse(struct deadline_worker *dw)
{
	return dw->w;
}

/* See deadline.h: what runs inline as without the option. */
static bool runs_inline(uint32_t opcode)
{
	switch (opcode) {
	case FUSE_INIT:
	case FUSE_DESTROY:
	case FUSE_FORGET:
	case FUSE_BATCH_FORGET:
	case FUSE_INTERRUPT:
	case FUSE_SETLKW:
		return true;
	default:
		return false;
	}
}

/* The reply of a request answered without its op. */
static uint32_t reply_error(const struct ferry_req *req, uint64_t unique, int err)
{
	struct fuse_out_header out = { .len = sizeof(out), .error = err, .unique = unique };

	iov_copy_to(req->wr, req->wr_cnt, 0, &out, sizeof(out));
	return sizeof(out);
}

/* A job holding a copy of req: the queue's spare or a new one. NULL when
 * memory ran out. */
static struct deadline_job *job_prepare(struct deadline_worker *dw, const struct ferry_req *req,
					const struct fuse_in_header *in, size_t rd_len, size_t wr_len)
{
	struct deadline_job *job = dw->spare;

	dw->spare = NULL;
	if (!job)
		job = job_new(dw->d);
	if (!job)
		return NULL;
	/* Bytes past in.len are never read (fuse_worker_process), and an
	 * in.len past the chain, or short of a header, is refused there as
	 * here; the copy always holds the header. */
	if (in->len < rd_len && in->len >= sizeof(*in))
		rd_len = in->len;
	if (wr_len > dw->d->max_reply)
		wr_len = dw->d->max_reply;
	if (buf_reserve(&job->rd_buf, &job->rd_cap, rd_len) ||
	    buf_reserve(&job->wr_buf, &job->wr_cap, wr_len)) {
		job_free(job);
		return NULL;
	}
	iov_copy_from(job->rd_buf, req->rd, req->rd_cnt, 0, rd_len);
	/* The copy, not the guest's header: what the job will run. */
	memcpy(&job->in, job->rd_buf, sizeof(job->in));
	job->rd_len = rd_len;
	job->wr_len = wr_len;
	job->started = job->finished = job->abandoned = false;
	job->oj.run = job_run;
	return job;
}

/* Marks the job abandoned and answers the guest: the job's thread owns
 * it from now on. Called with d->lock held; unlocks. */
static uint32_t abandon(struct deadline *d, struct deadline_job *job, const struct ferry_req *req)
{
	unsigned stuck;

	job->abandoned = true;
	job->abandoned_ns = ferry_monotonic_ns();
	d->stuck++;
	d->timed_out++;
	stuck = d->stuck;
	pthread_mutex_unlock(&d->lock);
	log_warn("--request-timeout: %s (unique %llu, node %llu) got no answer from the host "
		 "within %g s: answered %s; %u host call(s) stuck, at most %u",
		 job_op_name(job), (unsigned long long)job->in.unique, (unsigned long long)job->in.nodeid,
		 d->seconds, strerror(-DEADLINE_ERROR), stuck, DEADLINE_STUCK_MAX);
	return reply_error(req, job->in.unique, DEADLINE_ERROR);
}

uint32_t deadline_serve(struct deadline_worker *dw, const struct ferry_req *req)
{
	struct deadline *d = dw->d;
	struct fuse_in_header in;
	struct deadline_job *job;
	size_t rd_len = iov_length(req->rd, req->rd_cnt);
	size_t wr_len = iov_length(req->wr, req->wr_cnt);
	struct timespec until;
	uint64_t until_ns;
	uint32_t len;

	/* Too short to judge, or one that waits for no storage: as without
	 * the option (fuse_worker_process refuses what is malformed). */
	if (rd_len < sizeof(in) || wr_len < sizeof(struct fuse_out_header))
		return fuse_worker_process(dw->w, req);
	iov_copy_from(&in, req->rd, req->rd_cnt, 0, sizeof(in));
	if (runs_inline(in.opcode))
		return fuse_worker_process(dw->w, req);

	pthread_mutex_lock(&d->lock);
	if (d->stuck >= DEADLINE_STUCK_MAX) {
		bool newly = !d->at_cap;

		d->refused++;
		d->at_cap = true;
		pthread_mutex_unlock(&d->lock);
		if (newly)
			log_warn("--request-timeout: %u host calls stuck: requests fail at once "
				 "until one returns", DEADLINE_STUCK_MAX);
		return reply_error(req, in.unique, DEADLINE_ERROR);
	}
	pthread_mutex_unlock(&d->lock);

	job = job_prepare(dw, req, &in, rd_len, wr_len);
	if (!job)
		return reply_error(req, in.unique, -ENOMEM);
	if (offload_submit(d->pool, &job->oj) < 0) {
		job_free(job);
		return reply_error(req, in.unique, -EIO);
	}

	until_ns = ferry_monotonic_ns() + d->timeout_ns;
	until.tv_sec = (time_t)(until_ns / 1000000000u);
	until.tv_nsec = (long)(until_ns % 1000000000u);
	pthread_mutex_lock(&d->lock);
	while (!job->finished) {
		if (pthread_cond_timedwait(&job->done, &d->lock, &until) == ETIMEDOUT &&
		    !job->finished)
			return abandon(d, job, req);
	}
	pthread_mutex_unlock(&d->lock);

	/* Done in time: the reply goes to the guest from here (rule 1). */
	len = job->reply_len;
	if (len)
		iov_copy_to(req->wr, req->wr_cnt, 0, job->wr_buf, len);
	dw->spare = job;
	return len;
}
