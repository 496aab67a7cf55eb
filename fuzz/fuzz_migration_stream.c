/* libFuzzer target: the migration state decoder, as received and with the checksum made right, plus decode-encode-decode. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "migration/stream.h"
#include "fuzz_common.h"

/*
 * Input: a whole stream. Most mutations break the checksum, which the
 * decoder checks first; so each input is decoded twice, as it came and
 * with its header length and checksum rewritten, to reach the record
 * checks. Whatever decodes must encode, decode again and encode to the
 * same bytes: nothing the decoder accepts may be lost or changed.
 */
static struct mig_limits limits;

/* ---- seeds ---- */

struct seed {
	struct mig_inode inodes[8];
	struct mig_file_handle fh;
	size_t n_inodes;
	struct mig_open_file open_files[3];
	size_t n_open_files;
	struct mig_lock locks[2];
	size_t n_locks;
};

static void write_one(const char *dir, const char *name, struct seed *s,
		      const struct mig_session *session, unsigned shard_bits)
{
	struct mig_options opts = { .flags = MIG_OPT_XATTR | MIG_OPT_POSIX_LOCK,
				    .file_handles = MIG_FH_PREFER,
				    .migration_mode = MIG_MODE_FILE_HANDLES };
	struct mig_counters counters = { .next_fh = 10, .shard_bits = shard_bits };
	struct mig_arrays a = { .session = session, .options = &opts,
				.counters = &counters,
				.inodes = s->inodes, .n_inodes = s->n_inodes,
				.open_files = s->open_files, .n_open_files = s->n_open_files,
				.locks = s->locks, .n_locks = s->n_locks };
	struct mig_buf b = { 0 };
	struct mig_state *st;
	char why[256];

	for (unsigned i = 0; i < (1u << shard_bits); i++)
		counters.next_seq[i] = 100;
	if (mig_encode_arrays(&a, &b))
		fuzz_fail("seed %s does not encode", name);
	/* A seed the decoder refuses would only teach the fuzzer refusals. */
	if (mig_decode(b.data, b.len, &limits, &st, why, sizeof(why)))
		fuzz_fail("seed %s refused: %s", name, why);
	mig_state_free(st);
	fuzz_write_seed(dir, name, b.data, b.len);
	mig_buf_free(&b);
}

static void add_inode(struct seed *s, uint64_t id, uint32_t type, uint32_t flags,
		      uint64_t parent, const char *name)
{
	struct mig_inode *in = &s->inodes[s->n_inodes++];

	*in = (struct mig_inode){ .nodeid = id, .nlookup = 1, .generation = id,
				  .type = type, .flags = flags, .parent = parent,
				  .name = name, .name_len = name ? strlen(name) : 0 };
	if (flags & MIG_INODE_FILE_HANDLE)
		in->file_handle = &s->fh;
}

static void write_seeds(const char *dir)
{
	struct mig_session none = { 0 };
	struct mig_session session = { .initialized = true, .major = 7, .minor = 38,
				       .max_write = 131072, .flags = 0x1c0000fbffULL,
				       .max_readahead = 131072, .time_gran = 1,
				       .max_pages = 32 };
	struct seed s = { 0 };

	add_inode(&s, 1, S_IFDIR, MIG_INODE_ROOT, 0, NULL);
	write_one(dir, "root-only-before-init", &s, &none, 0);

	s.fh = (struct mig_file_handle){ .handle_type = 0x81, .mount_id = 29, .size = 8,
					 .bytes = { 1, 2, 3, 4, 5, 6, 7, 8 } };
	add_inode(&s, 2, S_IFDIR, MIG_INODE_PATH, 1, "dir");
	add_inode(&s, 3, S_IFREG, MIG_INODE_PATH, 2, "file");
	add_inode(&s, 4, S_IFREG, MIG_INODE_UNLINKED | MIG_INODE_FILE_HANDLE, 0, NULL);
	add_inode(&s, 5, S_IFLNK, MIG_INODE_PATH, 1, "link");
	add_inode(&s, 6, S_IFREG, MIG_INODE_UNLINKED, 0, NULL);
	s.open_files[s.n_open_files++] = (struct mig_open_file){ .fh = 1, .nodeid = 2,
		.open_flags = O_RDONLY | O_DIRECTORY, .kind = MIG_OPEN_DIR };
	s.open_files[s.n_open_files++] = (struct mig_open_file){ .fh = 2, .nodeid = 3,
		.open_flags = O_RDWR | O_APPEND, .kind = MIG_OPEN_REGULAR };
	s.open_files[s.n_open_files++] = (struct mig_open_file){ .fh = 7, .nodeid = 4,
		.open_flags = O_WRONLY, .kind = MIG_OPEN_REGULAR };
	s.locks[s.n_locks++] = (struct mig_lock){ .nodeid = 3, .owner = 0x55, .start = 10,
		.end = 20, .pid = 9, .kind = MIG_LOCK_POSIX, .type = MIG_LOCK_WRITE };
	s.locks[s.n_locks++] = (struct mig_lock){ .nodeid = 3, .owner = 2, .start = 0,
		.end = UINT64_MAX, .pid = 9, .kind = MIG_LOCK_FLOCK, .type = MIG_LOCK_READ };
	write_one(dir, "tree-handles-locks", &s, &session, 0);

	/* ferryfs's own nodeids: (seq << 6) | shard. */
	s = (struct seed){ 0 };
	add_inode(&s, 1, S_IFDIR, MIG_INODE_ROOT, 0, NULL);
	add_inode(&s, (5 << 6) | 3, S_IFDIR, MIG_INODE_PATH, 1, "a");
	add_inode(&s, (7 << 6) | 9, S_IFREG, MIG_INODE_PATH, (5 << 6) | 3, "b");
	write_one(dir, "sharded-ids", &s, &session, 6);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_init_log();
	/* Small caps, so that an input cannot spend the run in one huge
	 * allocation; the caps' own checks are what is fuzzed. */
	mig_limits_default(&limits);
	limits.max_stream_bytes = 1 << 20;
	limits.max_inodes = 4096;
	limits.max_open_files = 1024;
	limits.max_locks = 1024;
	if (fuzz_seed_dir()) {
		write_seeds(fuzz_seed_dir());
		exit(0);
	}
	return 0;
}

/* Decodes; what is accepted must survive encode-decode-encode unchanged. */
static void decode_one(const uint8_t *data, size_t size)
{
	struct mig_state *st = NULL, *st2 = NULL;
	struct mig_buf b1 = { 0 }, b2 = { 0 };
	char why[256];
	int rc;

	memset(why, 'x', sizeof(why));
	rc = mig_decode(data, size, &limits, &st, why, sizeof(why));
	FUZZ_ASSERT(memchr(why, '\0', sizeof(why)), "reason not terminated");
	if (rc) {
		FUZZ_ASSERT(rc < 0 && !st && why[0], "refused without a reason (%d)", rc);
		return;
	}
	FUZZ_ASSERT(st && st->n_inodes >= 1, "accepted without a root");
	FUZZ_ASSERT(mig_encode_state(st, &b1) == 0, "accepted state does not encode");
	rc = mig_decode(b1.data, b1.len, &limits, &st2, why, sizeof(why));
	FUZZ_ASSERT(rc == 0, "re-encoded state refused: %s", why);
	FUZZ_ASSERT(mig_encode_state(st2, &b2) == 0 && b1.len == b2.len &&
		    !memcmp(b1.data, b2.data, b1.len), "decode-encode-decode changed the state");
	/* Only skipped optional records may be missing from the re-encoding;
	 * with none, every byte the decoder accepted must come back the same
	 * (no field read and then dropped or changed). */
	FUZZ_ASSERT(b1.len <= size, "re-encoding grew the stream");
	FUZZ_ASSERT(b1.len != size || !memcmp(b1.data, data, size),
		    "re-encoding differs from an input without optional records");
	/* The first nodes only: paths over thousands would make this
	 * quadratic and starve the fuzzer. */
	for (size_t i = 0; i < st->n_inodes && i < 64; i++) {
		char path[1024];

		rc = mig_state_path(st, st->inodes[i].nodeid, path, sizeof(path));
		FUZZ_ASSERT(rc == 0 || rc == -ENAMETOOLONG, "no path for node %zu: %d", i, rc);
	}
	mig_state_free(st);
	mig_state_free(st2);
	mig_buf_free(&b1);
	mig_buf_free(&b2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char *copy;

	decode_one(data, size);
	if (size < MIG_HEADER_SIZE + MIG_END_SIZE || size > limits.max_stream_bytes)
		return 0;
	copy = malloc(size);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	mig_fix_checksum(copy, size);
	decode_one(copy, size);
	free(copy);
	return 0;
}
