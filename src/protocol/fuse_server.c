/* FUSE session lifetime, INIT/DESTROY, and the copy-then-validate request path. */
#include "protocol/fuse_opcodes.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"

int fuse_server_new(struct fuse_server **out,
		     const struct fuse_server_opts *opts,
		     const struct fs_ops *ops, void *fs)
{
	struct fuse_server *se;
	int rc;

	se = calloc(1, sizeof(*se));
	if (!se)
		return -ENOMEM;
	se->opts = *opts;
	if (se->opts.max_write == 0)
		se->opts.max_write = FERRY_DEFAULT_MAX_WRITE;
	/* The client never sends less than a page per request, and max_pages
	 * is a 16-bit field. */
	if (se->opts.max_write < FERRY_PAGE_SIZE)
		se->opts.max_write = FERRY_PAGE_SIZE;
	if (se->opts.max_write > UINT16_MAX * FERRY_PAGE_SIZE)
		se->opts.max_write = UINT16_MAX * FERRY_PAGE_SIZE;
	se->ops = ops;
	se->fs = fs;
	atomic_init(&se->state, SESSION_NEW);
	rc = -pthread_mutex_init(&se->workers_lock, NULL);
	if (rc)
		goto err_free;
	rc = fuse_deferred_init(se);
	if (rc)
		goto err_workers_lock;
	*out = se;
	return 0;

err_workers_lock:
	pthread_mutex_destroy(&se->workers_lock);
err_free:
	free(se);
	return rc;
}

void fuse_server_free(struct fuse_server *se)
{
	if (!se)
		return;
	/* A daemon going away under a mounted guest never saw DESTROY; the
	 * backend still gets its one destroy call, as libfuse does. */
	if (atomic_load(&se->state) == SESSION_READY && se->ops->destroy)
		se->ops->destroy(se->fs);
	fuse_deferred_destroy(se);
	pthread_mutex_destroy(&se->workers_lock);
	free(se);
}

int fuse_worker_new(struct fuse_server *se, struct fuse_worker **out)
{
	struct fuse_worker *w;

	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->arg_buf = malloc(FERRY_ARG_BUF_SIZE);
	w->out_buf = malloc(FERRY_OUT_BUF_SIZE);
	if (!w->arg_buf || !w->out_buf)
		goto err_free;
	w->se = se;
	atomic_init(&w->busy, false);
	pthread_mutex_lock(&se->workers_lock);
	w->next = se->workers;
	se->workers = w;
	pthread_mutex_unlock(&se->workers_lock);
	*out = w;
	return 0;

err_free:
	free(w->arg_buf);
	free(w->out_buf);
	free(w);
	return -ENOMEM;
}

static void stats_accumulate(struct fuse_stats *dst, const struct fuse_stats *src)
{
	for (unsigned i = 0; i < FUSE_STATS_SLOTS; i++) {
		dst->op[i].count += ferry_count_read(&src->op[i].count);
		dst->op[i].errors += ferry_count_read(&src->op[i].errors);
		ferry_hist_accumulate(&dst->op[i].latency_us, &src->op[i].latency_us);
	}
	dst->write_runs += ferry_count_read(&src->write_runs);
	dst->run_writes += ferry_count_read(&src->run_writes);
}

void fuse_server_stats(struct fuse_server *se, struct fuse_stats *out)
{
	pthread_mutex_lock(&se->workers_lock);
	*out = se->retired_stats;
	for (struct fuse_worker *w = se->workers; w; w = w->next)
		stats_accumulate(out, &w->stats);
	pthread_mutex_unlock(&se->workers_lock);
}

const char *fuse_stats_slot_name(unsigned slot)
{
	const struct fuse_op_desc *desc;

	if (slot == 0)
		return "other";
	desc = slot < FUSE_STATS_SLOTS ? fuse_op_lookup(slot) : NULL;
	if (!desc || !desc->name)
		return NULL;
	return strncmp(desc->name, "FUSE_", 5) ? desc->name : desc->name + 5;
}

/* Plain single-writer increments: no lock, no locked instruction. */
static void stats_record(struct fuse_worker *w, const struct fuse_op_desc *desc,
			 uint32_t opcode, int rc, uint64_t start_ns)
{
	/* Unknown opcodes share slot 0, so every request has a named row. */
	struct fuse_op_stats *st = &w->stats.op[desc && opcode < FUSE_STATS_SLOTS ? opcode : 0];

	ferry_count(&st->count, 1);
	if (rc < 0)
		ferry_count(&st->errors, 1);
	ferry_hist_add(&st->latency_us, (ferry_monotonic_ns() - start_ns) / 1000u);
}

void fuse_stats_record(struct fuse_worker *w, uint32_t opcode, int rc, uint64_t start_ns)
{
	stats_record(w, fuse_op_lookup(opcode), opcode, rc, start_ns);
}

void fuse_worker_free(struct fuse_worker *w)
{
	struct fuse_server *se;

	if (!w)
		return;
	se = w->se;
	pthread_mutex_lock(&se->workers_lock);
	stats_accumulate(&se->retired_stats, &w->stats);
	for (struct fuse_worker **p = &se->workers; *p; p = &(*p)->next) {
		if (*p == w) {
			*p = w->next;
			break;
		}
	}
	pthread_mutex_unlock(&se->workers_lock);
	free(w->arg_buf);
	free(w->out_buf);
	free(w);
}

/* ------------------------------------------------------------------ INIT */

uint64_t fuse_init_offered_flags(const struct fuse_server *se)
{
	const struct fuse_server_opts *o = &se->opts;
	const struct fs_ops *ops = se->ops;
	uint64_t f = FUSE_ASYNC_READ | FUSE_PARALLEL_DIROPS | FUSE_BIG_WRITES |
		     FUSE_AUTO_INVAL_DATA | FUSE_ATOMIC_O_TRUNC | FUSE_ASYNC_DIO |
		     FUSE_INIT_EXT | FUSE_MAX_PAGES | FUSE_EXPORT_SUPPORT;

	if (o->readdirplus)
		f |= FUSE_DO_READDIRPLUS | FUSE_READDIRPLUS_AUTO;
	if (o->killpriv_v2)
		f |= FUSE_HANDLE_KILLPRIV_V2;
	if (o->writeback)
		f |= FUSE_WRITEBACK_CACHE;
	if (o->xattr)
		f |= FUSE_SETXATTR_EXT;
	/* The client's ACL checks read the ACLs through GETXATTR. DONT_MASK
	 * with it: the client then leaves the umask to us, and the host
	 * applies it only where the parent has no default ACL. */
	if (o->posix_acl && o->xattr)
		f |= FUSE_POSIX_ACL | FUSE_DONT_MASK;
	if (o->announce_submounts)
		f |= FUSE_SUBMOUNTS;
	if (o->security_label)
		f |= FUSE_SECURITY_CTX;
	/* Costs nothing unless used: the client sends the group only when
	 * the caller creates in a directory of a group not its primary one. */
	f |= FUSE_CREATE_SUPP_GROUP;
	/* Offering locks the backend cannot take would make the client send
	 * requests that all fail with ENOSYS instead of locking locally. */
	if (o->flock && ops->setlk)
		f |= FUSE_FLOCK_LOCKS;
	if (o->posix_lock && ops->getlk && ops->setlk)
		f |= FUSE_POSIX_LOCKS;
	if (o->cache_symlinks)
		f |= FUSE_CACHE_SYMLINKS;
	/* Only clients that know the flag (7.39, Linux 6.6) offer it; older
	 * ones never agree, so their shared mmap of DIRECT_IO files stays
	 * refused (ENODEV). */
	if (o->allow_mmap)
		f |= FUSE_DIRECT_IO_ALLOW_MMAP;
	/* Only clients that know the flag (7.41, Linux 6.12) offer it. Once
	 * agreed, requests that create nothing come without the caller's ids
	 * (FUSE_INVALID_UIDGID), and creating ones with the ids an idmapped
	 * mount gave the caller; the client only agrees with
	 * default_permissions, so its kernel has judged every request. What
	 * the daemon decides by the caller's ids itself (suid/sgid on an
	 * O_TRUNC open, trusted.* in a listing) then goes as for an
	 * unprivileged caller: hence an option. A backend that must know
	 * every caller withdraws it at init. */
	if (o->allow_idmap)
		f |= FUSE_ALLOW_IDMAP;
	return f;
}

static void init_reply_version_only(struct fuse_request *req)
{
	struct fuse_init_out *out = &req->out.init;

	memset(out, 0, sizeof(*out));
	out->major = FERRY_FUSE_MAJOR;
	out->minor = FERRY_FUSE_MINOR;
	req->reply_arg = out;
	req->reply_len = sizeof(*out);
}

/*
 * Negotiates the protocol. Only one worker may negotiate: the CAS from NEW to
 * INITIALIZING excludes a concurrent second INIT, and the release store of
 * READY publishes conn to workers that load the state with acquire.
 */
int fuse_do_init(struct fuse_request *req)
{
	struct fuse_server *se = req->se;
	struct fuse_init_in in;
	struct fuse_init_out *out = &req->out.init;
	int expected = SESSION_NEW;
	uint64_t client_flags, agreed;
	int rc;

	if (!atomic_compare_exchange_strong(&se->state, &expected, SESSION_INITIALIZING)) {
		log_debug("fuse: INIT while already initialised (state %d)", expected);
		return -EIO;
	}

	/* Clients before 7.36 send the 16-byte struct; the rest stays zero. */
	memset(&in, 0, sizeof(in));
	memcpy(&in, req->arg, req->arg_len < sizeof(in) ? req->arg_len : sizeof(in));

	if (in.major > FERRY_FUSE_MAJOR) {
		/* Per the protocol: answer with our version only and wait for
		 * the client to retry INIT with a major it shares with us. */
		log_info("fuse: client offers %u.%u, answering with %u.%u",
			 in.major, in.minor, FERRY_FUSE_MAJOR, FERRY_FUSE_MINOR);
		init_reply_version_only(req);
		rc = 0;
		goto out_not_ready;
	}
	if (in.major < FERRY_FUSE_MAJOR || in.minor < FERRY_FUSE_MIN_MINOR) {
		log_err("fuse: client protocol %u.%u too old (need %u.%u)",
			in.major, in.minor, FERRY_FUSE_MAJOR, FERRY_FUSE_MIN_MINOR);
		rc = -EPROTO;
		goto out_not_ready;
	}

	client_flags = in.flags;
	if ((in.flags & FUSE_INIT_EXT) && req->arg_len >= sizeof(in))
		client_flags |= (uint64_t)in.flags2 << 32;
	agreed = fuse_init_offered_flags(se) & client_flags;
	/* Extensions (total_extlen) came with 7.38: an older client could not
	 * send the group it would have agreed to. */
	if (in.minor < 38)
		agreed &= ~FUSE_CREATE_SUPP_GROUP;
	/* The flag is 7.41's: a client that answers for an older protocol
	 * keeps sending its callers' ids, whatever bit 40 said. */
	if (in.minor < 41)
		agreed &= ~FUSE_ALLOW_IDMAP;

	memset(&se->conn, 0, sizeof(se->conn));
	se->conn.proto_minor = in.minor < FERRY_FUSE_MINOR ? in.minor : FERRY_FUSE_MINOR;
	se->conn.flags = agreed;
	se->conn.max_write = se->opts.max_write;
	se->max_readahead = in.max_readahead;
	se->setxattr_in_size = (agreed & FUSE_SETXATTR_EXT) ?
		sizeof(struct fuse_setxattr_in) : FUSE_COMPAT_SETXATTR_IN_SIZE;

	if (se->ops->init) {
		rc = se->ops->init(se->fs, &se->conn);
		if (rc < 0) {
			log_err("fuse: backend init failed: %s", strerror(-rc));
			goto out_not_ready;
		}
		/* The backend may only take FUSE_ALLOW_IDMAP back. */
		agreed &= se->conn.flags | ~FUSE_ALLOW_IDMAP;
		se->conn.flags = agreed;
	}

	memset(out, 0, sizeof(*out));
	out->major = FERRY_FUSE_MAJOR;
	out->minor = se->conn.proto_minor;
	out->max_readahead = in.max_readahead;
	out->flags = (uint32_t)agreed;
	if (agreed & FUSE_INIT_EXT)
		out->flags2 = (uint32_t)(agreed >> 32);
	out->max_write = se->conn.max_write;
	out->max_pages = (uint16_t)((se->conn.max_write + FERRY_PAGE_SIZE - 1) / FERRY_PAGE_SIZE);
	out->time_gran = 1;
	out->max_background = FERRY_MAX_BACKGROUND;
	out->congestion_threshold = FERRY_CONGESTION_THRESHOLD;
	req->reply_arg = out;
	req->reply_len = sizeof(*out);

	/* What the client asked for and we left out: which newer kernel
	 * features a guest would use that we do not serve (docs/options.md). */
	log_info("fuse: client %u.%u offers 0x%llx, not agreed 0x%llx",
		 in.major, in.minor, (unsigned long long)client_flags,
		 (unsigned long long)(client_flags & ~agreed));
	log_info("fuse: session %u.%u, flags 0x%llx, max_write %u",
		 out->major, out->minor, (unsigned long long)agreed, out->max_write);
	atomic_store_explicit(&se->state, SESSION_READY, memory_order_release);
	return 0;

out_not_ready:
	atomic_store_explicit(&se->state, SESSION_NEW, memory_order_release);
	return rc;
}

/*
 * Ends a session the caller moved to SESSION_DESTROYING: new requests see a
 * state other than READY and get EIO, and we wait for requests other
 * workers already admitted (self is the caller's own worker, or NULL), so
 * the backend's destroy never runs under a live op. A guest that keeps a
 * SETLKW blocked stalls only its own queue here.
 */
static void session_end(struct fuse_server *se, const struct fuse_worker *self)
{
	pthread_mutex_lock(&se->workers_lock);
	for (struct fuse_worker *w = se->workers; w; w = w->next) {
		if (w == self)
			continue;
		while (atomic_load(&w->busy))
			sched_yield();
	}
	pthread_mutex_unlock(&se->workers_lock);
	fuse_deferred_cancel_all(se);

	if (se->ops->destroy)
		se->ops->destroy(se->fs);
	atomic_store_explicit(&se->state, SESSION_NEW, memory_order_release);
}

/* DESTROY: the client unmounted; it only sends this once idle. */
int fuse_do_destroy(struct fuse_request *req)
{
	struct fuse_server *se = req->se;
	int expected = SESSION_READY;

	if (!atomic_compare_exchange_strong(&se->state, &expected, SESSION_DESTROYING))
		return -EIO;
	session_end(se, req->w);
	return 0;
}

void fuse_server_reset(struct fuse_server *se)
{
	int expected = SESSION_READY;

	/* NEW: nothing to release (never initialised, or already reset). */
	if (!atomic_compare_exchange_strong(&se->state, &expected, SESSION_DESTROYING))
		return;
	session_end(se, NULL);
}

/* --------------------------------------------------------- request path */

/*
 * The op is over. Only session_end waits on busy, and it needs the op's
 * effects to be visible once it sees false: a release store is enough (a
 * plain mov on x86, where the default sequentially consistent store is an
 * xchg, a full barrier after every request). The Dekker pair below is the
 * store of true and the load of the state after it; this store is not part
 * of it, and the next request's store of true, sequenced after this one,
 * is what DESTROY's load must see.
 */
void fuse_worker_idle(struct fuse_worker *w)
{
	/* A held WRITE is still to be done: its run's flush idles. */
	if (w->run.count)
		return;
	atomic_store_explicit(&w->busy, false, memory_order_release);
}

/*
 * Admits a request to a READY session. busy is set before the state is
 * re-read (both sequentially consistent), so DESTROY either sees us busy or
 * we see it destroying: the Dekker pattern, without a shared counter.
 */
static int req_admit(struct fuse_request *req)
{
	struct fuse_worker *w = req->w;

	if (atomic_load_explicit(&req->se->state, memory_order_acquire) != SESSION_READY)
		return -EIO;
	atomic_store(&w->busy, true);
	if (atomic_load(&req->se->state) != SESSION_READY) {
		fuse_worker_idle(w);
		return -EIO;
	}
	return 0;
}

/*
 * Length rules, all applied to our copy of the header:
 *  - in.len counts header, arguments, payload and extensions, and must be at
 *    least the header and at most the readable chain. Readable bytes past
 *    in.len are ignored: the Linux driver makes them equal, but a frontend
 *    posting fixed-size buffers stays correct and nothing past in.len is
 *    ever read.
 *  - total_extlen (8-byte units) must fit inside in.len; the argument block
 *    is what lies between the header and the extensions.
 */
static int req_prepare(struct fuse_request *req, const struct fuse_op_desc *desc,
		       size_t rd_len)
{
	struct fuse_server *se = req->se;
	size_t body_len, ext_len, copy_len;
	int rc;

	if (req->in.len < sizeof(struct fuse_in_header) || req->in.len > rd_len) {
		log_debug("fuse: unique %llu: in.len %u, chain %zu",
			  (unsigned long long)req->in.unique, req->in.len, rd_len);
		return -EINVAL;
	}
	body_len = req->in.len - sizeof(struct fuse_in_header);
	ext_len = (size_t)req->in.total_extlen * 8;
	if (ext_len > body_len)
		return -EINVAL;
	req->arg_len = body_len - ext_len;

	/* Before INIT everything but INIT gets EIO, unknown opcodes too;
	 * INIT itself checks the state when it claims the session. */
	if (req->in.opcode != FUSE_INIT) {
		rc = req_admit(req);
		if (rc < 0)
			return rc;
	}
	if (!desc || !desc->run)
		return -ENOSYS;
	if ((desc->flags & FUSE_OP_XATTR) && !se->opts.xattr)
		return -ENOSYS;
	if ((desc->flags & FUSE_OP_MODIFIES) && se->opts.readonly)
		return -EROFS;
	if (req->arg_len < desc->min_arg) {
		log_debug("fuse: %s: %zu argument bytes, need %u",
			  desc->name, req->arg_len, desc->min_arg);
		return -EINVAL;
	}
	/* Checked before the op runs: a LOOKUP whose entry cannot be sent
	 * would leak the reference the backend took. */
	if (req->wr_len - sizeof(struct fuse_out_header) < desc->reply_arg &&
	    !(desc->flags & FUSE_OP_NO_REPLY)) {
		log_debug("fuse: %s: reply of %u bytes, writable %zu",
			  desc->name, desc->reply_arg, req->wr_len);
		return -ERANGE;
	}

	copy_len = (desc->flags & FUSE_OP_HEAD_ONLY) ? desc->min_arg : body_len;
	if (copy_len > FERRY_ARG_BUF_SIZE) {
		log_debug("fuse: %s: %zu argument bytes exceed our limit",
			  desc->name, copy_len);
		return -EINVAL;
	}
	/* The guest may rewrite its buffers while we run: from here on only
	 * the copy is looked at. */
	iov_copy_from(req->w->arg_buf, req->treq->rd, req->treq->rd_cnt,
		      sizeof(struct fuse_in_header), copy_len);
	req->arg = req->w->arg_buf;
	if (desc->flags & FUSE_OP_HEAD_ONLY) {
		req->payload_len = req->arg_len - copy_len;
		req->arg_len = copy_len;
	}
	/* Last, so a request that is malformed as well is refused as such. */
	if (!fuse_backend_has_op(se->ops, desc))
		return -ENOSYS;
	return 0;
}

uint32_t fuse_request_reply(struct fuse_request *req, int rc)
{
	struct fuse_out_header out = { .unique = req->in.unique };
	size_t len = sizeof(out);

	if (rc > 0)
		rc = 0;
	if (rc < -4095)
		rc = -EIO;
	if (rc == 0) {
		len += req->reply_len + req->reply_in_place;
		if (len > req->wr_len) {
			/* Only a backend bug gets here; all sizes were
			 * clipped or checked against wr before. */
			log_err("fuse: unique %llu: reply of %zu bytes exceeds %zu",
				(unsigned long long)req->in.unique, len, req->wr_len);
			rc = -ERANGE;
			len = sizeof(out);
		}
	}
	out.error = rc;
	out.len = (uint32_t)len;
	if (rc == 0 && req->reply_len)
		iov_copy_to(req->treq->wr, req->treq->wr_cnt, sizeof(out) + req->reply_in_place,
			    req->reply_arg, req->reply_len);
	iov_copy_to(req->treq->wr, req->treq->wr_cnt, 0, &out, sizeof(out));
	return (uint32_t)len;
}

uint32_t fuse_worker_process(struct fuse_worker *w, const struct ferry_req *treq)
{
	struct fuse_request req;
	const struct fuse_op_desc *desc;
	uint64_t start_ns = ferry_monotonic_ns();
	size_t rd_len;
	bool no_reply;
	uint32_t len;
	int rc;

	memset(&req, 0, sizeof(req));
	req.w = w;
	req.se = w->se;
	req.treq = treq;
	req.start_ns = start_ns;
	req.wr_len = iov_length(treq->wr, treq->wr_cnt);
	rd_len = iov_length(treq->rd, treq->rd_cnt);

	if (rd_len < sizeof(req.in)) {
		log_debug("fuse: request of %zu bytes has no full header", rd_len);
		return 0;
	}
	iov_copy_from(&req.in, treq->rd, treq->rd_cnt, 0, sizeof(req.in));
	/* WRITEs held in a run go to the file before anything else runs. */
	if (w->run.count && req.in.opcode != FUSE_WRITE)
		fuse_write_run_flush(w);
	req.ctx.unique = req.in.unique;
	req.ctx.uid = req.in.uid;
	req.ctx.gid = req.in.gid;
	req.ctx.pid = req.in.pid;
	req.ctx.can_defer = treq->chan != NULL;
	req.ctx.queued_behind = treq->queued_behind;

	desc = fuse_op_lookup(req.in.opcode);
	no_reply = desc && (desc->flags & FUSE_OP_NO_REPLY);
	if (!no_reply && req.wr_len < sizeof(struct fuse_out_header)) {
		log_debug("fuse: unique %llu opcode %u: writable part of %zu bytes, no reply possible",
			  (unsigned long long)req.in.unique, req.in.opcode, req.wr_len);
		return 0;
	}

	rc = req_prepare(&req, desc, rd_len);
	if (rc == 0)
		rc = desc->run(&req);
	if (req.deferred) {
		/* The op owns the reply now; answering here too would send
		 * two replies for one request. */
		if (rc != FERRY_DEFERRED)
			log_err("fuse: unique %llu %s: deferred but returned %d",
				(unsigned long long)req.in.unique, desc->name, rc);
		fuse_worker_idle(w);
		/* Counted now; the wait for the lock is not service time. */
		stats_record(w, desc, req.in.opcode, 0, start_ns);
		return FERRY_DEFERRED;
	}
	if (req.held)
		return 0;   /* the run's flush answers it */
	if (rc < 0 && ferry_log_level >= LOG_LVL_DEBUG)
		log_debug("fuse: unique %llu %s: %s", (unsigned long long)req.in.unique,
			  desc ? desc->name : "unknown opcode", strerror(-rc));

	fuse_worker_idle(w);
	len = no_reply ? 0 : fuse_request_reply(&req, rc);
	stats_record(w, desc, req.in.opcode, rc, start_ns);
	return len;
}
