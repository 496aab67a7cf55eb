/* ferryfsd --help, made from the option table's help entries (help2man turns it into the man page). */
#include <string.h>

#include "daemon/options_table.h"

/* Where each entry's text starts, as help2man expects: past the synopsis
 * and at least one space, or on the next line when the synopsis is long. */
#define HELP_COLUMN 28

static void print_entry(FILE *out, const struct opt_help *h, const char *prefix,
			const char *name)
{
	char synopsis[128];
	int len;

	if (h->synopsis)
		len = snprintf(synopsis, sizeof(synopsis), "%s", h->synopsis);
	else
		len = snprintf(synopsis, sizeof(synopsis), "%s%s%s%s", prefix, name,
			       h->metavar ? "=" : "", h->metavar ? h->metavar : "");
	fprintf(out, "  %s", synopsis);
	if (2 + len < HELP_COLUMN)
		fprintf(out, "%*s", HELP_COLUMN - 2 - len, "");
	else
		fprintf(out, "\n%*s", HELP_COLUMN, "");
	for (const char *t = h->text; *t; t++) {
		fputc(*t, out);
		if (*t == '\n')
			fprintf(out, "%*s", HELP_COLUMN, "");
	}
	fputc('\n', out);
}

/* The Rust dialect's entries, in table order. "-h, --help": a row's
 * short word goes before its long name. */
static void print_long_entries(FILE *out)
{
	for (size_t i = 0; i < opt_row_count; i++) {
		const struct opt_row *r = &opt_rows[i];
		char prefix[16] = "--";

		if (!r->help.text)
			continue;
		if (r->words[0] && r->words[0][1] != '-')
			snprintf(prefix, sizeof(prefix), "%s, --", r->words[0]);
		print_entry(out, &r->help, prefix, r->long_name);
	}
}

/* The C dialect's entries, by ascending c_help_at. */
static void print_c_entries(FILE *out)
{
	int last = 0;

	for (;;) {
		const struct opt_row *next = NULL;

		for (size_t i = 0; i < opt_row_count; i++) {
			const struct opt_row *r = &opt_rows[i];

			if (r->c_help.text && r->c_help_at > last &&
			    (!next || r->c_help_at < next->c_help_at))
				next = r;
		}
		if (!next)
			return;
		print_entry(out, &next->c_help, "-o ", next->c_name);
		last = next->c_help_at;
	}
}

void ferry_options_usage(FILE *out)
{
	fputs(
"Usage: ferryfsd --socket-path=PATH --shared-dir=DIR [options]\n"
"  or:  ferryfsd --socket-path=PATH -o source=DIR[,opt...] [options]\n"
"  or:  ferryfsd --mount=MOUNTPOINT --shared-dir=DIR [options]\n"
"  or:  ferryfsd --stats=STATS_SOCKET [--json]\n"
"\n"
"A vhost-user-fs backend: shares DIR with a virtual machine over virtio-fs.\n"
"\n"
"Options (the Rust virtiofsd's dialect):\n", out);
	print_long_entries(out);
	fputs(
"\n"
"QEMU's C virtiofsd dialect (items of -o may be joined with commas):\n", out);
	print_c_entries(out);
	fputs(
"\n"
"Without --socket-path or --fd, ferryfsd takes a socket passed by systemd\n"
"socket activation (LISTEN_PID, LISTEN_FDS=1: fd 3).\n"
"\n"
"Options of either virtiofsd that ferryfsd does not implement yet are refused\n"
"by name; docs/options.md lists them.\n", out);
}
