/* A run of requests served together: adjacent WRITEs of one file reach it in one system call. */
#include <errno.h>
#include <string.h>

#include "common/iov.h"
#include "protocol/fuse_internal.h"

/*
 * Why: a guest writing a file sequentially with several requests in flight
 * (direct I/O at a queue depth, writeback of adjacent pages) puts WRITEs of
 * consecutive ranges on the ring together. Each costs the host a system
 * call, and on a machine whose system calls are dear (a virtual machine
 * with page-table isolation: ~1 us of a 4 KiB tmpfs write's ~1.9 us) one
 * pwritev for the lot is most of the gain there is. The requests were in
 * flight together, so the guest expects no order among them; the run
 * keeps every other request's order, as a held WRITE is written before
 * anything after it in the run is done.
 */

/* Whether in continues the held WRITEs: the same open file, the next
 * byte, the same flags and writer, and room left in the run. */
static bool continues_run(const struct fuse_write_run *run, const struct fuse_in_header *h,
			  const struct fuse_write_in *in)
{
	const struct fuse_run_member *first = &run->m[0];

	return run->count > 0 && run->count < FUSE_RUN_MAX &&
	       h->nodeid == run->nodeid && in->fh == first->in.fh &&
	       in->offset == run->next_offset && in->write_flags == first->in.write_flags &&
	       h->uid == first->ctx.uid && h->gid == first->ctx.gid &&
	       run->total + in->size <= FUSE_RUN_BYTES;
}

int fuse_write_run_hold(struct fuse_request *req, const struct fuse_write_in *in,
			size_t payload_off)
{
	struct fuse_worker *w = req->w;
	struct fuse_write_run *run = &w->run;
	struct fuse_run_member *m;
	int n_iov;

	/*
	 * Not held: empty writes, writes whose end would wrap, and writes
	 * that clear suid/sgid (the backend may switch to the writer's
	 * credentials for those; alone they stay exactly as they were).
	 */
	if (in->size == 0 || in->offset > UINT64_MAX - in->size ||
	    (in->write_flags & FUSE_WRITE_KILL_SUIDGID)) {
		fuse_write_run_flush(w);
		return 0;
	}
	if (!continues_run(run, &req->in, in))
		fuse_write_run_flush(w);
	n_iov = iov_slice(w->iov + run->iov_cnt, FERRY_MAX_IOV - run->iov_cnt,
			  req->treq->rd, req->treq->rd_cnt, payload_off, in->size);
	if (n_iov == -E2BIG && run->count > 0) {
		fuse_write_run_flush(w);
		n_iov = iov_slice(w->iov, FERRY_MAX_IOV, req->treq->rd, req->treq->rd_cnt,
				  payload_off, in->size);
	}
	/* -E2BIG here: more segments than the worker's iov holds, the error
	 * the WRITE would get alone. */
	if (n_iov < 0)
		return n_iov;

	m = &run->m[run->count];
	m->treq = req->treq;
	m->wr_len = req->wr_len;
	m->unique = req->in.unique;
	m->start_ns = req->start_ns;
	m->ctx = req->ctx;
	m->in = *in;
	m->iov_first = run->iov_cnt;
	m->iov_cnt = (unsigned)n_iov;
	m->index = run->index;
	if (run->count == 0)
		run->nodeid = req->in.nodeid;
	run->count++;
	run->iov_cnt += (unsigned)n_iov;
	run->total += in->size;
	run->next_offset = in->offset + in->size;
	req->held = true;
	return 1;
}

/* A member's reply and its count, through the one reply path. */
static void answer(struct fuse_worker *w, const struct fuse_run_member *m, ssize_t written)
{
	struct fuse_request req;
	int rc = 0;

	memset(&req, 0, sizeof(req));
	req.w = w;
	req.se = w->se;
	req.treq = m->treq;
	req.wr_len = m->wr_len;
	req.in.unique = m->unique;
	req.in.opcode = FUSE_WRITE;
	if (written < 0) {
		rc = (int)written;
	} else if ((size_t)written > m->in.size) {
		rc = -EIO;
	} else {
		req.out.write.size = (uint32_t)written;
		req.reply_arg = &req.out.write;
		req.reply_len = sizeof(req.out.write);
	}
	w->run.lens[m->index] = fuse_request_reply(&req, rc);
	fuse_stats_record(w, FUSE_WRITE, rc, m->start_ns);
}

/*
 * Each member gets what its own pwrite would have given: all of its
 * bytes while the one write covered them; the member the write stopped
 * in, the part written (a short write, as alone); every member after it
 * is written alone, so each gets its own result (ENOSPC, EFBIG), and a
 * failure before any byte is the first member's.
 */
void fuse_write_run_flush(struct fuse_worker *w)
{
	struct fuse_write_run *run = &w->run;
	const struct fs_ops *ops = w->se->ops;
	struct fuse_write_in whole;
	size_t left;
	ssize_t done;

	if (run->count == 0)
		return;
	whole = run->m[0].in;
	whole.size = (uint32_t)run->total;
	done = ops->write(w->se->fs, &run->m[0].ctx, run->nodeid, &whole, w->iov,
			  run->iov_cnt);
	if (done > (ssize_t)run->total)
		done = -EIO;
	if (run->count > 1) {
		ferry_count(&w->stats.write_runs, 1);
		ferry_count(&w->stats.run_writes, run->count);
	}
	left = done > 0 ? (size_t)done : 0;
	for (unsigned i = 0; i < run->count; i++) {
		const struct fuse_run_member *m = &run->m[i];
		ssize_t written;

		if (left > 0) {
			written = left < m->in.size ? (ssize_t)left : (ssize_t)m->in.size;
			left -= (size_t)written;
		} else if (i == 0) {
			written = done;   /* 0 or -errno: nothing was written */
		} else {
			written = ops->write(w->se->fs, &m->ctx, run->nodeid, &m->in,
					     w->iov + m->iov_first, m->iov_cnt);
		}
		answer(w, m, written);
	}
	run->count = 0;
	run->iov_cnt = 0;
	run->total = 0;
	fuse_worker_idle(w);
}

/* A look at treq before it runs: whether it is a WRITE that continues
 * the held ones. Only a guess at what it would do: fuse_do_write checks
 * it in full, and one that does not continue after all starts anew. */
static bool next_continues(struct fuse_worker *w, const struct ferry_req *treq)
{
	struct {
		struct fuse_in_header h;
		struct fuse_write_in in;
	} head;

	if (iov_length(treq->rd, treq->rd_cnt) < sizeof(head))
		return false;
	iov_copy_from(&head, treq->rd, treq->rd_cnt, 0, sizeof(head));
	return head.h.opcode == FUSE_WRITE && continues_run(&w->run, &head.h, &head.in);
}

unsigned fuse_worker_process_run(struct fuse_worker *w, const struct ferry_req *const *reqs,
				 unsigned n, uint32_t *lens)
{
	struct fuse_write_run *run = &w->run;
	unsigned i = 0;

	run->lens = lens;
	do {
		run->index = i;
		lens[i] = fuse_worker_process(w, reqs[i]);
		i++;
	} while (run->count > 0 && i < n && next_continues(w, reqs[i]));
	fuse_write_run_flush(w);
	run->lens = NULL;
	return i;
}
