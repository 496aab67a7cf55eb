/* The daemon's ferry_service: how a transport's workers reach the FUSE session, and the migration hooks. */
#ifndef FERRY_DAEMON_SERVICE_H
#define FERRY_DAEMON_SERVICE_H

#include "backend/passthrough.h"
#include "daemon/deadline.h"
#include "common/ferry_req.h"
#include "daemon/request_pool.h"
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
	/* A share whose storage is remote (daemon/pool_policy.h); NULL
	 * otherwise, and the services without it serve. */
	struct request_pool *pool;
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

/* The same two on a share whose storage is remote, with st->pool:
 * requests that wait on the storage overlap (daemon/request_pool.h). */
extern const struct ferry_service daemon_service_pooled;
extern const struct ferry_service daemon_service_pooled_migratable;

#endif
