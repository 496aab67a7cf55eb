/* Live migration of the passthrough backend: its tables saved into and loaded from the state stream's structs. */
#ifndef FERRY_PT_MIGRATION_H
#define FERRY_PT_MIGRATION_H

#include <stdbool.h>
#include <stddef.h>

#include "backend/passthrough.h"
#include "migration/stream.h"

/* The four --migration-* options (docs/options.md, docs/migration.md). */
struct pt_mig_opts {
	enum mig_mode mode;          /* how inodes are found again */
	/* --migration-on-error=guest-error: an inode that cannot be found
	 * becomes a placeholder the guest gets EIO from; else the migration
	 * fails. */
	bool guest_error;
	/* Save: open each file handle again and check it names the inode. */
	bool verify_handles;
	/* Save: stat each path found once more and check it names the inode. */
	bool confirm_paths;
};

/*
 * Source: walks the inode, handle and lock tables (changing none of them)
 * and appends the whole stream, with session and options as given, to
 * out. Refuses (-EBUSY) while a host lock the guest took is held, naming
 * the file: a lock cannot move to another process without a moment in
 * which neither holds it. -errno with why in reason.
 */
int passthrough_mig_save(struct passthrough *pt, const struct pt_mig_opts *o,
			 const struct mig_session *session,
			 const struct mig_options *options,
			 struct mig_buf *out, char *reason, size_t reason_size);

/* Caps for mig_decode from this backend's fd budget (each inode and each
 * open handle holds an fd). */
void passthrough_mig_limits(struct passthrough *pt, struct mig_limits *lim);

/*
 * Destination, in two steps so that nothing is installed before all of it
 * is ready: prepare resolves every inode of a decoded state in the share
 * and reopens every handle (the tables must hold nothing yet: -EBUSY);
 * then either commit installs all of it (cannot fail) or abort closes and
 * frees all of it. prepare fails with -errno and why in reason, holding
 * nothing.
 */
struct pt_mig_load;
int passthrough_mig_prepare(struct passthrough *pt, const struct pt_mig_opts *o,
			    const struct mig_state *st, struct pt_mig_load **out,
			    char *reason, size_t reason_size);
void passthrough_mig_commit(struct passthrough *pt, struct pt_mig_load *l);
void passthrough_mig_abort(struct passthrough *pt, struct pt_mig_load *l);

#endif
