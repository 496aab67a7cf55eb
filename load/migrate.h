/* ferryfs-load --migrate-to: the interface main.c calls and the figures it reports. */
#ifndef FERRY_LOAD_MIGRATE_H
#define FERRY_LOAD_MIGRATE_H

#include <stdbool.h>
#include <stdint.h>

#include "load.h"

struct mig_result {
	uint64_t inodes, open_files;
	uint64_t stream_bytes;
	double setup_ms;     /* INIT excluded: the files made and the handles written */
	double suspend_ms;   /* every ring disabled and stopped (GET_VRING_BASE) */
	double save_ms;      /* SET_DEVICE_STATE_FD save, the pipe to EOF, CHECK */
	double load_ms;      /* SET_DEVICE_STATE_FD load, the stream written, CHECK */
	double start_ms;     /* the destination's memory table and rings */
	double verify_ms;
	uint64_t getattrs, reads, lookups;
	uint64_t errors;     /* wrong replies, wrong data, node ids that changed */
	bool no_device_state;  /* the source did not offer DEVICE_STATE */
	bool announced;        /* the source offered a dirty log, and logged */
	uint64_t log_expected, log_marked;  /* pages written while logging, and marked */
	char *workdir;       /* left in the shared directory, for the caller to remove */
};

/* Connects to cfg->socket, makes cfg->inodes files, moves the backend's
 * state to cfg->migrate_to and checks it there. Returns 0 when the whole
 * sequence ran (res->errors may still be non-zero), -errno when it could
 * not (-ENOTSUP with res->no_device_state: the source cannot migrate). */
int migrate_run(const struct load_cfg *cfg, struct mig_result *res);

#endif
