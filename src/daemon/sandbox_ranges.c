/* Checks the --uid-map/--gid-map ranges of an unprivileged start before newuidmap/newgidmap see them. */
#include <errno.h>

#include "common/log.h"
#include "daemon/sandbox_ranges.h"

int sandbox_ranges_check(const struct idmap *m, const char *opt, uint32_t own,
			 uint32_t *root_host)
{
	if (!m->strict) {
		log_err("sandbox: without root, --uid-map and --gid-map go together "
			"(give --%s too, e.g. --%s=:0:%u:1:)", opt, opt, (unsigned)own);
		return -EINVAL;
	}
	for (unsigned i = 0; i < m->nrules; i++) {
		enum idmap_kind kind = m->rules[i].kind;

		if (kind != IDMAP_GUEST && kind != IDMAP_HOST) {
			log_err("sandbox: without root, ids are mapped by a user "
				"namespace: --translate-uid/--translate-gid squash and "
				"forbid rules need root; use --%s ranges only", opt);
			return -EINVAL;
		}
	}
	if (idmap_to_host(m, 0, root_host) < 0) {
		log_err("sandbox: without root, --%s must map 0 inside (e.g. "
			"--%s=:0:%u:1: for your own id, or a range of yours from "
			"/etc/sub%cid): the daemon serves as root of its user namespace",
			opt, opt, (unsigned)own, opt[0]);
		return -EINVAL;
	}
	return 0;
}
