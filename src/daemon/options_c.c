/* The -o lexer: QEMU's C virtiofsd's "key[=value],..." lists, looked up by the rows' C names. */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "daemon/options_table.h"

/* One item of the list: "key" or "key=value". */
static int lex_item(struct ferry_options *o, char *item, FILE *err)
{
	char *val = strchr(item, '=');
	const struct opt_row *row;
	int ret;

	if (val)
		*val++ = '\0';
	row = opt_find_c(item);
	if (row && row->kind == OPT_REFUSED)
		return opt_refuse(err, item);
	/* A key with a value it does not take, or without one it needs, is
	 * no option of this dialect; nor is an empty string ("source="). */
	if (!row || opt_takes_value(row) != !!val ||
	    (row->kind == OPT_STRING && !*val)) {
		fprintf(err, "ferryfsd: unknown option '-o %s%s%s'\n", item,
			val ? "=" : "", val ? val : "");
		return -EINVAL;
	}
	ret = opt_apply(o, row, OPT_C, val, err);
	/* A command line for QEMU's C virtiofsd: options_check gives it that
	 * daemon's defaults where ferryfsd's differ. */
	if (!ret && row->field == offsetof(struct ferry_options, shared_dir) + 1)
		o->share_named_by_c_dialect = true;
	return ret;
}

/* Splits the list on ',' in place. As in libfuse's option parser, a
 * backslash makes the next character literal, so an xattrmap rule can hold
 * a ',' written as '\,'. */
int options_lex_c(struct ferry_options *o, char *list, FILE *err)
{
	char *in = list;

	while (*in) {
		char *item = in, *out = in;

		while (*in && *in != ',') {
			if (*in == '\\' && in[1])
				in++;
			*out++ = *in++;
		}
		if (*in)
			in++;
		*out = '\0';
		if (*item) {
			int ret = lex_item(o, item, err);

			if (ret)
				return ret;
		}
	}
	return 0;
}
