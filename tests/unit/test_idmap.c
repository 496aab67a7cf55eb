/* Tests uid/gid translation: each rule type in both directions, strict maps, and rule limits. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "backend/idmap.h"
#include "../common/check.h"

static uint32_t to_host(const struct idmap *m, uint32_t id)
{
	uint32_t out = 0xdeadbeef;

	return idmap_to_host(m, id, &out) < 0 ? 0xffffffffu : out;
}

int main(void)
{
	struct idmap m;

	memset(&m, 0, sizeof(m));
	CHECK_MSG(idmap_add_translate(&m, "map:1000:5000:10") == 0 &&
	          idmap_add_translate(&m, "squash-guest:2000:7000:5") == 0 &&
	          idmap_add_translate(&m, "squash-host:8000:3000:5") == 0 &&
	          idmap_add_translate(&m, "forbid-guest:4000:10") == 0 &&
	          idmap_add_translate(&m, "guest:6000:9000:1") == 0 &&
	          idmap_add_translate(&m, "host:9500:600:2") == 0, "rules accepted");
	CHECK_MSG(to_host(&m, 1000) == 5000 && to_host(&m, 1009) == 5009 &&
	          to_host(&m, 1010) == 1010, "map: guest side 1:1, edges");
	CHECK_MSG(idmap_to_guest(&m, 5003) == 1003 && idmap_to_guest(&m, 5010) == 5010,
	          "map: host side 1:1, edges");
	CHECK_MSG(to_host(&m, 2000) == 7000 && to_host(&m, 2004) == 7000 &&
	          to_host(&m, 2005) == 2005, "squash-guest");
	CHECK_MSG(idmap_to_guest(&m, 7000) == 7000, "squash-guest has no host-to-guest side");
	CHECK_MSG(idmap_to_guest(&m, 8000) == 3000 && idmap_to_guest(&m, 8004) == 3000 &&
	          to_host(&m, 3000) == 3000, "squash-host, one direction only");
	uint32_t out = 42;
	CHECK_MSG(idmap_to_host(&m, 4005, &out) == -EPERM && out == 42 &&
	          to_host(&m, 4010) == 4010, "forbid-guest refuses its range only");
	CHECK_MSG(to_host(&m, 6000) == 9000 && idmap_to_guest(&m, 9000) == 9000,
	          "guest: one direction");
	CHECK_MSG(idmap_to_guest(&m, 9501) == 601 && to_host(&m, 601) == 601,
	          "host: one direction");
	CHECK_MSG(idmap_add_translate(&m, "guest:1005:1:1") == -EINVAL &&
	          idmap_add_translate(&m, "host:5009:1:1") == -EINVAL,
	          "overlaps with map's ranges refused");
	unsigned before = m.nrules;
	CHECK_MSG(idmap_add_translate(&m, "map:100:8002:2") == -EINVAL && m.nrules == before,
	          "a map whose host side overlaps leaves no half rule behind");

	memset(&m, 0, sizeof(m));
	CHECK_MSG(idmap_add_translate(&m, "squash-guest:0:1001:4294967295") == 0 &&
	          to_host(&m, 0) == 1001 && to_host(&m, 4294967294u) == 1001 &&
	          to_host(&m, 4294967295u) == 4294967295u,
	          "the README's squash-everything example");
	CHECK_MSG(idmap_add_translate(&m, "host:0:0:4294967296") == 0 &&
	          idmap_to_guest(&m, 4294967295u) == 4294967295u, "count 2^32 from 0");
	CHECK_MSG(idmap_add_translate(&m, "guest:1:0:4294967296") == -EINVAL, "count past 2^32");
	CHECK_MSG(idmap_add_translate(&m, "guest:1:2") == -EINVAL &&
	          idmap_add_translate(&m, "guest:1:2:3:4") == -EINVAL &&
	          idmap_add_translate(&m, "guest:-1:2:3") == -EINVAL &&
	          idmap_add_translate(&m, "guest::2:3") == -EINVAL &&
	          idmap_add_translate(&m, "Guest:1:2:3") == -EINVAL &&
	          idmap_add_translate(&m, "") == -EINVAL, "malformed specs refused");

	memset(&m, 0, sizeof(m));
	CHECK_MSG(idmap_add_namespace_range(&m, ":0:100000:65536:") == 0 && m.strict, "--uid-map range");
	CHECK_MSG(to_host(&m, 0) == 100000 && to_host(&m, 65535) == 165535 &&
	          to_host(&m, 65536) == 0xffffffffu, "strict: unmapped guest ids refused");
	CHECK_MSG(idmap_to_guest(&m, 100001) == 1 && idmap_to_guest(&m, 0) == IDMAP_OVERFLOW_ID,
	          "strict: unmapped host ids shown as the overflow id");
	CHECK_MSG(idmap_add_namespace_range(&m, "0:1:2:") == -EINVAL &&
	          idmap_add_namespace_range(&m, ":0:1:2") == -EINVAL, "--uid-map needs both colons");

	memset(&m, 0, sizeof(m));
	char spec[64];
	int ret = 0;
	for (unsigned i = 0; i < IDMAP_MAX_RULES && ret == 0; i++) {
		snprintf(spec, sizeof(spec), "guest:%u:1:1", i * 10);
		ret = idmap_add_translate(&m, spec);
	}
	CHECK_MSG(ret == 0 && idmap_add_translate(&m, "guest:100000:1:1") == -EINVAL,
	          "at most %d rules", IDMAP_MAX_RULES);

	return check_result();
}
