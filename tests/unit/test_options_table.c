/* Tests the option table itself: unique names, every option in --help, rows that fit their fields, both dialects alike. */
#include <ctype.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/options_table.h"
#include "../common/check.h"

static char help_text[32768];
static const char *c_section;   /* where the C dialect's entries begin */

/* Whether text holds word followed by something that cannot continue a
 * name ("--stats" must not be found in "--stats-socket"). */
static int mentions(const char *text, const char *end, const char *word)
{
	size_t len = strlen(word);

	for (const char *p = text; (p = strstr(p, word)) && (!end || p < end); p++) {
		char next = p[len];

		if (!isalnum((unsigned char)next) && next != '-' && next != '_')
			return 1;
	}
	return 0;
}

static const char *row_name(const struct opt_row *r)
{
	return r->long_name ? r->long_name : r->c_name ? r->c_name : r->words[0];
}

/* A value each row accepts, so that both dialects can be given it. */
static const char *sample_value(const struct opt_row *r)
{
	static const struct { const char *name; const char *value; } parsed[] = {
		{ "timeout", "2.5" }, { "xattrmap", ":map::user.virtiofs.:" },
		{ "read-only", "etc/secrets" }, { "hide", ".ssh" },
		{ "quota-bytes", "10G" }, { "quota_bytes", "512M" },
		{ "log-level", "debug" }, { "loglevel", "debug" }, { "modcaps", "-mknod" },
		{ "translate-uid", "map:1000:5000:10" }, { "translate-gid", "host:8000:3000:2" },
		{ "uid-map", ":0:100000:65536:" }, { "gid-map", ":0:100000:65536:" },
		{ "queue-cpus", "0" },
		{ "add-dir", "data,ro:/srv/data" },
		{ "request-timeout", "2.5" },
	};

	switch (r->kind) {
	case OPT_STRING:
		return "/x";
	case OPT_NUMBER:
		return "1";
	case OPT_CHOICE:
		/* The last name -o knows: not the default, so a field that
		 * did not change would show. */
		for (unsigned n = 0; r->choices[n].name; n++)
			if (!r->choices[n + 1].name || n + 1 == r->c_choice_count)
				return r->choices[n].name;
		return NULL;
	case OPT_PARSE:
		for (size_t i = 0; i < sizeof(parsed) / sizeof(*parsed); i++)
			if (!strcmp(parsed[i].name, row_name(r)))
				return parsed[i].value;
		return NULL;
	case OPT_CONST:
	case OPT_REFUSED:
		break;
	}
	return NULL;
}

/* Where lex() keeps the words it passes: string options point into it. */
struct words {
	char w1[512], w2[512];
};

/* Lexes one option (no cross-option checks) into o; err gets the message. */
static int lex(struct ferry_options *o, struct words *words, char *err, size_t err_size,
	       const char *a, const char *b)
{
	char arg0[] = "ferryfsd";
	char *argv[] = { arg0, words->w1, words->w2, NULL };
	FILE *f = fmemopen(err, err_size, "w");
	int ret;

	if (!f) {
		perror("fmemopen");
		exit(1);
	}
	memset(err, 0, err_size);
	snprintf(words->w1, sizeof(words->w1), "%s", a);
	snprintf(words->w2, sizeof(words->w2), "%s", b ? b : "");
	options_defaults(o);
	ret = options_lex_argv(o, b ? 3 : 2, argv, f);
	fclose(f);
	return ret;
}

/* The string a field points to when it points into the words, else NULL. */
static const char *string_in(const struct ferry_options *o, const struct opt_row *r,
			     const struct words *words)
{
	const char *p;

	if (r->size != sizeof(p))
		return NULL;
	memcpy(&p, (const char *)o + r->field - 1, sizeof(p));
	if ((uintptr_t)p < (uintptr_t)words ||
	    (uintptr_t)p >= (uintptr_t)words + sizeof(*words))
		return NULL;
	return p;
}

static void check_names(void)
{
	int dup = 0;

	for (size_t i = 0; i < opt_row_count; i++) {
		const struct opt_row *a = &opt_rows[i];

		CHECK_MSG(a->long_name || a->c_name || a->words[0],
		          "row %zu has a name in some dialect", i);
		for (size_t j = i + 1; j < opt_row_count; j++) {
			const struct opt_row *b = &opt_rows[j];

			if ((a->long_name && b->long_name && !strcmp(a->long_name, b->long_name)) ||
			    (a->c_name && b->c_name && !strcmp(a->c_name, b->c_name)) ||
			    (a->words[0] && b->words[0] && !strcmp(a->words[0], b->words[0]))) {
				printf("FAIL: %s and %s share a name\n", row_name(a), row_name(b));
				dup++;
			}
			if (a->c_help.text && b->c_help.text && a->c_help_at == b->c_help_at) {
				printf("FAIL: %s and %s share c_help_at %d\n", row_name(a),
				       row_name(b), a->c_help_at);
				dup++;
			}
		}
		/* A whole word is matched before long names: it must not hide one. */
		for (size_t w = 0; w < 2; w++)
			if (a->words[w] && !strncmp(a->words[w], "--", 2))
				CHECK_MSG(!opt_find_long(a->words[w] + 2, strlen(a->words[w] + 2)),
				          "word %s hides no long option", a->words[w]);
	}
	failures += dup;
	CHECK_MSG(!dup, "names of each dialect and C help positions are unique (%zu rows)",
	          opt_row_count);
}

static void check_help(void)
{
	FILE *f = fmemopen(help_text, sizeof(help_text) - 1, "w");

	ferry_options_usage(f);
	fclose(f);
	c_section = strstr(help_text, "QEMU's C virtiofsd dialect");
	CHECK_MSG(c_section != NULL, "--help has the C dialect's section");
	if (!c_section)
		return;
	for (size_t i = 0; i < opt_row_count; i++) {
		const struct opt_row *r = &opt_rows[i];
		char word[96];

		if (r->kind == OPT_REFUSED) {
			CHECK_MSG(!r->help.text && !r->c_help.text, "refused %s has no help entry",
			          row_name(r));
			continue;
		}
		if (r->long_name) {
			snprintf(word, sizeof(word), "--%s", r->long_name);
			CHECK_MSG(mentions(help_text, c_section, word),
			          "--help's Rust dialect section names %s", word);
		}
		if (r->c_name) {
			snprintf(word, sizeof(word), "-o %s", r->c_name);
			CHECK_MSG(mentions(c_section, NULL, word), "--help's C dialect section names %s",
			          word);
		}
		if (r->words[0])
			CHECK_MSG(mentions(help_text, NULL, r->words[0]), "--help names %s",
			          r->words[0]);
		CHECK_MSG(!r->c_help.text || r->c_help_at > 0, "%s has a C help position",
		          row_name(r));
	}
	for (const char *line = help_text; *line; line = strchr(line, '\n') + 1) {
		size_t len = strcspn(line, "\n");

		/* help2man reads 80-column text. */
		if (len > 80)
			CHECK_MSG(0, "--help line within 80 columns: %.*s", (int)len, line);
		if (!line[len])
			break;
	}
}

/* A row's field fits what its kind stores there. */
static void check_fields(void)
{
	for (size_t i = 0; i < opt_row_count; i++) {
		const struct opt_row *r = &opt_rows[i];
		int fits = 1;

		if (r->field > sizeof(struct ferry_options) || r->also > sizeof(struct ferry_options))
			fits = 0;
		switch (r->kind) {
		case OPT_CONST:
			fits &= !r->field || r->size == sizeof(bool) || r->size == sizeof(int);
			fits &= !r->field || r->size != sizeof(bool) || r->value == 0 || r->value == 1;
			break;
		case OPT_STRING:
			fits &= r->field && r->size == sizeof(char *);
			fits &= !r->max || r->max >= r->min;
			break;
		case OPT_NUMBER:
			fits &= !r->field || r->size == sizeof(unsigned long) ||
				(r->size == sizeof(unsigned) && r->max <= UINT_MAX);
			break;
		case OPT_CHOICE:
			fits &= r->field && r->size == sizeof(int) && r->choices && r->choices[0].name;
			break;
		case OPT_PARSE:
			fits &= r->field && r->parse;
			break;
		case OPT_REFUSED:
			fits &= !r->field && !r->c_help.text;
			break;
		}
		CHECK_MSG(fits, "%s: its field fits its kind", row_name(r));
	}
}

/* Every option that has a C name is accepted by both dialects, and an
 * option of both stores the same through either. */
static void check_dialects(void)
{
	static struct words long_words, c_words;
	struct ferry_options by_long, by_c;
	char err[512];

	for (size_t i = 0; i < opt_row_count; i++) {
		const struct opt_row *r = &opt_rows[i];
		const char *val = sample_value(r);
		char item[256], arg[256];
		int ret_long = 0, ret_c;

		if (r->kind == OPT_REFUSED) {
			if (r->long_name) {
				snprintf(arg, sizeof(arg), "--%s", r->long_name);
				ret_long = lex(&by_long, &long_words, err, sizeof(err), arg, NULL);
			} else {
				ret_long = lex(&by_long, &long_words, err, sizeof(err), "-o",
					       r->c_name);
			}
			CHECK_MSG(ret_long && strstr(err, "not supported yet"), "%s is refused: %s",
			          row_name(r), err);
			continue;
		}
		if (opt_takes_value(r) && !val) {
			CHECK_MSG(0, "%s: this test has a sample value for it", row_name(r));
			continue;
		}
		if (r->long_name) {
			snprintf(arg, sizeof(arg), "--%s%s%s", r->long_name, val ? "=" : "",
				 val ? val : "");
			ret_long = lex(&by_long, &long_words, err, sizeof(err), arg, NULL);
			CHECK_MSG(!ret_long, "%s accepted: %s", arg, err);
		}
		if (!r->c_name)
			continue;
		snprintf(item, sizeof(item), "%s%s%s", r->c_name, val ? "=" : "", val ? val : "");
		ret_c = lex(&by_c, &c_words, err, sizeof(err), "-o", item);
		CHECK_MSG(!ret_c, "-o %s accepted: %s", item, err);
		if (!r->long_name || ret_long || ret_c || !r->field)
			continue;
		const char *s_long = string_in(&by_long, r, &long_words);
		const char *s_c = string_in(&by_c, r, &c_words);

		if (s_long || s_c)
			CHECK_MSG(s_long && s_c && !strcmp(s_long, s_c),
			          "--%s and -o %s store the string alike", r->long_name, r->c_name);
		else
			CHECK_MSG(!memcmp((char *)&by_long + r->field - 1,
				          (char *)&by_c + r->field - 1, r->size),
			          "--%s and -o %s store the same value", r->long_name, r->c_name);
		CHECK_MSG(!r->also || *((bool *)&by_long + r->also - 1) ==
				      *((bool *)&by_c + r->also - 1),
		          "--%s and -o %s set the same companion flag", r->long_name, r->c_name);
	}
}

int main(void)
{
	check_names();
	check_help();
	check_fields();
	check_dialects();
	return check_result();
}
