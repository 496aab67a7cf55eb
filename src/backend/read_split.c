/* Large READs shared with a helper thread: both copy parts of one request from the page cache straight into the guest's buffers. */
#include "backend/read_split.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "backend/file_io.h"
#include "common/cpu_list.h"
#include "common/log.h"
#include "common/signal_handoff.h"

/*
 * A large READ from the page cache is nearly all copying in the kernel
 * (copy_to_iter and the page cache lookups): one queue does one such copy
 * at a time on one CPU, the host's own single-thread pread bounds it, and
 * so does every daemon that reads a request on one thread. Split in
 * chunks, a second thread copies some of them at the same time. Chunks
 * are claimed one at a time by whichever thread is free, so a helper that
 * is slow to wake (an idle vCPU may take longer than a chunk's copy) or
 * preempted by another tenant takes fewer, and the queue thread never
 * waits for more than the chunk the helper is copying.
 */
#define CHUNK_MIN (128u << 10)
#define CHUNKS_MAX 64u

/* After its last chunk the helper watches for the next read this long
 * before it sleeps: at queue depth > 1 the next large READ follows within
 * a chunk's time, and a futex wake per request would cost the queue
 * thread a system call and the helper a wake-up on every read. */
#define HELPER_SPIN_NS 50000

/* The queue thread spins this long for the helper's last chunk before it
 * yields the CPU, which the helper may then need (both on one CPU). */
#define OWNER_SPIN_NS 200000

/*
 * Whether splitting pays, judged by what the helper saved the reads it
 * was asked to help with: the time its chunks would have taken the queue
 * thread, less the queue thread's wait for its last one (the helper
 * preempted in the middle of a chunk: the queue thread waits out whoever
 * took its CPU), and a chunk's worth lost when it took none. When the
 * average of the last 16 or so reads is a loss, another tenant has the
 * second CPU: large reads are then read alone for the next BACKOFF_READS,
 * and tried split again after.
 *
 * The average, not a count of reads that waited long: the driver itself
 * (a guest's vCPU, or ferryfs-load) wakes for every reply and preempts one
 * of the two copiers now and then, so single reads wait long even when
 * splitting gains on the whole, and a count of them would back off where
 * the average still gains. A tenant that keeps the second CPU busy makes
 * the average a loss, and that is what backs off.
 */
#define BACKOFF_READS 1024u

/* claim word: generation (32 bits) | chunk count (16) | next chunk (16).
 * One CAS both claims a chunk and checks it is of the current read. */
#define CLAIM(gen, n, next) (((uint64_t)(gen) << 32) | ((uint64_t)(n) << 16) | (uint64_t)(next))
#define CLAIM_GEN(c) ((uint32_t)((c) >> 32))
#define CLAIM_N(c) ((unsigned)(((c) >> 16) & 0xffffu))
#define CLAIM_NEXT(c) ((unsigned)((c) & 0xffffu))

enum { HELPER_NONE, HELPER_RUNNING, HELPER_FAILED };

struct read_split {
	bool enabled;
	pthread_mutex_t start_lock;     /* starting the helper */
	_Atomic int helper;             /* HELPER_* */
	pthread_t thread;
	atomic_flag busy;               /* a read owns the job below */
	atomic_bool stop;
	_Atomic uint32_t seq;           /* futex: bumped per read and at stop */
	atomic_bool sleeping;           /* the helper waits on seq */
	_Atomic uint64_t claim;
	atomic_uint done;               /* chunks of this read finished */
	_Atomic uint64_t helped;        /* chunks the helper read, ever */
	/* Owned by the read that holds busy. */
	int64_t gain_avg;               /* ns the helper saved a read, moving */
	unsigned judged;                /* reads in gain_avg since a back-off */
	unsigned backoff;               /* large reads left to read alone */
	uint64_t splits, backoffs;      /* for the log at the end */
	/* The read: written before claim is published, read after a chunk
	 * of it is claimed. */
	struct split_job {
		int fd;
		const struct iovec *iov;
		unsigned cnt;
		size_t size, chunk;
		uint64_t off;
	} job;
	ssize_t result[CHUNKS_MAX];
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

/* Claims a chunk of read gen (any gen when want_gen is false): its index,
 * or -1 when none is left. */
static int chunk_claim(struct read_split *s, bool want_gen, uint32_t gen)
{
	uint64_t c = atomic_load_explicit(&s->claim, memory_order_acquire);

	for (;;) {
		if ((want_gen && CLAIM_GEN(c) != gen) || CLAIM_NEXT(c) >= CLAIM_N(c))
			return -1;
		if (atomic_compare_exchange_weak_explicit(&s->claim, &c, c + 1,
							  memory_order_acquire,
							  memory_order_acquire))
			return (int)CLAIM_NEXT(c);
	}
}

static size_t chunk_len(const struct split_job *j, unsigned k)
{
	size_t start = (size_t)k * j->chunk;

	return j->size - start < j->chunk ? j->size - start : j->chunk;
}

static void chunk_read(struct read_split *s, unsigned k)
{
	const struct split_job *j = &s->job;
	size_t start = (size_t)k * j->chunk;

	s->result[k] = iov_transfer_part(false, j->fd, j->iov, j->cnt, start,
					 chunk_len(j, k), j->off + start, 0);
	atomic_fetch_add_explicit(&s->done, 1, memory_order_release);
}

static bool work_pending(struct read_split *s)
{
	uint64_t c = atomic_load_explicit(&s->claim, memory_order_acquire);

	return CLAIM_NEXT(c) < CLAIM_N(c);
}

static void *helper_thread(void *arg)
{
	struct read_split *s = arg;

	pthread_setname_np(pthread_self(), "ferry-readsplit");
	while (!atomic_load_explicit(&s->stop, memory_order_acquire)) {
		uint64_t until = now_ns() + HELPER_SPIN_NS;
		uint32_t seq;
		bool handoff;
		int k;

		while ((k = chunk_claim(s, false, 0)) >= 0) {
			chunk_read(s, (unsigned)k);
			atomic_fetch_add_explicit(&s->helped, 1, memory_order_relaxed);
			until = now_ns() + HELPER_SPIN_NS;
		}
		/* Spinning, it has the time to write a queue thread's call
		 * to its driver (signal_handoff.h). */
		handoff = signal_handoff_open();
		while (!work_pending(s) && now_ns() < until &&
		       !atomic_load_explicit(&s->stop, memory_order_relaxed)) {
			if (handoff)
				signal_handoff_serve();
			for (unsigned i = 0; i < 64; i++)
				cpu_relax();
		}
		if (handoff)
			signal_handoff_close();
		if (work_pending(s))
			continue;
		/* sleeping is set before seq is read, and a read is published
		 * before seq is bumped and sleeping looked at: either the
		 * reader sees sleeping and wakes us, or we see its seq, and
		 * with it its work, below (or the wait returns at once). */
		atomic_store(&s->sleeping, true);
		seq = atomic_load(&s->seq);
		if (!work_pending(s) && !atomic_load(&s->stop))
			syscall(SYS_futex, &s->seq, FUTEX_WAIT_PRIVATE, seq, NULL, NULL, 0);
		atomic_store(&s->sleeping, false);
	}
	return NULL;
}

int read_split_new(struct read_split **out, bool enabled)
{
	struct read_split *s = calloc(1, sizeof(*s));
	cpu_set_t set;

	if (!s)
		return -ENOMEM;
	/* With one CPU the helper could only take turns with the queue
	 * thread. */
	if (enabled && sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) < 2)
		enabled = false;
	s->enabled = enabled;
	pthread_mutex_init(&s->start_lock, NULL);
	atomic_flag_clear(&s->busy);
	*out = s;
	return 0;
}

void read_split_free(struct read_split *s)
{
	if (!s)
		return;
	if (atomic_load(&s->helper) == HELPER_RUNNING) {
		log_info("read: %llu large reads split, the helper read %llu chunks of them; %llu back-offs of %u reads",
			 (unsigned long long)s->splits, (unsigned long long)read_split_helped(s),
			 (unsigned long long)s->backoffs, BACKOFF_READS);
		atomic_store(&s->stop, true);
		atomic_fetch_add(&s->seq, 1);
		syscall(SYS_futex, &s->seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
		pthread_join(s->thread, NULL);
	}
	pthread_mutex_destroy(&s->start_lock);
	free(s);
}

uint64_t read_split_helped(struct read_split *s)
{
	return atomic_load_explicit(&s->helped, memory_order_relaxed);
}

int64_t read_split_gain(unsigned chunks, unsigned own, uint64_t per_chunk_ns, uint64_t waited_ns)
{
	int64_t alone = (int64_t)(chunks * per_chunk_ns), gain;

	if (own >= chunks)      /* the helper took none: woken for nothing */
		return -(int64_t)per_chunk_ns;
	if (own == 0)           /* no measure of this thread's chunk time */
		return 0;
	gain = (int64_t)((chunks - own) * per_chunk_ns) - (int64_t)waited_ns;
	/* One read counts at most as a loss of reading it alone: a helper
	 * preempted once for a whole time slice is one bad read, not the
	 * next 16 reads' worth. */
	return gain < -alone ? -alone : gain;
}

static bool helper_ready(struct read_split *s)
{
	int state = atomic_load_explicit(&s->helper, memory_order_acquire);
	int rc;

	if (state != HELPER_NONE)
		return state == HELPER_RUNNING;
	pthread_mutex_lock(&s->start_lock);
	state = atomic_load(&s->helper);
	if (state == HELPER_NONE) {
		pthread_attr_t attr;

		/* On --queue-cpus's CPUs if given: the helper reads beside its
		 * queue thread, not on that thread's own CPU. */
		pthread_attr_init(&attr);
		rc = -cpu_placement_helper_attr(&attr);
		if (rc == 0)
			rc = pthread_create(&s->thread, &attr, helper_thread, s);
		pthread_attr_destroy(&attr);
		if (rc)
			log_warn("read: no helper thread for large reads (%s); they run on one thread",
				 strerror(rc));
		state = rc ? HELPER_FAILED : HELPER_RUNNING;
		atomic_store_explicit(&s->helper, state, memory_order_release);
	}
	pthread_mutex_unlock(&s->start_lock);
	return state == HELPER_RUNNING;
}

/* The bytes of the chunks up to the first short one, or the first one's
 * -errno. */
static ssize_t split_result(const struct read_split *s, unsigned n)
{
	size_t total = 0;

	for (unsigned k = 0; k < n; k++) {
		ssize_t r = s->result[k];

		if (r < 0)
			return total ? (ssize_t)total : r;
		total += (size_t)r;
		if ((size_t)r < chunk_len(&s->job, k))
			break;
	}
	return (ssize_t)total;
}

ssize_t read_split_read(struct read_split *s, int fd, const struct iovec *iov,
			unsigned cnt, size_t size, uint64_t off)
{
	uint64_t c, start, waited, per_chunk, until;
	uint32_t gen;
	unsigned n, own = 0;
	size_t chunk = CHUNK_MIN;
	ssize_t ret;
	int k;

	if (!s || !s->enabled || size < READ_SPLIT_MIN || !helper_ready(s) ||
	    atomic_flag_test_and_set_explicit(&s->busy, memory_order_acquire))
		return iov_transfer(false, fd, iov, cnt, size, off, 0);
	if (s->backoff > 0) {
		s->backoff--;
		atomic_flag_clear_explicit(&s->busy, memory_order_release);
		return iov_transfer(false, fd, iov, cnt, size, off, 0);
	}
	if (size / chunk >= CHUNKS_MAX)
		chunk = (size + CHUNKS_MAX - 1) / CHUNKS_MAX;
	n = (unsigned)((size + chunk - 1) / chunk);
	s->job = (struct split_job){ .fd = fd, .iov = iov, .cnt = cnt, .size = size,
				     .chunk = chunk, .off = off };
	atomic_store_explicit(&s->done, 0, memory_order_relaxed);
	c = atomic_load_explicit(&s->claim, memory_order_relaxed);
	gen = CLAIM_GEN(c) + 1;
	atomic_store_explicit(&s->claim, CLAIM(gen, n, 0), memory_order_release);
	atomic_fetch_add(&s->seq, 1);
	if (atomic_load(&s->sleeping))
		syscall(SYS_futex, &s->seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);

	start = now_ns();
	while ((k = chunk_claim(s, true, gen)) >= 0) {
		chunk_read(s, (unsigned)k);
		own++;
	}
	/* Every chunk is claimed; wait for the helper's, which it is reading
	 * right now. */
	waited = now_ns();
	per_chunk = own ? (waited - start) / own : 0;
	until = waited + OWNER_SPIN_NS;
	while (atomic_load_explicit(&s->done, memory_order_acquire) < n) {
		if (now_ns() < until)
			for (unsigned i = 0; i < 64; i++)
				cpu_relax();
		else
			sched_yield();
	}
	waited = now_ns() - waited;
	s->gain_avg += (read_split_gain(n, own, per_chunk, waited) - s->gain_avg) / 16;
	if (++s->judged >= 16u && s->gain_avg < 0) {
		s->backoff = BACKOFF_READS;
		s->gain_avg = 0;
		s->judged = 0;
		s->backoffs++;
	}
	s->splits++;
	ret = split_result(s, n);
	atomic_flag_clear_explicit(&s->busy, memory_order_release);
	return ret;
}
