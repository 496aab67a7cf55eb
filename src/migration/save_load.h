/* Live migration of the daemon's device state: the FUSE session and the passthrough tables saved to, and loaded from, the device-state fd. */
#ifndef FERRY_MIGRATION_SAVE_LOAD_H
#define FERRY_MIGRATION_SAVE_LOAD_H

#include <stddef.h>
#include <stdint.h>

#include "backend/idmap.h"
#include "backend/pt_migration.h"
#include "backend/xattrmap.h"
#include "migration/stream.h"
#include "protocol/fuse_server.h"

/*
 * The layer above the protocol and the backend, below the daemon: it asks
 * each for its part (fuse_server_export/import, passthrough_mig_*), which
 * each keeps beside its own private tables, and moves the stream
 * (migration/stream.h) through the fd the transport hands over.
 */

/* How this side migrates, from its command line. */
struct migration_config {
	struct pt_mig_opts backend;   /* how inodes are found again */
	struct mig_options agreed;    /* what source and destination must agree on */
};

/* The id and xattr maps decide which host ids and names a guest's request
 * becomes: a destination with other maps would act as someone else. A
 * digest of them for mig_options.config_digest; 0 when none is set. */
uint64_t migration_config_digest(const struct idmap *uid_map, const struct idmap *gid_map,
				 const struct xattrmap *xattrmap);

/*
 * The save_state and load_state of a vhost-user service (struct
 * ferry_service). Save leaves every table as it was: a cancelled migration
 * goes on serving. Load is all of it or nothing: decoded and checked whole,
 * resolved in the share, and only then installed. Both return 0 or -errno
 * with why in reason, and log the outcome.
 */
int migration_save(struct fuse_server *session, struct passthrough *pt,
		   const struct migration_config *cfg, int fd,
		   char *reason, size_t reason_size);
int migration_load(struct fuse_server *session, struct passthrough *pt,
		   const struct migration_config *cfg, int fd,
		   char *reason, size_t reason_size);

#endif
