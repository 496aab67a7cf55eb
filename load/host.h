/* ferryfs-load --host: the state of a run with no daemon and the per-workload steps of system calls (private to load/). */
#ifndef FERRY_LOAD_HOST_H
#define FERRY_LOAD_HOST_H

#include <stdbool.h>
#include <stdint.h>

#include "load.h"

/*
 * What a daemon's host side would do for a workload, done here by
 * --host-threads threads (default one), each making one system call at a
 * time: N threads keep N calls in flight, as a daemon serving a queue
 * depth of N can. It bounds what any daemon serving the same directory
 * can deliver at that depth, as far as the host's own calls are the cost;
 * on remote storage, where each call waits on the network, the depth is
 * most of the bound.
 *
 * One struct host_run per thread (a "lane"): the files are shared, made
 * once; the buffers, the listing and the counters are the lane's own.
 */
struct host_count;

struct host_run {
	const struct load_cfg *cfg;
	/* the workload's step (the workload table's host row) */
	int (*step)(struct host_run *h, struct host_count *c);
	int wdir;               /* the work directory, made in --host's DIR */
	int fd;                 /* data file, O_RDWR; -1 when the workload has none */
	int path_fd;            /* the same file, O_PATH: what a daemon keeps per inode */
	uint64_t file_ino;
	uint64_t nblocks;
	unsigned lane;          /* this thread's number, 0.. */
	void *buf;              /* one block, page aligned */
	uint64_t *seq;          /* shared by the lanes: the next block of read/write,
	                         * name number of lookup (atomic) */
	uint64_t names;         /* create-unlink's next name in this lane */
	uint64_t rng;
	bool measuring;         /* read: sparse data check, as ferryfs-load's measured READs */
	bool fsync_next;        /* write-fsync: the WRITE went, the FSYNC is next */
	uint64_t fills;         /* blocks filled before their pwrite, measured interval */
	struct {                /* readdirplus: the listing under way */
		int fd;         /* -1: the next step opens the directory */
		uint32_t count; /* our names seen in this listing */
		uint8_t *seen;  /* one bit per name, to catch duplicates */
		char *dents;    /* the getdents64 buffer, HOST_DENTS_SIZE */
	} dir;
};

/* What one step did: FUSE requests a daemon would have answered for it
 * (one per system call that stands for one), and their work. */
struct host_count {
	uint32_t ops;
	uint64_t bytes, entries, cycles;
};

/* 32 KiB, as glibc's readdir(3), which the daemons list directories with:
 * on a FUSE mount each getdents64 is a round trip, and a 6.x kernel sizes
 * its READDIRPLUS request from this buffer (a smaller one makes the loop
 * pay a round trip per few entries, and the bound it sets too low).
 * Compare entries/s. */
#define HOST_DENTS_SIZE 32768

/* The next number of the lanes' common sequence. */
static inline uint64_t host_next_seq(struct host_run *h)
{
	return __atomic_fetch_add(h->seq, 1, __ATOMIC_RELAXED);
}

/* One step of a workload: 0 done, -EBADMSG a wrong answer (said on
 * stderr), other -errno fatal. */
typedef int host_step_fn(struct host_run *h, struct host_count *c);

/* host_steps.c: the steps the workload table's rows name. */
host_step_fn host_read, host_randread, host_write, host_randwrite, host_getattr, host_lookup,
	host_create_unlink, host_readdirplus, host_write_fsync;

#endif
