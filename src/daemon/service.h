/* The daemon's ferry_service: how a transport's workers reach the FUSE session, and the migration hooks. */
#ifndef FERRY_DAEMON_HANDLER_H
#define FERRY_DAEMON_HANDLER_H

#include "backend/passthrough.h"
#include "backend/pt_migration.h"
#include "common/ferry_req.h"
#include "common/migration_stream.h"
#include "daemon/options.h"
#include "protocol/fuse_server.h"

/* What the service's opaque points to. */
struct daemon_state {
	struct fuse_server *session;
	struct passthrough *pt;
	/* Live migration (vhost-user only): how, and the options a source
	 * and a destination must agree on. */
	struct pt_mig_opts mig;
	struct mig_options mig_options;
};

/* Both transports: workers, requests, reset. */
extern const struct ferry_service daemon_service;
/* vhost-user: the same, and save_state/load_state (daemon/migration.c). */
extern const struct ferry_service daemon_service_migratable;

/* daemon/migration.c */
/* Fills st->mig and st->mig_options from the command line. */
void daemon_migration_config(const struct ferry_options *o, struct daemon_state *st);
int daemon_save_state(void *opaque, int fd, char *reason, size_t reason_size);
int daemon_load_state(void *opaque, int fd, char *reason, size_t reason_size);

#endif
