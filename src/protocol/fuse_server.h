/* FUSE session: INIT negotiation, request decoding and dispatch to fs_ops. */
#ifndef FERRY_FUSE_SERVER_H
#define FERRY_FUSE_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "common/ferry_req.h"
#include "migration/stream.h"
#include "common/stats.h"
#include "protocol/fuse_ops.h"

struct fuse_server_opts {
	uint32_t max_write;          /* bytes; max_pages follows from it */
	bool writeback;              /* FUSE_WRITEBACK_CACHE */
	bool xattr;                  /* serve SET/GET/LIST/REMOVEXATTR */
	bool posix_acl;              /* FUSE_POSIX_ACL */
	bool killpriv_v2;            /* FUSE_HANDLE_KILLPRIV_V2 */
	bool readdirplus;            /* DO_READDIRPLUS + READDIRPLUS_AUTO */
	bool announce_submounts;     /* FUSE_SUBMOUNTS */
	bool security_label;         /* FUSE_SECURITY_CTX */
	bool flock;                  /* FUSE_FLOCK_LOCKS */
	bool posix_lock;             /* FUSE_POSIX_LOCKS */
	bool cache_symlinks;         /* FUSE_CACHE_SYMLINKS */
	bool allow_mmap;             /* FUSE_DIRECT_IO_ALLOW_MMAP (7.39) */
	bool allow_idmap;            /* FUSE_ALLOW_IDMAP (7.41) */
	/* Every opcode that always changes something gets EROFS before the
	 * backend sees it. The backend still judges the ops that change
	 * something only with some arguments (SETATTR, OPEN). */
	bool readonly;
};

struct fuse_server;
struct fuse_worker;

int fuse_server_new(struct fuse_server **out,
		     const struct fuse_server_opts *opts,
		     const struct fs_ops *ops, void *fs);
void fuse_server_free(struct fuse_server *se);
/*
 * Ends the session as a DESTROY would, for a client that went away without
 * one (its transport was reset, e.g. a guest reboot): waits for requests in
 * flight, calls the backend's destroy, and leaves the session waiting for
 * a new INIT. No-op on a session that was never initialised. Must not race
 * an INIT; the transport calls it with its queues stopped.
 */
void fuse_server_reset(struct fuse_server *se);

/*
 * Live migration (protocol/fuse_migration.c). export: the negotiated
 * session (initialized false before INIT); -EBUSY while INIT or DESTROY
 * runs. import: on a session that had no INIT, answers from now on as if
 * the INIT the source agreed had happened here (no INIT comes); refuses,
 * with why in reason, what this server could not have agreed to (flags it
 * does not offer, a minor above its own, another max_write). Both with the
 * transport's workers stopped.
 */
int fuse_server_export(struct fuse_server *se, struct mig_session *out);
int fuse_server_import(struct fuse_server *se, const struct mig_session *in,
			char *reason, size_t reason_size);

/* A worker holds one thread's scratch buffers, so requests need no malloc.
 * Each queue thread owns one; workers of one session run concurrently. */
int fuse_worker_new(struct fuse_server *se, struct fuse_worker **out);
void fuse_worker_free(struct fuse_worker *w);

/*
 * Processes one request (the serve() of a ferry_service). req->rd is the
 * request as the client sent it (FUSE in-header, arguments, write payload),
 * req->wr the room for the reply. READ data goes straight into wr and
 * WRITE data straight from rd. Returns the number of bytes written into
 * wr: 0 for requests that get no reply (FORGET, BATCH_FORGET, INTERRUPT)
 * and for requests too malformed to answer, or FERRY_DEFERRED: an op
 * deferred the request (fuse_deferred_begin), and its reply goes to
 * req->chan once the op finishes; wr must not be used for it any more.
 * Without req->chan no request is deferred: ops that would wait fail with
 * ENOLCK or do their work inline.
 */
uint32_t fuse_worker_process(struct fuse_worker *w, const struct ferry_req *req);
/*
 * The serve_run() of a ferry_service: processes reqs[0] and the WRITEs
 * after it that continue it (the same open file, the next bytes), as
 * fuse_worker_process would one by one, but with one system call for all
 * of them. Returns how many it processed (1 when reqs[0] is anything
 * else), their reply lengths (or FERRY_DEFERRED) in lens. Every request's
 * buffers must stay valid until this returns.
 */
unsigned fuse_worker_process_run(struct fuse_worker *w, const struct ferry_req *const *reqs,
				 unsigned n, uint32_t *lens);
/* The worker stops: its deferred requests are cancelled (they complete
 * soon, with EINTR, through their channel). */
void fuse_worker_cancel_deferred(struct fuse_worker *w);

/* Opcodes 1..63 are counted each in their own slot; slot 0 counts every
 * other opcode (unknown ones, CUSE_INIT). */
#define FUSE_STATS_SLOTS 64

struct fuse_op_stats {
	uint64_t count;
	uint64_t errors;                 /* replies with a negative error */
	struct ferry_hist latency_us;    /* decode, backend and reply assembly */
};

struct fuse_stats {
	struct fuse_op_stats op[FUSE_STATS_SLOTS];
	uint64_t write_runs;             /* system calls that wrote 2 or more WRITEs */
	uint64_t run_writes;             /* the WRITEs those calls wrote */
};

/* Sums the counters of every worker of the session, live or freed. Reads
 * the live ones racily (see common/stats.h); never stops a request. */
void fuse_server_stats(struct fuse_server *se, struct fuse_stats *out);
/* The opcode counted in a slot's name without the FUSE_ prefix ("LOOKUP"),
 * "other" for slot 0, NULL for a slot no known opcode uses. */
const char *fuse_stats_slot_name(unsigned slot);

#endif
