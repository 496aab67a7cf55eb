/* Which --uid-map/--gid-map ranges an unprivileged sandbox can hand to newuidmap/newgidmap. */
#ifndef FERRY_SANDBOX_RANGES_H
#define FERRY_SANDBOX_RANGES_H

#include <stdint.h>

#include "backend/idmap.h"

/*
 * Checks one map for an unprivileged start with ranges: strict (--uid-map
 * or --gid-map given), plain 1:1 ranges only (squash and forbid rules have
 * no user-namespace form), and 0 inside mapped, since the daemon serves as
 * root of its namespace. 0 need not map to the user's own id (own): libvirt
 * passes <idmap><uid start='0' target='100000' .../> as --uid-map=:0:100000:N:.
 * opt names the option in the messages ("uid-map"). Sets *root_host to the
 * host id 0 inside maps to. 0 or -EINVAL (logged).
 */
int sandbox_ranges_check(const struct idmap *m, const char *opt, uint32_t own,
			 uint32_t *root_host);

#endif
