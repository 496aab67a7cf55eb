/* ferryfsd: wires a transport (vhost-user or /dev/fuse), the FUSE protocol and the passthrough backend. */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/passthrough.h"
#include "common/log.h"
#include "common/unix_socket.h"
#include "daemon/caps.h"
#include "daemon/fusermount.h"
#include "daemon/lifecycle.h"
#include "daemon/listener.h"
#include "daemon/pool_policy.h"
#include "daemon/service.h"
#include "daemon/options.h"
#include "daemon/options_config.h"
#include "daemon/print_capabilities.h"
#include "daemon/sandbox.h"
#include "daemon/seccomp.h"
#include "daemon/stats.h"
#include "ferryfs_config.h"
#include "protocol/fuse_server.h"
#include "transport/devfuse.h"
#include "transport/vhost_user.h"

/* Request queues a frontend may start (QEMU's num-request-queues, Linux
 * 6.11+ spreads its CPUs over them). Each started queue gets a thread;
 * queues the frontend does not start cost only their bookkeeping. */
#define FERRY_MAX_REQUEST_QUEUES 16

static struct vu_dev *volatile running_dev;
static struct devfuse *volatile running_mount;
static volatile sig_atomic_t stop_requested;
/* The socket accept() waits on, while it does: shutting it down from the
 * handler ends that wait even when the signal came just before it. */
static volatile int stop_listen_fd = -1;

static void on_stop_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
	if (stop_listen_fd >= 0)
		shutdown(stop_listen_fd, SHUT_RDWR);
	if (running_dev)
		vu_dev_stop(running_dev);
	if (running_mount)
		devfuse_stop(running_mount);
}

static void install_stop_signals(void)
{
	struct sigaction sa = { .sa_handler = on_stop_signal };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

static int check_shared_dir(const char *dir)
{
	struct stat st;

	if (stat(dir, &st))
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	return 0;
}

/* --add-dir: each DIR opened now, while relative paths still mean what they
 * meant to the caller and before a sandbox hides the host's paths; the
 * backend owns the fds from passthrough_new on. */
static int open_added_dirs(struct added_dir_list *l)
{
	for (unsigned i = 0; i < l->count; i++) {
		struct added_dir *d = &l->dirs[i];
		int fd = open(d->dir, O_PATH | O_DIRECTORY | O_CLOEXEC), err = errno;

		if (fd < 0) {
			log_err("--add-dir=%.*s:%s: %s (an existing directory is needed)",
				(int)d->name_len, d->name, d->dir, strerror(err));
			return -err;
		}
		d->fd = fd;
		d->opened = true;
	}
	return 0;
}

/*
 * A mount inside the shared directory would show itself through itself:
 * every walk of the share would recurse into the mount and each lookup
 * there would wait on our own reader threads.
 */
static int check_mountpoint(const char *mountpoint, const char *shared_dir)
{
	char *mp = realpath(mountpoint, NULL);
	char *sd = realpath(shared_dir, NULL);
	struct stat st;
	int ret = 0;

	if (!mp || !sd) {
		ret = -errno;
		goto out;
	}
	if (stat(mp, &st)) {
		ret = -errno;
		goto out;
	}
	if (!S_ISDIR(st.st_mode)) {
		ret = -ENOTDIR;
		goto out;
	}
	size_t sd_len = strlen(sd);
	if (!strcmp(sd, "/") || (!strncmp(mp, sd, sd_len) &&
				 (mp[sd_len] == '\0' || mp[sd_len] == '/')))
		ret = -ELOOP;
out:
	free(mp);
	free(sd);
	return ret;
}

/* --mount inside an added dir would recurse as inside the shared dir.
 * Checked at the start, while a relative DIR still means what it meant. */
static int check_mountpoint_outside_added(const char *mountpoint, const struct added_dir_list *l)
{
	for (unsigned i = 0; i < l->count; i++) {
		if (check_mountpoint(mountpoint, l->dirs[i].dir) == -ELOOP) {
			log_err("mount point %s is inside --add-dir=%.*s:%s: give --mount "
				"a directory outside it", mountpoint, (int)l->dirs[i].name_len,
				l->dirs[i].name, l->dirs[i].dir);
			return -ELOOP;
		}
	}
	return 0;
}

/* Both modes, once only serving is left: the seccomp filter (host_fuse
 * adds what /dev/fuse and the unmount need), then the statistics server. */
static int begin_serving(const struct ferry_options *o, bool host_fuse,
			 struct stats_socket *ss, const struct stats_sources *src,
			 struct stats_server **srv)
{
	int ret = seccomp_install(options_seccomp_mode(o), host_fuse);

	if (ret) {
		log_err("cannot install the seccomp filter: %s (--seccomp=none "
			"runs without it)", strerror(-ret));
		return ret;
	}
	return stats_socket_serve(ss, src, srv);
}

/* Host FUSE mode: the same session and backend behind the host's /dev/fuse. */
static int serve_mount(const struct ferry_options *o, struct daemon_state *st,
		       struct stats_socket *ss, int *ready_fd)
{
	struct stats_sources stats_src = { .session = st->session, .backend = st->pt,
					 .deadline = st->deadline };
	struct stats_server *stats_srv = NULL;
	struct devfuse_config df_config = {
		.mountpoint = o->mountpoint,
		.source = o->shared_dir,
		.max_write = FERRY_MAX_WRITE,
	};
	struct devfuse *df = NULL;
	int fuse_fd = -1, keep_fd = -1;
	int ret;

	ret = check_mountpoint(o->mountpoint, o->shared_dir);
	if (ret == -ELOOP) {
		log_err("mount point %s is inside the shared directory %s: "
			"give --mount a directory outside it", o->mountpoint,
			o->shared_dir);
		goto out;
	}
	if (ret) {
		log_err("mount point %s: %s (--mount needs an existing "
			"directory)", o->mountpoint, strerror(-ret));
		goto out;
	}
	ret = devfuse_new(&df, &df_config,
			  st->deadline ? &daemon_service_deadline :
			  st->pool ? &daemon_service_pooled : &daemon_service, st);
	if (ret) {
		log_err("host FUSE transport: %s", strerror(-ret));
		goto out;
	}
	/* Without root, fusermount3 mounts; a watcher child detaches the
	 * mount once keep_fd closes, i.e. when we exit. */
	if (geteuid() != 0) {
		ret = fusermount_mount(o->mountpoint, o->shared_dir, &fuse_fd, &keep_fd);
		if (ret == 0)
			ret = devfuse_adopt(df, fuse_fd);
		if (ret == 0)
			fuse_fd = -1;
	} else {
		ret = devfuse_mount(df);
	}
	if (ret)
		goto out_df;
	/* Mounted: from here on only serving is left, as in vhost-user mode
	 * after accept's setup. Capabilities stay: the stop unmounts. */
	stats_src.devfuse = df;
	ret = begin_serving(o, true, ss, &stats_src, &stats_srv);
	if (ret)
		goto out_df;
	running_mount = df;
	/* A stop asked for before running_mount was set (the handler is in
	 * place since serve()) found nothing to stop. */
	if (stop_requested)
		devfuse_stop(df);
	log_info("sharing %s on %s", o->shared_dir, o->mountpoint);
	daemon_ready(*ready_fd);
	*ready_fd = -1;
	ret = devfuse_serve(df);
	if (ret)
		log_err("host FUSE transport: %s", strerror(-ret));
	else
		log_info("%s unmounted; exiting", o->mountpoint);
	running_mount = NULL;
	stats_socket_end(&stats_src, stats_srv);
out_df:
	devfuse_free(df);
	if (fuse_fd >= 0)
		close(fuse_fd);
	if (keep_fd >= 0)
		close(keep_fd);
out:
	return ret;
}

/* listen_fd: listening since before the sandbox; closed here. */
static int serve_vhost_user(const struct ferry_options *o, struct daemon_state *st,
			    struct stats_socket *ss, struct vu_listener *l,
			    int *ready_fd)
{
	struct stats_sources stats_src = { .session = st->session, .backend = st->pt,
					 .deadline = st->deadline };
	struct stats_server *stats_srv = NULL;
	struct vu_fs_config vu_config = {
		.tag = o->tag,
		/* The config space says one: a frontend that passes it to
		 * the guest without setting up more rings stays correct.
		 * QEMU and cloud-hypervisor announce their own count. */
		.num_request_queues = 1,
		.max_request_queues = FERRY_MAX_REQUEST_QUEUES,
		.poll_max_us = o->poll_max_us,
		.queue_cpus = &o->queue_cpus,
	};
	struct vu_dev *dev = NULL;
	int conn_fd = -1;
	int ret;

	if (o->queue_cpus.count) {
		cpu_set_t helpers;
		char cpus[256];

		/* Before the first request, so every helper starts there. */
		cpu_list_to_set(&o->queue_cpus, &helpers);
		cpu_placement_set_helpers(&helpers);
		log_info("--queue-cpus: hiprio and helper threads on CPU %s",
			 cpu_set_format(&helpers, cpus, sizeof(cpus)));
	}
	ret = vu_dev_new(&dev, &vu_config,
			 st->deadline ? &daemon_service_deadline_migratable :
			 st->pool ? &daemon_service_pooled_migratable : &daemon_service_migratable, st);
	if (ret) {
		log_err("vhost-user device: %s", strerror(-ret));
		goto out_listen;
	}
	/* Listening, with the device ready: a VMM may connect now. Before
	 * the seccomp filter, which does not allow chdir. */
	daemon_ready(*ready_fd);
	*ready_fd = -1;
	/* Last, once nothing but serving is left to do. */
	ret = caps_limit(o->modcaps, o->inode_file_handles != FILE_HANDLES_NEVER ||
			 o->migration_mode == MIG_MODE_FILE_HANDLES);
	if (ret) {
		log_err("cannot limit capabilities: %s (check --modcaps)",
			strerror(-ret));
		goto out_listen;
	}
	stats_src.vu_dev = dev;
	ret = begin_serving(o, false, ss, &stats_src, &stats_srv);
	if (ret)
		goto out_listen;

	running_dev = dev;
	/* A stop asked for earlier (even in the sandbox's parent, before it
	 * forked us) must not leave us waiting in accept for ever. */
	if (!l->inherited)   /* shutdown would reach the socket's other holders */
		stop_listen_fd = l->fd;
	if (stop_requested) {
		ret = 0;
		goto out_stats;
	}

	for (;;) {
		log_info("waiting for a vhost-user frontend on %s",
			 l->socket_path ? l->socket_path : l->where);
		ret = ferry_unix_accept(l->fd, &conn_fd);
		if (ret) {
			if (stop_requested)
				ret = 0;
			else
				log_err("accept: %s", strerror(-ret));
			goto out_stats;
		}
		/* One frontend at a time, as virtiofsd: later ones are
		 * refused, or with --keep-listening wait in the backlog. */
		if (!o->keep_listening && !l->inherited) {
			stop_listen_fd = -1;
			close(l->fd);
			l->fd = -1;
		}
		log_info("frontend connected; sharing %s", o->shared_dir);
		ret = vu_dev_serve(dev, conn_fd);
		conn_fd = -1;   /* vu_dev_serve owns and closes it */
		if (ret) {
			log_err("vhost-user connection failed: %s", strerror(-ret));
			goto out_stats;
		}
		/* The session was reset through service->reset: the next
		 * frontend's guest starts with a fresh INIT. */
		if (!o->keep_listening || stop_requested)
			break;
		log_info("frontend gone; --keep-listening: waiting for the next one");
	}
	log_info("frontend gone; exiting");

out_stats:
	stop_listen_fd = -1;
	stats_socket_end(&stats_src, stats_srv);
out_listen:
	running_dev = NULL;
	if (conn_fd >= 0)
		close(conn_fd);
	vu_dev_free(dev);
	return ret;
}

/* Whether a --modcaps list leaves CAP_DAC_READ_SEARCH out (its last word
 * on it wins, as when caps_limit applies it). */
static int note_handle_cap(int cap, bool add, void *dropped)
{
	if (cap == CAP_DAC_READ_SEARCH)
		*(bool *)dropped = !add;
	return 0;
}

/*
 * open_by_handle_at() needs CAP_DAC_READ_SEARCH in the initial user
 * namespace, which an ordinary user's start (its own user namespace
 * included) never has, nor a root daemon whose --modcaps drops it (it is
 * dropped only once serving, after the share's mount was judged usable):
 * say so once, at start, in those words.
 */
static int file_handles_without_capability(const struct ferry_options *o,
				     struct passthrough_opts *pt_opts)
{
	bool cap_dropped = false;

	if (pt_opts->file_handles == FILE_HANDLES_NEVER)
		return 0;
	if (geteuid() == 0 && o->modcaps)
		ferry_modcaps_walk(o->modcaps, note_handle_cap, &cap_dropped);
	if (cap_dropped) {
		if (pt_opts->file_handles == FILE_HANDLES_MANDATORY) {
			log_err("--inode-file-handles=mandatory needs CAP_DAC_READ_SEARCH, "
				"which --modcaps drops");
			return -EPERM;
		}
		log_info("--inode-file-handles=prefer: --modcaps drops CAP_DAC_READ_SEARCH, "
			 "which open_by_handle_at needs; inodes keep O_PATH fds");
		pt_opts->file_handles = FILE_HANDLES_NEVER;
		return 0;
	}
	if (geteuid() == 0)
		return 0;
	if (pt_opts->file_handles == FILE_HANDLES_MANDATORY) {
		log_err("--inode-file-handles=mandatory needs root (open_by_handle_at "
			"needs CAP_DAC_READ_SEARCH on the host, which no user "
			"namespace gives): use prefer or never");
		return -EPERM;
	}
	log_info("--inode-file-handles=prefer: without root file handles cannot "
		 "be opened (open_by_handle_at needs CAP_DAC_READ_SEARCH on the host); "
		 "inodes keep O_PATH fds");
	pt_opts->file_handles = FILE_HANDLES_NEVER;
	return 0;
}

/* The start's one line when no mount is judged for handles: why every
 * inode keeps its fd. The mounts that are judged say so themselves
 * (pt_file_handles.c), the share's at start and others when first met. */
static void log_no_file_handles(const struct ferry_options *o)
{
	if (o->inode_file_handles != FILE_HANDLES_NEVER)
		return;
	if (o->inode_file_handles_set || !o->share_named_by_c_dialect)
		log_info("--inode-file-handles=never: every inode keeps an O_PATH fd");
	else
		log_info("--inode-file-handles: never, as QEMU's C virtiofsd (the share "
			 "is named by -o source=): every inode keeps an O_PATH fd");
}

/* --request-timeout: the deadline for requests, before any worker starts. */
static int start_deadline(const struct ferry_options *o, struct daemon_state *st)
{
	/* The largest reply: max_write bytes of a READ or READDIR, or an
	 * xattr's value or list (at most 64 KiB in Linux), and headers. */
	size_t max_reply = (FERRY_MAX_WRITE > 65536 ? FERRY_MAX_WRITE : 65536) + 4096;
	int ret;

	if (o->request_timeout <= 0)
		return 0;
	ret = deadline_new(&st->deadline, o->request_timeout, st->session, max_reply);
	if (ret) {
		log_err("--request-timeout: %s", strerror(-ret));
		return ret;
	}
	log_info("--request-timeout: requests that reach the host's storage are answered "
		 "ETIMEDOUT after %g s; at most %u host calls left stuck",
		 o->request_timeout, DEADLINE_STUCK_MAX);
	return 0;
}

/* On a share whose storage is remote, the request pool (daemon/pool_policy.h
 * says why only there). 0 or -errno. */
static int start_request_pool(struct daemon_state *st, const struct passthrough *pt,
			      uint32_t max_write)
{
	unsigned long fs_type = passthrough_root_fs_type(pt);
	int ret;

	/* --request-timeout runs each such request on a thread of its own
	 * already, with its deadline. */
	if (st->deadline || !pool_policy_storage_remote(fs_type))
		return 0;
	ret = request_pool_new(&st->pool, st->session, max_write ? max_write : FERRY_MAX_WRITE);
	if (ret) {
		log_err("request pool: %s", strerror(-ret));
		return ret;
	}
	log_info("the share is on remote storage (file system type 0x%lx): requests "
		 "that wait on it run on a pool, as many at once as the guest queues",
		 fs_type);
	return 0;
}

static int serve(const struct ferry_options *o)
{
	struct passthrough_opts pt_opts;
	struct fuse_server_opts se_opts;
	struct daemon_state st = { 0 };
	struct passthrough *pt = NULL;
	struct vu_listener listener = { .fd = -1, .pid_fd = -1 };
	char *stats_path = NULL;
	struct stats_socket ss = { .fd = -1 };
	int ready_fd = -1;
	int ret;

	options_to_passthrough(o, &pt_opts);
	options_to_session(o, &se_opts);
	ret = check_shared_dir(o->shared_dir);
	if (ret) {
		log_err("shared directory %s: %s (--shared-dir, -o source=, "
			"needs an existing directory)", o->shared_dir,
			strerror(-ret));
		goto out;
	}
	ret = open_added_dirs(&pt_opts.added_dirs);
	if (ret == 0 && o->mountpoint)
		ret = check_mountpoint_outside_added(o->mountpoint, &pt_opts.added_dirs);
	if (ret)
		goto out;
	log_no_file_handles(o);
	ret = file_handles_without_capability(o, &pt_opts);
	if (ret)
		goto out;
	if (o->migration_mode == MIG_MODE_FILE_HANDLES && geteuid() != 0)
		log_warn("--migration-mode=file-handles without root: streams of file "
			 "handles (from a file-handles source) cannot load here, and the "
			 "handles this daemon sends load only into a root destination "
			 "(open_by_handle_at needs CAP_DAC_READ_SEARCH on the host); "
			 "find-paths streams load");
	ret = raise_nofile_limit(o);
	/* A limit asked for stops the start when it cannot be set, as in the
	 * Rust virtiofsd; the default one is only raised where it can be. */
	if (ret && o->rlimit_nofile_set) {
		log_err("--rlimit-nofile=%lu: %s (above the hard limit only as "
			"root, and never above /proc/sys/fs/nr_open)",
			o->rlimit_nofile, strerror(-ret));
		goto out;
	}
	if (ret)
		log_warn("could not set the open-file limit: %s", strerror(-ret));
	if (o->thread_pool_size_set && o->thread_pool_size > 0)
		log_info("--thread-pool-size=%u: ferryfsd has no thread pool; each "
			 "queue's thread runs its requests", o->thread_pool_size);

	/* Absolute now: --daemonize changes the working directory. */
	ret = absolute_path(o->stats_socket, &stats_path);
	if (ret) {
		log_err("--stats-socket: %s", strerror(-ret));
		goto out;
	}
	if (o->daemonize) {
		if (!o->syslog)
			log_warn("--daemonize without --syslog: messages after the "
				 "start go to /dev/null");
		ret = daemonize(&ready_fd);
		if (ret) {
			log_err("cannot daemonize: %s", strerror(-ret));
			goto out;
		}
	}
	if (!o->mountpoint) {
		ret = listen_vhost_user(o, &listener);
		if (ret)
			goto out_listen;
	} else {
		log_info("--mount: no sandbox yet, only the seccomp filter "
			 "(docs/security.md)");
	}
	ret = stats_socket_listen(&ss, stats_path, o->sandbox == SANDBOX_NONE);
	if (ret)
		goto out_listen;
	/* Once, for both modes, and before the sandbox forks: pid 1 of a pid
	 * namespace only gets the signals it has a handler for, and the
	 * child keeps the handler. */
	install_stop_signals();
	if (ready_fd >= 0)
		daemon_detach_stdio();
	ret = sandbox_enter(o->sandbox, o->shared_dir, &pt_opts.uid_map,
			    &pt_opts.gid_map, &pt_opts.proc_self_fd,
			    &pt_opts.shared_dir);
	if (ret)
		goto out_listen;
	pt_opts.proc_self_fd_given = pt_opts.proc_self_fd >= 0;
	pt_opts.host_dir = o->shared_dir;
	ret = passthrough_new(&pt, &pt_opts);
	if (ret) {
		log_err("cannot serve %s: %s", o->shared_dir, strerror(-ret));
		goto out_listen;
	}
	st.pt = pt;
	options_to_migration(o, &st.mig);
	ret = fuse_server_new(&st.session, &se_opts, &passthrough_ops, pt);
	if (ret) {
		log_err("FUSE session: %s", strerror(-ret));
		goto out_pt;
	}
	ret = start_deadline(o, &st);
	if (ret)
		goto out_session;

	ret = start_request_pool(&st, pt, se_opts.max_write);
	if (ret)
		goto out_session;

	if (o->mountpoint)
		ret = serve_mount(o, &st, &ss, &ready_fd);
	else
		ret = serve_vhost_user(o, &st, &ss, &listener, &ready_fd);

	/* Calls still stuck use the session and the backend: the exit frees
	 * them. */
	if (deadline_free(st.deadline))
		goto out_listen;
	request_pool_free(st.pool);
out_session:
	fuse_server_free(st.session);
out_pt:
	passthrough_free(pt);
out_listen:
	/* A sandboxed daemon leaves them; the next start replaces them. */
	unlisten_vhost_user(&listener, o->sandbox == SANDBOX_NONE);
out:
	/* Closed without the ready byte: the waiting parent exits 1. */
	if (ready_fd >= 0)
		close(ready_fd);
	stats_socket_close(&ss);
	free(stats_path);
	return ret;
}

int main(int argc, char **argv)
{
	struct ferry_options opts;

	if (ferry_options_parse(&opts, argc, argv, stderr))
		return 1;
	switch (opts.action) {
	case ACTION_HELP:
		ferry_options_usage(stdout);
		return 0;
	case ACTION_VERSION:
		printf("ferryfsd %s\n", FERRYFS_VERSION);
		return 0;
	case ACTION_PRINT_CAPS:
		print_capabilities(stdout);
		return 0;
	case ACTION_STATS:
		return stats_query(opts.stats_query, opts.stats_json, stdout, stderr) ? 1 : 0;
	case ACTION_SERVE:
		break;
	}
	/* As sd_listen_fds(unset_environment=1): nothing we start may take
	 * the activation as its own. */
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	ferry_log_init(opts.log_level, opts.syslog);
	return serve(&opts) ? 1 : 0;
}
