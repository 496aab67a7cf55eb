/* Passthrough backend: serves FUSE ops from a host directory. */
#ifndef FERRY_PASSTHROUGH_H
#define FERRY_PASSTHROUGH_H

#include <stdbool.h>

#include "protocol/fuse_ops.h"

enum cache_mode { CACHE_AUTO, CACHE_ALWAYS, CACHE_NEVER, CACHE_METADATA };

struct passthrough_opts {
	const char *shared_dir;
	enum cache_mode cache;
	double timeout;              /* seconds; <0 means "from the cache mode" */
	bool xattr;
	bool allow_direct_io;        /* keep the guest's O_DIRECT */
	bool writeback;
	bool readonly;
	bool announce_submounts;
};

struct passthrough;

extern const struct fs_ops passthrough_ops;

int passthrough_new(struct passthrough **out, const struct passthrough_opts *opts);
void passthrough_free(struct passthrough *pt);

#endif
