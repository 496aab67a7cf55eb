/* ferryfsd's options as data: options.def's rows, and how a row's value is checked and stored. */
#include "daemon/options_table.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/caps.h"

int opt_refuse(FILE *err, const char *what)
{
	fprintf(err, "ferryfsd: option '%s' is not supported yet "
		"(see docs/options.md)\n", what);
	return -EINVAL;
}

int opt_bad_value(FILE *err, const char *label, const char *val)
{
	fprintf(err, "ferryfsd: invalid value '%s' for option '%s' "
		"(ferryfsd --help lists what it takes)\n", val ? val : "", label);
	return -EINVAL;
}

int opt_parse_ulong(const char *s, unsigned long max, unsigned long *out)
{
	char *end;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	unsigned long v = strtoul(s, &end, 0);
	if (errno || *end || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* Value parsers of the options with a syntax of their own. */

/* In any case, as the Rust virtiofsd takes them ("DEBUG"). */
static int parse_log_level(const struct opt_use *use, void *field, const char *val)
{
	char lower[16];
	size_t i;

	for (i = 0; val[i] && i < sizeof(lower) - 1; i++)
		lower[i] = (char)tolower((unsigned char)val[i]);
	lower[i] = '\0';
	if (val[i] || ferry_log_level_parse(lower, field))
		return opt_bad_value(use->err, use->label, val);
	return 0;
}

static int parse_seconds(const struct opt_use *use, void *field, const char *val)
{
	double *seconds = field;
	char *end;

	*seconds = strtod(val, &end);
	if (*end || !*val || *seconds < 0)
		return opt_bad_value(use->err, use->label, val);
	return 0;
}

static int bad_idmap(const struct opt_use *use, const char *val)
{
	fprintf(use->err, "ferryfsd: invalid value '%s' for option '%s': expected "
		"TYPE:FROM:TO:COUNT (guest, host, squash-guest, squash-host, map), "
		"forbid-guest:FROM:COUNT or, for --uid-map/--gid-map, "
		":GUEST:HOST:COUNT:, with ranges inside 32 bits that do not "
		"overlap others of the same direction (at most %d)\n",
		val, use->label, IDMAP_MAX_RULES);
	return -EINVAL;
}

static int parse_translate(const struct opt_use *use, void *field, const char *val)
{
	return idmap_add_translate(field, val) ? bad_idmap(use, val) : 0;
}

static int parse_id_range(const struct opt_use *use, void *field, const char *val)
{
	return idmap_add_namespace_range(field, val) ? bad_idmap(use, val) : 0;
}

/* A value its parser refused, with the parser's reason; the value itself is
 * quoted only where it is short enough to help (not a rule list). */
static int refused_value(const struct opt_use *use, const char *label, const char *val,
			 const char *why)
{
	if (val)
		fprintf(use->err, "ferryfsd: invalid value '%s' for option '%s': %s\n",
			val, label, why);
	else
		fprintf(use->err, "ferryfsd: invalid value for option '%s': %s\n", label, why);
	return -EINVAL;
}

static int parse_xattrmap(const struct opt_use *use, void *field, const char *val)
{
	char msg[256];

	/* The C dialect's message has always named it "-o xattrmap". */
	return xattrmap_parse(field, val, msg, sizeof(msg)) ?
	       refused_value(use, use->dialect == OPT_C ? "-o xattrmap" : use->label, NULL, msg) : 0;
}

static int parse_queue_cpus(const struct opt_use *use, void *field, const char *val)
{
	char why[128];

	return cpu_list_parse(val, field, why, sizeof(why)) ?
	       refused_value(use, use->label, val, why) : 0;
}

/* --request-timeout: a positive number of seconds, fractions allowed, up
 * to a day (a deadline longer than that protects from nothing). */
static int parse_request_timeout(const struct opt_use *use, void *field, const char *val)
{
	double *seconds = field;
	char *end;

	errno = 0;
	*seconds = strtod(val, &end);
	if (!*val || *end || errno || !isfinite(*seconds))
		return refused_value(use, use->label, val, "expected a number of seconds, "
				     "such as 30 or 2.5");
	if (*seconds < 0.001 || *seconds > 86400)
		return refused_value(use, use->label, val, "the deadline must be at least "
				     "0.001 and at most 86400 seconds (leave the option out for none)");
	return 0;
}

/* A --read-only or --hide PATH: its syntax now; that it exists inside the share is
 * checked when the backend starts. */
static int parse_path_policy(const struct opt_use *use, void *field, const char *val)
{
	char msg[256];

	return path_list_add(field, val, msg, sizeof(msg)) ?
	       refused_value(use, use->label, NULL, msg) : 0;
}

/* An --add-dir NAME[,ro]:DIR: its syntax now; DIR is opened at the start. */
static int parse_added_dir(const struct opt_use *use, void *field, const char *val)
{
	char msg[256];

	return added_dir_add(field, val, msg, sizeof(msg)) ?
	       refused_value(use, use->label, NULL, msg) : 0;
}

/* A --quota-bytes SIZE: a number with an optional binary K, M, G or T. */
static int parse_quota_bytes(const struct opt_use *use, void *field, const char *val)
{
	uint64_t bytes;

	if (quota_parse_size(val, &bytes) < 0) {
		fprintf(use->err, "ferryfsd: invalid value for option '%s': '%s' (a size: "
			"a number of bytes, or with K, M, G or T)\n", use->label, val);
		return -EINVAL;
	}
	*(uint64_t *)field = bytes;
	return 0;
}

static int check_cap(int cap, bool add, void *opaque)
{
	(void)cap;
	(void)add;
	(void)opaque;
	return 0;
}

/* Checked now, applied by caps_limit() once serving: a typo must stop the
 * start, not a running daemon. */
static int parse_modcaps(const struct opt_use *use, void *field, const char *val)
{
	if (ferry_modcaps_walk(val, check_cap, NULL))
		return opt_bad_value(use->err, use->label, val);
	*(const char **)field = val;
	return 0;
}

/* Choice lists; each enum lists its names in the Rust virtiofsd's order. */

/* none is QEMU's C virtiofsd's name of never; -o takes metadata too, as
 * the Rust virtiofsd's -o does. */
static const struct opt_choice cache_choices[] = {
	{ "auto", CACHE_AUTO }, { "always", CACHE_ALWAYS }, { "never", CACHE_NEVER },
	{ "none", CACHE_NEVER }, { "metadata", CACHE_METADATA }, { NULL, 0 },
};
/* Nor a sandbox=none: its -o takes the first two. */
static const struct opt_choice sandbox_choices[] = {
	{ "namespace", SANDBOX_NAMESPACE }, { "chroot", SANDBOX_CHROOT },
	{ "none", SANDBOX_NONE }, { NULL, 0 },
};
static const struct opt_choice seccomp_choices[] = {
	{ "kill", SECCOMP_KILL }, { "log", SECCOMP_LOG }, { "trap", SECCOMP_TRAP },
	{ "none", SECCOMP_NONE }, { NULL, 0 },
};
static const struct opt_choice migration_mode_choices[] = {
	{ "find-paths", MIG_MODE_FIND_PATHS }, { "file-handles", MIG_MODE_FILE_HANDLES },
	{ NULL, 0 },
};
static const struct opt_choice migration_on_error_choices[] = {
	{ "abort", MIGRATION_ON_ERROR_ABORT },
	{ "guest-error", MIGRATION_ON_ERROR_GUEST_ERROR }, { NULL, 0 },
};
/* fallback: the Rust virtiofsd's older name of prefer, which it still takes. */
static const struct opt_choice file_handles_choices[] = {
	{ "never", FILE_HANDLES_NEVER }, { "prefer", FILE_HANDLES_PREFER },
	{ "mandatory", FILE_HANDLES_MANDATORY }, { "fallback", FILE_HANDLES_PREFER },
	{ NULL, 0 },
};

/* Row shorthands: an option without a value that stores v (true, false,
 * an enum), and one that only sets the run action. */
#define SETS(v) .kind = OPT_CONST, .value = (v)
#define ACTION(a) .kind = OPT_CONST, .action = (a)

/* The table: options.def's entries as rows, in its order. */
const struct opt_row opt_rows[] = {
#define OPTION(type, field, default_, to, ...) { OPT_FIELD(field), __VA_ARGS__ },
#define ALIAS(field, ...) { OPT_FIELD(field), __VA_ARGS__ },
#define ROW(...) { __VA_ARGS__ },
/* A switch of both dialects: --LONG and -o C set the field, -o no_C
 * clears it; the C dialect's synopsis names both forms. */
#define SWITCH(field, to, agreed_bit, long_, c, help_text, c_text, c_at) \
	{ .long_name = long_, .c_name = c, OPT_FIELD(field), SETS(true), \
	  .agreed = (agreed_bit), \
	  .help = { .text = help_text }, \
	  .c_help = { .synopsis = "-o " c ", -o no_" c, .text = c_text }, .c_help_at = (c_at) }, \
	{ .c_name = "no_" c, OPT_FIELD(field), SETS(false) },
#include "daemon/options.def"
};

const size_t opt_row_count = sizeof(opt_rows) / sizeof(opt_rows[0]);

const struct opt_row *opt_find_long(const char *name, size_t len)
{
	for (size_t i = 0; i < opt_row_count; i++) {
		const char *n = opt_rows[i].long_name;

		if (n && strlen(n) == len && !strncmp(n, name, len))
			return &opt_rows[i];
	}
	return NULL;
}

const struct opt_row *opt_find_c(const char *name)
{
	for (size_t i = 0; i < opt_row_count; i++)
		if (opt_rows[i].c_name && !strcmp(opt_rows[i].c_name, name))
			return &opt_rows[i];
	return NULL;
}

const struct opt_row *opt_find_word(const char *word)
{
	for (size_t i = 0; i < opt_row_count; i++)
		for (size_t w = 0; w < 2; w++)
			if (opt_rows[i].words[w] && !strcmp(opt_rows[i].words[w], word))
				return &opt_rows[i];
	return NULL;
}

bool opt_takes_value(const struct opt_row *row)
{
	return row->kind != OPT_CONST && row->kind != OPT_REFUSED;
}

/* Stores v in a field of the row's size: bool, int-sized (int, unsigned,
 * enums) or unsigned long. */
static void store(void *field, size_t size, unsigned long v)
{
	if (size == sizeof(bool)) {
		*(bool *)field = v != 0;
	} else if (size == sizeof(unsigned)) {
		unsigned u = (unsigned)v;

		memcpy(field, &u, sizeof(u));
	} else {
		memcpy(field, &v, sizeof(v));
	}
}

static int apply_value(const struct opt_use *use, void *field, const char *val)
{
	const struct opt_row *row = use->row;
	const struct opt_choice *c;
	unsigned long n;

	switch (row->kind) {
	case OPT_REFUSED:
		return opt_refuse(use->err, use->label);
	case OPT_CONST:
		if (field)
			store(field, row->size, (unsigned long)row->value);
		return 0;
	case OPT_STRING:
		if (strlen(val) < row->min || (row->max && strlen(val) > row->max)) {
			char label[96];

			/* With an upper bound, say the bounds. */
			if (row->max)
				snprintf(label, sizeof(label), "%s (%lu to %lu bytes)",
					 use->label, row->min, row->max);
			return opt_bad_value(use->err, row->max ? label : use->label, val);
		}
		if (field)
			*(const char **)field = val;
		return 0;
	case OPT_NUMBER:
		if (opt_parse_ulong(val, row->max, &n))
			return opt_bad_value(use->err, use->label, val);
		if (field)
			store(field, row->size, n);
		return 0;
	case OPT_CHOICE:
		for (c = row->choices; c->name; c++) {
			if (use->dialect == OPT_C && row->c_choice_count &&
			    c - row->choices >= (ptrdiff_t)row->c_choice_count)
				break;
			if (!strcmp(val, c->name)) {
				store(field, row->size, (unsigned long)c->value);
				return 0;
			}
		}
		return opt_bad_value(use->err, use->label, val);
	case OPT_PARSE:
		return row->parse(use, field, val);
	}
	return -EINVAL;
}

int opt_apply(struct ferry_options *o, const struct opt_row *row,
	      enum opt_dialect dialect, const char *val, FILE *err)
{
	char label[64];
	struct opt_use use = { .row = row, .dialect = dialect, .label = label, .err = err };
	void *field = row->field ? (char *)o + row->field - 1 : NULL;
	int ret;

	/* Named as the user wrote it: "--cache", the -o item "cache", or a
	 * whole word such as "-d". */
	if (dialect == OPT_C)
		snprintf(label, sizeof(label), "%s", row->c_name);
	else if (row->long_name)
		snprintf(label, sizeof(label), "--%s", row->long_name);
	else
		snprintf(label, sizeof(label), "%s", row->words[0] ? row->words[0] : "?");
	ret = apply_value(&use, field, val);
	if (ret)
		return ret;
	if (row->also)
		*(bool *)((char *)o + row->also - 1) = true;
	if (row->action != ACTION_SERVE)
		o->action = row->action;
	return 0;
}
