/* A realistic migration state for the stream's tests: nested directories, files, file handles, open handles, locks. */
#ifndef FERRY_TEST_MIGRATION_MODEL_H
#define FERRY_TEST_MIGRATION_MODEL_H

#include <stdbool.h>

#include "migration/stream.h"

#define N_DIRS 60
#define N_FILES 440
#define N_INODES (1 + N_DIRS + N_FILES)

struct model {
	struct mig_session session;
	struct mig_options options;
	struct mig_counters counters;
	struct mig_inode inodes[N_INODES];
	char names[N_INODES][32];
	struct mig_file_handle fhandles[N_INODES];
	struct mig_open_file open_files[64];
	size_t n_open_files;
	struct mig_lock locks[8];
	size_t n_locks;
};

/* 501 inodes: directory i (1..60) sits in directory i/2, the root for 1;
 * every 17th file is unlinked but open, every 3rd node has a file handle;
 * nodeids are ferryfs's (seq << 6) | shard. */
void model_build(struct model *m);
/* Encodes m (mig_encode_arrays). */
int model_encode(struct model *m, struct mig_buf *b);
/* Field by field: padding bytes are not part of the state. */
bool session_equal(const struct mig_session *a, const struct mig_session *b);
bool inode_equal(const struct mig_inode *a, const struct mig_inode *b);
bool lock_equal(const struct mig_lock *a, const struct mig_lock *b);

#endif
