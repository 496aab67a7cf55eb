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
	host_step_fn *host;
} mix[] = {
	{ 35, io_randread_next, io_done, host_randread },
	{ 55, io_randwrite_next, io_done, host_randwrite },
	{ 70, meta_getattr_next, meta_getattr_done, host_getattr },
	{ 85, meta_lookup_next, meta_lookup_done, host_lookup },
	{ 100, meta_create_unlink_next, meta_create_unlink_done, host_create_unlink },
};

static uint8_t mix_pick(uint64_t rnd)
{
	unsigned x = (unsigned)(rnd % 100), i = 0;

	while (x >= mix[i].below)
		i++;
	return (uint8_t)i;
}

static int mixed_next(struct run *r, struct ld_slot *s)
{
	if (!s->w.step)
		s->w.mix = mix_pick(load_rnd(r));
	return mix[s->w.mix].next(r, s);
}

/* --host: each step one chain of the mix, drawn alike (a create-unlink
 * chain is one step there). */
static int mixed_host(struct host_run *h, struct host_count *c)
{
	return mix[mix_pick(load_xorshift(&h->rng))].host(h, c);
}

static int mixed_done(struct run *r, struct ld_slot *s, char *why, size_t whylen)
{
	return mix[s->w.mix].done(r, s, why, whylen);
}

static const struct load_workload table[] = {
	{ "read", io_read_next, io_done, .data_file = true, .host = host_read },
	{ "randread", io_randread_next, io_done, .data_file = true, .host = host_randread },
	{ "write", io_write_next, io_done, .data_file = true, .host = host_write },
	{ "randwrite", io_randwrite_next, io_done, .data_file = true, .host = host_randwrite },
	{ "getattr", meta_getattr_next, meta_getattr_done, .data_file = true, .host = host_getattr },
	{ "lookup", meta_lookup_next, meta_lookup_done, .data_file = true, .host = host_lookup },
	{ "create-unlink", meta_create_unlink_next, meta_create_unlink_done, .data_file = false,
	  .host = host_create_unlink },
	{ "readdirplus", meta_readdirplus_next, meta_readdirplus_done,
	  .setup = meta_setup_dir, .teardown = meta_teardown_dir, .host = host_readdirplus, .dir = true },
	{ "mixed", mixed_next, mixed_done, .data_file = true, .host = mixed_host },
	{ "write-fsync", io_write_fsync_next, io_write_fsync_done, .data_file = true,
	  .host = host_write_fsync },
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
