/* Passthrough backend: the ops table, INIT/DESTROY, and setting the backend up and down. */
#include "backend/passthrough.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "backend/pt_internal.h"
#include "common/log.h"

/* fds the daemon keeps for itself (sockets, eventfds, logs) beyond the
 * guest's budget. */
#define FD_RESERVE 128

/* ---- ops -------------------------------------------------------------- */

/* Whether the id options refuse some guest callers (forbid-guest rules, a
 * strict --uid-map/--gid-map): requests that do not name their caller
 * could not be refused. */
static bool refuses_some_callers(const struct idmap *m)
{
	if (m->strict)
		return true;
	for (unsigned i = 0; i < m->nrules; i++)
		if (m->rules[i].kind == IDMAP_FORBID_GUEST)
			return true;
	return false;
}

int pt_init(void *fs, struct fuse_conn_params *conn)
{
	struct passthrough *pt = fs;

	pt->writeback = conn->flags & FUSE_WRITEBACK_CACHE;
	pt->dont_mask = conn->flags & FUSE_DONT_MASK;
	pt->posix_acl = conn->flags & FUSE_POSIX_ACL;
	pt->submounts = pt->opts.announce_submounts && (conn->flags & FUSE_SUBMOUNTS);
	pt->guest_strips_sgid = conn->proto_minor >= 37;
	pt->guest_kills_acl_sgid = conn->flags & FUSE_SETXATTR_EXT;
	pt->guest_kills_suidgid = conn->flags & FUSE_HANDLE_KILLPRIV_V2;
	/* Requests without their caller's ids (FUSE_ALLOW_IDMAP) cannot be
	 * refused by id, nor can the host judge their writer's group, as
	 * killpriv v2 asks it to (whether a sgid bit without group execute
	 * stays). */
	if (refuses_some_callers(&pt->opts.uid_map) || refuses_some_callers(&pt->opts.gid_map) ||
	    pt->guest_kills_suidgid)
		conn->flags &= ~FUSE_ALLOW_IDMAP;
	pt->callers_unnamed = conn->flags & FUSE_ALLOW_IDMAP;
	return 0;
}

/* The guest unmounted: it names no file any more. A new INIT may follow. */
void pt_destroy(void *fs)
{
	struct passthrough *pt = fs;

	locks_drop_all(pt->locks);
	open_file_remove_all(pt->open_files);
	inode_forget_all(pt->inodes);
}

/* Every fs_ops member as its pt_<member>: each lives in the file of its
 * concern (pt_internal.h declares them), INIT and DESTROY above. getlk
 * and setlk are offered to the guest only with --posix-lock / --flock. */
#define PT_OP(op) .op = pt_##op,
const struct fs_ops passthrough_ops = { FS_OPS(PT_OP) };

/* ---- setup ------------------------------------------------------------ */

static void set_timeout(struct passthrough *pt)
{
	double t = pt->opts.timeout;

	if (t < 0) {
		switch (pt->opts.cache) {
		case CACHE_NEVER:
			t = 0;
			break;
		case CACHE_ALWAYS:
		case CACHE_METADATA:
			t = 86400;
			break;
		case CACHE_AUTO:
		default:
			t = 1;
			break;
		}
	}
	pt->timeout_sec = (uint64_t)t;
	pt->timeout_nsec = (uint32_t)((t - (double)pt->timeout_sec) * 1e9);
}

static long guest_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return 1 << 20;
	if (rl.rlim_cur > 2 * FD_RESERVE)
		return rl.rlim_cur - FD_RESERVE;
	return rl.rlim_cur / 2;
}

/* Also passthrough_new's way out: it takes down what is set up and skips
 * what is not yet. */
void passthrough_free(struct passthrough *pt)
{
	if (!pt)
		return;
	/* First: its jobs (reads, syncs, lock waits) still use io and the
	 * lock table, and hold handles. */
	offload_free(pt->offload);
	io_offload_free(pt->io);
	lock_table_free(pt->locks);
	open_file_table_free(pt->open_files);
	pt_areas_free(pt);
	inode_table_free(pt->inodes);   /* closes the root's fd */
	if (pt->proc_self_fd >= 0)
		close(pt->proc_self_fd);
	pt_close_mount_fds(pt);
	policy_links_free(&pt->read_only_set.links);
	policy_links_free(&pt->hidden_set.links);
	quota_free(pt->quota);
	free(pt->shared_dir);
	free(pt);
}

/* One policy's paths, each found below the share (never through a
 * symlink) and kept by identity, so that a host rename keeps it in force,
 * with the files of its subtrees that have other names. */
static int resolve_policy(struct passthrough *pt, const struct path_list *l, const char *option,
			  int root_fd, struct policy_set *set)
{
	int ret = 0;

	for (unsigned i = 0; i < l->count && ret == 0; i++) {
		const char *why;
		int fd;

		ret = path_policy_resolve(root_fd, l->paths[i], set == &pt->hidden_set,
					  &set->roots[i], &fd, &why);
		if (ret < 0) {
			log_err("--%s=%s: %s (%s)", option, l->paths[i],
				why ? why : "cannot resolve it", strerror(-ret));
			break;
		}
		set->n_roots = i + 1;
		ret = policy_links_collect(&set->links, fd);
		close(fd);
		if (ret < 0)
			log_err("--%s=%s: cannot list the files it holds: %s",
				option, l->paths[i], strerror(-ret));
	}
	policy_links_seal(&set->links);
	return ret;
}

/* The quota's first measure of the tree: what the share holds now,
 * whatever an earlier daemon or the host did. */
static int start_quota(struct passthrough *pt, const struct passthrough_opts *opts, int root_fd)
{
	struct quota_limits lim = { .bytes = opts->quota_bytes, .inodes = opts->quota_inodes };
	struct quota_usage u;
	int ret = quota_new(&pt->quota, &lim, root_fd);

	if (ret < 0) {
		log_err("--quota-bytes/--quota-inodes: cannot measure %s: %s",
			opts->shared_dir, strerror(-ret));
		return ret;
	}
	if (pt->quota) {
		quota_get_usage(pt->quota, &u);
		log_info("quota: %llu bytes in %llu inodes used; limits %llu bytes, %llu inodes "
			 "(0: none)", (unsigned long long)u.used_bytes,
			 (unsigned long long)u.used_inodes, (unsigned long long)u.limit_bytes,
			 (unsigned long long)u.limit_inodes);
	}
	return 0;
}

bool passthrough_quota_usage(struct passthrough *pt, struct quota_usage *out)
{
	if (!pt || !pt->quota)
		return false;
	quota_get_usage(pt->quota, out);
	return true;
}

unsigned long passthrough_root_fs_type(const struct passthrough *pt)
{
	return pt->root_fs_type;
}

int passthrough_new(struct passthrough **out, const struct passthrough_opts *opts)
{
	struct passthrough *pt;
	struct inode_key root_key;
	struct statx stx;
	struct statfs root_fs;
	int root_fd, ret;

	if (!opts || !opts->shared_dir)
		return -EINVAL;
	pt = calloc(1, sizeof(*pt));
	if (!pt)
		return -ENOMEM;
	/* A failure from here on ends in passthrough_free: it takes down what
	 * is set up so far and skips what is not yet. */
	pthread_mutex_init(&pt->mounts_lock, NULL);
	pt->proc_self_fd = -1;
	pt->opts = *opts;
	pt->shared_dir = strdup(opts->shared_dir);
	if (!pt->shared_dir) {
		ret = -ENOMEM;
		goto err;
	}
	pt->opts.shared_dir = pt->shared_dir;
	pt->writeback = opts->writeback;
	set_timeout(pt);
	pt->fds.limit = guest_fd_limit();

	pt->switch_creds = geteuid() == 0;
	if (pt->switch_creds) {
		ret = creds_drop_supplementary_groups();
		if (ret < 0) {
			log_err("cannot drop supplementary groups: %s", strerror(-ret));
			goto err;
		}
		/* Here, before any serving thread starts and before the
		 * daemon gives up CAP_SETPCAP: every thread inherits it. */
		ret = creds_keep_caps_on_switch();
		if (ret < 0) {
			log_err("cannot keep capabilities across id switches "
				"(SECBIT_NO_SETUID_FIXUP): %s", strerror(-ret));
			goto err;
		}
	}

	if (opts->proc_self_fd_given)
		pt->proc_self_fd = opts->proc_self_fd;
	else
		pt->proc_self_fd = open("/proc/self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (pt->proc_self_fd < 0) {
		ret = -errno;
		log_err("cannot open /proc/self/fd: %s", strerror(errno));
		goto err;
	}
	root_fd = open(opts->shared_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0) {
		ret = -errno;
		log_err("cannot open shared dir %s: %s", opts->shared_dir,
			strerror(errno));
		goto err;
	}
	ret = pt_stat_fd(root_fd, &stx);
	if (ret < 0)
		goto err_root;
	if (fstatfs(root_fd, &root_fs) == 0)
		pt->root_fs_type = (unsigned long)root_fs.f_type;
	/* After the shared dir is open: its path may be relative. Threads
	 * that unshare(CLONE_FS) for their umask keep this cwd. */
	if (fchdir(pt->proc_self_fd) < 0) {
		ret = -errno;
		log_err("cannot enter /proc/self/fd: %s", strerror(errno));
		goto err_root;
	}
	ret = pt_check_file_handles(pt, root_fd);
	if (ret < 0)
		goto err_root;
	ret = resolve_policy(pt, &opts->read_only, "read-only", root_fd, &pt->read_only_set);
	if (ret == 0)
		ret = resolve_policy(pt, &opts->hide, "hide", root_fd, &pt->hidden_set);
	if (ret < 0)
		goto err_root;
	pt_key_from_statx(&stx, &root_key);
	ret = inode_table_new(&pt->inodes, &pt->fds, root_fd, &root_key);
	if (ret < 0)
		goto err_root;
	/* The inode table has root_fd now: passthrough_free closes it. */
	pt_start_lazy_handles(pt);
	ret = pt_areas_setup(pt, root_fd);
	if (ret == 0)
		ret = start_quota(pt, opts, root_fd);
	if (ret < 0)
		goto err;
	ret = open_file_table_new(&pt->open_files, pt->inodes, &pt->fds);
	if (ret < 0)
		goto err;
	ret = offload_new(&pt->offload);
	if (ret < 0)
		goto err;
	ret = lock_table_new(&pt->locks, pt->open_files, &pt->fds, pt->proc_self_fd,
			     pt->offload);
	if (ret < 0)
		goto err;
	ret = io_offload_new(&pt->io, pt->open_files, pt->offload);
	if (ret < 0)
		goto err;
	*out = pt;
	return 0;

err_root:
	close(root_fd);
err:
	passthrough_free(pt);
	return ret;
}
