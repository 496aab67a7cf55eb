/* Unit tests and the FUSE fuzzer: the real passthrough backend on a directory, a FUSE session over it and one worker. */
#include "pt_session.h"

#include <string.h>

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
