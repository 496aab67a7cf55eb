/* The argv lexer: the Rust virtiofsd's --name[=value] words, whole words such as -h, and -o lists handed to options_c.c. */
#include <errno.h>
#include <string.h>

#include "daemon/options_table.h"

/* One argv word that starts with "--" and is not a whole word of a row;
 * *i moves past a value given as the next word. */
static int lex_long(struct ferry_options *o, int argc, char **argv, int *i, FILE *err)
{
	char *arg = argv[*i];
	char *name = arg + 2;
	char *val = strchr(name, '=');
	size_t name_len = val ? (size_t)(val - name) : strlen(name);
	const struct opt_row *row = opt_find_long(name, name_len);

	if (!row) {
		fprintf(err, "ferryfsd: unknown option '%s' (try --help)\n", arg);
		return -EINVAL;
	}
	/* Before its value is looked at: the option itself is the problem. */
	if (row->kind == OPT_REFUSED)
		return opt_refuse(err, arg);
	if (opt_takes_value(row) && !val) {
		if (++*i >= argc) {
			fprintf(err, "ferryfsd: option '%s' needs a value: "
				"give %s=VALUE\n", arg, arg);
			return -EINVAL;
		}
		val = argv[*i];
	} else if (val) {
		if (!opt_takes_value(row)) {
			fprintf(err, "ferryfsd: option '--%s' takes no value: "
				"give it as --%s alone\n", row->long_name, row->long_name);
			return -EINVAL;
		}
		val++;
	}
	return opt_apply(o, row, OPT_LONG, val, err);
}

int options_lex_argv(struct ferry_options *o, int argc, char **argv, FILE *err)
{
	for (int i = 1; i < argc; i++) {
		char *arg = argv[i];
		const struct opt_row *row;
		int ret;

		if (!strcmp(arg, "-o")) {
			if (++i >= argc)
				return opt_bad_value(err, "-o", NULL);
			ret = options_lex_c(o, argv[i], err);
		} else if (!strncmp(arg, "-o", 2) && arg[2]) {
			ret = options_lex_c(o, arg + 2, err);
		} else if ((row = opt_find_word(arg))) {
			ret = opt_apply(o, row, OPT_LONG, NULL, err);
		} else if (strncmp(arg, "--", 2) != 0 || !arg[2]) {
			fprintf(err, "ferryfsd: unexpected argument '%s': "
				"options are --name[=value] or -o list (try --help)\n", arg);
			ret = -EINVAL;
		} else {
			ret = lex_long(o, argc, argv, &i, err);
		}
		if (ret)
			return ret;
	}
	return 0;
}
