/* The request engine: keeps every slot of every request queue busy, checks replies, batches FORGETs. */
#include "engine.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuse_requests.h"
#include "measure.h"

#define STALL_NS      (30ull * 1000000000ull)
#define MAX_REPORTED  20

static void report(struct run *r, const struct lq *q, const struct fc_slot *s,
		   const char *why)
{
	r->errors++;
	if (r->errors <= MAX_REPORTED)
		fprintf(stderr, "ferryfs-load: wrong reply (queue %u slot %u unique %llu): %s\n",
			q->vq->index, s->index, (unsigned long long)s->unique, why);
	else if (r->errors == MAX_REPORTED + 1)
		fprintf(stderr, "ferryfs-load: further wrong replies not shown\n");
}

static int kick(struct lq *q)
{
	uint64_t t;
	unsigned i;

	if (!q->npend)
		return 0;
	/* Latency counts from the notification, not from when we built the
	 * request: building a batch of large writes takes a while. */
	t = load_now_ns();
	for (i = 0; i < q->npend; i++)
		q->slots[q->pend[i]].fc.t_submit = t;
	q->npend = 0;
	return fe_queue_kick(q->vq);
}

static int submit(struct run *r, struct lq *q, struct fc_slot *s)
{
	int ret;

	fc_finish(s);
	ret = fe_queue_add(q->vq, s->index, s->seg, s->nseg);
	if (ret)
		return ret;
	s->busy = true;
	q->inflight++;
	q->pend[q->npend++] = s->index;
	/* As Linux's virtio-fs driver: each request is made available, and the
	 * device notified if it asked, as it is queued (virtqueue_add writes
	 * the avail index, then kick_prepare). --publish-batch holds them to
	 * the end of the round, after every completed slot is refilled: a
	 * device then idles while the driver fills, and a polling device
	 * gains most from its own early replies. */
	if (!r->cfg->publish_batch)
		return kick(q);
	return 0;
}

static int advance(struct run *r, struct lq *q, struct ld_slot *s)
{
	int ret;

	/* Once the window closes, chains under way finish; none starts. */
	if (r->stopping && !s->w.step)
		return 0;
	ret = r->next(r, s);
	if (ret == -ENODATA)
		return 0;
	if (ret)
		return ret;
	return submit(r, q, &s->fc);
}

static void measure_stop(struct run *r, uint64_t now);

static int complete(struct run *r, struct lq *q, uint16_t idx, uint32_t len,
		    uint64_t now)
{
	struct ld_slot *ls = &q->slots[idx];
	struct fc_slot *s = &ls->fc;
	char why[256];
	int ret;

	if (!s->busy) {
		snprintf(why, sizeof(why), "used element for slot %u, which has no request in flight (duplicate?)",
			 idx);
		report(r, q, s, why);
		return 0;
	}
	s->busy = false;
	q->inflight--;
	ret = fc_check(s, len, why, sizeof(why));
	if (!ret && !q->hiprio)
		ret = r->done(r, ls, why, sizeof(why));
	if (ret == -EBADMSG) {
		/* The slot's chain cannot go on from a wrong answer: leave it idle. */
		report(r, q, s, why);
		return 0;
	}
	if (ret)
		return ret;
	if (q->hiprio)
		return 0;
	if (r->measuring) {
		r->ops++;
		r->bytes += s->data_len;
		r->lat_backwards += now < s->t_submit;
		ret = load_lat_add(&r->lat, now - s->t_submit);
		if (ret)
			return ret;
		/* --ops: the window closes on that answer, however long it took. */
		if (r->ops == r->cfg->ops)
			measure_stop(r, now);
	}
	return advance(r, q, ls);
}

int load_forget_add(struct run *r, uint64_t nodeid, uint64_t nlookup)
{
	if (r->nforget == r->capforget) {
		size_t cap = r->capforget ? r->capforget * 2 : 4096;
		struct fuse_forget_one *p = realloc(r->forgets, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		r->forgets = p;
		r->capforget = cap;
	}
	r->forgets[r->nforget++] = (struct fuse_forget_one){ nodeid, nlookup };
	return 0;
}

/* Sends queued FORGETs on the hiprio queue, as the Linux driver does, in
 * batches; with force, also a partial batch; with hold, only then. */
static int forget_flush(struct run *r, bool force, bool hold)
{
	struct lq *h = &r->q[0];
	unsigned i;
	int ret = 0;

	while (r->nforget && (force || (r->nforget >= LOAD_FORGET_BATCH && !hold))) {
		struct fc_slot *s = NULL;
		size_t n = r->nforget < LOAD_FORGET_BATCH ? r->nforget : LOAD_FORGET_BATCH;
		struct fuse_forget_one *batch = r->forgets + r->nforget - n;

		for (i = 0; i < h->vq->nslots && !s; i++)
			if (!h->slots[i].fc.busy)
				s = &h->slots[i].fc;
		if (!s)
			break;
		if (n == 1) {
			struct fuse_forget_in fi = { .nlookup = batch[0].nlookup };

			fc_begin(s, FUSE_FORGET, batch[0].nodeid, load_unique(r));
			ret = fc_arg(s, &fi, sizeof(fi));
		} else {
			struct fuse_batch_forget_in bi = { .count = (uint32_t)n };

			fc_begin(s, FUSE_BATCH_FORGET, 0, load_unique(r));
			memcpy(s->data, batch, n * sizeof(*batch));
			ret = fc_arg(s, &bi, sizeof(bi));
			if (!ret)
				ret = fc_data_in(s, (uint32_t)(n * sizeof(*batch)));
		}
		if (ret)
			break;
		ret = submit(r, h, s);
		if (ret)
			break;
		r->nforget -= n;
		r->forgets_sent += n;
	}
	if (!ret)
		ret = kick(h);
	return ret;
}

/* Kicks sent and calls seen so far, all queues together. */
static void count_signals(const struct run *r, uint64_t *kicks, uint64_t *calls)
{
	*kicks = *calls = 0;
	for (unsigned i = 0; i < r->nq; i++) {
		if (!r->q[i].vq)
			continue;
		*kicks += r->q[i].vq->kicks;
		*calls += r->q[i].vq->calls_seen;
	}
}

static void measure_start(struct run *r, uint64_t now)
{
	r->measuring = true;
	r->t_start = now;
	r->ops = r->bytes = r->entries = r->cycles = r->lat_backwards = 0;
	r->lat.n = 0;
	r->cpu0_us = (uint64_t)load_proc_cpu_us(r->cfg->daemon_pid);
	r->watch0_us = load_proc_cpu_us(r->cfg->watch_pid);
	r->self0_us = load_self_cpu_us();
	count_signals(r, &r->kicks0, &r->calls0);
}

static void measure_stop(struct run *r, uint64_t now)
{
	r->measuring = false;
	r->stopping = true;
	r->t_end = now;
	r->cpu1_us = (uint64_t)load_proc_cpu_us(r->cfg->daemon_pid);
	r->watch1_us = load_proc_cpu_us(r->cfg->watch_pid);
	r->self1_us = load_self_cpu_us();
	count_signals(r, &r->kicks1, &r->calls1);
}

/* Sleeps until some queue with requests in flight is called, or timeout. */
static int wait_calls(struct run *r, int timeout_ms)
{
	struct pollfd pfd[LOAD_MAX_QUEUES + 2];
	unsigned i, n = 0, map[LOAD_MAX_QUEUES + 1];
	int ret;

	if (r->cfg->poll)
		return 0;
	for (i = 0; i < r->nq; i++) {
		struct lq *q = &r->q[i];

		if (!q->inflight)
			continue;
		if (fe_queue_arm(q->vq))
			goto disarm;
		pfd[n] = (struct pollfd){ .fd = q->vq->callfd, .events = POLLIN };
		map[n++] = i;
	}
	if (!n)
		goto disarm;
	/* Also watch the control socket: a backend that dies is reported at
	 * once instead of as a 30 s stall. */
	pfd[n] = (struct pollfd){ .fd = r->dev.sock, .events = POLLIN };
	ret = poll(pfd, n + 1, timeout_ms);
	if (ret < 0 && errno != EINTR)
		return -errno;
	if (ret > 0 && pfd[n].revents) {
		fprintf(stderr, "ferryfs-load: the backend closed its vhost-user socket (did it crash?)\n");
		return -ECONNRESET;
	}
	for (i = 0; ret > 0 && i < n; i++)
		if (pfd[i].revents)
			fe_queue_clear_call(r->q[map[i]].vq);
disarm:
	for (i = 0; i < r->nq; i++)
		fe_queue_disarm(r->q[i].vq);
	return 0;
}

int load_engine(struct run *r, const char *phase, load_next_fn *next, load_done_fn *done,
		uint64_t win_start, uint64_t win_end)
{
	uint64_t last = load_now_ns();
	unsigned i, j;
	int ret = 0;

	r->phase = phase;
	r->next = next;
	r->done = done;
	r->stopping = false;
	r->measuring = false;
	for (i = 1; i < r->nq; i++) {
		for (j = 0; j < r->q[i].vq->nslots; j++) {
			ret = advance(r, &r->q[i], &r->q[i].slots[j]);
			if (ret)
				goto out;
		}
		ret = kick(&r->q[i]);
		if (ret)
			goto out;
	}
	for (;;) {
		uint64_t now = load_now_ns();
		unsigned progress = 0, busy = 0;
		int timeout = 100;

		if (win_start && !r->measuring && !r->stopping && now >= win_start)
			measure_start(r, now);
		if (r->measuring && now >= win_end)
			measure_stop(r, now);
		for (i = 0; i < r->nq; i++) {
			struct lq *q = &r->q[i];
			uint16_t idx;
			uint32_t len;
			int got;

			while ((got = fe_queue_get_used(q->vq, &idx, &len)) == 1) {
				/* A request published as it is queued may be answered
				 * within this round: its latency needs the time now. */
				if (!r->cfg->publish_batch)
					now = load_now_ns();
				ret = complete(r, q, idx, len, now);
				if (ret)
					goto out;
				progress++;
			}
			if (got < 0) {
				fprintf(stderr, "ferryfs-load: queue %u: backend returned a descriptor id we never made available\n",
					i);
				r->errors++;
				ret = got;
				goto out;
			}
			ret = kick(q);
			if (ret)
				goto out;
			if (i)
				busy += q->inflight;
		}
		/* --keep-lookups holds the measured phase's FORGETs (the setup's
		 * go as usual: the guest it plays keeps what it listed). */
		ret = forget_flush(r, busy == 0, r->cfg->keep_lookups && win_start);
		if (ret)
			goto out;
		if (!busy && !r->q[0].inflight && !r->nforget)
			break;
		if (progress) {
			last = now;
			continue;
		}
		if (now - last > STALL_NS) {
			fprintf(stderr, "ferryfs-load: no completion for 30 s in phase %s (%u in flight): backend stalled\n",
				r->phase, busy + r->q[0].inflight);
			ret = -ETIMEDOUT;
			goto out;
		}
		if (win_start && !r->stopping) {
			uint64_t edge = r->measuring ? win_end : win_start;

			if (edge > now && (edge - now) / 1000000 < (uint64_t)timeout)
				timeout = (int)((edge - now) / 1000000) + 1;
		}
		ret = wait_calls(r, timeout);
		if (ret)
			goto out;
	}
out:
	if (r->measuring)
		measure_stop(r, load_now_ns());
	return ret;
}

int load_sync_call(struct run *r, struct fc_slot *s)
{
	struct lq *q = &r->q[1];
	uint64_t start = load_now_ns();
	char why[256];
	uint16_t idx;
	uint32_t len;
	int ret, got;

	ret = submit(r, q, s);
	if (!ret)
		ret = kick(q);
	if (ret)
		return ret;
	while ((got = fe_queue_get_used(q->vq, &idx, &len)) == 0) {
		if (load_now_ns() - start > STALL_NS) {
			fprintf(stderr, "ferryfs-load: %s: no reply in 30 s\n", fc_opname(s->opcode));
			return -ETIMEDOUT;
		}
		ret = wait_calls(r, 100);
		if (ret)
			return ret;
	}
	if (got < 0 || idx != s->index) {
		fprintf(stderr, "ferryfs-load: %s: completion for the wrong descriptor\n",
			fc_opname(s->opcode));
		r->errors++;
		return -EPROTO;
	}
	s->busy = false;
	q->inflight--;
	ret = fc_check(s, len, why, sizeof(why));
	if (ret) {
		report(r, q, s, why);
		return -EPROTO;
	}
	return 0;
}

struct fc_slot *load_sync_slot(struct run *r)
{
	return &r->q[1].slots[0].fc;
}

int load_sync_mkdir(struct run *r, uint64_t parent, const char *name, uint64_t *nodeid)
{
	struct fuse_mkdir_in mk = { .mode = 0755, .umask = 022 };
	struct fc_slot *s = load_sync_slot(r);
	int ret;

	ret = fr_name(s, load_unique(r), FUSE_MKDIR, parent, name, &mk, sizeof(mk),
		      sizeof(struct fuse_entry_out));
	if (!ret)
		ret = load_sync_call(r, s);
	if (!ret)
		*nodeid = ((const struct fuse_entry_out *)fc_out_args(s))->nodeid;
	return ret;
}

int load_sync_create(struct run *r, uint64_t parent, const char *name, uint64_t *nodeid,
		     uint64_t *ino, uint64_t *fh)
{
	struct fc_slot *s = load_sync_slot(r);
	const struct fuse_entry_out *e = fc_out_args(s);
	int ret;

	ret = fr_create(s, load_unique(r), parent, name);
	if (!ret)
		ret = load_sync_call(r, s);
	if (ret)
		return ret;
	*nodeid = e->nodeid;
	*ino = e->attr.ino;
	*fh = ((const struct fuse_open_out *)(e + 1))->fh;
	return 0;
}

int load_sync_remove(struct run *r, uint32_t opcode, uint64_t parent, const char *name,
		     uint64_t nodeid, uint64_t nlookup)
{
	struct fc_slot *s = load_sync_slot(r);
	int ret;

	ret = fr_name(s, load_unique(r), opcode, parent, name, NULL, 0, 0);
	if (!ret)
		ret = load_sync_call(r, s);
	if (!ret)
		ret = load_forget_add(r, nodeid, nlookup);
	return ret;
}

/* Never builds a request: the engine only sends the queued FORGETs and
 * waits for the hiprio queue. */
static int drain_next(struct run *r, struct ld_slot *s)
{
	return -ENODATA;
}

static int drain_done(struct run *r, struct ld_slot *s, char *why, size_t whylen)
{
	return 0;
}

int load_drain(struct run *r)
{
	/* Named as the phase it used to borrow, so stall reports read as before. */
	return load_engine(r, "rmfiles", drain_next, drain_done, 0, 0);
}
