/* The request engine, setup/teardown through FUSE, and every ferryfs-load workload. */
#include "workloads.h"
#include "measure.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HIPRIO_SLOTS  16
#define FORGET_BATCH  1024          /* fuse_forget_one entries per BATCH_FORGET */
#define HIPRIO_DATA   (FORGET_BATCH * sizeof(struct fuse_forget_one))
#define RDP_BUF       4096u         /* what the Linux driver asks for: one page */
#define STALL_NS      (30ull * 1000000000ull)
#define MAX_REPORTED  20

enum kind { K_READ, K_RANDREAD, K_WRITE, K_RANDWRITE, K_GETATTR, K_LOOKUP,
	    K_CREATE_UNLINK, K_READDIRPLUS, K_MIXED, K_WRITE_FSYNC };

static const char *const kind_names[] = {
	"read", "randread", "write", "randwrite", "getattr", "lookup",
	"create-unlink", "readdirplus", "mixed", "write-fsync",
};

struct lq {
	struct vu_queue *vq;
	struct fc_slot *slots;
	uint16_t *pend;          /* slots added since the last kick */
	unsigned npend;
	unsigned inflight;
	bool hiprio;
};

struct run;

struct phase {
	const char *name;
	/* Builds the slot's next request: 0 built, 1 nothing more for this
	 * slot, -errno fatal. */
	int (*next)(struct run *r, struct fc_slot *s);
	/* Checks a reply that passed fc_check and moves the slot on: 0 right,
	 * -EBADMSG wrong (reason in why), other -errno fatal. */
	int (*done)(struct run *r, struct fc_slot *s, char *why, size_t whylen);
};

struct run {
	const struct load_cfg *cfg;
	enum kind kind;
	struct vu_dev dev;
	struct lq *q;
	unsigned nq;
	uint64_t unique;
	uint64_t rng;
	uint32_t proto_minor, max_write, max_pages;
	uint64_t workdir, file_nodeid, file_fh, file_ino, dir_nodeid;
	char workdir_name[64];
	uint64_t nblocks, cursor;
	const struct phase *ph;
	bool stopping, measuring;
	uint64_t t_start, t_end;
	uint64_t cpu0_us, cpu1_us;
	double self0_us, self1_us;
	uint64_t ops, bytes, entries, cycles, errors;
	uint32_t *lat;
	size_t nlat, caplat;
	struct fuse_forget_one *forgets;
	size_t nforget, capforget;
	uint64_t file_lookups;
	uint64_t forgets_sent;
};

bool load_workload_valid(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(kind_names) / sizeof(kind_names[0]); i++)
		if (!strcmp(name, kind_names[i]))
			return true;
	return false;
}

static uint64_t rnd(struct run *r)
{
	/* xorshift64*: cheap, and the sequence is reproducible from --seed. */
	r->rng ^= r->rng >> 12;
	r->rng ^= r->rng << 25;
	r->rng ^= r->rng >> 27;
	return r->rng * 0x2545f4914f6cdd1dull;
}

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

static uint64_t next_unique(struct run *r)
{
	/* The Linux driver steps by 2: bit 0 marks interrupt requests. */
	r->unique += 2;
	return r->unique;
}

/* ---- the engine ---- */

static int submit(struct lq *q, struct fc_slot *s)
{
	int ret;

	fc_finish(s);
	ret = vu_queue_add(q->vq, s->index, s->seg, s->nseg);
	if (ret)
		return ret;
	s->busy = true;
	q->inflight++;
	q->pend[q->npend++] = s->index;
	return 0;
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
		q->slots[q->pend[i]].t_submit = t;
	q->npend = 0;
	return vu_queue_kick(q->vq);
}

static int advance(struct run *r, struct lq *q, struct fc_slot *s)
{
	int ret = r->ph->next(r, s);

	if (ret == 1)
		return 0;
	if (ret)
		return ret;
	return submit(q, s);
}

static int lat_add(struct run *r, uint64_t ns)
{
	if (r->nlat == r->caplat) {
		size_t cap = r->caplat ? r->caplat * 2 : 1 << 16;
		uint32_t *p = realloc(r->lat, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		r->lat = p;
		r->caplat = cap;
	}
	r->lat[r->nlat++] = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
	return 0;
}

static int complete(struct run *r, struct lq *q, uint16_t idx, uint32_t len,
		    uint64_t now)
{
	struct fc_slot *s = &q->slots[idx];
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
		ret = r->ph->done(r, s, why, sizeof(why));
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
		ret = lat_add(r, now - s->t_submit);
		if (ret)
			return ret;
	}
	return advance(r, q, s);
}

static int forget_add(struct run *r, uint64_t nodeid, uint64_t nlookup)
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
 * batches; with force, also a partial batch. */
static int forget_flush(struct run *r, bool force)
{
	struct lq *h = &r->q[0];
	unsigned i;
	int ret = 0;

	while (r->nforget && (force || r->nforget >= FORGET_BATCH)) {
		struct fc_slot *s = NULL;
		size_t n = r->nforget < FORGET_BATCH ? r->nforget : FORGET_BATCH;
		struct fuse_forget_one *batch = r->forgets + r->nforget - n;

		for (i = 0; i < h->vq->nslots && !s; i++)
			if (!h->slots[i].busy)
				s = &h->slots[i];
		if (!s)
			break;
		if (n == 1) {
			struct fuse_forget_in fi = { .nlookup = batch[0].nlookup };

			fc_begin(s, FUSE_FORGET, batch[0].nodeid, next_unique(r));
			ret = fc_arg(s, &fi, sizeof(fi));
		} else {
			struct fuse_batch_forget_in bi = { .count = (uint32_t)n };

			fc_begin(s, FUSE_BATCH_FORGET, 0, next_unique(r));
			memcpy(s->data, batch, n * sizeof(*batch));
			ret = fc_arg(s, &bi, sizeof(bi));
			if (!ret)
				ret = fc_data_in(s, (uint32_t)(n * sizeof(*batch)));
		}
		if (ret)
			break;
		ret = submit(h, s);
		if (ret)
			break;
		r->nforget -= n;
		r->forgets_sent += n;
	}
	if (!ret)
		ret = kick(h);
	return ret;
}

static void measure_start(struct run *r, uint64_t now)
{
	r->measuring = true;
	r->t_start = now;
	r->ops = r->bytes = r->entries = r->cycles = 0;
	r->nlat = 0;
	r->cpu0_us = (uint64_t)load_proc_cpu_us(r->cfg->daemon_pid);
	r->self0_us = load_self_cpu_us();
}

static void measure_stop(struct run *r, uint64_t now)
{
	r->measuring = false;
	r->stopping = true;
	r->t_end = now;
	r->cpu1_us = (uint64_t)load_proc_cpu_us(r->cfg->daemon_pid);
	r->self1_us = load_self_cpu_us();
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
		if (vu_queue_arm(q->vq))
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
			vu_queue_clear_call(r->q[map[i]].vq);
disarm:
	for (i = 0; i < r->nq; i++)
		vu_queue_disarm(r->q[i].vq);
	return 0;
}

/* Runs phase ph on every request queue and slot until every slot is idle.
 * With a window, measures from win_start to win_end, then stops starting new
 * request chains. */
static int engine(struct run *r, const struct phase *ph, uint64_t win_start,
		  uint64_t win_end)
{
	uint64_t last = load_now_ns();
	unsigned i, j;
	int ret = 0;

	r->ph = ph;
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

			while ((got = vu_queue_get_used(q->vq, &idx, &len)) == 1) {
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
		ret = forget_flush(r, busy == 0);
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
				ph->name, busy + r->q[0].inflight);
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

/* ---- request builders ---- */

static int b_read(struct run *r, struct fc_slot *s, uint64_t off)
{
	struct fuse_read_in in = { .fh = r->file_fh, .offset = off,
				   .size = r->cfg->block_size };
	int ret;

	fc_begin(s, FUSE_READ, r->file_nodeid, next_unique(r));
	/* Poisoned first: a reply that claims data it never wrote then fails
	 * the pattern check even if the offset repeats. The strength is fixed
	 * when the request is built, so one built during warmup is checked in
	 * full even if its reply comes in the measured interval. */
	s->full_check = !r->measuring;
	fc_pattern_poison(s->data, off, in.size,
			  s->full_check ? FC_POISON_STRIDE_FULL : FC_CHECK_STRIDE_SPARSE);
	s->off = off;
	ret = fc_arg(s, &in, sizeof(in));
	if (!ret)
		ret = fc_reply(s, 0);
	if (!ret)
		ret = fc_data_out(s, in.size);
	s->expect_len = sizeof(struct fuse_out_header) + in.size;
	s->data_len = in.size;
	return ret;
}

static int b_write(struct run *r, struct fc_slot *s, uint64_t off)
{
	struct fuse_write_in in = { .fh = r->file_fh, .offset = off,
				    .size = r->cfg->block_size };
	int ret;

	fc_begin(s, FUSE_WRITE, r->file_nodeid, next_unique(r));
	fc_pattern_fill(s->data, off, in.size);
	s->off = off;
	ret = fc_arg(s, &in, sizeof(in));
	if (!ret)
		ret = fc_data_in(s, in.size);
	if (!ret)
		ret = fc_reply(s, sizeof(struct fuse_write_out));
	s->expect_len = sizeof(struct fuse_out_header) + sizeof(struct fuse_write_out);
	s->data_len = in.size;
	return ret;
}

static int b_name(struct run *r, struct fc_slot *s, uint32_t opcode,
		  uint64_t parent, const char *name, const void *arg, uint32_t alen,
		  uint32_t reply)
{
	int ret = 0;

	fc_begin(s, opcode, parent, next_unique(r));
	if (alen)
		ret = fc_arg(s, arg, alen);
	if (!ret)
		ret = fc_arg(s, name, (uint32_t)strlen(name) + 1);
	if (!ret)
		ret = fc_reply(s, reply);
	s->expect_len = sizeof(struct fuse_out_header) + reply;
	return ret;
}

static int b_lookup(struct run *r, struct fc_slot *s, uint64_t parent, const char *name)
{
	return b_name(r, s, FUSE_LOOKUP, parent, name, NULL, 0, sizeof(struct fuse_entry_out));
}

static int b_create(struct run *r, struct fc_slot *s, uint64_t parent, const char *name)
{
	struct fuse_create_in in = { .flags = O_RDWR | O_CREAT | O_EXCL,
				     .mode = S_IFREG | 0644, .umask = 022 };

	return b_name(r, s, FUSE_CREATE, parent, name, &in, sizeof(in),
		      sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out));
}

static int b_release(struct run *r, struct fc_slot *s, uint32_t opcode,
		     uint64_t nodeid, uint64_t fh, uint32_t flags)
{
	struct fuse_release_in in = { .fh = fh, .flags = flags };
	int ret;

	fc_begin(s, opcode, nodeid, next_unique(r));
	ret = fc_arg(s, &in, sizeof(in));
	if (!ret)
		ret = fc_reply(s, 0);
	s->expect_len = sizeof(struct fuse_out_header);
	return ret;
}

static int b_fsync(struct run *r, struct fc_slot *s)
{
	struct fuse_fsync_in in = { .fh = r->file_fh };
	int ret;

	fc_begin(s, FUSE_FSYNC, r->file_nodeid, next_unique(r));
	ret = fc_arg(s, &in, sizeof(in));
	if (!ret)
		ret = fc_reply(s, 0);
	s->expect_len = sizeof(struct fuse_out_header);
	return ret;
}

static int b_getattr(struct run *r, struct fc_slot *s, uint64_t nodeid)
{
	struct fuse_getattr_in in = { 0 };
	int ret;

	fc_begin(s, FUSE_GETATTR, nodeid, next_unique(r));
	ret = fc_arg(s, &in, sizeof(in));
	if (!ret)
		ret = fc_reply(s, sizeof(struct fuse_attr_out));
	s->expect_len = sizeof(struct fuse_out_header) + sizeof(struct fuse_attr_out);
	return ret;
}

static int b_open(struct run *r, struct fc_slot *s, uint32_t opcode,
		  uint64_t nodeid, uint32_t flags)
{
	struct fuse_open_in in = { .flags = flags };
	int ret;

	fc_begin(s, opcode, nodeid, next_unique(r));
	ret = fc_arg(s, &in, sizeof(in));
	if (!ret)
		ret = fc_reply(s, sizeof(struct fuse_open_out));
	s->expect_len = sizeof(struct fuse_out_header) + sizeof(struct fuse_open_out);
	return ret;
}

static int b_readdirplus(struct run *r, struct fc_slot *s, uint64_t nodeid,
			 uint64_t fh, uint64_t off)
{
	struct fuse_read_in in = { .fh = fh, .offset = off, .size = RDP_BUF };
	int ret;

	fc_begin(s, FUSE_READDIRPLUS, nodeid, next_unique(r));
	ret = fc_arg(s, &in, sizeof(in));
	if (!ret)
		ret = fc_reply(s, 0);
	if (!ret)
		ret = fc_data_out(s, RDP_BUF);
	return ret;
}

/* ---- reply checks ---- */

static int check_data_file(struct run *r, struct fc_slot *s, char *why, size_t whylen)
{
	const struct fuse_out_header *out = fc_out_hdr(s);
	uint64_t bad;

	if (s->opcode == FUSE_READ) {
		if (fc_pattern_verify(s->data, s->off, out->len - sizeof(*out),
				      s->full_check, &bad)) {
			snprintf(why, whylen, "READ at %llu: data at file offset %llu is not what was written",
				 (unsigned long long)s->off, (unsigned long long)bad);
			return -EBADMSG;
		}
	} else {
		const struct fuse_write_out *wo = fc_out_args(s);

		if (wo->size != r->cfg->block_size) {
			snprintf(why, whylen, "WRITE at %llu: wrote %u of %u bytes",
				 (unsigned long long)s->off, wo->size, r->cfg->block_size);
			return -EBADMSG;
		}
	}
	return 0;
}

static int check_entry(const struct fuse_entry_out *e, uint32_t mode_type,
		       const char *what, char *why, size_t whylen)
{
	if (!e->nodeid || (e->attr.mode & S_IFMT) != mode_type) {
		snprintf(why, whylen, "%s: nodeid %llu mode %o", what,
			 (unsigned long long)e->nodeid, e->attr.mode);
		return -EBADMSG;
	}
	return 0;
}

/* ---- setup phases, run through the engine so they are pipelined too ---- */

static int fill_next(struct run *r, struct fc_slot *s)
{
	if (r->cursor >= r->nblocks)
		return 1;
	return b_write(r, s, r->cursor++ * r->cfg->block_size);
}

static int fill_done(struct run *r, struct fc_slot *s, char *why, size_t whylen)
{
	return check_data_file(r, s, why, whylen);
}

static const struct phase fill_phase = { "fill", fill_next, fill_done };

static int mkfiles_next(struct run *r, struct fc_slot *s)
{
	if (s->state == 1)
		return b_release(r, s, FUSE_RELEASE, s->nodeid, s->fh, O_RDWR);
	if (r->cursor >= r->cfg->dir_entries)
		return 1;
	snprintf(s->name, sizeof(s->name), "f%06llu", (unsigned long long)r->cursor++);
	return b_create(r, s, r->dir_nodeid, s->name);
}

static int mkfiles_done(struct run *r, struct fc_slot *s, char *why, size_t whylen)
{
	const struct fuse_entry_out *e = fc_out_args(s);
	const struct fuse_open_out *o = (const void *)(e + 1);
	int ret;

	if (s->state == 1) {
		s->state = 0;
		return forget_add(r, s->nodeid, 1);
	}
	ret = check_entry(e, S_IFREG, "CREATE", why, whylen);
	if (ret)
		return ret;
	s->nodeid = e->nodeid;
	s->fh = o->fh;
	s->state = 1;
	return 0;
}

static const struct phase mkfiles_phase = { "mkfiles", mkfiles_next, mkfiles_done };

/* LOOKUP before UNLINK, as the kernel always has a dentry for what it
 * unlinks: virtiofsd answers EIO to an UNLINK of a name it holds no inode
 * for, and the listing's FORGETs have dropped them all. */
static int rmfiles_next(struct run *r, struct fc_slot *s)
{
	if (s->state == 1)
		return b_name(r, s, FUSE_UNLINK, r->dir_nodeid, s->name, NULL, 0, 0);
	if (r->cursor >= r->cfg->dir_entries)
		return 1;
	snprintf(s->name, sizeof(s->name), "f%06llu", (unsigned long long)r->cursor++);
	return b_lookup(r, s, r->dir_nodeid, s->name);
}

static int rmfiles_done(struct run *r, struct fc_slot *s, char *why, size_t whylen)
{
	int ret;

	if (s->state == 1) {
		s->state = 0;
		return forget_add(r, s->nodeid, 1);
	}
	ret = check_entry(fc_out_args(s), S_IFREG, "LOOKUP", why, whylen);
	if (ret)
		return ret;
	s->nodeid = ((const struct fuse_entry_out *)fc_out_args(s))->nodeid;
	s->state = 1;
	return 0;
}

static const struct phase rmfiles_phase = { "rmfiles", rmfiles_next, rmfiles_done };

/* ---- the workloads: one state machine per slot ---- */

enum { CU_CREATE, CU_RELEASE, CU_UNLINK };
enum { RD_OPENDIR, RD_READ, RD_RELEASEDIR };
enum { WF_WRITE, WF_FSYNC };

static enum kind pick_mixed(struct run *r)
{
	unsigned x = (unsigned)(rnd(r) % 100);

	/* Reads dominate, as in the seeds' guest workloads; the rest keeps
	 * metadata paths busy at the same time. */
	if (x < 35)
		return K_RANDREAD;
	if (x < 55)
		return K_RANDWRITE;
	if (x < 70)
		return K_GETATTR;
	if (x < 85)
		return K_LOOKUP;
	return K_CREATE_UNLINK;
}

static int wl_next(struct run *r, struct fc_slot *s)
{
	uint64_t bs = r->cfg->block_size;
	bool chain_start = !(s->kind == K_CREATE_UNLINK && s->state != CU_CREATE) &&
			   !(s->kind == K_READDIRPLUS && s->state != RD_OPENDIR) &&
			   !(s->kind == K_WRITE_FSYNC && s->state != WF_WRITE);

	if (chain_start && r->stopping)
		return 1;
	if (chain_start && r->kind == K_MIXED)
		s->kind = pick_mixed(r);
	/* One slot per queue writes and syncs, as a database's log writer
	 * would; the others keep asking for attributes behind it. */
	if (chain_start && r->kind == K_WRITE_FSYNC)
		s->kind = s->index ? K_GETATTR : K_WRITE_FSYNC;
	switch (s->kind) {
	case K_READ:
		return b_read(r, s, (r->cursor++ % r->nblocks) * bs);
	case K_RANDREAD:
		return b_read(r, s, (rnd(r) % r->nblocks) * bs);
	case K_WRITE:
		return b_write(r, s, (r->cursor++ % r->nblocks) * bs);
	case K_RANDWRITE:
		return b_write(r, s, (rnd(r) % r->nblocks) * bs);
	case K_GETATTR:
		return b_getattr(r, s, r->file_nodeid);
	case K_LOOKUP:
		/* Alternate hits and misses across the whole run. */
		s->seq = r->cursor++;
		if (s->seq & 1) {
			snprintf(s->name, sizeof(s->name), "missing-%llu",
				 (unsigned long long)s->seq);
			b_lookup(r, s, r->workdir, s->name);
			s->allow_err = -ENOENT;
			return 0;
		}
		return b_lookup(r, s, r->workdir, "data");
	case K_CREATE_UNLINK:
		switch (s->state) {
		case CU_CREATE:
			snprintf(s->name, sizeof(s->name), "cu-%u-%u-%llu",
				 s->index, (unsigned)(s->seq >> 48),
				 (unsigned long long)r->cursor++);
			return b_create(r, s, r->workdir, s->name);
		case CU_RELEASE:
			return b_release(r, s, FUSE_RELEASE, s->nodeid, s->fh, O_RDWR);
		default:
			return b_name(r, s, FUSE_UNLINK, r->workdir, s->name, NULL, 0, 0);
		}
	case K_WRITE_FSYNC:
		if (s->state == WF_WRITE)
			return b_write(r, s, (r->cursor++ % r->nblocks) * bs);
		return b_fsync(r, s);
	case K_READDIRPLUS:
		switch (s->state) {
		case RD_OPENDIR:
			return b_open(r, s, FUSE_OPENDIR, r->dir_nodeid, O_RDONLY);
		case RD_READ:
			return b_readdirplus(r, s, r->dir_nodeid, s->fh, s->off);
		default:
			return b_release(r, s, FUSE_RELEASEDIR, r->dir_nodeid, s->fh, O_RDONLY);
		}
	default:
		return -EINVAL;
	}
}

static int parse_dirplus(struct run *r, struct fc_slot *s, char *why, size_t whylen)
{
	const struct fuse_out_header *out = fc_out_hdr(s);
	size_t left = out->len - sizeof(*out);
	const uint8_t *p = s->data;
	int ret;

	while (left) {
		const struct fuse_direntplus *d = (const void *)p;
		size_t reclen;
		unsigned long idx;
		char name[256], *end;

		if (left < FUSE_NAME_OFFSET_DIRENTPLUS) {
			snprintf(why, whylen, "READDIRPLUS: %zu trailing bytes", left);
			return -EBADMSG;
		}
		reclen = FUSE_DIRENTPLUS_SIZE(d);
		if (!d->dirent.namelen || d->dirent.namelen > 255 || reclen > left) {
			snprintf(why, whylen, "READDIRPLUS: entry of namelen %u in %zu bytes",
				 d->dirent.namelen, left);
			return -EBADMSG;
		}
		memcpy(name, d->dirent.name, d->dirent.namelen);
		name[d->dirent.namelen] = 0;
		s->off = d->dirent.off;
		p += reclen;
		left -= reclen;
		r->entries += r->measuring;
		if (!strcmp(name, ".") || !strcmp(name, ".."))
			continue;
		idx = strtoul(name + 1, &end, 10);
		if (name[0] != 'f' || *end || idx >= r->cfg->dir_entries) {
			snprintf(why, whylen, "READDIRPLUS: unexpected name '%s'", name);
			return -EBADMSG;
		}
		if (s->seen[idx / 8] & (1u << (idx % 8))) {
			snprintf(why, whylen, "READDIRPLUS: '%s' listed twice", name);
			return -EBADMSG;
		}
		s->seen[idx / 8] |= (uint8_t)(1u << (idx % 8));
		s->count++;
		/* A zero nodeid means "no attributes, no lookup": nothing to
		 * forget. Otherwise the entry holds a lookup count, like the
		 * dentries the Linux driver creates and later forgets. */
		if (!d->entry_out.nodeid)
			continue;
		if ((d->entry_out.attr.mode & S_IFMT) != S_IFREG) {
			snprintf(why, whylen, "READDIRPLUS: '%s' has mode %o", name,
				 d->entry_out.attr.mode);
			return -EBADMSG;
		}
		ret = forget_add(r, d->entry_out.nodeid, 1);
		if (ret)
			return ret;
	}
	return 0;
}

static int wl_done(struct run *r, struct fc_slot *s, char *why, size_t whylen)
{
	const struct fuse_out_header *out = fc_out_hdr(s);
	const struct fuse_entry_out *e = fc_out_args(s);
	int ret;

	switch (s->kind) {
	case K_READ:
	case K_RANDREAD:
	case K_WRITE:
	case K_RANDWRITE:
		return check_data_file(r, s, why, whylen);
	case K_WRITE_FSYNC:
		if (s->state == WF_WRITE) {
			s->state = WF_FSYNC;
			return check_data_file(r, s, why, whylen);
		}
		s->state = WF_WRITE;
		r->cycles += r->measuring;
		return 0;
	case K_GETATTR: {
		const struct fuse_attr_out *a = fc_out_args(s);

		if (a->attr.ino != r->file_ino || a->attr.size != r->nblocks * r->cfg->block_size ||
		    (a->attr.mode & S_IFMT) != S_IFREG) {
			snprintf(why, whylen, "GETATTR: ino %llu size %llu mode %o",
				 (unsigned long long)a->attr.ino,
				 (unsigned long long)a->attr.size, a->attr.mode);
			return -EBADMSG;
		}
		return 0;
	}
	case K_LOOKUP:
		if (s->seq & 1) {
			/* ENOENT, or a negative entry (nodeid 0) to cache. */
			if (!out->error && e->nodeid) {
				snprintf(why, whylen, "LOOKUP of missing name '%s' found nodeid %llu",
					 s->name, (unsigned long long)e->nodeid);
				return -EBADMSG;
			}
			return 0;
		}
		if (e->nodeid != r->file_nodeid || e->attr.ino != r->file_ino) {
			snprintf(why, whylen, "LOOKUP 'data': nodeid %llu ino %llu, expected %llu %llu",
				 (unsigned long long)e->nodeid, (unsigned long long)e->attr.ino,
				 (unsigned long long)r->file_nodeid, (unsigned long long)r->file_ino);
			return -EBADMSG;
		}
		r->file_lookups++;
		return 0;
	case K_CREATE_UNLINK:
		switch (s->state) {
		case CU_CREATE:
			ret = check_entry(e, S_IFREG, "CREATE", why, whylen);
			if (ret)
				return ret;
			s->nodeid = e->nodeid;
			s->fh = ((const struct fuse_open_out *)(e + 1))->fh;
			s->state = CU_RELEASE;
			return 0;
		case CU_RELEASE:
			s->state = CU_UNLINK;
			return 0;
		default:
			s->state = CU_CREATE;
			r->cycles += r->measuring;
			return forget_add(r, s->nodeid, 1);
		}
	case K_READDIRPLUS:
		switch (s->state) {
		case RD_OPENDIR:
			s->fh = ((const struct fuse_open_out *)fc_out_args(s))->fh;
			s->off = 0;
			s->count = 0;
			memset(s->seen, 0, (r->cfg->dir_entries + 7) / 8);
			s->state = RD_READ;
			return 0;
		case RD_READ:
			if (out->len > sizeof(*out))
				return parse_dirplus(r, s, why, whylen);
			s->state = RD_RELEASEDIR;
			if (s->count != r->cfg->dir_entries) {
				snprintf(why, whylen, "READDIRPLUS: listing ended after %u of %u entries",
					 s->count, r->cfg->dir_entries);
				return -EBADMSG;
			}
			return 0;
		default:
			s->state = RD_OPENDIR;
			r->cycles += r->measuring;
			return 0;
		}
	default:
		return -EINVAL;
	}
}

static const struct phase wl_phase = { "workload", wl_next, wl_done };

/* ---- one request at a time, for setup and teardown ---- */

static int sync_call(struct run *r, struct fc_slot *s)
{
	struct lq *q = &r->q[1];
	uint64_t start = load_now_ns();
	char why[256];
	uint16_t idx;
	uint32_t len;
	int ret, got;

	ret = submit(q, s);
	if (!ret)
		ret = kick(q);
	if (ret)
		return ret;
	while ((got = vu_queue_get_used(q->vq, &idx, &len)) == 0) {
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

static struct fc_slot *sync_slot(struct run *r)
{
	return &r->q[1].slots[0];
}

static int do_init(struct run *r)
{
	struct fuse_init_in in = {
		.major = FUSE_KERNEL_VERSION, .minor = 38, .max_readahead = 0,
		/* A cache=none guest: no writeback cache, no ACLs (they would
		 * change what the backend does), big requests, readdirplus. */
		.flags = FUSE_ASYNC_READ | FUSE_BIG_WRITES | FUSE_MAX_PAGES |
			 FUSE_DO_READDIRPLUS | FUSE_PARALLEL_DIROPS | FUSE_ASYNC_DIO,
	};
	struct fc_slot *s = sync_slot(r);
	const struct fuse_init_out *o;
	uint32_t olen;
	int ret;

	fc_begin(s, FUSE_INIT, 0, next_unique(r));
	ret = fc_arg(s, &in, sizeof(in));
	if (!ret)
		ret = fc_reply(s, sizeof(struct fuse_init_out));
	if (!ret)
		ret = sync_call(r, s);
	if (ret)
		return ret;
	o = fc_out_args(s);
	olen = fc_out_hdr(s)->len - (uint32_t)sizeof(struct fuse_out_header);
	if (olen < FUSE_COMPAT_22_INIT_OUT_SIZE || o->major != FUSE_KERNEL_VERSION ||
	    o->minor < 27) {
		fprintf(stderr, "ferryfs-load: INIT reply: %u bytes, version %u.%u\n",
			olen, o->major, o->minor);
		r->errors++;
		return -EPROTO;
	}
	r->proto_minor = o->minor;
	r->max_write = o->max_write;
	r->max_pages = (o->flags & FUSE_MAX_PAGES) && olen >= 34 ? o->max_pages : 32;
	if (r->kind != K_CREATE_UNLINK && r->kind != K_READDIRPLUS &&
	    (r->cfg->block_size > r->max_write ||
	     r->cfg->block_size > r->max_pages * 4096u)) {
		fprintf(stderr, "ferryfs-load: block size %u over the backend's max_write %u / max_pages %u\n",
			r->cfg->block_size, r->max_write, r->max_pages);
		return -EINVAL;
	}
	return 0;
}

static int setup(struct run *r)
{
	struct fuse_mkdir_in mk = { .mode = 0755, .umask = 022 };
	struct fc_slot *s = sync_slot(r);
	const struct fuse_entry_out *e;
	int ret;

	snprintf(r->workdir_name, sizeof(r->workdir_name), "ferryfs-load.%d.%llx",
		 (int)getpid(), (unsigned long long)(rnd(r) & 0xffffff));
	ret = b_name(r, s, FUSE_MKDIR, FUSE_ROOT_ID, r->workdir_name, &mk, sizeof(mk),
		     sizeof(struct fuse_entry_out));
	if (!ret)
		ret = sync_call(r, s);
	if (ret)
		return ret;
	e = fc_out_args(s);
	r->workdir = e->nodeid;

	if (r->kind == K_READDIRPLUS) {
		ret = b_name(r, s, FUSE_MKDIR, r->workdir, "dir", &mk, sizeof(mk),
			     sizeof(struct fuse_entry_out));
		if (!ret)
			ret = sync_call(r, s);
		if (ret)
			return ret;
		r->dir_nodeid = e->nodeid;
		r->cursor = 0;
		return engine(r, &mkfiles_phase, 0, 0);
	}
	if (r->kind == K_CREATE_UNLINK)
		return 0;
	ret = b_create(r, s, r->workdir, "data");
	if (!ret)
		ret = sync_call(r, s);
	if (ret)
		return ret;
	r->file_nodeid = e->nodeid;
	r->file_ino = e->attr.ino;
	r->file_fh = ((const struct fuse_open_out *)(e + 1))->fh;
	r->cursor = 0;
	return engine(r, &fill_phase, 0, 0);
}

static int teardown(struct run *r)
{
	struct fc_slot *s = sync_slot(r);
	int ret = 0;

	if (r->file_nodeid) {
		ret = b_release(r, s, FUSE_RELEASE, r->file_nodeid, r->file_fh, O_RDWR);
		if (!ret)
			ret = sync_call(r, s);
		if (!ret)
			ret = b_name(r, s, FUSE_UNLINK, r->workdir, "data", NULL, 0, 0);
		if (!ret)
			ret = sync_call(r, s);
		if (!ret)
			ret = forget_add(r, r->file_nodeid, 1 + r->file_lookups);
		if (ret)
			goto out;
	}
	if (r->dir_nodeid) {
		r->cursor = 0;
		ret = engine(r, &rmfiles_phase, 0, 0);
		if (!ret)
			ret = b_name(r, s, FUSE_RMDIR, r->workdir, "dir", NULL, 0, 0);
		if (!ret)
			ret = sync_call(r, s);
		if (!ret)
			ret = forget_add(r, r->dir_nodeid, 1);
		if (ret)
			goto out;
	}
	if (r->workdir) {
		ret = b_name(r, s, FUSE_RMDIR, FUSE_ROOT_ID, r->workdir_name, NULL, 0, 0);
		if (!ret)
			ret = sync_call(r, s);
		if (!ret)
			ret = forget_add(r, r->workdir, 1);
		if (ret)
			goto out;
	}
	/* Sends the remaining FORGETs and waits for the hiprio queue to drain. */
	r->cursor = UINT64_MAX;
	ret = engine(r, &rmfiles_phase, 0, 0);
	if (ret)
		goto out;
	/* DESTROY, as the Linux driver sends at unmount; it is optional in the
	 * protocol, so ENOSYS is fine. */
	fc_begin(s, FUSE_DESTROY, 0, next_unique(r));
	ret = fc_reply(s, 0);
	s->expect_len = sizeof(struct fuse_out_header);
	s->allow_err = -ENOSYS;
	if (!ret)
		ret = sync_call(r, s);
out:
	return ret;
}

/* ---- the run ---- */

static int alloc_queues(struct run *r)
{
	const struct load_cfg *c = r->cfg;
	uint32_t dcap = c->block_size > RDP_BUF ? c->block_size : RDP_BUF;
	uint16_t *nslots = NULL;
	uint64_t need = 1 << 20;
	unsigned i, j;
	int ret;

	r->nq = 1 + c->queues;
	nslots = calloc(r->nq, sizeof(*nslots));
	r->q = calloc(r->nq, sizeof(*r->q));
	if (!nslots || !r->q) {
		ret = -ENOMEM;
		goto out;
	}
	for (i = 0; i < r->nq; i++) {
		uint32_t cap = i ? dcap : (uint32_t)HIPRIO_DATA;

		nslots[i] = (uint16_t)(i ? c->queue_depth : HIPRIO_SLOTS);
		need += vu_queue_mem_needed(nslots[i], vu_has_indirect(&r->dev));
		need += (uint64_t)nslots[i] * (FC_CTRL_SIZE + ((cap + 4095) & ~4095u));
	}
	ret = vu_mem_create(&r->dev, need);
	if (ret)
		goto out;
	ret = vu_queues_create(&r->dev, r->nq, nslots);
	if (ret)
		goto out;
	for (i = 0; i < r->nq; i++) {
		struct lq *q = &r->q[i];
		uint32_t cap = i ? dcap : (uint32_t)HIPRIO_DATA;

		q->vq = &r->dev.queues[i];
		q->hiprio = i == 0;
		q->slots = calloc(nslots[i], sizeof(*q->slots));
		q->pend = calloc(nslots[i], sizeof(*q->pend));
		if (!q->slots || !q->pend) {
			ret = -ENOMEM;
			goto out;
		}
		for (j = 0; j < nslots[i]; j++) {
			struct fc_slot *s = &q->slots[j];

			s->index = (uint16_t)j;
			s->kind = r->kind;
			s->seq = (uint64_t)i << 48;
			s->ctrl = vu_alloc(&r->dev, FC_CTRL_SIZE, 4096, &s->ctrl_gpa);
			s->data = vu_alloc(&r->dev, cap, 4096, &s->data_gpa);
			s->data_cap = cap;
			if (!s->ctrl || !s->data) {
				ret = -ENOMEM;
				goto out;
			}
			if (i && r->kind == K_READDIRPLUS) {
				s->seen = calloc(1, (c->dir_entries + 7) / 8);
				if (!s->seen) {
					ret = -ENOMEM;
					goto out;
				}
			}
		}
	}
out:
	free(nslots);
	return ret;
}

static void free_run(struct run *r)
{
	unsigned i, j;

	for (i = 0; r->q && i < r->nq; i++) {
		for (j = 0; r->q[i].slots && j < r->q[i].vq->nslots; j++)
			free(r->q[i].slots[j].seen);
		free(r->q[i].slots);
		free(r->q[i].pend);
	}
	free(r->q);
	free(r->lat);
	free(r->forgets);
	vu_close(&r->dev);
}

/* --cold: drops the data file from the host's page cache over and over
 * while the workload runs, so that its reads keep coming from the disk. */
struct evictor {
	int fd;
	atomic_bool stop;
	pthread_t thread;
	bool running;
};

static void *evict_loop(void *arg)
{
	struct evictor *e = arg;
	struct timespec ts = { 0, 20 * 1000 * 1000 };

	while (!atomic_load(&e->stop)) {
		posix_fadvise(e->fd, 0, 0, POSIX_FADV_DONTNEED);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* Syncs the data file through the backend (dirty pages cannot be dropped)
 * and starts dropping it. */
static int evict_start(struct run *r, struct evictor *e)
{
	struct fc_slot *s = sync_slot(r);
	char path[4096];
	int ret;

	ret = b_fsync(r, s);
	if (!ret)
		ret = sync_call(r, s);
	if (ret)
		return ret;
	snprintf(path, sizeof(path), "%s/%s/data", r->cfg->cold_dir, r->workdir_name);
	e->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (e->fd < 0) {
		ret = -errno;
		fprintf(stderr, "ferryfs-load: --cold: %s: %s (is it the directory the backend shares?)\n",
			path, strerror(errno));
		return ret;
	}
	posix_fadvise(e->fd, 0, 0, POSIX_FADV_DONTNEED);
	ret = -pthread_create(&e->thread, NULL, evict_loop, e);
	if (ret) {
		close(e->fd);
		return ret;
	}
	e->running = true;
	return 0;
}

static void evict_stop(struct evictor *e)
{
	if (!e->running)
		return;
	atomic_store(&e->stop, true);
	pthread_join(e->thread, NULL);
	close(e->fd);
	e->running = false;
}

int load_run(const struct load_cfg *cfg, struct load_result *res)
{
	struct run r = { .cfg = cfg, .rng = cfg->seed | 1 };
	struct evictor ev = { .fd = -1 };
	uint64_t t0, ws;
	size_t i;
	int ret;

	memset(res, 0, sizeof(*res));
	res->idle_daemon_cpu_us = -1;
	r.dev.sock = -1;
	r.dev.memfd = -1;
	for (i = 0; i < sizeof(kind_names) / sizeof(kind_names[0]); i++)
		if (!strcmp(cfg->workload, kind_names[i]))
			r.kind = (enum kind)i;
	r.nblocks = cfg->file_size / cfg->block_size;

	t0 = load_now_ns();
	ret = vu_connect(&r.dev, cfg->socket);
	if (ret) {
		fprintf(stderr, "ferryfs-load: connect %s: %s\n", cfg->socket, strerror(-ret));
		goto out;
	}
	ret = vu_negotiate(&r.dev, cfg->event_idx);
	if (ret)
		goto out;
	if (r.dev.queue_num_max && 1 + cfg->queues > r.dev.queue_num_max) {
		fprintf(stderr, "ferryfs-load: --queues %u but the backend has %llu queues (hiprio included)\n",
			cfg->queues, (unsigned long long)r.dev.queue_num_max);
		ret = -EINVAL;
		goto out;
	}
	ret = alloc_queues(&r);
	if (ret)
		goto out;
	ret = vu_start(&r.dev);
	if (ret)
		goto out;
	ret = do_init(&r);
	if (ret)
		goto out;
	ret = setup(&r);
	if (ret)
		goto out;
	if (r.errors) {
		fprintf(stderr, "ferryfs-load: setup got wrong replies; not measuring\n");
		goto teardown;
	}
	if (cfg->cold_dir && r.file_nodeid) {
		ret = evict_start(&r, &ev);
		if (ret)
			goto out;
	}
	res->setup_s = (double)(load_now_ns() - t0) / 1e9;
	r.cursor = 0;
	ws = load_now_ns() + (uint64_t)(cfg->warmup * 1e9);
	ret = engine(&r, &wl_phase, ws, ws + (uint64_t)(cfg->seconds * 1e9));
	evict_stop(&ev);
	if (ret)
		goto out;
	if (cfg->idle > 0)
		res->idle_daemon_cpu_us = load_idle_cpu_us(cfg->daemon_pid, cfg->idle);
teardown:
	ret = teardown(&r);
out:
	res->errors = r.errors;
	res->elapsed_s = (double)(r.t_end - r.t_start) / 1e9;
	res->ops = r.ops;
	res->bytes = r.bytes;
	res->entries = r.entries;
	res->cycles = r.cycles;
	load_latency_summary(r.lat, r.nlat, res);
	res->daemon_cpu_us = (cfg->daemon_pid > 0 && (int64_t)r.cpu0_us >= 0 &&
			      (int64_t)r.cpu1_us >= 0) ?
			     (double)r.cpu1_us - (double)r.cpu0_us : -1;
	res->load_cpu_us = r.self1_us - r.self0_us;
	for (i = 0; r.q && i < r.nq; i++) {
		res->kicks += r.q[i].vq ? r.q[i].vq->kicks : 0;
		res->calls += r.q[i].vq ? r.q[i].vq->calls_seen : 0;
	}
	res->proto_minor = r.proto_minor;
	res->max_write = r.max_write;
	res->max_pages = r.max_pages;
	res->event_idx = r.dev.features & (1ull << VIRTIO_RING_F_EVENT_IDX);
	res->indirect = vu_has_indirect(&r.dev);
	res->queue_num_max = r.dev.queue_num_max;
	free_run(&r);
	return ret;
}
