/* Passthrough backend: serves FUSE ops from a host directory. */
#ifndef FERRY_PASSTHROUGH_H
#define FERRY_PASSTHROUGH_H

#include <stdbool.h>

#include "backend/added_dirs.h"
#include "backend/idmap.h"
#include "backend/path_policy.h"
#include "backend/passthrough_modes.h"
#include "backend/quota.h"
#include "backend/xattrmap.h"
#include "protocol/fuse_ops.h"

struct passthrough_opts {
	const char *shared_dir;
	/* The share's path on the host, for messages naming a mount: in a
	 * sandbox shared_dir is "/" (NULL: shared_dir is that path). */
	const char *host_dir;
	enum cache_mode cache;
	double timeout;              /* seconds; <0 means "from the cache mode" */
	bool xattr;
	bool allow_direct_io;        /* keep the guest's O_DIRECT */
	bool writeback;
	/* EROFS for the ops that change something only with some arguments
	 * (SETATTR, OPEN for writing, ACCESS W_OK); the session refuses the
	 * ops that always change something before they get here. */
	bool readonly;
	bool announce_submounts;
	enum inode_file_handles file_handles;
	/* A sandbox hides /proc: it opens /proc/self/fd first and hands it
	 * over (passthrough owns it then). Otherwise passthrough opens it. */
	bool proc_self_fd_given;
	int proc_self_fd;
	bool preserve_noatime;       /* keep the guest's O_NOATIME */
	struct idmap uid_map;        /* guest <-> host uids */
	struct idmap gid_map;        /* guest <-> host gids */
	struct xattrmap xattrmap;    /* count 0: names pass unchanged */
	/* Subtrees that refuse every change with EROFS (docs/options.md,
	 * "Per-path policy", says what is guaranteed). */
	struct path_list read_only;
	/* Entries the guest can neither see nor reach (--hide). */
	struct path_list hide;
	/* More host directories, each a NAME at the share's root (--add-dir). */
	struct added_dir_list added_dirs;
	/* The share's quota (docs/options.md, "Quota"); 0: no limit. */
	uint64_t quota_bytes;
	unsigned long quota_inodes;
};

struct passthrough;

extern const struct fs_ops passthrough_ops;

/* Also makes /proc/self/fd the process's working directory (the xattr
 * calls name inodes relative to it). On success it owns opts->proc_self_fd. */
int passthrough_new(struct passthrough **out, const struct passthrough_opts *opts);
void passthrough_free(struct passthrough *pt);
/* The quota's limits and usage for the stats; false when there is none. */
bool passthrough_quota_usage(struct passthrough *pt, struct quota_usage *out);
/* The statfs(2) f_type of the file system the share's directory is on
 * (0 if unknown), for the daemon to judge how far away its storage is. */
unsigned long passthrough_root_fs_type(const struct passthrough *pt);
/* Switches that only test builds have: backend/passthrough_test_hooks.h. */

#endif
