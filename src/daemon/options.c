/* ferryfsd's command line: both the Rust virtiofsd's and QEMU's C virtiofsd's dialects. */
#include "daemon/options.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/caps.h"

/* Options of either anchor that ferryfsd knows but does not implement yet:
 * refusing them by name beats accepting a setting we would not honour. */
static const char *const refused_long[] = {
	"migration-mode", "migration-on-error", "migration-verify-handles",
	"migration-confirm-paths",
};

static const char *const refused_c_opts[] = {
	"allow_root",
};

static int refuse(FILE *err, const char *what)
{
	fprintf(err, "ferryfsd: option '%s' is not supported yet "
		"(see docs/options.md)\n", what);
	return -EINVAL;
}

static int parse_ulong(const char *s, unsigned long max, unsigned long *out)
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

static int parse_cache(const char *s, enum cache_mode *mode)
{
	if (!strcmp(s, "auto"))
		*mode = CACHE_AUTO;
	else if (!strcmp(s, "always"))
		*mode = CACHE_ALWAYS;
	else if (!strcmp(s, "never") || !strcmp(s, "none"))
		*mode = CACHE_NEVER;
	else if (!strcmp(s, "metadata"))
		*mode = CACHE_METADATA;
	else
		return -EINVAL;
	return 0;
}

static int bad_value(FILE *err, const char *opt, const char *val)
{
	fprintf(err, "ferryfsd: invalid value '%s' for option '%s'\n",
		val ? val : "", opt);
	return -EINVAL;
}

/* Maps val to the index of its name in names (NULL-terminated). */
static int parse_choice(const char *val, const char *const *names, int *out)
{
	for (int i = 0; names[i]; i++) {
		if (!strcmp(val, names[i])) {
			*out = i;
			return 0;
		}
	}
	return -EINVAL;
}

static const char *const sandbox_names[] = { "namespace", "chroot", "none", NULL };
static const char *const seccomp_names[] = { "kill", "log", "trap", "none", NULL };
static const char *const file_handles_names[] = { "never", "prefer", "mandatory", NULL };

static int parse_sandbox(struct ferry_options *o, const char *val)
{
	int v;

	if (parse_choice(val, sandbox_names, &v))
		return -EINVAL;
	o->sandbox = (enum sandbox_mode)v;
	o->sandbox_set = true;
	return 0;
}

static int check_cap(int cap, bool add, void *opaque)
{
	(void)cap;
	(void)add;
	(void)opaque;
	return 0;
}

static int bad_idmap(FILE *err, const char *opt, const char *val)
{
	fprintf(err, "ferryfsd: invalid value '%s' for option '%s': expected "
		"TYPE:FROM:TO:COUNT (guest, host, squash-guest, squash-host, map), "
		"forbid-guest:FROM:COUNT or, for --uid-map/--gid-map, "
		":GUEST:HOST:COUNT:, with ranges inside 32 bits that do not "
		"overlap others of the same direction (at most %d)\n",
		val, opt, IDMAP_MAX_RULES);
	return -EINVAL;
}

static int parse_xattrmap(struct ferry_options *o, const char *opt,
			  const char *val, FILE *err)
{
	char msg[256];

	if (xattrmap_parse(&o->xattrmap, val, msg, sizeof(msg))) {
		fprintf(err, "ferryfsd: invalid value for option '%s': %s\n", opt, msg);
		return -EINVAL;
	}
	/* Both virtiofsds: a map is pointless without xattrs, so it turns them on. */
	o->xattr = true;
	return 0;
}

/* One item of the C dialect's -o list: "key" or "key=value". */
static int parse_c_opt(struct ferry_options *o, char *item, FILE *err)
{
	char *val = strchr(item, '=');
	unsigned long n;

	if (val)
		*val++ = '\0';
	for (size_t i = 0; i < sizeof(refused_c_opts) / sizeof(*refused_c_opts); i++)
		if (!strcmp(item, refused_c_opts[i]))
			return refuse(err, item);

	if (!strcmp(item, "source") && val && *val) {
		o->shared_dir = val;
	} else if (!strcmp(item, "cache") && val) {
		if (parse_cache(val, &o->cache) || o->cache == CACHE_METADATA)
			return bad_value(err, "cache", val);
	} else if (!strcmp(item, "timeout") && val) {
		char *end;
		o->timeout = strtod(val, &end);
		if (*end || !*val || o->timeout < 0)
			return bad_value(err, "timeout", val);
	} else if (!strcmp(item, "log_level") && val) {
		if (ferry_log_level_parse(val, &o->log_level))
			return bad_value(err, "log_level", val);
	} else if (!strcmp(item, "xattr") && !val) {
		o->xattr = true;
	} else if (!strcmp(item, "no_xattr") && !val) {
		o->xattr = false;
	} else if (!strcmp(item, "writeback") && !val) {
		o->writeback = true;
	} else if (!strcmp(item, "no_writeback") && !val) {
		o->writeback = false;
	} else if (!strcmp(item, "readdirplus") && !val) {
		o->readdirplus = true;
		o->readdirplus_set = true;
	} else if (!strcmp(item, "no_readdirplus") && !val) {
		o->readdirplus = false;
		o->readdirplus_set = true;
	} else if (!strcmp(item, "allow_direct_io") && !val) {
		o->allow_direct_io = true;
	} else if (!strcmp(item, "no_allow_direct_io") && !val) {
		o->allow_direct_io = false;
	} else if (!strcmp(item, "flock") && !val) {
		o->flock = true;
	} else if (!strcmp(item, "no_flock") && !val) {
		o->flock = false;
	} else if (!strcmp(item, "posix_lock") && !val) {
		o->posix_lock = true;
	} else if (!strcmp(item, "no_posix_lock") && !val) {
		o->posix_lock = false;
	} else if (!strcmp(item, "killpriv_v2") && !val) {
		o->killpriv_v2 = true;
	} else if (!strcmp(item, "no_killpriv_v2") && !val) {
		o->killpriv_v2 = false;
	} else if (!strcmp(item, "announce_submounts") && !val) {
		o->announce_submounts = true;
	} else if (!strcmp(item, "xattrmap") && val) {
		if (parse_xattrmap(o, "-o xattrmap", val, err))
			return -EINVAL;
	} else if (!strcmp(item, "posix_acl") && !val) {
		o->posix_acl = true;
	} else if (!strcmp(item, "no_posix_acl") && !val) {
		o->posix_acl = false;
	} else if (!strcmp(item, "security_label") && !val) {
		o->security_label = true;
	} else if (!strcmp(item, "no_security_label") && !val) {
		o->security_label = false;
	} else if (!strcmp(item, "debug") && !val) {
		o->log_level = LOG_LVL_DEBUG;
	} else if (!strcmp(item, "sandbox") && val) {
		if (parse_sandbox(o, val) || o->sandbox == SANDBOX_NONE)
			return bad_value(err, "sandbox", val);
	} else if (!strcmp(item, "modcaps") && val) {
		if (ferry_modcaps_walk(val, check_cap, NULL))
			return bad_value(err, "modcaps", val);
		o->modcaps = val;
	} else if (!strcmp(item, "max_idle_threads") && val) {
		/* Only meaningful to a thread pool, and ferryfsd has none;
		 * the value is still checked so a typo is not accepted. */
		if (parse_ulong(val, UINT_MAX, &n))
			return bad_value(err, "max_idle_threads", val);
	} else {
		fprintf(err, "ferryfsd: unknown option '-o %s%s%s'\n", item,
			val ? "=" : "", val ? val : "");
		return -EINVAL;
	}
	return 0;
}

/* Splits the -o list on ',' in place. As in libfuse's option parser, a
 * backslash makes the next character literal, so an xattrmap rule can hold
 * a ',' written as '\,'. */
static int parse_c_opts(struct ferry_options *o, char *list, FILE *err)
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
			int ret = parse_c_opt(o, item, err);
			if (ret)
				return ret;
		}
	}
	return 0;
}

enum long_opt_id {
	OPT_SOCKET_PATH, OPT_SOCKET_GROUP, OPT_FD, OPT_SHARED_DIR, OPT_TAG,
	OPT_CACHE, OPT_THREAD_POOL_SIZE, OPT_XATTR, OPT_WRITEBACK,
	OPT_ALLOW_DIRECT_IO, OPT_NO_READDIRPLUS, OPT_LOG_LEVEL, OPT_SYSLOG,
	OPT_RLIMIT_NOFILE, OPT_POLL_MAX_US, OPT_DAEMONIZE, OPT_PRINT_CAPS, OPT_HELP, OPT_VERSION,
	OPT_NO_KILLPRIV_V2, OPT_NO_ANNOUNCE_SUBMOUNTS, OPT_POSIX_LOCK, OPT_FLOCK,
	OPT_MOUNT,
	OPT_STATS_SOCKET, OPT_STATS, OPT_JSON, OPT_KEEP_LISTENING,
	OPT_SANDBOX, OPT_SECCOMP, OPT_MODCAPS, OPT_INODE_FILE_HANDLES,
	OPT_KILLPRIV_V2, OPT_ANNOUNCE_SUBMOUNTS, OPT_READONLY, OPT_PRESERVE_NOATIME,
	OPT_ALLOW_MMAP, OPT_TRANSLATE_UID, OPT_TRANSLATE_GID, OPT_UID_MAP,
	OPT_GID_MAP,
	OPT_XATTRMAP, OPT_POSIX_ACL, OPT_SECURITY_LABEL,
};

static const struct long_opt {
	const char *name;
	bool has_value;
	enum long_opt_id id;
} long_opts[] = {
	{ "socket-path", true, OPT_SOCKET_PATH },
	{ "socket-group", true, OPT_SOCKET_GROUP },
	{ "fd", true, OPT_FD },
	{ "shared-dir", true, OPT_SHARED_DIR },
	{ "tag", true, OPT_TAG },
	{ "cache", true, OPT_CACHE },
	{ "thread-pool-size", true, OPT_THREAD_POOL_SIZE },
	{ "xattr", false, OPT_XATTR },
	{ "writeback", false, OPT_WRITEBACK },
	{ "allow-direct-io", false, OPT_ALLOW_DIRECT_IO },
	{ "no-readdirplus", false, OPT_NO_READDIRPLUS },
	{ "log-level", true, OPT_LOG_LEVEL },
	{ "syslog", false, OPT_SYSLOG },
	{ "rlimit-nofile", true, OPT_RLIMIT_NOFILE },
	{ "poll-max-us", true, OPT_POLL_MAX_US },
	{ "daemonize", false, OPT_DAEMONIZE },
	{ "print-capabilities", false, OPT_PRINT_CAPS },
	{ "help", false, OPT_HELP },
	{ "version", false, OPT_VERSION },
	{ "no-killpriv-v2", false, OPT_NO_KILLPRIV_V2 },
	{ "no-announce-submounts", false, OPT_NO_ANNOUNCE_SUBMOUNTS },
	{ "posix-lock", false, OPT_POSIX_LOCK },
	{ "flock", false, OPT_FLOCK },
	{ "mount", true, OPT_MOUNT },
	{ "stats-socket", true, OPT_STATS_SOCKET },
	{ "stats", true, OPT_STATS },
	{ "json", false, OPT_JSON },
	{ "keep-listening", false, OPT_KEEP_LISTENING },
	{ "sandbox", true, OPT_SANDBOX },
	{ "seccomp", true, OPT_SECCOMP },
	{ "modcaps", true, OPT_MODCAPS },
	{ "inode-file-handles", true, OPT_INODE_FILE_HANDLES },
	{ "killpriv-v2", false, OPT_KILLPRIV_V2 },
	{ "announce-submounts", false, OPT_ANNOUNCE_SUBMOUNTS },
	{ "readonly", false, OPT_READONLY },
	{ "preserve-noatime", false, OPT_PRESERVE_NOATIME },
	{ "allow-mmap", false, OPT_ALLOW_MMAP },
	{ "translate-uid", true, OPT_TRANSLATE_UID },
	{ "translate-gid", true, OPT_TRANSLATE_GID },
	{ "uid-map", true, OPT_UID_MAP },
	{ "gid-map", true, OPT_GID_MAP },
	{ "xattrmap", true, OPT_XATTRMAP },
	{ "posix-acl", false, OPT_POSIX_ACL },
	{ "security-label", false, OPT_SECURITY_LABEL },
};

static int apply_long(struct ferry_options *o, const struct long_opt *lo,
		      const char *val, FILE *err)
{
	unsigned long n;
	int choice;

	switch (lo->id) {
	case OPT_SOCKET_PATH:
		if (!*val)
			return bad_value(err, "--socket-path", val);
		o->socket_path = val;
		break;
	case OPT_SOCKET_GROUP:
		o->socket_group = val;
		break;
	case OPT_FD:
		if (parse_ulong(val, INT_MAX, &n))
			return bad_value(err, "--fd", val);
		o->listen_fd = (int)n;
		break;
	case OPT_SHARED_DIR:
		if (!*val)
			return bad_value(err, "--shared-dir", val);
		o->shared_dir = val;
		break;
	case OPT_TAG:
		/* The config space holds 36 bytes and no terminator is needed. */
		if (!*val || strlen(val) > 36)
			return bad_value(err, "--tag (1 to 36 bytes)", val);
		o->tag = val;
		break;
	case OPT_CACHE:
		if (parse_cache(val, &o->cache))
			return bad_value(err, "--cache", val);
		break;
	case OPT_THREAD_POOL_SIZE:
		if (parse_ulong(val, UINT_MAX, &n))
			return bad_value(err, "--thread-pool-size", val);
		o->thread_pool_size = (unsigned)n;
		o->thread_pool_size_set = true;
		break;
	case OPT_XATTR:
		o->xattr = true;
		break;
	case OPT_XATTRMAP:
		return parse_xattrmap(o, "--xattrmap", val, err);
	case OPT_POSIX_ACL:
		o->posix_acl = true;
		break;
	case OPT_SECURITY_LABEL:
		o->security_label = true;
		break;
	case OPT_WRITEBACK:
		o->writeback = true;
		break;
	case OPT_ALLOW_DIRECT_IO:
		o->allow_direct_io = true;
		break;
	case OPT_POSIX_LOCK:
		o->posix_lock = true;
		break;
	case OPT_FLOCK:
		o->flock = true;
		break;
	case OPT_NO_READDIRPLUS:
		o->readdirplus = false;
		o->readdirplus_set = true;
		break;
	case OPT_LOG_LEVEL:
		if (ferry_log_level_parse(val, &o->log_level))
			return bad_value(err, "--log-level", val);
		break;
	case OPT_SYSLOG:
		o->syslog = true;
		break;
	case OPT_RLIMIT_NOFILE:
		if (parse_ulong(val, ULONG_MAX, &n))
			return bad_value(err, "--rlimit-nofile", val);
		o->rlimit_nofile = n;
		o->rlimit_nofile_set = true;
		break;
	case OPT_POLL_MAX_US:
		/* Above a second it is no longer a short spin. */
		if (parse_ulong(val, 1000000, &n))
			return bad_value(err, "--poll-max-us", val);
		o->poll_max_us = (unsigned)n;
		break;
	case OPT_DAEMONIZE:
		o->daemonize = true;
		break;
	case OPT_KEEP_LISTENING:
		o->keep_listening = true;
		break;
	case OPT_PRINT_CAPS:
		o->action = ACTION_PRINT_CAPS;
		break;
	case OPT_HELP:
		o->action = ACTION_HELP;
		break;
	case OPT_VERSION:
		o->action = ACTION_VERSION;
		break;
	case OPT_MOUNT:
		if (!*val)
			return bad_value(err, "--mount", val);
		o->mountpoint = val;
		break;
	case OPT_STATS_SOCKET:
		if (!*val)
			return bad_value(err, "--stats-socket", val);
		o->stats_socket = val;
		break;
	case OPT_STATS:
		if (!*val)
			return bad_value(err, "--stats", val);
		o->stats_query = val;
		o->action = ACTION_STATS;
		break;
	case OPT_JSON:
		o->stats_json = true;
		break;
	case OPT_NO_KILLPRIV_V2:
		o->killpriv_v2 = false;
		break;
	case OPT_KILLPRIV_V2:
		o->killpriv_v2 = true;
		break;
	case OPT_NO_ANNOUNCE_SUBMOUNTS:
		o->announce_submounts = false;
		break;
	case OPT_ANNOUNCE_SUBMOUNTS:
		o->announce_submounts = true;
		break;
	case OPT_READONLY:
		o->readonly = true;
		break;
	case OPT_PRESERVE_NOATIME:
		o->preserve_noatime = true;
		break;
	case OPT_ALLOW_MMAP:
		o->allow_mmap = true;
		break;
	case OPT_TRANSLATE_UID:
		if (idmap_add_translate(&o->uid_map, val))
			return bad_idmap(err, "--translate-uid", val);
		break;
	case OPT_TRANSLATE_GID:
		if (idmap_add_translate(&o->gid_map, val))
			return bad_idmap(err, "--translate-gid", val);
		break;
	case OPT_UID_MAP:
		if (idmap_add_namespace_range(&o->uid_map, val))
			return bad_idmap(err, "--uid-map", val);
		break;
	case OPT_GID_MAP:
		if (idmap_add_namespace_range(&o->gid_map, val))
			return bad_idmap(err, "--gid-map", val);
		break;
	case OPT_SANDBOX:
		if (parse_sandbox(o, val))
			return bad_value(err, "--sandbox", val);
		break;
	case OPT_SECCOMP:
		if (parse_choice(val, seccomp_names, &choice))
			return bad_value(err, "--seccomp", val);
		o->seccomp = (enum seccomp_mode)choice;
		o->seccomp_set = true;
		break;
	case OPT_MODCAPS:
		if (ferry_modcaps_walk(val, check_cap, NULL))
			return bad_value(err, "--modcaps", val);
		o->modcaps = val;
		break;
	case OPT_INODE_FILE_HANDLES:
		if (parse_choice(val, file_handles_names, &choice))
			return bad_value(err, "--inode-file-handles", val);
		o->inode_file_handles = (enum inode_file_handles)choice;
		break;
	}
	return 0;
}

/*
 * systemd socket activation (sd_listen_fds(3)): the manager passes the
 * listening socket as fd 3 and names this process in LISTEN_PID, so a
 * variable inherited from a parent that was activated is not mistaken for
 * ours. Returns the fd, -ENOENT when nothing was passed to us, or -EINVAL
 * (with a message) when the passed sockets are not exactly one.
 */
static int systemd_listen_fd(FILE *err)
{
	const char *pid_env = getenv("LISTEN_PID");
	const char *fds_env = getenv("LISTEN_FDS");
	unsigned long pid, fds;

	if (!pid_env || !fds_env || parse_ulong(pid_env, INT_MAX, &pid) ||
	    (pid_t)pid != getpid())
		return -ENOENT;
	if (parse_ulong(fds_env, INT_MAX, &fds) || fds != 1) {
		fprintf(err, "ferryfsd: socket activation passed LISTEN_FDS=%s; "
			"ferryfsd serves exactly one socket\n", fds_env);
		return -EINVAL;
	}
	return FERRY_LISTEN_FDS_START;
}

static void set_defaults(struct ferry_options *o)
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
	set_defaults(o);
	for (int i = 1; i < argc; i++) {
		char *arg = argv[i];

		if (!strcmp(arg, "-o")) {
			if (++i >= argc)
				return bad_value(err, "-o", NULL);
			if (parse_c_opts(o, argv[i], err))
				return -EINVAL;
			continue;
		}
		if (!strncmp(arg, "-o", 2) && arg[2]) {
			if (parse_c_opts(o, arg + 2, err))
				return -EINVAL;
			continue;
		}
		if (!strcmp(arg, "-f") || !strcmp(arg, "--foreground"))
			continue;       /* ferryfsd runs in the foreground unless told */
		if (!strcmp(arg, "-d") || !strcmp(arg, "--debug")) {
			o->log_level = LOG_LVL_DEBUG;
			continue;
		}
		if (!strcmp(arg, "-h")) {
			o->action = ACTION_HELP;
			continue;
		}
		if (!strcmp(arg, "-V")) {
			o->action = ACTION_VERSION;
			continue;
		}
		if (strncmp(arg, "--", 2) != 0 || !arg[2]) {
			fprintf(err, "ferryfsd: unexpected argument '%s'\n", arg);
			return -EINVAL;
		}

		char *name = arg + 2;
		char *val = strchr(name, '=');
		size_t name_len = val ? (size_t)(val - name) : strlen(name);
		const struct long_opt *lo = NULL;

		for (size_t k = 0; k < sizeof(long_opts) / sizeof(*long_opts); k++) {
			if (strlen(long_opts[k].name) == name_len &&
			    !strncmp(long_opts[k].name, name, name_len)) {
				lo = &long_opts[k];
				break;
			}
		}
		if (!lo) {
			for (size_t k = 0; k < sizeof(refused_long) / sizeof(*refused_long); k++) {
				if (strlen(refused_long[k]) == name_len &&
				    !strncmp(refused_long[k], name, name_len)) {
					return refuse(err, arg);
				}
			}
			fprintf(err, "ferryfsd: unknown option '%s' (try --help)\n", arg);
			return -EINVAL;
		}
		if (lo->has_value && !val) {
			if (++i >= argc) {
				fprintf(err, "ferryfsd: option '%s' needs a value\n", arg);
				return -EINVAL;
			}
			val = argv[i];
		} else if (val) {
			if (!lo->has_value) {
				fprintf(err, "ferryfsd: option '--%s' takes no value\n",
					lo->name);
				return -EINVAL;
			}
			val++;
		}
		if (apply_long(o, lo, val, err))
			return -EINVAL;
	}

	if (o->stats_json && o->action != ACTION_STATS) {
		fprintf(err, "ferryfsd: --json only goes with --stats=PATH\n");
		return -EINVAL;
	}
	if (o->action != ACTION_SERVE)
		return 0;
	if (!o->shared_dir) {
		fprintf(err, "ferryfsd: no shared directory: give --shared-dir=DIR "
			"or -o source=DIR\n");
		return -EINVAL;
	}
	if (o->mountpoint) {
		/* Host FUSE mode has no VMM: the vhost-user options mean nothing. */
		if (o->socket_path || o->listen_fd >= 0 || o->socket_group || o->tag) {
			fprintf(err, "ferryfsd: --mount excludes --socket-path, --fd, "
				"--socket-group and --tag\n");
			return -EINVAL;
		}
	} else if (!o->socket_path && o->listen_fd < 0) {
		int fd = systemd_listen_fd(err);

		if (fd == -EINVAL)
			return -EINVAL;
		if (fd < 0) {
			fprintf(err, "ferryfsd: no vhost-user socket: give --socket-path=PATH "
				"or --fd=N, start it by systemd socket activation, or give "
				"--mount=DIR for host FUSE mode\n");
			return -EINVAL;
		}
		o->listen_fd = fd;
		o->socket_activated = true;
	}
	if (o->socket_path && o->listen_fd >= 0) {
		fprintf(err, "ferryfsd: --socket-path and --fd exclude each other\n");
		return -EINVAL;
	}
	/* The guest's kernel reads and writes ACLs as xattrs. */
	if (o->posix_acl && !o->xattr) {
		fprintf(err, "ferryfsd: --posix-acl (-o posix_acl) needs --xattr "
			"(-o xattr)\n");
		return -EINVAL;
	}
	if (o->socket_group && !o->socket_path) {
		fprintf(err, "ferryfsd: --socket-group needs --socket-path\n");
		return -EINVAL;
	}
	/* Not yet: host FUSE mode mounts on a host path the sandbox hides
	 * (docs/security.md). Said, not silently dropped. The seccomp filter
	 * applies as in vhost-user mode. */
	if (o->mountpoint) {
		if (o->sandbox_set && o->sandbox != SANDBOX_NONE) {
			fprintf(err, "ferryfsd: --mount runs without a sandbox so far "
				"(its mount point is a host path): leave out --sandbox "
				"or give 'none'\n");
			return -EINVAL;
		}
		o->sandbox = SANDBOX_NONE;
	}
	/* Like virtiofsd: readdirplus is off with cache=never unless asked for,
	 * because the entries it would cache expire at once. */
	if (!o->readdirplus_set && o->cache == CACHE_NEVER)
		o->readdirplus = false;
	return 0;
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
"Options (the Rust virtiofsd's dialect):\n"
"  --socket-path=PATH        listen for the VMM on this unix socket; PATH.pid\n"
"                            is locked while the daemon runs, so a second\n"
"                            daemon on PATH fails\n"
"  --socket-group=GROUP      make the socket accessible to GROUP (mode 0660)\n"
"  --fd=N                    use the inherited listening socket N instead\n"
"                            (as libvirt starts it)\n"
"  --mount=MOUNTPOINT        host FUSE mode: no VMM; mount DIR on MOUNTPOINT\n"
"                            through the host's /dev/fuse (as root)\n"
"  --shared-dir=DIR          the directory to share\n"
"  --tag=TAG                 the tag in the device's config space (<= 36 bytes)\n"
"  --cache=auto|always|never|metadata\n"
"                            guest caching (default auto): entry/attr\n"
"                            timeouts 1 s, 1 day, 0, 1 day; never and\n"
"                            metadata bypass the guest's page cache\n"
"  --xattr                   serve extended attributes\n"
"  --xattrmap=RULES          rename, hide or refuse xattr names between guest\n"
"                            and host (QEMU virtiofsd's rules, e.g.\n"
"                            ':map::user.virtiofs.:'); implies --xattr\n"
"  --posix-acl               POSIX ACLs enforced by the guest, stored on the\n"
"                            host as system.posix_acl_* (needs --xattr)\n"
"  --security-label          store the label the guest's LSM gives each new\n"
"                            file (FUSE_SECURITY_CTX)\n"
"  --writeback               let the guest cache writes (writeback cache)\n"
"  --allow-direct-io         keep the guest's O_DIRECT on host files\n"
"  --no-readdirplus          list directories without attributes\n"
"  --allow-mmap              offer shared mmap of DIRECT_IO files (cache=never,\n"
"                            metadata); guests before Linux 6.6 ignore it\n"
"  --readonly                refuse every change with EROFS\n"
"  --preserve-noatime        keep the guest's O_NOATIME (default: dropped)\n"
"  --announce-submounts      show host mount points as guest submounts\n"
"                            (default; --no-announce-submounts turns it off)\n"
"  --killpriv-v2             the daemon clears suid/sgid/capabilities on\n"
"                            write, truncate and chown (default off;\n"
"                            --no-killpriv-v2)\n"
"  --translate-uid=TYPE:FROM:TO:COUNT, --translate-gid=...\n"
"                            map ids: guest, host, squash-guest, squash-host,\n"
"                            map; forbid-guest:FROM:COUNT (repeatable)\n"
"  --uid-map=:GUEST:HOST:COUNT:, --gid-map=...\n"
"                            a user-namespace-like map: ids outside it are\n"
"                            refused (guest) or shown as 65534 (host)\n"
"  --posix-lock              POSIX (fcntl) locks held on the host, seen by\n"
"                            host processes (default: guest-local locks)\n"
"  --flock                   the same for flock() locks\n"
"  --thread-pool-size=N      accepted for compatibility: ferryfsd runs each\n"
"                            request on its queue's own thread, with no pool\n"
"  --rlimit-nofile=N         set the open-file limit (0 leaves it alone)\n"
"  --poll-max-us=N           longest a queue thread spins on its ring before\n"
"                            sleeping (default 50; it adapts below that to\n"
"                            the guest's pace; 0 never spins)\n"
"  --log-level=error|warn|info|debug\n"
"                            the least severe messages logged (default info)\n"
"  --syslog                  log to syslog (facility daemon) instead of stderr\n"
"  --daemonize               go to the background; the command returns once\n"
"                            the socket listens and PATH.pid holds the pid\n"
"                            (with --mount: once the mount is up)\n"
"  --keep-listening          when the VMM disconnects, wait for the next one\n"
"                            (e.g. a restarted QEMU) instead of exiting\n"
"  --sandbox=namespace|chroot|none\n"
"                            confine the daemon to DIR: new mount, pid and net\n"
"                            namespaces with pivot_root (default), chroot(2),\n"
"                            or nothing\n"
"  --seccomp=kill|log|trap|none\n"
"                            what a system call outside the allow-list does\n"
"                            (default kill; log in sanitizer builds)\n"
"  --modcaps=+CAP:-CAP...    add to or remove from the capabilities kept\n"
"  --inode-file-handles=never|prefer|mandatory\n"
"                            keep file handles instead of an O_PATH fd per\n"
"                            inode (default never)\n"
"  --print-capabilities      print the vhost-user backend description (JSON)\n"
"  --stats-socket=PATH       answer statistics queries on this unix socket\n"
"  --stats=PATH [--json]     print a running daemon's statistics (per-opcode\n"
"                            counts, errors, latencies, queue depths) and exit\n"
"  -h, --help                print this text\n"
"  -V, --version             print the version\n"
"\n"
"QEMU's C virtiofsd dialect (items of -o may be joined with commas):\n"
"  -o source=DIR             the directory to share\n"
"  -o cache=auto|always|none guest caching (none is never)\n"
"  -o timeout=SECONDS        how long the guest may cache entries and attributes\n"
"  -o xattr, -o no_xattr     serve extended attributes, or not\n"
"  -o writeback, -o no_writeback\n"
"                            writeback cache, or not\n"
"  -o readdirplus, -o no_readdirplus\n"
"                            list directories with attributes, or not\n"
"  -o allow_direct_io, -o no_allow_direct_io\n"
"                            keep the guest's O_DIRECT, or not\n"
"  -o log_level=LEVEL, -o debug\n"
"                            as --log-level, and --log-level=debug\n"
"  -o posix_lock, -o no_posix_lock\n"
"                            as --posix-lock, or not\n"
"  -o flock, -o no_flock     as --flock, or not\n"
"  -o max_idle_threads=N     accepted for compatibility (no thread pool)\n"
"  -o killpriv_v2, -o no_killpriv_v2, -o announce_submounts\n"
"                            as --killpriv-v2, --no-killpriv-v2,\n"
"                            --announce-submounts\n"
"  -o xattrmap=RULES         as --xattrmap (a ',' in RULES written '\\,')\n"
"  -o posix_acl, -o no_posix_acl\n"
"                            as --posix-acl, or not\n"
"  -o security_label, -o no_security_label\n"
"                            as --security-label, or not\n"
"  -o sandbox=namespace|chroot, -o modcaps=+CAP:-CAP\n"
"                            as --sandbox, --modcaps\n"
"  -f                        stay in the foreground (the default)\n"
"  -d                        debug logging\n"
"\n"
"Without --socket-path or --fd, ferryfsd takes a socket passed by systemd\n"
"socket activation (LISTEN_PID, LISTEN_FDS=1: fd 3).\n"
"\n"
"Options of either virtiofsd that ferryfsd does not implement yet are refused\n"
"by name; docs/options.md lists them.\n", out);
}
