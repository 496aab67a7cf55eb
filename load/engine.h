/* The request engine's state and interface, shared by the run, the engine and the workloads (private to load/). */
#ifndef FERRY_LOAD_ENGINE_H
#define FERRY_LOAD_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fuse_client.h"
#include "load.h"
#include "measure.h"
#include "frontend.h"

#define LOAD_FORGET_BATCH 1024  /* fuse_forget_one entries per BATCH_FORGET */

struct run;
struct load_workload;

/*
 * What a workload keeps between the requests of one slot's chain. It is
 * kept beside the FUSE slot (not in it): the FUSE client knows requests,
 * the workloads know chains. Each workload touches its own member; step is
 * shared because the engine reads it, seq for the reason below.
 */
struct wl_state {
	int step;               /* 0: the next request starts a new chain */
	/* (queue << 48) at first; the lookup workload keeps its request
	 * number here. create-unlink names carry seq >> 48, so under mixed,
	 * once a LOOKUP ran on the slot, they carry 0 (names stay unique:
	 * the run's cursor is in them too). Kept so that requests stay what
	 * they were. */
	uint64_t seq;
	uint8_t mix;            /* mixed: which of its rows this chain runs */
	struct {                /* READ and WRITE */
		uint64_t off;   /* file offset of the request in flight */
	} io;
	struct {                /* create-unlink, and the directory's setup phases */
		uint64_t nodeid, fh;
	} ent;
	struct {                /* readdirplus */
		uint64_t fh, off;
		uint32_t count;
		uint8_t *seen;  /* one bit per entry, to catch duplicates */
	} dir;
	char name[64];          /* the name in the request in flight */
};

/* One request position of a queue: the FUSE request and the chain's state. */
struct ld_slot {
	struct fc_slot fc;
	struct wl_state w;
};

struct lq {
	struct fe_queue *vq;
	struct ld_slot *slots;
	uint16_t *pend;          /* slots added since the last kick */
	unsigned npend;
	unsigned inflight;
	bool hiprio;
};

/* Builds the slot's next request: 0 built, -ENODATA nothing more for this
 * slot (it goes idle), other -errno fatal. */
typedef int load_next_fn(struct run *r, struct ld_slot *s);
/* Checks a reply that passed fc_check and moves the slot on: 0 right,
 * -EBADMSG wrong (reason in why), other -errno fatal. */
typedef int load_done_fn(struct run *r, struct ld_slot *s, char *why, size_t whylen);

struct run {
	const struct load_cfg *cfg;
	const struct load_workload *wl;
	struct fe_dev dev;
	struct lq *q;
	unsigned nq;
	uint64_t unique;
	uint64_t rng;
	uint32_t proto_minor, max_write, max_pages;
	uint64_t workdir, file_nodeid, file_fh, file_ino, dir_nodeid;
	char workdir_name[64];
	uint64_t nblocks;           /* of the data file */
	uint64_t cursor;            /* the running phase's next block, file or name number */
	const char *phase;          /* what load_engine runs now */
	load_next_fn *next;
	load_done_fn *done;
	bool stopping, measuring;
	uint64_t t_start, t_end;
	uint64_t cpu0_us, cpu1_us;
	int64_t watch0_us, watch1_us;
	double self0_us, self1_us;
	/* Kicks sent and calls seen on all queues when measuring started and
	 * stopped: the setup's and the warm-up's are not the workload's. */
	uint64_t kicks0, kicks1, calls0, calls1;
	uint64_t ops, bytes, entries, cycles, errors, lat_backwards;
	uint64_t quirk_destroy_empty;   /* DESTROY answered with no bytes */
	struct load_lat lat;
	struct fuse_forget_one *forgets;
	size_t nforget, capforget;
	uint64_t file_lookups;      /* LOOKUPs of the data file, forgotten at teardown */
	uint64_t forgets_sent;
};

static inline uint64_t load_rnd(struct run *r)
{
	return load_xorshift(&r->rng);
}

static inline uint64_t load_unique(struct run *r)
{
	/* The Linux driver steps by 2: bit 0 marks interrupt requests. */
	r->unique += 2;
	return r->unique;
}

/* run.c's steps, shared with migrate.c: the rings and slots in guest
 * memory for cfg's queues (after fe_negotiate), FUSE INIT, and the
 * teardown of both. */
int load_alloc_queues(struct run *r);
int load_init(struct run *r);
void load_free_run(struct run *r);

/* Runs next/done on every request queue's slots until every slot is idle,
 * pipelined. With a window, measures from win_start to win_end, then starts
 * no new chain (a slot whose w.step is 0). phase names it in stall reports. */
int load_engine(struct run *r, const char *phase, load_next_fn *next, load_done_fn *done,
		uint64_t win_start, uint64_t win_end);
/* Sends the FORGETs still queued and waits for the hiprio queue to drain. */
int load_drain(struct run *r);
/* The slot setup and teardown build one request at a time in. */
struct fc_slot *load_sync_slot(struct run *r);
/* Sends the request built in load_sync_slot and waits for its reply. */
int load_sync_call(struct run *r, struct fc_slot *s);
/* MKDIR of name in parent, mode 0755, one request at a time; its node id
 * in *nodeid. */
int load_sync_mkdir(struct run *r, uint64_t parent, const char *name, uint64_t *nodeid);
/* CREATE of name in parent (O_RDWR, 0644), one request at a time; its
 * node id, inode number and open handle. */
int load_sync_create(struct run *r, uint64_t parent, const char *name, uint64_t *nodeid,
		     uint64_t *ino, uint64_t *fh);
/* UNLINK or RMDIR (opcode) of name in parent, then the FORGET of the
 * nlookup lookups of nodeid. */
int load_sync_remove(struct run *r, uint32_t opcode, uint64_t parent, const char *name,
		     uint64_t nodeid, uint64_t nlookup);
/* Queues a FORGET of nlookup for nodeid; the engine sends them in batches. */
int load_forget_add(struct run *r, uint64_t nodeid, uint64_t nlookup);

#endif
