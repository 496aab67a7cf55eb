/* uid/gid translation between guest and host (--translate-uid/--translate-gid, --uid-map/--gid-map). */
#ifndef FERRY_IDMAP_H
#define FERRY_IDMAP_H

#include <stdbool.h>
#include <stdint.h>

#define IDMAP_MAX_RULES 32
/* What a host id no rule maps looks like in the guest under a strict map,
 * the overflow id of a user namespace. */
#define IDMAP_OVERFLOW_ID 65534

enum idmap_kind {
	IDMAP_GUEST,         /* guest range -> host range, 1:1 */
	IDMAP_HOST,          /* host range -> guest range, 1:1 */
	IDMAP_SQUASH_GUEST,  /* guest range -> one host id */
	IDMAP_SQUASH_HOST,   /* host range -> one guest id */
	IDMAP_FORBID_GUEST,  /* guest range refused (EPERM) */
};

struct idmap_rule {
	enum idmap_kind kind;
	uint32_t from;       /* base of the source range */
	uint32_t to;         /* target base, or the single target id */
	uint64_t count;      /* 1 .. 2^32 - from */
};

/*
 * The rules in force for one kind of id. Ids no rule covers pass unchanged,
 * as with the Rust virtiofsd's --translate-*; "strict" (--uid-map, which
 * mimics a user namespace) refuses unmapped guest ids and shows unmapped
 * host ids as IDMAP_OVERFLOW_ID.
 */
struct idmap {
	struct idmap_rule rules[IDMAP_MAX_RULES];
	unsigned nrules;
	bool strict;
};

static inline bool idmap_empty(const struct idmap *m)
{
	return m->nrules == 0 && !m->strict;
}

/*
 * Adds a --translate-uid/gid rule, "TYPE:A:B:COUNT" (TYPE guest, host,
 * squash-guest, squash-host, map) or "forbid-guest:A:COUNT". "map" adds
 * two rules. Source ranges of one direction must not overlap. 0 or -EINVAL.
 */
int idmap_add_translate(struct idmap *m, const char *spec);
/* Adds a --uid-map/--gid-map range, ":GUEST:HOST:COUNT:", and makes the
 * map strict. 0 or -EINVAL. */
int idmap_add_namespace_range(struct idmap *m, const char *spec);

/* Guest id to host id; -EPERM when forbidden or unmapped under strict. */
int idmap_to_host(const struct idmap *m, uint32_t guest_id, uint32_t *host_id);
/* Host id as the guest should see it. */
uint32_t idmap_to_guest(const struct idmap *m, uint32_t host_id);

#endif
