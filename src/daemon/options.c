/* ferryfsd's command line: both the Rust virtiofsd's and QEMU's C virtiofsd's dialects (options_table.c lists them). */
#include "daemon/options.h"

#include <string.h>

#include "daemon/options_table.h"

void options_defaults(struct ferry_options *o)
{
	memset(o, 0, sizeof(*o));
	o->action = ACTION_SERVE;
	o->listen_fd = -1;
	o->cache = CACHE_AUTO;
	o->timeout = -1;
	o->readdirplus = true;
	o->announce_submounts = true;
	o->log_level = LOG_LVL_INFO;
	o->poll_max_us = FERRY_POLL_MAX_US_DEFAULT;
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
