/* The workload table's row type and the step functions its rows name (private to load/). */
#ifndef FERRY_LOAD_WORKLOADS_H
#define FERRY_LOAD_WORKLOADS_H

#include <stdbool.h>

#include "engine.h"
#include "host.h"

/* One --workload: what it sends (next), how it checks and moves on
 * (done), what it needs around the run, and what the host does for it
 * without a daemon (--host). */
struct load_workload {
	const char *name;            /* as --workload spells it */
	load_next_fn *next;
	load_done_fn *done;
	/* It uses the data file: the run creates it and writes it whole in
	 * --block-size WRITEs before, removes it after, and INIT checks
	 * that the backend takes blocks that big. */
	bool data_file;
	/* Otherwise, once the work directory exists: what the workload needs
	 * in it, and its removal before the work directory goes. NULL when
	 * nothing. Return 0 or -errno. */
	int (*setup)(struct run *r);
	int (*teardown)(struct run *r);
	/* --host: one step of the system calls a passthrough daemon makes on
	 * the host for this workload's requests, and whether it lists a
	 * directory of --dir-entries files (made before, removed after). */
	host_step_fn *host;
	bool dir;
};

/* The row of name, or NULL. */
const struct load_workload *load_workload_find(const char *name);

/* io_workloads.c: READ and WRITE on the data file. */
load_next_fn io_read_next, io_randread_next, io_write_next, io_randwrite_next;
load_done_fn io_done;
load_next_fn io_write_fsync_next;
load_done_fn io_write_fsync_done;
int io_setup_data_file(struct run *r);
int io_teardown_data_file(struct run *r);

/* meta_workloads.c: names, attributes, directories. */
load_next_fn meta_getattr_next, meta_lookup_next, meta_create_unlink_next,
	meta_readdirplus_next;
load_done_fn meta_getattr_done, meta_lookup_done, meta_create_unlink_done,
	meta_readdirplus_done;
int meta_setup_dir(struct run *r);
int meta_teardown_dir(struct run *r);

#endif
