/* Protocol-layer internals shared by the session, the opcode table and handlers, argument parsing and the deferred requests. */
#ifndef FERRY_FUSE_INTERNAL_H
#define FERRY_FUSE_INTERNAL_H

#include <linux/fuse.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#include "common/iov.h"
#include "protocol/fuse_ops.h"
#include "protocol/fuse_server.h"

/* Our protocol version; virtio-fs itself appeared in 7.31, so nothing older
 * can be a virtio-fs client. A client gets the lower of its minor and ours:
 * what 7.39 to 7.41 added (STATX, ALLOW_IDMAP, DIRECT_IO_ALLOW_MMAP) only
 * a client that offers or sends it ever meets. */
#define FERRY_FUSE_MAJOR 7
#define FERRY_FUSE_MINOR 41
#define FERRY_FUSE_MIN_MINOR 31

/* Protocol 7.39 (Linux 6.6); the installed uapi header (7.38) predates it.
 * Offering a bit an older client does not know is harmless: INIT agrees
 * only on bits the client offered. */
#ifndef FUSE_DIRECT_IO_ALLOW_MMAP
#define FUSE_DIRECT_IO_ALLOW_MMAP (1ULL << 36)
#endif

/* Protocol 7.38 as Linux 6.4 completed it; Debian 12's uapi header stops
 * before: one supplementary group of the caller (the new inode's parent
 * directory's group) sent with creating requests as an extension. */
#ifndef FUSE_CREATE_SUPP_GROUP
#define FUSE_CREATE_SUPP_GROUP (1ULL << 34)
#endif
#define FERRY_FUSE_EXT_GROUPS 32
struct ferry_fuse_supp_groups {
	uint32_t nr_groups;
	/* uint32_t groups[nr_groups] follow */
};

#define FERRY_DEFAULT_MAX_WRITE (1024u * 1024u)
#define FERRY_PAGE_SIZE 4096u

/*
 * INIT's max_background and congestion_threshold: how many asynchronous
 * requests (readahead, direct I/O through libaio, writeback) the guest's
 * FUSE keeps in flight, and past how many it stops starting readahead.
 * Left at 0 the kernel keeps its own 12 and 9, sized for a FUSE daemon
 * reading /dev/fuse one request at a time: a guest running 2 fio jobs at
 * iodepth 16 then never had more than 12 requests on the rings, and saw
 * half the IOPS of a daemon answering 65535 (the Rust virtiofsd). Here the
 * rings bound what is in flight (what does not fit waits in the guest's
 * driver), so the limit is the protocol's largest, and congestion starts
 * at three quarters of it, as the Rust virtiofsd answers.
 */
#define FERRY_MAX_BACKGROUND UINT16_MAX
#define FERRY_CONGESTION_THRESHOLD (UINT16_MAX / 4 * 3)

/* Linux limits the protocol enforces before the backend sees a request. */
#define FERRY_XATTR_NAME_MAX 255
#define FERRY_XATTR_SIZE_MAX 65536

/*
 * The largest argument block we copy: SETXATTR's extended fuse_setxattr_in,
 * a maximal xattr name and value, plus slack for a security-context
 * extension. WRITE payloads and BATCH_FORGET arrays are not copied here.
 */
#define FERRY_ARG_BUF_SIZE (16 + FERRY_XATTR_NAME_MAX + 1 + FERRY_XATTR_SIZE_MAX + 8192)
/* Scratch for replies assembled before copying into guest memory: READDIR
 * pages, xattr values and lists, link targets. */
#define FERRY_OUT_BUF_SIZE (128u * 1024u)
/* Sub-iovecs handed to READ and WRITE; a virtqueue chain is at most this long
 * in practice (the Linux driver's queue size is 1024). */
#define FERRY_MAX_IOV 1024

/* Requests deferred at once (lock waits, slow syncs, cold reads), per
 * session. */
#define FERRY_MAX_DEFERRED 256

struct fuse_deferred {
	struct fuse_server *se;
	bool in_use;                  /* under se->deferred_lock, as all below */
	uint64_t unique;              /* for INTERRUPT */
	struct fuse_worker *w;        /* whose queue it came on */
	struct ferry_chan *chan;      /* the transport's way back */
	void *token;
	fuse_deferred_cancel_fn cancel;
	void *cancel_arg;
};

enum fuse_server_state {
	SESSION_NEW,          /* waiting for INIT */
	SESSION_INITIALIZING, /* one worker negotiates; everyone else gets EIO */
	SESSION_READY,
	SESSION_DESTROYING,   /* DESTROY waits for in-flight requests */
};

struct fuse_server {
	struct fuse_server_opts opts;
	const struct fs_ops *ops;
	void *fs;
	/* Published with release by INIT; conn and setxattr_in_size are only
	 * written while the state is SESSION_INITIALIZING. */
	_Atomic int state;
	struct fuse_conn_params conn;
	uint32_t max_readahead;       /* the client's, echoed by INIT */
	uint32_t setxattr_in_size;
	/* Only DESTROY and worker creation take this; never the request path. */
	pthread_mutex_t workers_lock;
	struct fuse_worker *workers;
	/* Only deferring ops, their completion and INTERRUPT take this. */
	pthread_mutex_t deferred_lock;
	struct fuse_deferred deferred[FERRY_MAX_DEFERRED];
	/* Counts of freed workers, under workers_lock, so totals only grow. */
	struct fuse_stats retired_stats;
};

/*
 * Adjacent WRITEs of one file held while fuse_worker_process_run serves a
 * run of requests, so that they reach the file in one system call
 * (fuse_write_run.c). A run stays short: its replies wait for it, and a
 * guest's readahead or writeback waits on the first of them.
 */
#define FUSE_RUN_MAX 16
#define FUSE_RUN_BYTES (256u * 1024u)

struct fuse_run_member {
	const struct ferry_req *treq;  /* the transport's, valid for the run */
	size_t wr_len;
	uint64_t unique;
	uint64_t start_ns;             /* for its latency in the stats */
	struct fuse_request_ctx ctx;
	struct fuse_write_in in;       /* our copy */
	unsigned iov_first, iov_cnt;   /* its payload in the worker's iov */
	unsigned index;                /* its slot in run.lens */
};

/*
 * The held WRITEs' payloads are sliced into the worker's iov, which no
 * other request uses meanwhile: every op but WRITE writes the run out
 * before it runs, and a WRITE that is not held finds the run written.
 */
struct fuse_write_run {
	uint32_t *lens;                /* the run's reply lengths; NULL outside one */
	unsigned index;                /* of the request being processed */
	unsigned count;                /* members held */
	uint64_t nodeid;
	uint64_t next_offset;          /* where the next member must start */
	size_t total;
	unsigned iov_cnt;              /* of the worker's iov, in use */
	struct fuse_run_member m[FUSE_RUN_MAX];
};

struct fuse_worker {
	struct fuse_server *se;
	struct fuse_worker *next;
	/* Set while a request runs past the state check, so DESTROY can wait
	 * for in-flight requests without a shared counter. */
	_Atomic bool busy;
	char *arg_buf;                /* FERRY_ARG_BUF_SIZE */
	char *out_buf;                /* FERRY_OUT_BUF_SIZE */
	struct iovec iov[FERRY_MAX_IOV];
	struct fuse_write_run run;
	/* Written by this worker's thread alone; a cache line of its own so
	 * the stats reader's loads do not share a line with hot fields. */
	struct fuse_stats stats __attribute__((aligned(64)));
};

union fuse_reply_args {
	struct fuse_entry_out entry;
	struct fuse_attr_out attr;
	struct fuse_open_out open;
	struct {
		struct fuse_entry_out entry;
		struct fuse_open_out open;
	} create;
	struct fuse_write_out write;
	struct fuse_statfs_out statfs;
	struct fuse_getxattr_out getxattr;
	struct fuse_lk_out lk;
	struct fuse_lseek_out lseek;
	struct fuse_init_out init;
};

/* One request while it is processed; lives on the worker thread's stack. */
struct fuse_request {
	struct fuse_worker *w;
	struct fuse_server *se;
	struct fuse_in_header in;     /* copied out of guest memory */
	struct fuse_request_ctx ctx;
	const char *arg;              /* copied arguments, worker-owned */
	size_t arg_len;               /* bytes in arg, extensions excluded */
	size_t arg_pos;               /* parse cursor into arg */
	/* For FUSE_OP_HEAD_ONLY ops: argument bytes after the copied head,
	 * left in treq->rd at offset sizeof(fuse_in_header) + arg_len. */
	size_t payload_len;
	/* As the transport handed it over: buffers, channel, token. */
	const struct ferry_req *treq;
	size_t wr_len;
	/* Reply: reply_arg is copied after the out-header; reply_in_place
	 * bytes were already written there (READ). */
	const void *reply_arg;
	size_t reply_len;
	size_t reply_in_place;
	union fuse_reply_args out;
	bool deferred;                /* the op took it with fuse_deferred_begin */
	bool held;                    /* a WRITE its run answers (fuse_write_run.c) */
	uint64_t start_ns;            /* when it was taken, for the stats */
};

/* One row of the opcode table (fuse_opcodes.h). */
struct fuse_op_desc {
	const char *name;
	int (*run)(struct fuse_request *req);  /* NULL: ENOSYS */
	/* offsetof the struct fs_ops member the handler calls: a backend
	 * without it answers ENOSYS. FUSE_NO_BACKEND_OP: the protocol
	 * answers whatever the backend has. */
	uint16_t backend_op;
	uint32_t min_arg;     /* fixed argument bytes the op needs */
	uint32_t reply_arg;   /* fixed reply bytes, checked before the op runs */
	unsigned flags;
};

#define FUSE_OP_NO_REPLY   (1u << 0)  /* FORGET, BATCH_FORGET, INTERRUPT */
#define FUSE_OP_XATTR      (1u << 1)  /* served only with opts->xattr */
#define FUSE_OP_HEAD_ONLY  (1u << 2)  /* copy only min_arg: payload stays in rd */
#define FUSE_OP_MODIFIES   (1u << 3)  /* always a change: EROFS with opts->readonly */

#define FUSE_NO_BACKEND_OP UINT16_MAX

/* NULL for opcodes we do not know at all. */
const struct fuse_op_desc *fuse_op_lookup(uint32_t opcode);
/* Whether the backend has the op the opcode's handler calls; inline, as
 * it runs for every request. */
static inline bool fuse_backend_has_op(const struct fs_ops *ops, const struct fuse_op_desc *desc)
{
	void (*op)(void);

	if (desc->backend_op == FUSE_NO_BACKEND_OP)
		return true;
	/* Every fs_ops member is a function pointer; only NULL-ness is read. */
	memcpy(&op, (const char *)ops + desc->backend_op, sizeof(op));
	return op != NULL;
}

/* ---- fuse_args.c: the arguments after an op's fixed struct ---- */

/* A NUL-terminated string at the cursor, inside the argument block. */
int fuse_arg_string(struct fuse_request *req, const char **str, size_t *len);
/* A directory entry name: non-empty, no '/', at most NAME_MAX; "." and
 * ".." only with allow_dots. */
int fuse_arg_name(struct fuse_request *req, const char **name, bool allow_dots);
/* An xattr name: non-empty, at most FERRY_XATTR_NAME_MAX. */
int fuse_arg_xattr_name(struct fuse_request *req, const char **name);
/* A creating op's security context and supplementary group, into
 * req->ctx: an argument before 7.38, extensions from 7.38 on. */
int fuse_arg_create_ext(struct fuse_request *req);

/* ---- fuse_server.c: the request path the other files share ---- */

/* Every INIT flag this session offers (what a client may agree to). */
uint64_t fuse_init_offered_flags(const struct fuse_server *se);

/* The one place an op's result becomes a FUSE reply; returns its length. */
uint32_t fuse_request_reply(struct fuse_request *req, int rc);
/* Counts a finished request and its latency in the worker's stats. */
void fuse_stats_record(struct fuse_worker *w, uint32_t opcode, int rc, uint64_t start_ns);
/* The worker's requests are over, held WRITEs included (DESTROY waits). */
void fuse_worker_idle(struct fuse_worker *w);

/* ---- fuse_write_run.c: adjacent WRITEs of a run in one system call ---- */

/* From fuse_do_write inside a run: holds the WRITE (req->held) if it
 * continues the held ones or starts a run, writing those held before
 * first when it does not continue them. 1: held; 0: not holdable, the
 * caller writes it alone (the held ones are written by then); -errno:
 * the request is invalid, as it would be alone (-E2BIG: more payload
 * segments than the worker's iov holds). payload_off: where its data
 * start in rd. */
int fuse_write_run_hold(struct fuse_request *req, const struct fuse_write_in *in,
			size_t payload_off);
/* Writes what is held, answers each member, and lets the worker idle. */
void fuse_write_run_flush(struct fuse_worker *w);

/* ---- fuse_deferred.c: requests an op answers after its handler returned ---- */

/* Sets up a new session's slots; 0 or -errno. */
int fuse_deferred_init(struct fuse_server *se);
void fuse_deferred_destroy(struct fuse_server *se);
/* INTERRUPT: cancels the deferred request with this unique, if any. */
void fuse_deferred_interrupt(struct fuse_server *se, uint64_t unique);
/* Cancels every deferred request and waits until each has completed. */
void fuse_deferred_cancel_all(struct fuse_server *se);

#endif
