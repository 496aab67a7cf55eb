/* The request pool: a queue's requests served on threads of a pool, up to as many at once as the guest queued, each answered when its host call returns; for shares whose storage is remote (pool_policy.h). */
#ifndef FERRY_DAEMON_REQUEST_POOL_H
#define FERRY_DAEMON_REQUEST_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "common/ferry_req.h"
#include "protocol/fuse_server.h"

/*
 * How a request runs on the pool (request_pool_serve):
 *
 *  - The queue thread asks the policy (pool_policy.h): a pooled opcode
 *    that has been slow lately, with something waiting behind it, on a
 *    queue whose trial found the pool quicker. If so it
 *    copies the request (header, arguments, a WRITE's payload) out of
 *    guest memory into a job, which also has a reply buffer as large as
 *    the guest's writable part, hands the job to the pool and returns
 *    FERRY_DEFERRED: the transport counts it as deferred and serves the
 *    next request at once.
 *  - A pool thread serves the copy with a FUSE worker of the pool's own
 *    (one per thread that runs at once) and answers through the request's
 *    channel (ferry_chan.complete): the out-header, then the rest of the
 *    reply as the data the transport copies into the guest's buffers.
 *    The job never holds a pointer into guest memory, so a memory table
 *    that changes meanwhile cannot leave it a stale one.
 *  - The time each request took updates its opcode's estimate on its
 *    queue, whichever thread ran it.
 *
 * What keeps FUSE's guarantees: the guest only has requests in flight at
 * once that it lets complete in any order (the Linux driver serializes
 * what must be, e.g. one READDIR of a directory handle at a time, and
 * sends RELEASE only after every request on the handle was answered); the
 * backend already serves several queues at once. A request that changes
 * the session or drops references (INIT, DESTROY, FORGET, INTERRUPT) and
 * the lock requests run on the queue thread, as do WRITE and the directory
 * listings, which would not overlap on the host (pool_policy_opcode_pooled).
 * A handle used by a pooled request is a counted reference of the
 * backend's open-file table, so even a RELEASE that overtook it leaves
 * its fd open until it is done.
 *
 * Ending: the transport waits for every deferred request of a queue before
 * it stops it, so a queue's context outlives its pooled jobs; a session
 * that ends (DESTROY, a reset) waits for the pool's FUSE workers as for
 * any other (fuse_server's busy flag); request_pool_free waits for the
 * pool's threads.
 */

struct request_pool;
struct request_pool_queue;

/* max_write: the session's, so the largest request and reply a job may
 * copy follow from it. */
int request_pool_new(struct request_pool **out, struct fuse_server *se, size_t max_write);
/* After every queue stopped; before the session is freed. */
void request_pool_free(struct request_pool *p);
/* Requests the pool has served since it started. */
uint64_t request_pool_served(struct request_pool *p);

/* A queue thread's side: its own FUSE worker (for what runs inline) and
 * its opcodes' estimates. */
int request_pool_queue_new(struct request_pool *p, struct request_pool_queue **out);
void request_pool_queue_free(struct request_pool_queue *q);
struct fuse_worker *request_pool_queue_fuse(struct request_pool_queue *q);

/* The serve() and serve_run() of the service on a remote share: as
 * fuse_worker_process and fuse_worker_process_run. */
uint32_t request_pool_serve(struct request_pool_queue *q, const struct ferry_req *req);
unsigned request_pool_serve_run(struct request_pool_queue *q, const struct ferry_req *const *reqs,
				unsigned n, uint32_t *lens);

#endif
