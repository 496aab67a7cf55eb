/* ferryfsd: wires the vhost-user transport, the FUSE protocol and the passthrough backend. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/passthrough.h"
#include "common/log.h"
#include "daemon/options.h"
#include "daemon/sandbox.h"
#include "daemon/stats.h"
#include "ferryfs_config.h"
#include "protocol/fuse_server.h"
#include "transport/devfuse.h"
#include "transport/vhost_user.h"

/* FUSE_MAX_MAX_PAGES in Linux is 256: 1 MiB requests with 4 KiB pages. */
#define FERRY_MAX_WRITE (1u << 20)
/* Request queues a frontend may start (QEMU's num-request-queues, Linux
 * 6.11+ spreads its CPUs over them). Each started queue gets a thread;
 * queues the frontend does not start cost only their bookkeeping. */
#define FERRY_MAX_REQUEST_QUEUES 16

struct daemon_state {
	struct fuse_session *session;
};

static struct vu_dev *volatile running_dev;
static struct devfuse *volatile running_mount;
static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
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

static void *queue_start(void *opaque, unsigned queue_index)
{
	struct daemon_state *st = opaque;
	struct fuse_worker *w;
	int ret = fuse_worker_new(st->session, &w);

	if (ret) {
		log_err("queue %u: no FUSE worker: %s", queue_index, strerror(-ret));
		return NULL;
	}
	return w;
}

static void queue_stop(void *opaque, unsigned queue_index, void *queue_ctx)
{
	(void)opaque;
	(void)queue_index;
	fuse_worker_free(queue_ctx);
}

static uint32_t queue_handle(void *queue_ctx, unsigned queue_index,
			     const struct vu_request *req)
{
	uint32_t len;

	(void)queue_index;
	len = fuse_worker_process(queue_ctx, req->rd, req->rd_cnt,
				  req->wr, req->wr_cnt, req->token);
	return len == FUSE_REPLY_DEFERRED ? VU_DEFERRED : len;
}

static void queue_cancel(void *queue_ctx, unsigned queue_index)
{
	(void)queue_index;
	fuse_worker_cancel_deferred(queue_ctx);
}

/* The guest rebooted (or its frontend went away) without unmounting: what
 * the old kernel held open is released, and the next INIT starts afresh. */
static void device_reset(void *opaque)
{
	struct daemon_state *st = opaque;

	fuse_session_reset(st->session);
}

static const struct vu_fs_ops daemon_vu_ops = {
	.queue_start = queue_start,
	.queue_stop = queue_stop,
	.handle = queue_handle,
	.queue_cancel = queue_cancel,
	.device_reset = device_reset,
};

static uint32_t mount_handle(void *thread_ctx, const struct iovec *rd, unsigned rd_cnt,
			     const struct iovec *wr, unsigned wr_cnt, void *token)
{
	uint32_t len = fuse_worker_process(thread_ctx, rd, rd_cnt, wr, wr_cnt, token);

	return len == FUSE_REPLY_DEFERRED ? DEVFUSE_DEFERRED : len;
}

static void mount_cancel(void *thread_ctx, unsigned thread_index)
{
	(void)thread_index;
	fuse_worker_cancel_deferred(thread_ctx);
}

/* A /dev/fuse reader thread is to the protocol what a queue thread is. */
static const struct devfuse_ops daemon_mount_ops = {
	.thread_start = queue_start,
	.thread_stop = queue_stop,
	.handle = mount_handle,
	.thread_cancel = mount_cancel,
};

static int raise_nofile_limit(const struct ferry_options *o)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return -errno;
	if (o->rlimit_nofile_set) {
		if (o->rlimit_nofile == 0)
			return 0;
		rl.rlim_cur = o->rlimit_nofile;
		if (rl.rlim_max < rl.rlim_cur)
			rl.rlim_max = rl.rlim_cur;
	} else {
		/* One O_PATH fd per inode the guest knows: large trees need far
		 * more than the usual soft limit of 1024. */
		rl.rlim_cur = rl.rlim_max;
	}
	if (setrlimit(RLIMIT_NOFILE, &rl))
		return -errno;
	return 0;
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

static void print_capabilities(void)
{
	/* libvirt reads this; "separate-options" says the Rust dialect's
	 * --shared-dir style options are understood. */
	printf("{\n  \"type\": \"fs\",\n  \"features\": [\n"
	       "    \"separate-options\"\n  ]\n}\n");
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

/*
 * Starts the --stats-socket server once the transport exists and the
 * process is in its final form (daemon() forks, and threads do not follow).
 */
static int stats_begin(const char *stats_path, const struct stats_sources *src,
		       struct stats_server **srv)
{
	int ret;

	*srv = NULL;
	if (!stats_path)
		return 0;
	ret = stats_server_start(srv, stats_path, src);
	if (ret)
		log_err("--stats-socket=%s: %s", stats_path, strerror(-ret));
	else
		log_info("statistics on %s (ferryfsd --stats=%s)", stats_path, stats_path);
	return ret;
}

/* The report at exit, with --log-level=info or more. */
static void stats_end(const struct stats_sources *src, struct stats_server *srv)
{
	stats_server_stop(srv);
	stats_log_table(src);
}

/* Host FUSE mode: the same session and backend behind the host's /dev/fuse. */
static int serve_mount(const struct ferry_options *o, struct daemon_state *st,
		       const char *stats_path)
{
	struct stats_sources stats_src = { .session = st->session };
	struct stats_server *stats_srv = NULL;
	struct devfuse_config df_config = {
		.mountpoint = o->mountpoint,
		.source = o->shared_dir,
		.max_write = FERRY_MAX_WRITE,
	};
	struct devfuse *df = NULL;
	int ret;

	ret = check_mountpoint(o->mountpoint, o->shared_dir);
	if (ret == -ELOOP) {
		log_err("mount point %s is inside the shared directory %s",
			o->mountpoint, o->shared_dir);
		goto out;
	}
	if (ret) {
		log_err("mount point %s: %s", o->mountpoint, strerror(-ret));
		goto out;
	}
	ret = devfuse_new(&df, &df_config, &daemon_mount_ops, st);
	if (ret) {
		log_err("host FUSE transport: %s", strerror(-ret));
		goto out;
	}
	ret = devfuse_mount(df);
	if (ret)
		goto out_df;
	if (o->daemonize && daemon(0, 0)) {
		ret = -errno;
		log_err("cannot daemonize: %s", strerror(-ret));
		goto out_df;
	}
	stats_src.devfuse = df;
	ret = stats_begin(stats_path, &stats_src, &stats_srv);
	if (ret)
		goto out_df;
	running_mount = df;
	install_stop_signals();
	log_info("sharing %s on %s", o->shared_dir, o->mountpoint);
	ret = devfuse_serve(df);
	if (ret)
		log_err("host FUSE transport: %s", strerror(-ret));
	else
		log_info("%s unmounted; exiting", o->mountpoint);
	running_mount = NULL;
	stats_end(&stats_src, stats_srv);
out_df:
	devfuse_free(df);
out:
	return ret;
}

/* listen_fd: listening since before the sandbox; closed here. */
static int serve_vhost_user(const struct ferry_options *o, struct daemon_state *st,
			    const char *stats_path, int listen_fd)
{
	struct stats_sources stats_src = { .session = st->session };
	struct stats_server *stats_srv = NULL;
	struct vu_fs_config vu_config = {
		.tag = o->tag,
		/* The config space says one: a frontend that passes it to
		 * the guest without setting up more rings stays correct.
		 * QEMU and cloud-hypervisor announce their own count. */
		.num_request_queues = 1,
		.max_request_queues = FERRY_MAX_REQUEST_QUEUES,
	};
	struct vu_dev *dev = NULL;
	int conn_fd = -1;
	int ret;

	ret = vu_dev_new(&dev, &vu_config, &daemon_vu_ops, st);
	if (ret) {
		log_err("vhost-user device: %s", strerror(-ret));
		goto out_listen;
	}
	/* Last, once nothing but serving is left to do. */
	ret = caps_limit(o->modcaps, o->inode_file_handles != FILE_HANDLES_NEVER);
	if (ret) {
		log_err("cannot limit capabilities: %s", strerror(-ret));
		goto out_listen;
	}
	ret = seccomp_install(o->seccomp_set ? o->seccomp : seccomp_default());
	if (ret) {
		log_err("cannot install the seccomp filter: %s", strerror(-ret));
		goto out_listen;
	}
	stats_src.vu_dev = dev;
	ret = stats_begin(stats_path, &stats_src, &stats_srv);
	if (ret)
		goto out_listen;

	running_dev = dev;
	install_stop_signals();

	for (;;) {
		log_info("waiting for a vhost-user frontend on %s",
			 o->socket_path ? o->socket_path : "the inherited socket");
		ret = vu_accept(listen_fd, &conn_fd);
		if (ret) {
			if (stop_requested)
				ret = 0;
			else
				log_err("accept: %s", strerror(-ret));
			goto out_stats;
		}
		/* One frontend at a time, as virtiofsd: later ones are
		 * refused, or with --keep-listening wait in the backlog. */
		if (!o->keep_listening) {
			close(listen_fd);
			listen_fd = -1;
		}
		log_info("frontend connected; sharing %s", o->shared_dir);
		ret = vu_dev_serve(dev, conn_fd);
		conn_fd = -1;   /* vu_dev_serve owns and closes it */
		if (ret) {
			log_err("vhost-user connection failed: %s", strerror(-ret));
			goto out_stats;
		}
		/* The session was reset through device_reset: the next
		 * frontend's guest starts with a fresh INIT. */
		if (!o->keep_listening || stop_requested)
			break;
		log_info("frontend gone; --keep-listening: waiting for the next one");
	}
	log_info("frontend gone; exiting");

out_stats:
	stats_end(&stats_src, stats_srv);
out_listen:
	running_dev = NULL;
	if (conn_fd >= 0)
		close(conn_fd);
	if (listen_fd >= 0 && listen_fd != o->listen_fd)
		close(listen_fd);
	vu_dev_free(dev);
	return ret;
}

/* The vhost-user socket is set up before the sandbox hides host paths,
 * and daemon() forks before it, so the sandbox's fork comes last. */
static int listen_vhost_user(const struct ferry_options *o, int *listen_fd)
{
	int ret;

	if (o->listen_fd >= 0) {
		*listen_fd = o->listen_fd;
	} else {
		ret = vu_listen_unix(o->socket_path, o->socket_group, listen_fd);
		if (ret) {
			log_err("cannot listen on %s: %s", o->socket_path, strerror(-ret));
			return ret;
		}
	}
	if (o->daemonize && daemon(0, 0)) {
		ret = -errno;
		log_err("cannot daemonize: %s", strerror(-ret));
		if (*listen_fd != o->listen_fd)
			close(*listen_fd);
		return ret;
	}
	return 0;
}

/* *out = path made absolute (NULL for NULL); the caller frees it. */
static int absolute_path(const char *path, char **out)
{
	char *cwd;
	int ret = 0;

	*out = NULL;
	if (!path)
		return 0;
	if (path[0] == '/') {
		*out = strdup(path);
		return *out ? 0 : -ENOMEM;
	}
	cwd = getcwd(NULL, 0);
	if (!cwd)
		return -errno;
	if (asprintf(out, "%s/%s", cwd, path) < 0) {
		*out = NULL;
		ret = -ENOMEM;
	}
	free(cwd);
	return ret;
}

static int serve(const struct ferry_options *o)
{
	struct passthrough_opts pt_opts = {
		.shared_dir = o->shared_dir,
		.file_handles = o->inode_file_handles,
		.cache = o->cache,
		.timeout = o->timeout,
		.xattr = o->xattr,
		.allow_direct_io = o->allow_direct_io,
		.writeback = o->writeback,
		.readonly = o->readonly,
		.announce_submounts = o->announce_submounts,
		.preserve_noatime = o->preserve_noatime,
		.uid_map = o->uid_map,
		.gid_map = o->gid_map,
		.xattrmap = o->xattrmap,
	};
	struct fuse_session_opts se_opts = {
		.max_write = FERRY_MAX_WRITE,
		.writeback = o->writeback,
		.xattr = o->xattr,
		.posix_acl = o->posix_acl,
		.security_label = o->security_label,
		.readdirplus = o->readdirplus,
		.posix_lock = o->posix_lock,
		.flock = o->flock,
		.killpriv_v2 = o->killpriv_v2,
		.announce_submounts = o->announce_submounts,
		.allow_mmap = o->allow_mmap,
		/* Each transport delivers replies given later its own way. */
		.reply_later = o->mountpoint ? devfuse_request_complete : vu_request_complete,
	};
	struct daemon_state st = { 0 };
	struct passthrough *pt = NULL;
	char *stats_path = NULL;
	int listen_fd = -1;
	int ret;

	ret = check_shared_dir(o->shared_dir);
	if (ret) {
		log_err("shared directory %s: %s", o->shared_dir, strerror(-ret));
		goto out;
	}
	ret = raise_nofile_limit(o);
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
	if (!o->mountpoint) {
		ret = listen_vhost_user(o, &listen_fd);
		if (ret)
			goto out;
	} else {
		log_info("--mount: no sandbox and no seccomp filter yet "
			 "(docs/security.md)");
	}
	if (o->stats_socket)
		log_info("--stats-socket: no sandbox and no seccomp filter yet "
			 "(docs/security.md)");
	/* Before the sandbox forks: pid 1 of a pid namespace only gets the
	 * signals it has a handler for. */
	install_stop_signals();
	ret = sandbox_enter(o->sandbox, o->shared_dir, &pt_opts.proc_self_fd,
			    &pt_opts.shared_dir);
	if (ret)
		goto out_listen;
	pt_opts.proc_self_fd_given = pt_opts.proc_self_fd >= 0;
	ret = passthrough_new(&pt, &pt_opts);
	if (ret) {
		log_err("cannot serve %s: %s", o->shared_dir, strerror(-ret));
		goto out_listen;
	}
	ret = fuse_session_new(&st.session, &se_opts, &passthrough_ops, pt);
	if (ret) {
		log_err("FUSE session: %s", strerror(-ret));
		goto out_pt;
	}

	if (o->mountpoint)
		ret = serve_mount(o, &st, stats_path);
	else
		ret = serve_vhost_user(o, &st, stats_path, listen_fd);
	listen_fd = -1;     /* serve_vhost_user closed it */

	fuse_session_free(st.session);
out_pt:
	passthrough_free(pt);
out_listen:
	if (listen_fd >= 0 && listen_fd != o->listen_fd)
		close(listen_fd);
out:
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
		print_capabilities();
		return 0;
	case ACTION_STATS:
		return stats_query(opts.stats_query, opts.stats_json, stdout, stderr) ? 1 : 0;
	case ACTION_SERVE:
		break;
	}
	ferry_log_init(opts.log_level, opts.syslog);
	return serve(&opts) ? 1 : 0;
}
