/* Unit tests and the FUSE fuzzer: the real passthrough backend on a directory, a FUSE session over it and one worker. */
#ifndef FERRY_TEST_PT_SESSION_H
#define FERRY_TEST_PT_SESSION_H

#include <stdbool.h>
#include <stddef.h>

#include "backend/passthrough.h"
#include "protocol/fuse_server.h"

struct pt_session {
	struct passthrough *pt;
	struct fuse_server *se;
	struct fuse_worker *w;          /* feed it with raw_req_run() (raw_req.h) */
};

/* Makes the backend (pt_opts->shared_dir is served), the session (with
 * passthrough_ops) and a worker; nothing is sent, not even INIT. 0, or
 * the failing call's negative value with nothing left behind. */
int pt_session_open(struct pt_session *s, const struct passthrough_opts *pt_opts,
		    const struct fuse_server_opts *se_opts);
/* Frees what pt_session_open made (any part may be NULL) and zeroes s. */
void pt_session_close(struct pt_session *s);

/* A live migration tried both ways on the backend: whether it refuses to
 * save and to load a state (a fresh find-paths one), each with a reason
 * that holds why, written into reason (size bytes) as "save: ...; load: ...". */
bool pt_session_mig_refused(struct passthrough *pt, const char *why, char *reason, size_t size);

#endif
