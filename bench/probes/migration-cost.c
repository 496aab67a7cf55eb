/* migration-cost: what do saving and loading the migration state of 100,000 inodes cost in time, stream size and memory? */
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "migration/stream.h"

/*
 * Usage: migration-cost [INODES] [--handles]
 * A tree of 1,000 nested directories holding the rest as files, 1,000 open
 * handles, nodeids spread over 64 shards as ferryfs hands them out; with
 * --handles every inode also carries a 40-byte file handle (file-handle
 * mode). The encoder is fed by callbacks that make each inode on the fly,
 * as a daemon walking its table would. Best of 5 runs.
 */
#define DIRS 1000u
#define HANDLES 1000u
#define RUNS 5

struct gen {
	unsigned n, i, h;
	bool with_handles;
	char name[32];
	struct mig_file_handle fh;
};

static uint64_t nodeid_of(unsigned i)
{
	return i == 0 ? 1 : ((uint64_t)(1 + (i >> 6)) << 6) | (i & 63);
}

static int gen_inode(void *arg, struct mig_inode *out)
{
	struct gen *g = arg;
	unsigned i = g->i;

	if (i == g->n)
		return 0;
	g->i++;
	memset(out, 0, sizeof(*out));
	out->nodeid = nodeid_of(i);
	out->nlookup = 1;
	if (i == 0) {
		out->type = S_IFDIR;
		out->flags = MIG_INODE_ROOT;
		return 1;
	}
	out->type = i <= DIRS ? S_IFDIR : S_IFREG;
	out->flags = MIG_INODE_PATH;
	out->parent = nodeid_of(i <= DIRS ? i / 10 : 1 + i % DIRS);
	out->name_len = (size_t)snprintf(g->name, sizeof(g->name), "%s-%u",
					 i <= DIRS ? "dir" : "file", i);
	out->name = g->name;
	if (g->with_handles) {
		g->fh.handle_type = 1;
		g->fh.mount_id = 29;
		g->fh.size = 40;
		memset(g->fh.bytes, 0xa5, 40);
		memcpy(g->fh.bytes, &i, sizeof(i));
		out->flags |= MIG_INODE_FILE_HANDLE;
		out->file_handle = &g->fh;
	}
	return 1;
}

static int gen_open_file(void *arg, struct mig_open_file *out)
{
	struct gen *g = arg;

	if (g->h == HANDLES || DIRS + 1 + g->h >= g->n)
		return 0;
	out->fh = ++g->h;
	out->nodeid = nodeid_of(DIRS + g->h);
	out->open_flags = O_RDWR;
	out->kind = MIG_OPEN_REGULAR;
	return 1;
}

/* CPU time, not wall time: on a shared machine other work stretches the
 * wall clock but not what the codec itself costs. */
static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	struct mig_session session = { .initialized = true, .major = 7, .minor = 38,
				       .max_write = 1 << 20, .time_gran = 1, .max_pages = 256 };
	struct mig_options options = { .flags = MIG_OPT_XATTR };
	struct mig_counters counters = { .next_fh = HANDLES + 1, .shard_bits = 6 };
	struct gen g = { .n = 100000 };
	struct mig_source src = { .session = &session, .options = &options,
				  .counters = &counters, .next_inode = gen_inode,
				  .next_open_file = gen_open_file, .arg = &g };
	double best_enc = 1e9, best_dec = 1e9;
	size_t stream = 0, held = 0;
	struct rusage ru;
	int rc = 1;

	for (int a = 1; a < argc; a++) {
		if (!strcmp(argv[a], "--handles"))
			g.with_handles = true;
		else
			g.n = (unsigned)strtoul(argv[a], NULL, 0);
	}
	if (g.n < 2 || g.n > 4000000) {
		fprintf(stderr, "migration-cost: INODES must be 2..4000000\n");
		return 2;
	}
	for (unsigned s = 0; s < 64; s++)
		counters.next_seq[s] = 2 + (g.n >> 6);
	for (int run = 0; run < RUNS; run++) {
		struct mig_buf b = { 0 };
		struct mig_state *st = NULL;
		size_t before;
		char why[256];
		double t0, t1, t2;

		g.i = g.h = 0;
		t0 = now();
		if (mig_encode(&src, &b)) {
			fprintf(stderr, "migration-cost: encode failed\n");
			goto out;
		}
		t1 = now();
		before = mallinfo2().uordblks;
		if (mig_decode(b.data, b.len, NULL, &st, why, sizeof(why))) {
			fprintf(stderr, "migration-cost: decode refused: %s\n", why);
			mig_buf_free(&b);
			goto out;
		}
		t2 = now();
		held = mallinfo2().uordblks - before;
		stream = b.len;
		if (t1 - t0 < best_enc)
			best_enc = t1 - t0;
		if (t2 - t1 < best_dec)
			best_dec = t2 - t1;
		mig_state_free(st);
		mig_buf_free(&b);
	}
	getrusage(RUSAGE_SELF, &ru);
	printf("%u inodes%s, %u handles: stream %.1f MiB; CPU: encode %.1f ms, decode+validate %.1f ms "
	       "(best of %d); decoded state holds %.1f MiB; peak RSS %.1f MiB\n",
	       g.n, g.with_handles ? " with file handles" : "", HANDLES,
	       stream / 1048576.0, best_enc * 1e3, best_dec * 1e3, RUNS,
	       held / 1048576.0, ru.ru_maxrss / 1024.0);
	rc = 0;
out:
	return rc;
}
