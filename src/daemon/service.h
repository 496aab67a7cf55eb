/* The daemon's ferry_service: how a transport's workers reach the FUSE session, and the migration hooks. */
#ifndef FERRY_DAEMON_SERVICE_H
#define FERRY_DAEMON_SERVICE_H

#include "backend/passthrough.h"
#include "daemon/deadline.h"
#include "common/ferry_req.h"
#include "migration/save_load.h"
#include "protocol/fuse_server.h"

/* What the service's opaque points to. */
struct daemon_state {
	struct fuse_server *session;
	struct passthrough *pt;
	/* Live migration (vhost-user only): how, and what a source and a
	 * destination must agree on (options_to_migration). */
	struct migration_config mig;
	/* --request-timeout; NULL without it. */
	struct deadline *deadline;
};

/* Both transports: workers, requests, reset. */
extern const struct ferry_service daemon_service;
/* vhost-user: the same, and save_state/load_state (migration/save_load.h). */
extern const struct ferry_service daemon_service_migratable;
/* The same two with --request-timeout (daemon/deadline.h): each request
 * that may wait for the host's storage runs on a thread with a deadline,
 * one at a time (no WRITE runs). */
extern const struct ferry_service daemon_service_deadline;
extern const struct ferry_service daemon_service_deadline_migratable;

#endif
