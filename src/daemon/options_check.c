/* Checks that span options (what excludes or needs what), and the socket systemd may pass instead of one. */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/options_table.h"

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

	if (!pid_env || !fds_env || opt_parse_ulong(pid_env, INT_MAX, &pid) ||
	    (pid_t)pid != getpid())
		return -ENOENT;
	if (opt_parse_ulong(fds_env, INT_MAX, &fds) || fds != 1) {
		fprintf(err, "ferryfsd: socket activation passed LISTEN_FDS=%s; "
			"ferryfsd serves exactly one socket: give its socket unit "
			"one ListenStream=\n", fds_env);
		return -EINVAL;
	}
	return FERRY_LISTEN_FDS_START;
}

/* A CPU the daemon may not run on is refused, not silently dropped: the
 * kernel would refuse to pin a thread there anyway, or (were the set to
 * grow later) the placement would differ from what was asked. */
static int check_queue_cpus(const struct cpu_list *list, FILE *err)
{
	cpu_set_t allowed;
	unsigned missing;
	char own[256];

	if (!list->count)
		return 0;
	if (sched_getaffinity(0, sizeof(allowed), &allowed) < 0) {
		fprintf(err, "ferryfsd: --queue-cpus: cannot read the CPUs this daemon "
			"may run on: %s\n", strerror(errno));
		return -EINVAL;
	}
	if (!cpu_list_within(list, &allowed, &missing)) {
		fprintf(err, "ferryfsd: --queue-cpus names CPU %u, which this daemon may "
			"not run on (its CPUs: %s)\n", missing,
			cpu_set_format(&allowed, own, sizeof(own)));
		return -EINVAL;
	}
	return 0;
}

int options_check(struct ferry_options *o, FILE *err)
{
	if (o->stats_json && o->action != ACTION_STATS) {
		fprintf(err, "ferryfsd: --json only goes with --stats=PATH: "
			"give both, or leave out --json\n");
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
		if (o->socket_path || o->listen_fd >= 0 || o->socket_group || o->tag ||
		    o->queue_cpus.count) {
			fprintf(err, "ferryfsd: --mount excludes --socket-path, --fd, "
				"--socket-group, --tag and --queue-cpus\n");
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
		fprintf(err, "ferryfsd: --socket-path and --fd exclude each other: "
			"give one of them\n");
		return -EINVAL;
	}
	/* As in the Rust virtiofsd: the guest's kernel reads and writes ACLs
	 * and security labels as xattrs, and a map is pointless without
	 * them, so each turns xattrs on, whatever -o no_xattr said. */
	if (o->posix_acl || o->security_label || o->xattrmap.count)
		o->xattr = true;
	if (check_queue_cpus(&o->queue_cpus, err))
		return -EINVAL;
	/* The quota's walk counts the shared directory's tree; an added dir
	 * is another tree, often another file system, that it would miss. */
	if ((o->quota_bytes || o->quota_inodes) && o->added_dirs.count) {
		fprintf(err, "ferryfsd: --quota-bytes and --quota-inodes count the shared "
			"directory only, so they do not go with --add-dir yet\n");
		return -EINVAL;
	}
	if (o->socket_group && !o->socket_path) {
		fprintf(err, "ferryfsd: --socket-group needs --socket-path (with --fd or "
			"socket activation, whoever creates the socket sets its group)\n");
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
	/* QEMU's C virtiofsd had no file handles: its command line keeps an
	 * O_PATH fd per inode, and the capability set that daemon kept
	 * (handles need CAP_DAC_READ_SEARCH), unless it asks for handles. */
	if (o->share_named_by_c_dialect && !o->inode_file_handles_set)
		o->inode_file_handles = FILE_HANDLES_NEVER;
	return 0;
}

