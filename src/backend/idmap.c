/* uid/gid translation rules: parsing and lookup in both directions. */
#include "backend/idmap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static bool guest_side(enum idmap_kind k)
{
	return k == IDMAP_GUEST || k == IDMAP_SQUASH_GUEST || k == IDMAP_FORBID_GUEST;
}

static bool covers(const struct idmap_rule *r, uint32_t id)
{
	return id >= r->from && (uint64_t)id - r->from < r->count;
}

/* One unsigned 32-bit field; *s moves past it and the separator. */
static int take_u32(const char **s, char sep, uint64_t max, uint64_t *out)
{
	char *end;

	if (!**s || **s == '-' || **s == '+' || **s == ' ')
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(*s, &end, 10);
	if (errno || end == *s || v > max || *end != sep)
		return -EINVAL;
	*out = v;
	*s = sep ? end + 1 : end;
	return 0;
}

static int add_rule(struct idmap *m, enum idmap_kind kind, uint64_t from,
		    uint64_t to, uint64_t count)
{
	struct idmap_rule r = { .kind = kind, .from = (uint32_t)from,
				.to = (uint32_t)to, .count = count };
	bool squash = kind == IDMAP_SQUASH_GUEST || kind == IDMAP_SQUASH_HOST;

	if (count == 0 || from + count > (1ULL << 32))
		return -EINVAL;
	/* A 1:1 target range must fit in 32 bits too. */
	if (kind != IDMAP_FORBID_GUEST && !squash && to + count > (1ULL << 32))
		return -EINVAL;
	if (m->nrules >= IDMAP_MAX_RULES)
		return -EINVAL;
	for (unsigned i = 0; i < m->nrules; i++) {
		const struct idmap_rule *o = &m->rules[i];

		if (guest_side(o->kind) != guest_side(kind))
			continue;
		/* Overlapping sources would make the answer depend on order. */
		if (r.from < o->from + o->count && o->from < r.from + r.count)
			return -EINVAL;
	}
	m->rules[m->nrules++] = r;
	return 0;
}

int idmap_add_translate(struct idmap *m, const char *spec)
{
	static const struct { const char *name; enum idmap_kind kind; } kinds[] = {
		{ "guest:", IDMAP_GUEST }, { "host:", IDMAP_HOST },
		{ "squash-guest:", IDMAP_SQUASH_GUEST },
		{ "squash-host:", IDMAP_SQUASH_HOST },
		{ "forbid-guest:", IDMAP_FORBID_GUEST },
	};
	const uint64_t id_max = UINT32_MAX, count_max = 1ULL << 32;
	uint64_t a, b = 0, count;
	const char *s = spec;
	int ret;

	if (!strncmp(s, "map:", 4)) {
		struct idmap saved = *m;

		s += 4;
		if (take_u32(&s, ':', id_max, &a) || take_u32(&s, ':', id_max, &b) ||
		    take_u32(&s, '\0', count_max, &count))
			return -EINVAL;
		ret = add_rule(m, IDMAP_GUEST, a, b, count);
		if (ret == 0)
			ret = add_rule(m, IDMAP_HOST, b, a, count);
		if (ret < 0)
			*m = saved;
		return ret;
	}
	for (size_t i = 0; i < sizeof(kinds) / sizeof(*kinds); i++) {
		size_t n = strlen(kinds[i].name);

		if (strncmp(s, kinds[i].name, n))
			continue;
		s += n;
		if (take_u32(&s, ':', id_max, &a))
			return -EINVAL;
		if (kinds[i].kind != IDMAP_FORBID_GUEST && take_u32(&s, ':', id_max, &b))
			return -EINVAL;
		if (take_u32(&s, '\0', count_max, &count))
			return -EINVAL;
		return add_rule(m, kinds[i].kind, a, b, count);
	}
	return -EINVAL;
}

int idmap_add_namespace_range(struct idmap *m, const char *spec)
{
	const uint64_t id_max = UINT32_MAX;
	struct idmap saved = *m;
	const char *s = spec;
	uint64_t ns_id, host_id, count;
	int ret;

	if (*s++ != ':')
		return -EINVAL;
	if (take_u32(&s, ':', id_max, &ns_id) || take_u32(&s, ':', id_max, &host_id) ||
	    take_u32(&s, ':', 1ULL << 32, &count) || *s)
		return -EINVAL;
	ret = add_rule(m, IDMAP_GUEST, ns_id, host_id, count);
	if (ret == 0)
		ret = add_rule(m, IDMAP_HOST, host_id, ns_id, count);
	if (ret < 0) {
		*m = saved;
		return ret;
	}
	m->strict = true;
	return 0;
}

int idmap_to_host(const struct idmap *m, uint32_t guest_id, uint32_t *host_id)
{
	for (unsigned i = 0; i < m->nrules; i++) {
		const struct idmap_rule *r = &m->rules[i];

		if (!guest_side(r->kind) || !covers(r, guest_id))
			continue;
		switch (r->kind) {
		case IDMAP_GUEST:
			*host_id = r->to + (guest_id - r->from);
			return 0;
		case IDMAP_SQUASH_GUEST:
			*host_id = r->to;
			return 0;
		default:
			return -EPERM;
		}
	}
	if (m->strict)
		return -EPERM;
	*host_id = guest_id;
	return 0;
}

uint32_t idmap_to_guest(const struct idmap *m, uint32_t host_id)
{
	for (unsigned i = 0; i < m->nrules; i++) {
		const struct idmap_rule *r = &m->rules[i];

		if (guest_side(r->kind) || !covers(r, host_id))
			continue;
		return r->kind == IDMAP_HOST ? r->to + (host_id - r->from) : r->to;
	}
	return m->strict ? IDMAP_OVERFLOW_ID : host_id;
}
