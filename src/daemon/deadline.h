/* --request-timeout: each request that reaches the host's storage runs on a helper thread with a deadline, so a hung host file system costs the guest an error instead of a queue. */
#ifndef FERRY_DAEMON_DEADLINE_H
#define FERRY_DAEMON_DEADLINE_H

#include <stdint.h>

#include "common/ferry_req.h"
#include "protocol/fuse_server.h"

/*
 * How a request runs under a deadline (deadline_serve):
 *
 *  - The queue thread copies the request (header, arguments, WRITE
 *    payload) out of guest memory into a job of its own, and the job has a
 *    private reply buffer as large as the guest's writable part (bounded
 *    by the largest reply the session can send). An offload thread serves
 *    the copy with a FUSE worker of the job's own; the queue thread waits
 *    for it until the deadline.
 *  - Done in time: the queue thread copies the reply into guest memory
 *    and answers, as the request would have been answered inline.
 *  - Not done: the queue thread answers ETIMEDOUT itself and marks the job
 *    abandoned; the queue goes on serving. The job now belongs to its
 *    thread alone.
 *
 * Rules that keep an abandoned job safe:
 *  1. Guest memory: a job never holds a pointer into it. Only the queue
 *     thread copies in (before the job starts) and out (after the job
 *     said done, under the lock that also decides abandonment), so once
 *     the guest has its error it may reuse the buffers at once: a READ
 *     that returns later reads into the job's private buffer, which is
 *     freed with the job.
 *  2. References: the backend's op runs to its end whatever happens to
 *     the reply, so everything it took for the guest is given back by the
 *     job's thread once the host call returns: a lookup reference for each
 *     entry a dropped reply named (LOOKUP, MKNOD, MKDIR, SYMLINK, LINK,
 *     CREATE, TMPFILE, and each READDIRPLUS entry with a node id) is
 *     forgotten, and each handle a dropped OPEN, CREATE, TMPFILE or
 *     OPENDIR made is released, through the same FUSE worker, so the
 *     backend's own FORGET and RELEASE paths do it. What the op changed on
 *     the host (a WRITE, a RENAME) stays changed, as after any EIO from a
 *     file system: the guest cannot tell whether it happened.
 *  3. A job abandoned before a thread took it never runs.
 *  4. Bounded: at most DEADLINE_STUCK_MAX jobs are abandoned and not yet
 *     returned. While that many are, every request that would run on a
 *     thread is answered ETIMEDOUT at once, without a thread, until one of
 *     them returns.
 *  5. Ending the session (DESTROY, a guest reset) waits for the jobs'
 *     workers like any other's: the backend is never torn down under a
 *     host call that is still running. A migration is refused while any
 *     job is stuck (deadline_stuck), since its result could still change
 *     the tables being saved.
 *
 * Requests that run inline on the queue thread as without the option:
 * INIT, DESTROY, FORGET, BATCH_FORGET, INTERRUPT (none waits for the host's
 * storage: they change the session, or drop references and close O_PATH
 * fds) and SETLKW (its wait for a lock already runs on a thread of its own
 * and is answered when the lock is had, or cancelled).
 */

/* Abandoned host calls allowed at once; see rule 4. Each holds one thread
 * (its stack) and its request's buffers until its call returns. */
#define DEADLINE_STUCK_MAX 16

struct deadline;
struct deadline_worker;

struct deadline_counts {
	double seconds;           /* the deadline */
	unsigned stuck;           /* abandoned calls not yet returned */
	unsigned stuck_max;       /* DEADLINE_STUCK_MAX */
	uint64_t timed_out;       /* requests answered at their deadline */
	uint64_t refused;         /* answered at once while stuck_max were stuck */
	uint64_t returned_late;   /* abandoned calls that returned since */
};

/* seconds > 0. max_reply bounds a job's reply buffer: the largest reply
 * the session sends (max_write, or an xattr's 64 KiB, plus headers). */
int deadline_new(struct deadline **out, double seconds, struct fuse_server *se,
		 size_t max_reply);
/* Frees d unless host calls are still stuck: then it logs how many and
 * leaves d (and what they use) to the process's exit. Returns how many. */
unsigned deadline_free(struct deadline *d);
unsigned deadline_stuck(struct deadline *d);
void deadline_get_counts(struct deadline *d, struct deadline_counts *out);

/* A queue thread's side: its own FUSE worker and a job kept for reuse. */
int deadline_worker_new(struct deadline *d, struct deadline_worker **out);
void deadline_worker_free(struct deadline_worker *dw);
/* The FUSE worker for what runs inline (and for cancel). */
struct fuse_worker *deadline_worker_fuse(struct deadline_worker *dw);
/* The serve() of the service with a deadline: as fuse_worker_process. */
uint32_t deadline_serve(struct deadline_worker *dw, const struct ferry_req *req);

#endif
