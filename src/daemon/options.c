/* ferryfsd's command line: both the Rust virtiofsd's and QEMU's C virtiofsd's dialects (options.def lists them). */
#include "daemon/options.h"

#include <string.h>

#include "daemon/options_table.h"

void options_defaults(struct ferry_options *o)
{
	memset(o, 0, sizeof(*o));   /* and so every SWITCH off */
#define OPTION(type, field, default_, to, ...) o->field = (type)default_;
#define STATE(type, field, default_) o->field = (type)default_;
#include "daemon/options.def"
}

int ferry_options_parse(struct ferry_options *o, int argc, char **argv,
			FILE *err)
{
	int ret;

	options_defaults(o);
	ret = options_lex_argv(o, argc, argv, err);
	if (ret)
		return ret;
	return options_check(o, err);
}
