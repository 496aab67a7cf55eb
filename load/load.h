/* ferryfs-load's run: its configuration, its results, and the entry points main.c calls. */
#ifndef FERRY_LOAD_LOAD_H
#define FERRY_LOAD_LOAD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "fuse_client.h"
#include "frontend.h"

#define LOAD_MAX_QUEUES 64

struct load_cfg {
	const char *socket;
	const char *host_dir;    /* --host (--host-pread): no backend, the host's own calls here */
	const char *cold_dir;    /* --cold: the backend's shared directory */
	const char *workload;
	uint32_t block_size;
	uint32_t queue_depth;
	uint32_t host_threads;   /* --host-threads: --host's calls in flight (0: one) */
	uint32_t queues;
	double seconds;
	uint64_t ops;            /* --ops: the measured interval is this many answers, not seconds */
	double warmup;
	double idle;             /* --idle: connected, nothing in flight, after */
	uint64_t file_size;
	pid_t daemon_pid;
	pid_t watch_pid;         /* --watch-pid: another process's CPU, e.g. a FUSE share's client */
	bool json;
	int event_idx;           /* 1 on, 0 off, -1 if offered */
	bool packed;             /* --packed: VIRTIO_F_RING_PACKED rings */
	bool poll;
	bool publish_batch;      /* --publish-batch */
	uint32_t dir_entries;
	bool keep_lookups;       /* --keep-lookups: the workload's FORGETs at its end */
	uint64_t seed;
	bool verbose;
	const char *migrate_to;  /* --migrate-to: the destination backend's socket */
	uint64_t inodes;         /* --inodes: files known to the source before the move */
};

struct load_result {
	double elapsed_s;
	uint64_t ops, bytes, entries, cycles;
	uint64_t errors;
	/* Answers seen before their request was published: a latency that
	 * would wrap (a clock or bookkeeping bug), counted so that a test can
	 * see one without a bound on time. */
	uint64_t lat_backwards;
	/* Known quirks of the backend, not errors: DESTROY answered with no
	 * bytes at all (the Rust virtiofsd). */
	uint64_t quirk_destroy_empty;
	double lat_p50_us, lat_p99_us, lat_p999_us, lat_mean_us, lat_max_us;
	double daemon_cpu_us;      /* < 0 when unknown */
	double idle_daemon_cpu_us; /* during --idle; < 0 when unknown or none */
	double load_cpu_us;
	double watch_cpu_us;       /* --watch-pid's, measured interval; < 0 when unknown or none */
	/* --host: the part of load_cpu_us its loop spent filling the blocks it
	 * wrote, which in a daemon's run is the driver's work; < 0 otherwise. */
	double fill_cpu_us;
	uint64_t kicks, calls;
	uint32_t proto_minor, max_write, max_pages;
	bool event_idx, indirect, packed;
	uint64_t queue_num_max;
	double setup_s;
};

bool load_workload_valid(const char *name);

/* xorshift64*: cheap, and the sequence is reproducible from --seed. One
 * generator for load_run and host_run, so both draw offsets alike. */
static inline uint64_t load_xorshift(uint64_t *state)
{
	*state ^= *state >> 12;
	*state ^= *state << 25;
	*state ^= *state >> 27;
	return *state * 0x2545f4914f6cdd1dull;
}

/* Connects, sets up, runs the workload and tears down. Returns 0 when the
 * run completed (res->errors may still be non-zero), -errno when it could
 * not run at all. */
int load_run(const struct load_cfg *cfg, struct load_result *res);
/* The same workload as the host's own system calls in cfg->host_dir, at a
 * depth of cfg->host_threads threads (host.h): the bound for any daemon
 * serving that directory at that depth. Same
 * return convention as load_run; the CPU figure is this process's. */
int host_run(const struct load_cfg *cfg, struct load_result *res);

#endif
