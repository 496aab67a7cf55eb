/* Tests which --uid-map/--gid-map ranges an unprivileged sandbox accepts: libvirt's session map, its <idmap> form, and the refused ones. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "backend/idmap.h"
#include "daemon/sandbox_ranges.h"
#include "../common/check.h"

/* A map from --uid-map values, as libvirt 11.3 writes them (":%u:%u:%u:"). */
static struct idmap ranges(const char *a, const char *b)
{
	struct idmap m;

	memset(&m, 0, sizeof(m));
	CHECK(idmap_add_namespace_range(&m, a) == 0);
	if (b)
		CHECK(idmap_add_namespace_range(&m, b) == 0);
	return m;
}

int main(void)
{
	const uint32_t own = 1000;
	uint32_t root = 0xdeadbeef;
	struct idmap m;

	/* libvirt's session default: 0 -> the user, 1.. -> its /etc/subuid range. */
	m = ranges(":0:1000:1:", ":1:100000:65536:");
	CHECK_MSG(sandbox_ranges_check(&m, "uid-map", own, &root) == 0 && root == own,
		  "own id as 0 inside: accepted, 0 is host %u", root);

	/* <idmap><uid start='0' target='100000' count='65536'/>: the user's
	 * own id is not mapped at all. Refused before (0 had to be the user). */
	root = 0xdeadbeef;
	m = ranges(":0:100000:65536:", NULL);
	CHECK_MSG(sandbox_ranges_check(&m, "uid-map", own, &root) == 0 && root == 100000,
		  "0 -> a subordinate range: accepted, 0 is host %u", root);

	/* Several ranges, 0 in the second one. */
	root = 0xdeadbeef;
	m = ranges(":1000:1000:1:", ":0:200000:1000:");
	CHECK_MSG(sandbox_ranges_check(&m, "gid-map", own, &root) == 0 && root == 200000,
		  "0 in a later range: accepted, 0 is host %u", root);

	/* Nothing maps 0 inside: the daemon could not serve as root there. */
	root = 0xdeadbeef;
	m = ranges(":1:100000:65536:", NULL);
	CHECK_MSG(sandbox_ranges_check(&m, "uid-map", own, &root) == -EINVAL &&
		  root == 0xdeadbeef, "0 unmapped: refused, nothing set");

	/* --gid-map without --uid-map leaves the uid map empty and not strict. */
	memset(&m, 0, sizeof(m));
	CHECK_MSG(sandbox_ranges_check(&m, "uid-map", own, &root) == -EINVAL,
		  "no ranges for this kind: refused");

	/* A squash rule has no user-namespace form. */
	m = ranges(":0:1000:1:", NULL);
	CHECK(idmap_add_translate(&m, "squash-guest:5:100000:10") == 0);
	CHECK_MSG(sandbox_ranges_check(&m, "uid-map", own, &root) == -EINVAL,
		  "squash rule beside the ranges: refused");
	return check_result();
}
