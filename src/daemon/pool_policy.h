/* When a queue's requests run on the request pool instead of its own thread: which shares, which requests, how slow; every tuned constant with its reason. */
#ifndef FERRY_DAEMON_POOL_POLICY_H
#define FERRY_DAEMON_POOL_POLICY_H

#include <stdbool.h>
#include <stdint.h>

/*
 * The mechanism (request_pool.c) lets a queue keep as many host calls in
 * flight as its guest queued, instead of one at a time; it costs a
 * hand-over per request (a copy of the request, a pool thread's wake-up, a
 * reply handed back through the queue thread). That pays only where a host
 * call waits on something far away: a network round trip, a user-space
 * file server. On a local disk or tmpfs, whose metadata and page-cache
 * calls take far less than such a hand-over, it would only add to each
 * request, so such shares never build the pool at all (the daemon serves
 * them exactly as before).
 */

/*
 * Whether the file system of a share (its statfs f_type) reaches its
 * storage through a network or a user-space server: FUSE (GlusterFS,
 * ceph-fuse, sshfs and any other FUSE mount), NFS, CephFS's kernel client,
 * SMB/CIFS, 9P, AFS, Lustre.
 */
bool pool_policy_storage_remote(unsigned long fs_type);

/*
 * Whether an opcode may run on the pool. Those that change the session or
 * only drop references (INIT, DESTROY, FORGET, BATCH_FORGET, INTERRUPT)
 * stay on the queue thread, in the order they came; so do the lock
 * requests (GETLK, SETLK, SETLKW: a SETLKW that waits defers itself, and
 * lock state is per owner and cheap to reach) and whatever this list does
 * not name. READ stays too: the backend already sends a read that waits
 * for its storage to an offload thread (backend/io_offload.c), with no copy
 * of the request, on a file system of any kind. So do two that would not
 * overlap on the host anyway:
 *  - WRITE: the host kernel writes a file under its inode's lock, so the
 *    guest's WRITEs of one file run one after the other however many
 *    threads send them, and a run of adjacent ones already reaches the
 *    storage as one call (fuse_write_run.c);
 *  - READDIR and READDIRPLUS: one is already a host call per entry, and
 *    listings of one directory at once wait for each other in the host's
 *    directory and in the file server, where one after the other each
 *    finds the entries the previous one brought into the caches.
 */
bool pool_policy_opcode_pooled(uint32_t opcode);

/* Opcodes below this have an estimate of their own (every one the pool
 * takes does). */
#define POOL_OPCODES 64u

/*
 * A request is a candidate for the pool when its opcode has lately taken
 * at least this long on this queue: well above a local metadata call or a
 * copy from the page cache (a few microseconds), and above the hand-over
 * itself (two thread wake-ups and a copy). Whether the pool then pays is
 * the trial's to find out (below).
 */
#define POOL_SLOW_NS (40u * 1000u)

/*
 * Where each opcode's estimate starts: quick. An opcode goes to the pool
 * only once its own requests, run on the queue thread, were slow; a remote
 * file system's caches (attributes, the page cache) answer many requests
 * far quicker than any hand-over, and those stay where they are. Requests
 * on the pool keep the estimate current; a storage that got quick brings
 * it down again.
 */
#define POOL_ESTIMATE_START_NS 0u

/*
 * The estimate is a moving average: each request's time moves it by
 * 1/2^POOL_ESTIMATE_SHIFT of the difference, so one odd request (a cache
 * miss among hits) does not flip the choice, while a change of the
 * storage's speed shows within a few dozen requests.
 */
#define POOL_ESTIMATE_SHIFT 3

/*
 * Bytes of request copies and reply buffers on the pool at most, as for
 * io_offload's deferred reads: the daemon's own memory, which the guest's
 * queues (up to 16 of up to 1024 requests of up to max_write each) could
 * otherwise make it hold without bound. 32 MiB keeps 16 requests of 1 MiB
 * going; past it, requests run on their queue's thread.
 */
#define POOL_BYTES_MAX (32u << 20)

/*
 * The trial: whether overlapping a queue's slow requests pays is measured,
 * not assumed. Where the storage's "round trip" is itself work on this
 * host's CPUs (a FUSE client and its server on the same machine), the
 * calls do not overlap in time and the hand-over's CPU (the submit, a pool
 * thread's wake-up, the completion's wake-up of the queue thread, an
 * interrupt for a reply that comes alone) is taken from that work; where
 * it is a wait on a network or a server's timers, they do. So a queue
 * serves POOL_TRIAL_PROBE candidates on its thread, then as many on the
 * pool, keeps the quicker way for POOL_TRIAL_SETTLED candidates, and tries
 * both again: the storage, the guest's load and the machine's may change.
 * The pool is kept only if a request took at most POOL_TRIAL_KEEP_PERCENT
 * of the time there: it costs CPU that others on the machine could use, so
 * a tie, or a gain within a noisy machine's spread, goes to the queue
 * thread. The probes are long enough that a few requests' noise does not
 * decide, short enough that the worse way costs a small part of the time.
 */
#define POOL_TRIAL_PROBE 256u
#define POOL_TRIAL_SETTLED (16u * POOL_TRIAL_PROBE)
#define POOL_TRIAL_KEEP_PERCENT 85u
/*
 * Each phase also lasts at least this long, whichever comes last: a
 * probe much shorter than a scheduler's time slice measures who got the
 * CPUs meanwhile (on a machine whose file server shares them, a slice
 * lost to it), not the way of serving; and a settled phase many probes
 * long keeps the worse way's share of the time small.
 */
#define POOL_TRIAL_PROBE_MIN_NS (100ull * 1000u * 1000u)
#define POOL_TRIAL_SETTLED_MIN_NS (4000ull * 1000u * 1000u)
/* A gap this long between a candidate and the end of the one before (its
 * dispatch to the pool, or its end on the queue thread) means the guest
 * paused: the phase's clock would count the pause, so it starts over. */
#define POOL_TRIAL_GAP_NS (20u * 1000u * 1000u)

enum pool_trial_phase { POOL_TRIAL_INLINE, POOL_TRIAL_POOLED, POOL_TRIAL_KEPT };

/* One queue's trial; only its thread touches it. */
struct pool_trial {
	enum pool_trial_phase phase;
	bool pooled;               /* how candidates are served now */
	unsigned count;            /* candidates in this phase so far */
	uint64_t start_ns, last_ns;
	uint64_t inline_ns;        /* the last inline probe's time */
};

/* A candidate comes at now_ns: whether it goes to the pool. */
bool pool_trial_next(struct pool_trial *t, uint64_t now_ns);
/* The candidate served on the queue thread ended at now_ns. */
static inline void pool_trial_served(struct pool_trial *t, uint64_t now_ns)
{
	t->last_ns = now_ns;
}

/*
 * Whether a request goes to the pool: its opcode has been slow lately, and
 * something would wait for it if it ran here: a request queued behind it,
 * or replies of this queue's pooled requests, which only this thread
 * sends. A request alone on an idle queue runs here at no cost to anyone.
 */
static inline bool pool_policy_wants(uint32_t estimate_ns, unsigned queued_behind,
				     unsigned pooled_outstanding)
{
	return estimate_ns >= POOL_SLOW_NS && (queued_behind > 0 || pooled_outstanding > 0);
}

/*
 * Whether the served-th request run on the queue thread is timed for its
 * opcode's estimate: every one near or above the threshold, one in
 * POOL_QUICK_SAMPLE of an opcode well below it (the two clock reads are a
 * visible part of a request the host's caches answer), which still brings
 * a storage that turned slow to the threshold within a few hundred
 * requests.
 */
#define POOL_QUICK_SAMPLE 16u
static inline bool pool_policy_sample(uint32_t estimate_ns, unsigned served)
{
	return estimate_ns >= POOL_SLOW_NS / 2 || served % POOL_QUICK_SAMPLE == 0;
}

/*
 * The estimate after a request of sample_ns. A sample counts for at most
 * twice the estimate and the threshold: one request that waited long (a
 * cache miss, a flush of the client's write-behind) among quick ones moves
 * the estimate a little, and only a run of slow ones carries it across the
 * threshold (within about ten requests from quick).
 */
static inline uint32_t pool_policy_estimate(uint32_t estimate_ns, uint64_t sample_ns)
{
	int64_t e = estimate_ns;
	int64_t cap = 2 * e + POOL_SLOW_NS;
	int64_t s = sample_ns > (uint64_t)cap ? cap : (int64_t)sample_ns;

	return (uint32_t)(e + (s - e) / (1 << POOL_ESTIMATE_SHIFT));
}

#endif
