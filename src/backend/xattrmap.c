/* xattr name mapping between guest and host: QEMU virtiofsd's -o xattrmap= rules. */
#include "backend/xattrmap.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define CAPABILITY_XATTR "security.capability"

struct rule_parser {
	const char *rule_start;
	unsigned rule_no;
	char sep;
	char *err;
	size_t err_size;
};

/* One line: which rule (number and text) and what is wrong with it. */
static int rule_error(const struct rule_parser *rp, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int rule_error(const struct rule_parser *rp, const char *fmt, ...)
{
	size_t text_len = 0;
	int n;
	va_list ap;

	while (rp->rule_start[text_len] && !isspace((unsigned char)rp->rule_start[text_len]))
		text_len++;
	n = snprintf(rp->err, rp->err_size, "xattrmap rule %u ('%.*s%s'): ",
		     rp->rule_no, text_len > 60 ? 60 : (int)text_len,
		     rp->rule_start, text_len > 60 ? "..." : "");
	if (n >= 0 && (size_t)n < rp->err_size) {
		va_start(ap, fmt);
		vsnprintf(rp->err + n, rp->err_size - n, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* Copies the field at *p up to the separator into out and steps past it. */
static int next_field(struct rule_parser *rp, const char **p, const char *what,
		      char out[XATTRMAP_NAME_MAX + 1], uint16_t *len)
{
	const char *end = strchr(*p, rp->sep);
	size_t n;

	if (!end)
		return rule_error(rp, "ends before its %s field is closed with '%c'",
				  what, rp->sep);
	n = (size_t)(end - *p);
	if (n > XATTRMAP_NAME_MAX)
		return rule_error(rp, "%s field is longer than %d bytes", what,
				  XATTRMAP_NAME_MAX);
	memcpy(out, *p, n);
	out[n] = '\0';
	if (len)
		*len = (uint16_t)n;
	*p = end + 1;
	return 0;
}

static int add_rule(struct xattrmap *map, struct rule_parser *rp,
		    enum xattrmap_type type, unsigned scope, const char *key,
		    const char *prepend)
{
	struct xattrmap_rule *r;

	/* One place is kept for the terminator. */
	if (map->count + 1 >= XATTRMAP_MAX_RULES)
		return rule_error(rp, "too many rules (at most %d, a map rule "
				  "counting as up to 4)", XATTRMAP_MAX_RULES - 1);
	r = &map->rules[map->count++];
	r->type = type;
	r->scope = scope;
	r->key_len = (uint16_t)strlen(key);
	r->prepend_len = (uint16_t)strlen(prepend);
	memcpy(r->key, key, r->key_len + 1);
	memcpy(r->prepend, prepend, r->prepend_len + 1);
	return 0;
}

/*
 * ":map:KEY:PREPEND:" stands for the rules QEMU's virtiofsd documents as
 * its equivalents: everything (empty KEY) moved under PREPEND and host
 * names outside it hidden; or KEY moved under PREPEND, host names with the
 * KEY prefix hidden, the guest kept out of PREPEND, the rest unchanged.
 */
static int add_map_rules(struct xattrmap *map, struct rule_parser *rp,
			 const char *key, const char *prepend)
{
	unsigned all = XATTRMAP_CLIENT | XATTRMAP_SERVER;
	int ret = add_rule(map, rp, XATTRMAP_PREFIX, all, key, prepend);

	if (ret < 0)
		return ret;
	if (!*key)
		return add_rule(map, rp, XATTRMAP_BAD, all, "", "");
	ret = add_rule(map, rp, XATTRMAP_BAD, XATTRMAP_SERVER, "", key);
	if (ret == 0)
		ret = add_rule(map, rp, XATTRMAP_BAD, XATTRMAP_CLIENT, prepend, "");
	if (ret == 0)
		ret = add_rule(map, rp, XATTRMAP_OK, all, "", "");
	return ret;
}

struct word {
	const char *name;
	unsigned value;
};

/* The value s names in words (ended by a NULL name); false if none. */
static bool find_word(const struct word *words, const char *s, unsigned *value)
{
	for (; words->name; words++) {
		if (!strcmp(words->name, s)) {
			*value = words->value;
			return true;
		}
	}
	return false;
}

static int parse_type(struct rule_parser *rp, const char *s,
		      enum xattrmap_type *type, bool *is_map)
{
	static const struct word types[] = {
		{ "prefix", XATTRMAP_PREFIX }, { "ok", XATTRMAP_OK },
		{ "bad", XATTRMAP_BAD }, { "unsupported", XATTRMAP_UNSUPPORTED },
		{ NULL, 0 },
	};
	unsigned value;

	*is_map = !strcmp(s, "map");
	if (*is_map)
		return 0;
	if (!find_word(types, s, &value))
		return rule_error(rp, "unknown type '%s' (expected prefix, ok, "
				  "bad, unsupported or map)", s);
	*type = (enum xattrmap_type)value;
	return 0;
}

static int parse_scope(struct rule_parser *rp, const char *s, unsigned *scope)
{
	static const struct word scopes[] = {
		{ "client", XATTRMAP_CLIENT }, { "server", XATTRMAP_SERVER },
		{ "all", XATTRMAP_CLIENT | XATTRMAP_SERVER }, { NULL, 0 },
	};

	if (!find_word(scopes, s, scope))
		return rule_error(rp, "unknown scope '%s' (expected client, "
				  "server or all)", s);
	return 0;
}

/* One rule at *p (whitespace already skipped); steps past it. */
static int parse_rule(struct xattrmap *map, struct rule_parser *rp,
		      const char **p, bool *was_map)
{
	char type_s[XATTRMAP_NAME_MAX + 1], scope_s[XATTRMAP_NAME_MAX + 1];
	char key[XATTRMAP_NAME_MAX + 1], prepend[XATTRMAP_NAME_MAX + 1];
	enum xattrmap_type type = XATTRMAP_OK;
	unsigned scope = 0;
	int ret;

	rp->rule_start = *p;
	rp->sep = *(*p)++;
	ret = next_field(rp, p, "type", type_s, NULL);
	if (ret == 0)
		ret = parse_type(rp, type_s, &type, was_map);
	if (ret == 0 && !*was_map) {
		ret = next_field(rp, p, "scope", scope_s, NULL);
		if (ret == 0)
			ret = parse_scope(rp, scope_s, &scope);
	}
	if (ret == 0)
		ret = next_field(rp, p, "key", key, NULL);
	if (ret == 0)
		ret = next_field(rp, p, "prepend", prepend, NULL);
	if (ret < 0)
		return ret;
	if (*was_map)
		return add_map_rules(map, rp, key, prepend);
	return add_rule(map, rp, type, scope, key, prepend);
}

int xattrmap_parse(struct xattrmap *map, const char *spec, char *err,
		   size_t err_size)
{
	struct rule_parser rp = { .rule_start = spec, .err = err,
				  .err_size = err_size };
	char mapped[XATTRMAP_NAME_MAX + 1];
	const char *p = spec, *host;
	bool saw_map = false;
	int ret;

	memset(map, 0, sizeof(*map));
	for (;;) {
		while (isspace((unsigned char)*p))
			p++;
		if (!*p)
			break;
		rp.rule_no++;
		if (saw_map) {
			rp.rule_start = p;
			ret = rule_error(&rp, "follows a map rule, which must be "
					 "the only map rule and the last rule");
			goto fail;
		}
		ret = parse_rule(map, &rp, &p, &saw_map);
		if (ret < 0)
			goto fail;
	}
	if (rp.rule_no == 0) {
		snprintf(err, err_size, "xattrmap: no rules in '%s'", spec);
		ret = -EINVAL;
		goto fail;
	}
	/* As in QEMU's virtiofsd: a name no rule matches is refused (guest)
	 * or hidden (host). The place was kept by add_rule(). */
	map->rules[map->count++] = (struct xattrmap_rule){
		.type = XATTRMAP_BAD,
		.scope = XATTRMAP_CLIENT | XATTRMAP_SERVER,
	};
	if (xattrmap_to_host(map, CAPABILITY_XATTR, mapped, &host) == 0 &&
	    strcmp(host, CAPABILITY_XATTR))
		snprintf(map->capability_name, sizeof(map->capability_name), "%s", host);
	return 0;

fail:
	memset(map, 0, sizeof(*map));
	return ret;
}

static const struct xattrmap_rule *find_rule(const struct xattrmap *map,
					     unsigned scope, const char *name)
{
	for (unsigned i = 0; i < map->count; i++) {
		const struct xattrmap_rule *r = &map->rules[i];

		if (!(r->scope & scope))
			continue;
		if (scope == XATTRMAP_CLIENT ? !strncmp(name, r->key, r->key_len)
					     : !strncmp(name, r->prepend, r->prepend_len))
			return r;
	}
	return NULL;
}

int xattrmap_to_host(const struct xattrmap *map, const char *name,
		     char buf[XATTRMAP_NAME_MAX + 1], const char **host)
{
	const struct xattrmap_rule *r;
	size_t len;

	*host = name;
	if (map->count == 0)
		return 0;
	r = find_rule(map, XATTRMAP_CLIENT, name);
	if (!r || r->type == XATTRMAP_BAD)
		return -EPERM;
	if (r->type == XATTRMAP_UNSUPPORTED)
		return -EOPNOTSUPP;
	if (r->type == XATTRMAP_OK)
		return 0;
	len = strlen(name);
	if (r->prepend_len + len > XATTRMAP_NAME_MAX)
		return -ERANGE;
	memcpy(buf, r->prepend, r->prepend_len);
	memcpy(buf + r->prepend_len, name, len + 1);
	*host = buf;
	return 0;
}

bool xattrmap_to_guest(const struct xattrmap *map, const char *host_name,
		       const char **guest)
{
	const struct xattrmap_rule *r;

	*guest = host_name;
	if (map->count == 0)
		return true;
	r = find_rule(map, XATTRMAP_SERVER, host_name);
	if (!r || r->type == XATTRMAP_BAD || r->type == XATTRMAP_UNSUPPORTED)
		return false;
	if (r->type == XATTRMAP_PREFIX) {
		*guest = host_name + r->prepend_len;
		/* The bare prefix would be an empty name. */
		return **guest != '\0';
	}
	return true;
}
