/* ferryfsd's option table (one row per option of either dialect) and the parser's parts that read it. */
#ifndef FERRY_OPTIONS_TABLE_H
#define FERRY_OPTIONS_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "daemon/options.h"

/* Which command line a row was reached from: error messages name the
 * option the way the user wrote it ("--cache", or the -o item "cache"). */
enum opt_dialect { OPT_LONG, OPT_C };

enum opt_kind {
	/* Known to one of the virtiofsds but not implemented: refused by
	 * name, so that nothing is accepted and then ignored. */
	OPT_REFUSED,
	OPT_CONST,       /* takes no value; stores .value, or only sets .action */
	OPT_STRING,      /* stores the value itself; .min/.max bound its length */
	OPT_NUMBER,      /* an unsigned number (strtoul base 0) up to .max */
	OPT_CHOICE,      /* one of the names in .choices (for -o, of the first
			  * .c_choice_count when not 0) */
	OPT_PARSE,       /* its own syntax: .parse checks and stores it */
};

struct opt_choice {
	const char *name;
	int value;
};

/* What a row's value parser needs to say what went wrong. */
struct opt_use {
	const struct opt_row *row;
	enum opt_dialect dialect;
	const char *label;   /* "--NAME" or the -o item's "NAME" */
	FILE *err;
};

/* One entry of --help: "  SYNOPSIS", the text from column 28. */
struct opt_help {
	const char *synopsis;   /* NULL: --NAME[=METAVAR] or -o NAME[=METAVAR] */
	const char *metavar;
	const char *text;       /* its lines, joined by '\n'; NULL: no entry */
};

/*
 * A field is named by its offset in struct ferry_options plus one, so that
 * 0 (what a row leaves out) means "none": the first member is a field too.
 */
#define OPT_FIELD(m) .field = offsetof(struct ferry_options, m) + 1, \
	.size = sizeof(((struct ferry_options *)0)->m)
#define OPT_ALSO(m) .also = offsetof(struct ferry_options, m) + 1

struct opt_row {
	const char *long_name;    /* --NAME (Rust dialect), or NULL */
	const char *c_name;       /* -o NAME (C dialect), or NULL */
	const char *words[2];     /* whole argv words that mean it: "-h", "--debug" */
	enum opt_kind kind;
	size_t field, size;       /* OPT_FIELD(member); 0: the value is only checked */
	size_t also;              /* OPT_ALSO(bool member): set true as well */
	enum run_action action;   /* set when not ACTION_SERVE */
	int value;                /* OPT_CONST: stored into a bool or an enum */
	unsigned long min, max;   /* OPT_NUMBER: max; OPT_STRING: length bounds */
	const struct opt_choice *choices;   /* ends with a NULL name */
	unsigned c_choice_count;  /* not 0: -o knows only the first choices */
	/* OPT_PARSE: 0, or -EINVAL once it has written its message. */
	int (*parse)(const struct opt_use *use, void *field, const char *val);
	struct opt_help help;     /* its entry among the Rust dialect's options */
	struct opt_help c_help;   /* among the C dialect's, printed by c_help_at */
	int c_help_at;
	/* A bool field's MIG_OPT_* bit: source and destination of a
	 * migration must agree on it (options_to_migration); 0: none. */
	uint32_t agreed;
};

extern const struct opt_row opt_rows[];
extern const size_t opt_row_count;

/* NULL when no row has that name (len bytes; no terminator needed). */
const struct opt_row *opt_find_long(const char *name, size_t len);
const struct opt_row *opt_find_c(const char *name);
const struct opt_row *opt_find_word(const char *word);
/* Whether the row takes a value (--NAME=V, -o NAME=V). */
bool opt_takes_value(const struct opt_row *row);
/* Checks val and stores it (and .also, .action) in o; else writes one
 * message to err and returns -EINVAL. val is NULL for rows without one. */
int opt_apply(struct ferry_options *o, const struct opt_row *row,
	      enum opt_dialect dialect, const char *val, FILE *err);

/* Shared by the lexers and checks: the messages users have always seen. */
int opt_refuse(FILE *err, const char *what);
int opt_bad_value(FILE *err, const char *label, const char *val);
int opt_parse_ulong(const char *s, unsigned long max, unsigned long *out);

/* The parser's steps, in the order ferry_options_parse takes them. */
void options_defaults(struct ferry_options *o);
int options_lex_argv(struct ferry_options *o, int argc, char **argv, FILE *err);
int options_lex_c(struct ferry_options *o, char *list, FILE *err);
int options_check(struct ferry_options *o, FILE *err);

#endif
