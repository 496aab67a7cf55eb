/* ferryfsd's command line: both the Rust virtiofsd's and QEMU's C virtiofsd's dialects. */
#ifndef FERRY_OPTIONS_H
#define FERRY_OPTIONS_H

#include <stdbool.h>
#include <stdio.h>

/* Only the value types of options it holds: the backend's code and the
 * protocol stay out of the parser (options_config.c translates). */
#include "backend/idmap.h"
#include "backend/passthrough_modes.h"
#include "backend/xattrmap.h"
#include "common/log.h"
#include "migration/stream.h"

/* The first fd a socket-activating manager passes (SD_LISTEN_FDS_START). */
#define FERRY_LISTEN_FDS_START 3

/* --poll-max-us when not given: past ~50 us a spin costs more than the
 * wake-up it saves (docs/benchmarks.md, "Busy-polling"). */
#define FERRY_POLL_MAX_US_DEFAULT 50

enum run_action { ACTION_SERVE, ACTION_HELP, ACTION_VERSION, ACTION_PRINT_CAPS,
		  ACTION_STATS };

/* Listed in the order of the Rust virtiofsd's names; the first is the default. */
enum sandbox_mode { SANDBOX_NAMESPACE, SANDBOX_CHROOT, SANDBOX_NONE };
enum migration_on_error { MIGRATION_ON_ERROR_ABORT, MIGRATION_ON_ERROR_GUEST_ERROR };
enum seccomp_mode { SECCOMP_KILL, SECCOMP_LOG, SECCOMP_TRAP, SECCOMP_NONE };

/* What the command line says. The rows of options_table.c set these
 * fields; options_config.c hands them on to the backend and session. */
struct ferry_options {
	enum run_action action;
	const char *socket_path;
	const char *socket_group;
	const char *mountpoint;       /* --mount: serve through host /dev/fuse */
	const char *stats_socket;     /* --stats-socket: serve statistics there */
	const char *stats_query;      /* --stats: ask the daemon at this socket */
	bool stats_json;              /* --json: with --stats, JSON instead of a table */
	int listen_fd;                /* --fd or socket activation; else -1 */
	bool socket_activated;        /* listen_fd came from LISTEN_FDS */
	const char *shared_dir;
	const char *tag;
	enum cache_mode cache;
	double timeout;               /* <0: follow the cache mode */
	bool xattr;
	bool posix_acl;               /* FUSE_POSIX_ACL (needs xattr) */
	bool security_label;          /* FUSE_SECURITY_CTX */
	struct xattrmap xattrmap;     /* --xattrmap; count 0 when not given */
	bool writeback;
	bool allow_direct_io;
	bool readdirplus;
	bool readdirplus_set;         /* the user chose; else it follows cache */
	bool posix_lock;              /* host-backed POSIX locks (off: guest-local) */
	bool flock;                   /* host-backed flock locks (off: guest-local) */
	bool readonly;
	bool announce_submounts;      /* default on, as the Rust virtiofsd */
	bool killpriv_v2;             /* default off, as both virtiofsds */
	bool preserve_noatime;
	bool allow_mmap;
	struct idmap uid_map;         /* --translate-uid, --uid-map */
	struct idmap gid_map;         /* --translate-gid, --gid-map */
	bool syslog;
	bool daemonize;
	bool keep_listening;          /* serve frontend after frontend */
	unsigned long rlimit_nofile;  /* 0: leave the limit as it is */
	bool rlimit_nofile_set;
	unsigned poll_max_us;         /* queue busy-poll ceiling; 0: never */
	unsigned thread_pool_size;
	bool thread_pool_size_set;
	enum log_level log_level;
	enum sandbox_mode sandbox;
	bool sandbox_set;
	enum seccomp_mode seccomp;
	bool seccomp_set;             /* else sanitizer builds default to log */
	const char *modcaps;          /* "+cap:-cap..." checked when parsed, applied by caps.c */
	enum inode_file_handles inode_file_handles;
	enum mig_mode migration_mode;           /* --migration-mode */
	enum migration_on_error migration_on_error;
	bool migration_verify_handles;
	bool migration_confirm_paths;
};

/*
 * Parses argv into opts. On a bad or not-yet-supported option it writes one
 * message naming the option to err and returns -EINVAL; nothing is ever
 * accepted and then ignored. Without --socket-path or --fd, a socket passed
 * by systemd socket activation (LISTEN_PID/LISTEN_FDS) is used; the caller
 * unsets those variables.
 */
int ferry_options_parse(struct ferry_options *opts, int argc, char **argv,
			FILE *err);
void ferry_options_usage(FILE *out);

#endif
