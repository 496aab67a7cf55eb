/* Tests ferryfsd's command line: both dialects, and that unsupported options are refused by name. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/options.h"
#include "../common/check.h"

/* Parses a NULL-terminated argument list; err_text gets what was printed. */
static int parse(struct ferry_options *o, char *err_text, size_t err_size, ...)
{
	char *argv[32] = { "ferryfsd" };
	char storage[32][256];
	int argc = 1;
	va_list ap;

	va_start(ap, err_size);
	for (const char *a; (a = va_arg(ap, const char *)) && argc < 31; argc++) {
		snprintf(storage[argc], sizeof(storage[argc]), "%s", a);
		argv[argc] = storage[argc];
	}
	va_end(ap);
	argv[argc] = NULL;

	FILE *err = fmemopen(err_text, err_size, "w");
	if (!err) {
		perror("fmemopen");
		exit(1);
	}
	memset(err_text, 0, err_size);
	int ret = ferry_options_parse(o, argc, argv, err);
	fclose(err);
	return ret;
}

/* Refused after --socket-path=/s --shared-dir=/d: one argument each, the
 * error text naming in_err (any error where it is NULL). */
struct refusal {
	const char *arg;
	const char *in_err;
	const char *what;
};

static const struct refusal refused[] = {
	{ "--seccomp=strict", "strict", "bad seccomp value" },
	{ "--inode-file-handles=always", "always", "bad inode-file-handles value" },
	{ "--bogus", "unknown option '--bogus'", "unknown option" },
	{ "--cache=sometimes", "sometimes", "bad cache value" },
	{ "--thread-pool-size=-1", NULL, "negative thread pool size refused" },
	{ "--poll-max-us=1000001", "--poll-max-us",
	  "--poll-max-us over a second refused" },
	{ "--tag=0123456789012345678901234567890123456", "--tag", "37-byte tag refused" },
	{ "--json", "--json only goes with --stats", "--json alone" },
	{ "--translate-uid=guest:4294967295:0:2", "--translate-uid",
	  "range past 2^32 refused" },
	{ "--translate-gid=sideways:1:2:3", "sideways", "unknown map type refused" },
	{ "--translate-uid=guest:1:2:0", NULL, "count 0 refused" },
	{ "--translate-uid=forbid-guest:1:2:3", NULL,
	  "forbid-guest takes FROM:COUNT only" },
	{ "--uid-map=0:100000:65536", "--uid-map", "--uid-map needs the colons" },
	{ "--request-timeout=0", "at least 0.001", "--request-timeout=0 refused" },
	{ "--request-timeout=-2", "at least 0.001", "negative --request-timeout refused" },
	{ "--request-timeout=5s", "a number of seconds", "--request-timeout=5s refused" },
	{ "--request-timeout=nan", "a number of seconds", "--request-timeout=nan refused" },
	{ "--request-timeout=", "a number of seconds", "empty --request-timeout refused" },
	{ "--request-timeout=86401", "at most 86400", "--request-timeout over a day refused" },
};

int main(void)
{
	struct ferry_options o;
	char err[512];
	int ret;

	ret = parse(&o, err, sizeof(err), "--socket-path=/tmp/s", "--shared-dir=/srv",
		    "--request-timeout=0.25", NULL);
	CHECK_MSG(ret == 0 && o.request_timeout == 0.25, "--request-timeout=0.25 accepted: %s", err);
	ret = parse(&o, err, sizeof(err), "--socket-path=/tmp/s", "--shared-dir=/srv", NULL);
	CHECK_MSG(ret == 0 && o.request_timeout == 0, "no deadline by default: %s", err);

	ret = parse(&o, err, sizeof(err), "--socket-path=/tmp/s", "--shared-dir",
		    "/srv", "--cache", "never", "--xattr", "--tag=myfs",
		    "--thread-pool-size=64", "--log-level=debug", "--keep-listening", NULL);
	CHECK_MSG(ret == 0 && !strcmp(o.socket_path, "/tmp/s") && o.keep_listening &&
	          !strcmp(o.shared_dir, "/srv") && o.cache == CACHE_NEVER && o.xattr &&
	          !strcmp(o.tag, "myfs") && o.thread_pool_size == 64 &&
	          o.log_level == LOG_LVL_DEBUG,
	          "Rust dialect with '=' and separate values");
	CHECK_MSG(ret == 0 && !o.readdirplus, "cache=never turns readdirplus off by default");

	ret = parse(&o, err, sizeof(err), "--socket-path", "/tmp/s", "-o",
		    "source=/srv,cache=always,xattr,writeback,no_flock,log_level=warn",
		    "-f", "--thread-pool-size=0", NULL);
	CHECK_MSG(ret == 0 && !strcmp(o.shared_dir, "/srv") && o.cache == CACHE_ALWAYS &&
	          o.xattr && o.writeback && o.log_level == LOG_LVL_WARN && o.readdirplus,
	          "C dialect -o list");

	ret = parse(&o, err, sizeof(err), "--fd=3", "-osource=/srv,cache=none", "-d", NULL);
	CHECK_MSG(ret == 0 && o.listen_fd == 3 && o.cache == CACHE_NEVER &&
	          o.log_level == LOG_LVL_DEBUG, "--fd, joined -o, -d");

	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d", "-o",
		    "allow_root", NULL);
	CHECK_MSG(ret != 0 && strstr(err, "allow_root") && strstr(err, "not supported"),
	          "unsupported option refused by name: %s", err);

	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "--quota-bytes=1G", "--add-dir=logs:/var/log", NULL);
	CHECK_MSG(ret != 0 && strstr(err, "--add-dir") && strstr(err, "--quota-bytes"),
	          "a quota with --add-dir refused, naming both: %s", err);

	/* Live migration, as the Rust virtiofsd's options. */
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "--migration-mode=file-handles", "--migration-on-error=guest-error",
		    "--migration-verify-handles", "--migration-confirm-paths", NULL);
	CHECK_MSG(ret == 0 && o.migration_mode == MIG_MODE_FILE_HANDLES &&
		  o.migration_on_error == MIGRATION_ON_ERROR_GUEST_ERROR &&
		  o.migration_verify_handles && o.migration_confirm_paths,
		  "--migration-*: %s", ret ? err : "ok");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d", NULL);
	CHECK_MSG(ret == 0 && o.migration_mode == MIG_MODE_FIND_PATHS &&
		  o.migration_on_error == MIGRATION_ON_ERROR_ABORT &&
		  !o.migration_verify_handles && !o.migration_confirm_paths,
		  "migration defaults: find-paths, abort");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "--migration-mode=by-magic", NULL);
	CHECK_MSG(ret != 0 && strstr(err, "migration-mode"), "a bad --migration-mode: %s", err);

	/* xattrs: --xattrmap, --posix-acl, --security-label and their -o forms */
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "--xattrmap=:map::user.virtiofs.:", NULL);
	CHECK_MSG(ret == 0 && o.xattr && o.xattrmap.count == 3 &&
	          !strcmp(o.xattrmap.capability_name, "user.virtiofs.security.capability"),
	          "--xattrmap parsed, turns xattrs on, knows where security.capability goes");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "--xattrmap", " :ok:all::: ", NULL);
	CHECK_MSG(ret == 0 && o.xattrmap.count == 2 && !o.xattrmap.capability_name[0],
	          "--xattrmap RULES as a separate word; an ok rule leaves security.capability alone");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "--xattrmap=:ok:all::: :bogus:all:::", NULL);
	CHECK_MSG(ret != 0 && strstr(err, "'--xattrmap'") && strstr(err, "rule 2") &&
	          strstr(err, ":bogus:all:::") && strstr(err, "unknown type 'bogus'"),
	          "a bad rule names the option, the rule and the fault: %s", err);
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "-o",
		    "source=/d,xattrmap=/ok/client/a\\,b//  /bad/all///,posix_acl", NULL);
	CHECK_MSG(ret == 0 && o.xattr && o.posix_acl && o.xattrmap.count == 3 &&
	          !strcmp(o.xattrmap.rules[0].key, "a,b"),
	          "-o xattrmap= with an escaped ',' in a rule, then more options");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "-o",
		    "source=/d,xattrmap=:prefix:all", NULL);
	CHECK_MSG(ret != 0 && strstr(err, "'-o xattrmap'") && strstr(err, "rule 1") &&
	          strstr(err, "scope field"), "-o xattrmap= with a cut rule: %s", err);
	/* As in the Rust virtiofsd, each of them turns xattrs on. */
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "--posix-acl", NULL);
	CHECK_MSG(ret == 0 && o.posix_acl && o.xattr && !o.security_label,
	          "--posix-acl alone implies --xattr");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "--security-label", NULL);
	CHECK_MSG(ret == 0 && o.security_label && o.xattr && !o.posix_acl,
	          "--security-label alone implies --xattr");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "-o", "source=/d,posix_acl", NULL);
	CHECK_MSG(ret == 0 && o.posix_acl && o.xattr, "-o posix_acl alone implies xattr");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "--posix-acl", "--security-label", "--xattrmap=:map::user.virtiofs.:",
		    "-o", "no_xattr", NULL);
	CHECK_MSG(ret == 0 && o.xattr,
	          "-o no_xattr leaves xattrs on while ACLs, labels or a map need them");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "--xattrmap=:map::user.virtiofs.:", "-o", "no_xattr", NULL);
	CHECK_MSG(ret == 0 && o.xattr, "--xattrmap then -o no_xattr: xattrs stay on");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "-o", "xattr,no_xattr", NULL);
	CHECK_MSG(ret == 0 && !o.xattr, "-o xattr,no_xattr alone: off");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d", NULL);
	CHECK_MSG(ret == 0 && !o.xattr, "xattrs off by default");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "--posix-acl", "--xattr", "--security-label", NULL);
	CHECK_MSG(ret == 0 && o.posix_acl && o.xattr && o.security_label,
	          "--posix-acl --xattr --security-label");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "-o",
		    "source=/d,xattr,posix_acl,security_label,no_posix_acl,no_security_label", NULL);
	CHECK_MSG(ret == 0 && !o.posix_acl && !o.security_label,
	          "-o no_posix_acl,no_security_label: the last word wins");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "-o",
		    "source=/d,xattr,security_label", NULL);
	CHECK_MSG(ret == 0 && o.security_label && o.xattrmap.count == 0,
	          "-o security_label; no map unless given");

	/* Spellings the Rust virtiofsd takes. */
	ret = parse(&o, err, sizeof(err), "--socket=/s", "--shared-dir=/d", NULL);
	CHECK_MSG(ret == 0 && o.socket_path && !strcmp(o.socket_path, "/s"),
	          "--socket, the Rust virtiofsd's old name of --socket-path");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "--log-level=DEBUG", NULL);
	CHECK_MSG(ret == 0 && o.log_level == LOG_LVL_DEBUG, "--log-level in upper case");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "--log-level=debugging", NULL);
	CHECK_MSG(ret != 0 && strstr(err, "'debugging'"), "--log-level=debugging refused: %s", err);
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "-o", "source=/d,loglevel=err", NULL);
	CHECK_MSG(ret == 0 && o.log_level == LOG_LVL_ERROR, "-o loglevel=err");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "-o", "source=/d,cache=metadata", NULL);
	CHECK_MSG(ret == 0 && o.cache == CACHE_METADATA, "-o cache=metadata");

	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "-o", "source=/d,allow_root", NULL);
	CHECK_MSG(ret != 0 && strstr(err, "'allow_root'"), "unsupported C option refused by name: %s", err);

	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d", NULL);
	CHECK_MSG(ret == 0 && !o.posix_lock && !o.flock,
	          "locks stay guest-local unless asked for, like both virtiofsds");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "--posix-lock", "--flock", NULL);
	CHECK_MSG(ret == 0 && o.posix_lock && o.flock, "--posix-lock --flock");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "-o",
		    "source=/d,posix_lock,flock", NULL);
	CHECK_MSG(ret == 0 && o.posix_lock && o.flock, "-o posix_lock,flock");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "-o",
		    "source=/d,posix_lock,flock,no_posix_lock,no_flock", NULL);
	CHECK_MSG(ret == 0 && !o.posix_lock && !o.flock, "-o no_posix_lock,no_flock: the last word wins");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "-o", "source=/d,flock=1", NULL);
	CHECK_MSG(ret != 0 && strstr(err, "flock=1"), "-o flock takes no value: %s", err);

	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d", NULL);
	CHECK_MSG(ret == 0 && o.sandbox == SANDBOX_NAMESPACE && !o.seccomp_set &&
	          o.seccomp == SECCOMP_KILL && !o.modcaps &&
	          o.inode_file_handles == FILE_HANDLES_PREFER,
	          "defaults: namespace sandbox, seccomp kill, file handles where they work");

	/* prefer's other name, as the Rust virtiofsd still takes it. */
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "--inode-file-handles=fallback", NULL);
	CHECK_MSG(ret == 0 && o.inode_file_handles == FILE_HANDLES_PREFER,
	          "--inode-file-handles=fallback is prefer: %s", err);
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "--inode-file-handles", "never", NULL);
	CHECK_MSG(ret == 0 && o.inode_file_handles == FILE_HANDLES_NEVER,
	          "--inode-file-handles never");
	/* A share named as QEMU's C virtiofsd names it keeps that daemon's fd
	 * per inode, unless file handles are asked for; -o items beside
	 * --shared-dir change nothing. */
	ret = parse(&o, err, sizeof(err), "--fd=3", "-o", "source=/d,cache=auto,xattr", NULL);
	CHECK_MSG(ret == 0 && o.inode_file_handles == FILE_HANDLES_NEVER,
	          "-o source=: no file handles, as QEMU's C virtiofsd");
	ret = parse(&o, err, sizeof(err), "--fd=3", "-o", "source=/d",
		    "--inode-file-handles=prefer", NULL);
	CHECK_MSG(ret == 0 && o.inode_file_handles == FILE_HANDLES_PREFER,
	          "-o source= with --inode-file-handles=prefer");
	ret = parse(&o, err, sizeof(err), "--inode-file-handles=mandatory", "--fd=3",
		    "-o", "source=/d", NULL);
	CHECK_MSG(ret == 0 && o.inode_file_handles == FILE_HANDLES_MANDATORY,
	          "--inode-file-handles=mandatory before -o source=");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "-o", "cache=auto,xattr", NULL);
	CHECK_MSG(ret == 0 && o.inode_file_handles == FILE_HANDLES_PREFER,
	          "--shared-dir with -o items keeps prefer");

	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "--sandbox", "none", "--seccomp=none", NULL);
	CHECK_MSG(ret == 0 && o.sandbox == SANDBOX_NONE && o.seccomp == SECCOMP_NONE &&
	          o.seccomp_set, "--sandbox none and --seccomp=none");

	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "--sandbox=chroot", "--seccomp", "trap", "--modcaps=+sys_admin:-CAP_CHOWN",
		    "--inode-file-handles=mandatory", NULL);
	CHECK_MSG(ret == 0 && o.sandbox == SANDBOX_CHROOT && o.seccomp == SECCOMP_TRAP &&
	          !strcmp(o.modcaps, "+sys_admin:-CAP_CHOWN") &&
	          o.inode_file_handles == FILE_HANDLES_MANDATORY,
	          "--sandbox=chroot --seccomp trap --modcaps --inode-file-handles");

	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "-o",
		    "source=/d,sandbox=chroot,modcaps=-mknod", NULL);
	CHECK_MSG(ret == 0 && o.sandbox == SANDBOX_CHROOT && !strcmp(o.modcaps, "-mknod"),
	          "C dialect sandbox= and modcaps=");

	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "--sandbox=jail", NULL);
	CHECK_MSG(ret != 0 && strstr(err, "jail") && strstr(err, "--sandbox"),
	          "bad sandbox value: %s", err);

	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "-o", "source=/d,sandbox=none", NULL);
	CHECK_MSG(ret != 0 && strstr(err, "sandbox"),
	          "C dialect has no sandbox=none, as QEMU's virtiofsd: %s", err);

	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		const struct refusal *r = &refused[i];

		ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
			    r->arg, NULL);
		CHECK_MSG(ret != 0 && (!r->in_err || strstr(err, r->in_err)), "%s: %s",
		          r->what, err);
	}

	const char *bad_caps[] = { "+no_such_cap", "sys_admin", "+", "", "+chown:",
				   "+chown::-mknod", NULL };
	for (int i = 0; bad_caps[i]; i++) {
		char arg[64];

		snprintf(arg, sizeof(arg), "--modcaps=%s", bad_caps[i]);
		ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
			    arg, NULL);
		CHECK_MSG(ret != 0 && strstr(err, "--modcaps"), "bad modcaps '%s': %s",
		          bad_caps[i], err);
	}

	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "-o", "source=/d,nonsense", NULL);
	CHECK_MSG(ret != 0 && strstr(err, "nonsense"), "unknown -o item: %s", err);

	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d", NULL);
	CHECK_MSG(ret == 0 && o.poll_max_us == FERRY_POLL_MAX_US_DEFAULT,
	          "queue threads poll by default (%u us)", o.poll_max_us);
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "--poll-max-us=0", NULL);
	CHECK_MSG(ret == 0 && o.poll_max_us == 0, "--poll-max-us=0 turns polling off");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "--poll-max-us", "1000000", NULL);
	CHECK_MSG(ret == 0 && o.poll_max_us == 1000000, "--poll-max-us up to a second");

	ret = parse(&o, err, sizeof(err), "--shared-dir=/d", NULL);
	CHECK_MSG(ret != 0 && strstr(err, "socket"), "missing socket: %s", err);

	ret = parse(&o, err, sizeof(err), "--socket-path=/s", NULL);
	CHECK_MSG(ret != 0 && strstr(err, "shared directory"), "missing shared dir: %s", err);

	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--fd=4", "--shared-dir=/d", NULL);
	CHECK_MSG(ret != 0 && strstr(err, "exclude"), "--fd with --socket-path: %s", err);

	ret = parse(&o, err, sizeof(err), "--xattr=yes", NULL);
	CHECK_MSG(ret != 0 && strstr(err, "takes no value"), "flag given a value: %s", err);

	ret = parse(&o, err, sizeof(err), "--socket-path", NULL);
	CHECK_MSG(ret != 0 && strstr(err, "needs a value"), "value missing: %s", err);

	ret = parse(&o, err, sizeof(err), "--mount=/mnt/x", "--shared-dir=/d", NULL);
	CHECK_MSG(ret == 0 && !strcmp(o.mountpoint, "/mnt/x") && !o.socket_path &&
	          o.listen_fd < 0, "--mount needs no vhost-user socket");

	ret = parse(&o, err, sizeof(err), "--mount", "/mnt/x", "--shared-dir=/d",
		    "--socket-path=/s", NULL);
	CHECK_MSG(ret != 0 && strstr(err, "--mount excludes"), "--mount with --socket-path: %s", err);

	ret = parse(&o, err, sizeof(err), "--mount=/mnt/x", "--shared-dir=/d", "--tag=t", NULL);
	CHECK_MSG(ret != 0 && strstr(err, "--tag"), "--mount with --tag: %s", err);

	ret = parse(&o, err, sizeof(err), "--mount=", "--shared-dir=/d", NULL);
	CHECK_MSG(ret != 0 && strstr(err, "--mount"), "empty --mount: %s", err);

	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "--stats-socket=/run/x.stats", NULL);
	CHECK_MSG(ret == 0 && o.action == ACTION_SERVE && !strcmp(o.stats_socket, "/run/x.stats") &&
	          o.sandbox == SANDBOX_NAMESPACE && o.seccomp != SECCOMP_NONE,
	          "--stats-socket while serving, in the default sandbox and seccomp filter");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "--stats-socket=/run/x.stats", "--sandbox=chroot", "--seccomp=kill", NULL);
	CHECK_MSG(ret == 0 && o.sandbox == SANDBOX_CHROOT && o.seccomp == SECCOMP_KILL,
	          "--stats-socket with --sandbox=chroot --seccomp=kill");
	ret = parse(&o, err, sizeof(err), "--mount=/mnt/x", "--shared-dir=/d",
		    "--sandbox=namespace", NULL);
	CHECK_MSG(ret != 0 && strstr(err, "--mount runs without a sandbox"),
	          "--mount with --sandbox=namespace refused: %s", err);
	ret = parse(&o, err, sizeof(err), "--mount=/mnt/x", "--shared-dir=/d",
		    "--seccomp=kill", NULL);
	CHECK_MSG(ret == 0 && o.sandbox == SANDBOX_NONE && o.seccomp == SECCOMP_KILL,
	          "--mount with --seccomp=kill: %s", err);
	ret = parse(&o, err, sizeof(err), "--mount=/mnt/x", "--shared-dir=/d", NULL);
	CHECK_MSG(ret == 0 && o.sandbox == SANDBOX_NONE && !o.seccomp_set,
	          "--mount: no sandbox, the default seccomp filter: %s", err);

	ret = parse(&o, err, sizeof(err), "--stats", "/run/x.stats", "--json", NULL);
	CHECK_MSG(ret == 0 && o.action == ACTION_STATS && !strcmp(o.stats_query, "/run/x.stats") &&
	          o.stats_json, "--stats client needs no shared dir or socket");

	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d", NULL);
	CHECK_MSG(ret == 0 && o.announce_submounts && !o.killpriv_v2 && !o.readonly &&
	          !o.preserve_noatime && !o.allow_mmap && idmap_empty(&o.uid_map) &&
	          idmap_empty(&o.gid_map),
	          "defaults: submounts announced (as the Rust virtiofsd), killpriv_v2 off");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "--no-announce-submounts", "--killpriv-v2", "--readonly",
		    "--preserve-noatime", "--allow-mmap", "--cache=never", NULL);
	CHECK_MSG(ret == 0 && !o.announce_submounts && o.killpriv_v2 && o.readonly &&
	          o.preserve_noatime && o.allow_mmap, "semantics flags (Rust dialect)");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "--killpriv-v2", "--no-killpriv-v2", NULL);
	CHECK_MSG(ret == 0 && !o.killpriv_v2, "--no-killpriv-v2 after --killpriv-v2 wins");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "-o",
		    "source=/d,killpriv_v2,announce_submounts,timeout=2.5", NULL);
	CHECK_MSG(ret == 0 && o.killpriv_v2 && o.announce_submounts && o.timeout == 2.5,
	          "-o killpriv_v2,announce_submounts,timeout=2.5");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "-o",
		    "source=/d,killpriv_v2,no_killpriv_v2", NULL);
	CHECK_MSG(ret == 0 && !o.killpriv_v2, "-o no_killpriv_v2");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "-o", "source=/d,timeout=-1", NULL);
	CHECK_MSG(ret != 0 && strstr(err, "timeout"), "negative timeout refused: %s", err);
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "--cache", "metadata", NULL);
	CHECK_MSG(ret == 0 && o.cache == CACHE_METADATA && o.readdirplus,
	          "--cache metadata keeps readdirplus");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "-o", "source=/d,cache=none,readdirplus", NULL);
	CHECK_MSG(ret == 0 && o.cache == CACHE_NEVER && o.readdirplus,
	          "readdirplus asked for with cache=none stays on");

	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "--translate-uid", "map:1000:5000:10", "--translate-uid=squash-guest:2000:7000:5",
		    "--translate-gid=host:8000:3000:2", "--translate-uid=forbid-guest:4000:10", NULL);
	CHECK_MSG(ret == 0 && o.uid_map.nrules == 4 && o.gid_map.nrules == 1 && !o.uid_map.strict,
	          "--translate-uid/gid rules: %s", err);
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "--translate-uid=guest:0:100:10", "--translate-uid=squash-guest:5:1:2", NULL);
	CHECK_MSG(ret != 0 && strstr(err, "squash-guest:5:1:2"), "overlapping guest ranges refused: %s", err);
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d",
		    "--uid-map=:0:100000:65536:", "--gid-map=:0:100000:65536:", NULL);
	CHECK_MSG(ret == 0 && o.uid_map.strict && o.gid_map.strict, "--uid-map/--gid-map: %s", err);
	/* systemd socket activation: fd 3 when LISTEN_PID names this process. */
	char self[16];
	snprintf(self, sizeof(self), "%d", (int)getpid());
	setenv("LISTEN_PID", self, 1);
	setenv("LISTEN_FDS", "1", 1);
	ret = parse(&o, err, sizeof(err), "--shared-dir=/d", NULL);
	CHECK_MSG(ret == 0 && o.listen_fd == 3 && o.socket_activated,
	          "socket activation gives fd 3: %s", err);
	ret = parse(&o, err, sizeof(err), "--fd=5", "--shared-dir=/d", NULL);
	CHECK_MSG(ret == 0 && o.listen_fd == 5 && !o.socket_activated,
	          "--fd wins over socket activation");
	ret = parse(&o, err, sizeof(err), "--socket-path=/s", "--shared-dir=/d", NULL);
	CHECK_MSG(ret == 0 && o.listen_fd == -1 && !strcmp(o.socket_path, "/s"),
	          "--socket-path wins over socket activation");
	setenv("LISTEN_FDS", "2", 1);
	ret = parse(&o, err, sizeof(err), "--shared-dir=/d", NULL);
	CHECK_MSG(ret != 0 && strstr(err, "LISTEN_FDS=2"), "two activated sockets refused: %s", err);
	snprintf(self, sizeof(self), "%d", (int)getpid() + 1);
	setenv("LISTEN_PID", self, 1);
	setenv("LISTEN_FDS", "1", 1);
	ret = parse(&o, err, sizeof(err), "--shared-dir=/d", NULL);
	CHECK_MSG(ret != 0 && strstr(err, "no vhost-user socket"),
	          "activation meant for another process ignored: %s", err);
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");

	ret = parse(&o, err, sizeof(err), "--print-capabilities", NULL);
	CHECK_MSG(ret == 0 && o.action == ACTION_PRINT_CAPS, "--print-capabilities needs no socket");

	return check_result();
}
