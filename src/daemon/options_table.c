/* ferryfsd's options as data: one row per option of either dialect, and how a row's value is checked and stored. */
#include "daemon/options_table.h"

#include <errno.h>
#include <limits.h>
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

static int parse_log_level(const struct opt_use *use, void *field, const char *val)
{
	if (ferry_log_level_parse(val, field))
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

static int parse_xattrmap(const struct opt_use *use, void *field, const char *val)
{
	char msg[256];

	if (xattrmap_parse(field, val, msg, sizeof(msg))) {
		/* The C dialect's message has always named it "-o xattrmap". */
		fprintf(use->err, "ferryfsd: invalid value for option '%s': %s\n",
			use->dialect == OPT_C ? "-o xattrmap" : use->label, msg);
		return -EINVAL;
	}
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

/* QEMU's C virtiofsd has no metadata mode: its -o takes the first four. */
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
static const struct opt_choice file_handles_choices[] = {
	{ "never", FILE_HANDLES_NEVER }, { "prefer", FILE_HANDLES_PREFER },
	{ "mandatory", FILE_HANDLES_MANDATORY }, { NULL, 0 },
};

/* Row shorthands: an option without a value that stores v in member m
 * (true, false, an enum), and one that only sets the run action. */
#define SETS(m, v) .kind = OPT_CONST, OPT_FIELD(m), .value = (v)
#define ACTION(a) .kind = OPT_CONST, .action = (a)
/* A switch of both dialects: --LONG and -o C set field, -o no_C clears it;
 * the C dialect's synopsis names both forms. */
#define BOOL_OPT(long_, c, field_, help_text, c_text, c_at) \
	{ .long_name = long_, .c_name = c, SETS(field_, true), \
	  .help = { .text = help_text }, \
	  .c_help = { .synopsis = "-o " c ", -o no_" c, .text = c_text }, .c_help_at = (c_at) }, \
	{ .c_name = "no_" c, SETS(field_, false) }

/*
 * The table. Rows are in the order of the Rust dialect's --help; the C
 * dialect's entries are printed in c_help_at order, which follows QEMU's
 * virtiofsd's grouping. A row without help text of its own is named in
 * another's (tests/unit/test_options_table.c checks that each is).
 */
const struct opt_row opt_rows[] = {
	{ .long_name = "socket-path", .kind = OPT_STRING, OPT_FIELD(socket_path), .min = 1,
	  .help = { .metavar = "PATH", .text =
		"listen for the VMM on this unix socket; PATH.pid\n"
		"is locked while the daemon runs, so a second\n"
		"daemon on PATH fails" } },
	{ .long_name = "socket-group", .kind = OPT_STRING, OPT_FIELD(socket_group),
	  .help = { .metavar = "GROUP", .text =
		"make the socket accessible to GROUP (mode 0660)" } },
	{ .long_name = "fd", .kind = OPT_NUMBER, OPT_FIELD(listen_fd), .max = INT_MAX,
	  .help = { .metavar = "N", .text =
		"use the inherited listening socket N instead\n"
		"(as libvirt starts it)" } },
	{ .long_name = "mount", .kind = OPT_STRING, OPT_FIELD(mountpoint), .min = 1,
	  .help = { .metavar = "MOUNTPOINT", .text =
		"host FUSE mode: no VMM; mount DIR on MOUNTPOINT\n"
		"through the host's /dev/fuse (as root)" } },
	{ .long_name = "shared-dir", .c_name = "source", .kind = OPT_STRING,
	  OPT_FIELD(shared_dir), .min = 1,
	  .help = { .metavar = "DIR", .text = "the directory to share" },
	  .c_help = { .metavar = "DIR", .text = "the directory to share" }, .c_help_at = 10 },
	/* The config space holds 36 bytes and no terminator is needed. */
	{ .long_name = "tag", .kind = OPT_STRING, OPT_FIELD(tag), .min = 1, .max = 36,
	  .help = { .metavar = "TAG", .text =
		"the tag in the device's config space (<= 36 bytes)" } },
	{ .long_name = "cache", .c_name = "cache", .kind = OPT_CHOICE, OPT_FIELD(cache),
	  .choices = cache_choices, .c_choice_count = 4,
	  .help = { .metavar = "auto|always|never|metadata", .text =
		"guest caching (default auto): entry/attr\n"
		"timeouts 1 s, 1 day, 0, 1 day; never and\n"
		"metadata bypass the guest's page cache" },
	  .c_help = { .metavar = "auto|always|none", .text =
		"guest caching (none is never)" }, .c_help_at = 20 },
	{ .c_name = "timeout", .kind = OPT_PARSE, OPT_FIELD(timeout), .parse = parse_seconds,
	  .c_help = { .metavar = "SECONDS", .text =
		"how long the guest may cache entries and attributes" }, .c_help_at = 30 },
	BOOL_OPT("xattr", "xattr", xattr,
		 "serve extended attributes",
		 "serve extended attributes, or not", 40),
	/* Both virtiofsds: a map is pointless without xattrs, so it turns them on. */
	{ .long_name = "xattrmap", .c_name = "xattrmap", .kind = OPT_PARSE,
	  OPT_FIELD(xattrmap), OPT_ALSO(xattr), .parse = parse_xattrmap,
	  .help = { .metavar = "RULES", .text =
		"rename, hide or refuse xattr names between guest\n"
		"and host (QEMU virtiofsd's rules, e.g.\n"
		"':map::user.virtiofs.:'); implies --xattr" },
	  .c_help = { .metavar = "RULES", .text =
		"as --xattrmap (a ',' in RULES written '\\,')" }, .c_help_at = 130 },
	BOOL_OPT("posix-acl", "posix_acl", posix_acl,
		 "POSIX ACLs enforced by the guest, stored on the\n"
		 "host as system.posix_acl_* (needs --xattr)",
		 "as --posix-acl, or not", 140),
	BOOL_OPT("security-label", "security_label", security_label,
		 "store the label the guest's LSM gives each new\n"
		 "file (FUSE_SECURITY_CTX)",
		 "as --security-label, or not", 150),
	BOOL_OPT("writeback", "writeback", writeback,
		 "let the guest cache writes (writeback cache)",
		 "writeback cache, or not", 50),
	BOOL_OPT("allow-direct-io", "allow_direct_io", allow_direct_io,
		 "keep the guest's O_DIRECT on host files",
		 "keep the guest's O_DIRECT, or not", 70),
	/* Chosen either way, it no longer follows the cache mode. */
	{ .long_name = "no-readdirplus", .c_name = "no_readdirplus",
	  SETS(readdirplus, false), OPT_ALSO(readdirplus_set),
	  .help = { .text = "list directories without attributes" } },
	{ .c_name = "readdirplus", SETS(readdirplus, true), OPT_ALSO(readdirplus_set),
	  .c_help = { .synopsis = "-o readdirplus, -o no_readdirplus", .text =
		"list directories with attributes, or not" }, .c_help_at = 60 },
	{ .long_name = "allow-mmap", SETS(allow_mmap, true),
	  .help = { .text =
		"offer shared mmap of DIRECT_IO files (cache=never,\n"
		"metadata); guests before Linux 6.6 ignore it" } },
	{ .long_name = "readonly", SETS(readonly, true),
	  .help = { .text = "refuse every change with EROFS" } },
	{ .long_name = "preserve-noatime", SETS(preserve_noatime, true),
	  .help = { .text = "keep the guest's O_NOATIME (default: dropped)" } },
	{ .long_name = "announce-submounts", .c_name = "announce_submounts",
	  SETS(announce_submounts, true),
	  .help = { .text =
		"show host mount points as guest submounts\n"
		"(default; --no-announce-submounts turns it off)" } },
	{ .long_name = "no-announce-submounts", SETS(announce_submounts, false) },
	{ .long_name = "killpriv-v2", .c_name = "killpriv_v2", SETS(killpriv_v2, true),
	  .help = { .text =
		"the daemon clears suid/sgid/capabilities on\n"
		"write, truncate and chown (default off;\n"
		"--no-killpriv-v2)" },
	  .c_help = { .synopsis = "-o killpriv_v2, -o no_killpriv_v2, -o announce_submounts",
		.text = "as --killpriv-v2, --no-killpriv-v2,\n"
		"--announce-submounts" }, .c_help_at = 120 },
	{ .long_name = "no-killpriv-v2", .c_name = "no_killpriv_v2", SETS(killpriv_v2, false) },
	{ .long_name = "translate-uid", .kind = OPT_PARSE, OPT_FIELD(uid_map),
	  .parse = parse_translate,
	  .help = { .synopsis = "--translate-uid=TYPE:FROM:TO:COUNT, --translate-gid=...",
		.text = "map ids: guest, host, squash-guest, squash-host,\n"
		"map; forbid-guest:FROM:COUNT (repeatable)" } },
	{ .long_name = "translate-gid", .kind = OPT_PARSE, OPT_FIELD(gid_map),
	  .parse = parse_translate },
	{ .long_name = "uid-map", .kind = OPT_PARSE, OPT_FIELD(uid_map),
	  .parse = parse_id_range,
	  .help = { .synopsis = "--uid-map=:GUEST:HOST:COUNT:, --gid-map=...", .text =
		"a user-namespace-like map: ids outside it are\n"
		"refused (guest) or shown as 65534 (host)" } },
	{ .long_name = "gid-map", .kind = OPT_PARSE, OPT_FIELD(gid_map),
	  .parse = parse_id_range },
	BOOL_OPT("posix-lock", "posix_lock", posix_lock,
		 "POSIX (fcntl) locks held on the host, seen by\n"
		 "host processes (default: guest-local locks)",
		 "as --posix-lock, or not", 90),
	BOOL_OPT("flock", "flock", flock,
		 "the same for flock() locks",
		 "as --flock, or not", 100),
	{ .long_name = "thread-pool-size", .kind = OPT_NUMBER, OPT_FIELD(thread_pool_size),
	  OPT_ALSO(thread_pool_size_set), .max = UINT_MAX,
	  .help = { .metavar = "N", .text =
		"accepted for compatibility: ferryfsd runs each\n"
		"request on its queue's own thread, with no pool" } },
	/* Only meaningful to a thread pool, and ferryfsd has none; the value
	 * is still checked so a typo is not accepted. */
	{ .c_name = "max_idle_threads", .kind = OPT_NUMBER, .max = UINT_MAX,
	  .c_help = { .metavar = "N", .text =
		"accepted for compatibility (no thread pool)" }, .c_help_at = 110 },
	{ .long_name = "rlimit-nofile", .kind = OPT_NUMBER, OPT_FIELD(rlimit_nofile),
	  OPT_ALSO(rlimit_nofile_set), .max = ULONG_MAX,
	  .help = { .metavar = "N", .text = "set the open-file limit (0 leaves it alone)" } },
	/* Above a second it is no longer a short spin. */
	{ .long_name = "poll-max-us", .kind = OPT_NUMBER, OPT_FIELD(poll_max_us),
	  .max = 1000000,
	  .help = { .metavar = "N", .text =
		"longest a queue worker spins on its rings before\n"
		"sleeping (default 50; it adapts below that to\n"
		"the guest's pace; 0 never spins)" } },
	{ .long_name = "log-level", .c_name = "log_level", .kind = OPT_PARSE,
	  OPT_FIELD(log_level), .parse = parse_log_level,
	  .help = { .metavar = "error|warn|info|debug", .text =
		"the least severe messages logged (default info)" },
	  .c_help = { .synopsis = "-o log_level=LEVEL, -o debug", .text =
		"as --log-level, and --log-level=debug" }, .c_help_at = 80 },
	{ .long_name = "syslog", SETS(syslog, true),
	  .help = { .text = "log to syslog (facility daemon) instead of stderr" } },
	{ .long_name = "daemonize", SETS(daemonize, true),
	  .help = { .text =
		"go to the background; the command returns once\n"
		"the socket listens and PATH.pid holds the pid\n"
		"(with --mount: once the mount is up)" } },
	{ .long_name = "keep-listening", SETS(keep_listening, true),
	  .help = { .text =
		"when the VMM disconnects, wait for the next one\n"
		"(e.g. a restarted QEMU) instead of exiting" } },
	{ .long_name = "sandbox", .c_name = "sandbox", .kind = OPT_CHOICE,
	  OPT_FIELD(sandbox), OPT_ALSO(sandbox_set),
	  .choices = sandbox_choices, .c_choice_count = 2,
	  .help = { .metavar = "namespace|chroot|none", .text =
		"confine the daemon to DIR: new mount, pid and net\n"
		"namespaces with pivot_root (default; without root\n"
		"in a new user namespace), chroot(2), or nothing" },
	  .c_help = { .synopsis = "-o sandbox=namespace|chroot, -o modcaps=+CAP:-CAP",
		.text = "as --sandbox, --modcaps" }, .c_help_at = 160 },
	/* Unset, sanitizer builds default to log (options_seccomp_mode). */
	{ .long_name = "seccomp", .kind = OPT_CHOICE, OPT_FIELD(seccomp),
	  OPT_ALSO(seccomp_set), .choices = seccomp_choices,
	  .help = { .metavar = "kill|log|trap|none", .text =
		"what a system call outside the allow-list does\n"
		"(default kill; log in sanitizer builds)" } },
	{ .long_name = "modcaps", .c_name = "modcaps", .kind = OPT_PARSE,
	  OPT_FIELD(modcaps), .parse = parse_modcaps,
	  .help = { .metavar = "+CAP:-CAP...", .text =
		"add to or remove from the capabilities kept" } },
	{ .long_name = "inode-file-handles", .kind = OPT_CHOICE,
	  OPT_FIELD(inode_file_handles), .choices = file_handles_choices,
	  .help = { .metavar = "never|prefer|mandatory", .text =
		"keep file handles instead of an O_PATH fd per\n"
		"inode (default never)" } },
	/* Live migration (docs/migration.md), as the Rust virtiofsd's. */
	{ .long_name = "migration-mode", .kind = OPT_CHOICE, OPT_FIELD(migration_mode),
	  .choices = migration_mode_choices,
	  .help = { .metavar = "find-paths|file-handles", .text =
		"how a migration destination finds the guest's\n"
		"files: by their paths in the share (default),\n"
		"or by file handles (needs the same host file\n"
		"system; carries unlinked-but-open files)" } },
	{ .long_name = "migration-on-error", .kind = OPT_CHOICE,
	  OPT_FIELD(migration_on_error), .choices = migration_on_error_choices,
	  .help = { .metavar = "abort|guest-error", .text =
		"a file a migration cannot carry fails the\n"
		"migration (default), or only that file, with\n"
		"EIO on the guest" } },
	{ .long_name = "migration-verify-handles", SETS(migration_verify_handles, true),
	  .help = { .text =
		"on a migration source, check that each file\n"
		"handle sent opens its file" } },
	{ .long_name = "migration-confirm-paths", SETS(migration_confirm_paths, true),
	  .help = { .text =
		"on a migration source, check each path found\n"
		"once more before it is sent" } },
	{ .long_name = "print-capabilities", ACTION(ACTION_PRINT_CAPS),
	  .help = { .text = "print the vhost-user backend description (JSON)" } },
	{ .long_name = "stats-socket", .kind = OPT_STRING, OPT_FIELD(stats_socket), .min = 1,
	  .help = { .metavar = "PATH", .text =
		"answer statistics queries on this unix socket" } },
	{ .long_name = "stats", .kind = OPT_STRING, OPT_FIELD(stats_query), .min = 1,
	  .action = ACTION_STATS,
	  .help = { .synopsis = "--stats=PATH [--json]", .text =
		"print a running daemon's statistics (per-opcode\n"
		"counts, errors, latencies, queue depths) and exit" } },
	{ .long_name = "json", SETS(stats_json, true) },
	{ .long_name = "help", .words = { "-h" }, ACTION(ACTION_HELP),
	  .help = { .text = "print this text" } },
	{ .long_name = "version", .words = { "-V" }, ACTION(ACTION_VERSION),
	  .help = { .text = "print the version" } },
	/* QEMU's C virtiofsd's own argv flags. */
	{ .words = { "-f", "--foreground" }, .kind = OPT_CONST,
	  .c_help = { .synopsis = "-f", .text = "stay in the foreground (the default)" },
	  .c_help_at = 170 },
	{ .c_name = "debug", .words = { "-d", "--debug" }, SETS(log_level, LOG_LVL_DEBUG),
	  .c_help = { .synopsis = "-d", .text = "debug logging" }, .c_help_at = 180 },
	{ .c_name = "allow_root", .kind = OPT_REFUSED },
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
