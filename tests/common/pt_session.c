/* Unit tests and the FUSE fuzzer: the real passthrough backend on a directory, a FUSE session over it and one worker. */
#include "pt_session.h"

#include <stdio.h>
#include <string.h>

#include "backend/pt_migration.h"
#include "migration/stream.h"

int pt_session_open(struct pt_session *s, const struct passthrough_opts *pt_opts,
		    const struct fuse_server_opts *se_opts)
{
	int ret;

	memset(s, 0, sizeof(*s));
	ret = passthrough_new(&s->pt, pt_opts);
	if (ret >= 0)
		ret = fuse_server_new(&s->se, se_opts, &passthrough_ops, s->pt);
	if (ret >= 0)
		ret = fuse_worker_new(s->se, &s->w);
	if (ret < 0) {
		pt_session_close(s);
		return ret;
	}
	return 0;
}

void pt_session_close(struct pt_session *s)
{
	if (s->w)
		fuse_worker_free(s->w);
	if (s->se)
		fuse_server_free(s->se);
	if (s->pt)
		passthrough_free(s->pt);
	memset(s, 0, sizeof(*s));
}

bool pt_session_mig_refused(struct passthrough *pt, const char *why, char *reason, size_t size)
{
	struct pt_mig_opts mo = { .mode = MIG_MODE_FIND_PATHS };
	struct mig_session session = { 0 };
	struct mig_options agreed = { 0 };
	struct mig_state st = { 0 };
	struct pt_mig_load *load = NULL;
	struct mig_buf buf = { 0 };
	char saved[512] = "", loaded[512] = "";
	bool save_refused, load_refused;

	save_refused = passthrough_mig_save(pt, &mo, &session, &agreed, &buf, saved,
					    sizeof(saved)) < 0 && strstr(saved, why);
	mig_buf_free(&buf);
	load_refused = passthrough_mig_prepare(pt, &mo, &st, &load, loaded, sizeof(loaded)) < 0 &&
		       !load && strstr(loaded, why);
	snprintf(reason, size, "save: %s; load: %s", saved, loaded);
	return save_refused && load_refused;
}
