/* The workload table: one row per --workload, and mixed, which draws its rows from the others. */
#include "workloads.h"

#include <string.h>

#include "load.h"

/* mixed: each chain is one of these, drawn with these weights (percent,
 * cumulative). Reads dominate, as in the seeds' guest workloads; the rest
 * keeps metadata paths busy at the same time. */
static const struct {
	unsigned below;
	load_next_fn *next;
	load_done_fn *done;
} mix[] = {
	{ 35, io_randread_next, io_done },
	{ 55, io_randwrite_next, io_done },
	{ 70, meta_getattr_next, meta_getattr_done },
	{ 85, meta_lookup_next, meta_lookup_done },
	{ 100, meta_create_unlink_next, meta_create_unlink_done },
};

static int mixed_next(struct run *r, struct ld_slot *s)
{
	if (!s->w.step) {
		unsigned x = (unsigned)(load_rnd(r) % 100), i = 0;

		while (x >= mix[i].below)
			i++;
		s->w.mix = (uint8_t)i;
	}
	return mix[s->w.mix].next(r, s);
}

static int mixed_done(struct run *r, struct ld_slot *s, char *why, size_t whylen)
{
	return mix[s->w.mix].done(r, s, why, whylen);
}

static const struct load_workload table[] = {
	{ "read", io_read_next, io_done, .data_file = true },
	{ "randread", io_randread_next, io_done, .data_file = true },
	{ "write", io_write_next, io_done, .data_file = true },
	{ "randwrite", io_randwrite_next, io_done, .data_file = true },
	{ "getattr", meta_getattr_next, meta_getattr_done, .data_file = true },
	{ "lookup", meta_lookup_next, meta_lookup_done, .data_file = true },
	{ "create-unlink", meta_create_unlink_next, meta_create_unlink_done, .data_file = false },
	{ "readdirplus", meta_readdirplus_next, meta_readdirplus_done,
	  .setup = meta_setup_dir, .teardown = meta_teardown_dir },
	{ "mixed", mixed_next, mixed_done, .data_file = true },
	{ "write-fsync", io_write_fsync_next, io_write_fsync_done, .data_file = true },
};

const struct load_workload *load_workload_find(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (!strcmp(name, table[i].name))
			return &table[i];
	return NULL;
}

bool load_workload_valid(const char *name)
{
	return load_workload_find(name) != NULL;
}
