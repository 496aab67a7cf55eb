/* Confines ferryfsd to the shared directory: namespaces + pivot_root (in a user namespace without root), or chroot. */
#include <cap-ng.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/creds.h"
#include "common/log.h"
#include "daemon/sandbox.h"
#include "daemon/sandbox_ranges.h"

static volatile pid_t sandboxed_child;

static int open_proc_self_fd(void)
{
	int fd = open("/proc/self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0) {
		log_err("sandbox: cannot open /proc/self/fd: %s", strerror(errno));
		return -errno;
	}
	return fd;
}

static void forward_signal(int sig)
{
	if (sandboxed_child > 0)
		kill(sandboxed_child, sig);
}

/*
 * The parent left outside the new pid namespace: it only relays stop
 * signals and the exit status, so whoever started ferryfsd (libvirt, a
 * test) sees one process that behaves like the daemon.
 */
static void __attribute__((noreturn)) wait_for_child(pid_t child,
							const sigset_t *unblock)
{
	struct sigaction sa = { .sa_handler = forward_signal };
	int status;

	sandboxed_child = child;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	/* A stop signal that came while we forked was held for this. */
	sigprocmask(SIG_UNBLOCK, unblock, NULL);
	/* It needs no privilege to wait and to signal its own child. */
	capng_clear(CAPNG_SELECT_BOTH);
	if (capng_apply(CAPNG_SELECT_CAPS))
		log_warn("sandbox: the waiting parent keeps its capabilities");
	while (waitpid(child, &status, 0) < 0) {
		if (errno != EINTR) {
			log_err("sandbox: waitpid: %s", strerror(errno));
			_exit(1);
		}
	}
	if (WIFSIGNALED(status)) {
		log_err("sandbox: the daemon was killed by signal %d%s",
			WTERMSIG(status),
			WTERMSIG(status) == SIGSYS ? " (a system call outside the "
			"seccomp allow-list; --seccomp=log names it)" : "");
		_exit(128 + WTERMSIG(status));
	}
	_exit(WEXITSTATUS(status));
}

/*
 * In the child, pid 1 of the new namespace. The order matters: /proc is
 * remounted for the new pid namespace and /proc/self/fd opened before the
 * old root (and /proc with it) goes; the share becomes a mount point so
 * pivot_root can make it "/".
 */
/* What to do when the namespace sandbox cannot be built here. */
#define SANDBOX_ALTERNATIVE " (--sandbox=chroot works without mount namespaces)"

static int enter_new_root(const char *shared_dir, int *proc_self_fd)
{
	int proc_fd = -1, ret;

	/* Our mounts and unmounts must never propagate back to the host;
	 * slave still lets host mounts below the share show up. */
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0) {
		ret = -errno;
		log_err("sandbox: cannot make mounts private: %s%s", strerror(errno),
			SANDBOX_ALTERNATIVE);
		goto err;
	}
	if (mount("proc", "/proc", "proc", MS_NODEV | MS_NOEXEC | MS_NOSUID | MS_RELATIME,
		  NULL) < 0) {
		ret = -errno;
		log_err("sandbox: cannot mount /proc: %s%s", strerror(errno),
			SANDBOX_ALTERNATIVE);
		goto err;
	}
	proc_fd = open_proc_self_fd();
	if (proc_fd < 0) {
		ret = proc_fd;
		goto err;
	}
	if (mount(shared_dir, shared_dir, NULL, MS_BIND | MS_REC, NULL) < 0) {
		ret = -errno;
		log_err("sandbox: cannot bind-mount %s: %s%s", shared_dir, strerror(errno),
			SANDBOX_ALTERNATIVE);
		goto err_proc;
	}
	if (chdir(shared_dir) < 0) {
		ret = -errno;
		log_err("sandbox: cannot enter %s: %s", shared_dir, strerror(errno));
		goto err_proc;
	}
	/* pivot_root(".", ".") stacks the old root on the new one; detaching
	 * the top of "." then removes every host path from view. */
	if (syscall(SYS_pivot_root, ".", ".") < 0) {
		ret = -errno;
		log_err("sandbox: pivot_root into %s: %s%s", shared_dir, strerror(errno),
			SANDBOX_ALTERNATIVE);
		goto err_proc;
	}
	if (umount2(".", MNT_DETACH) < 0 || chdir("/") < 0) {
		ret = -errno;
		log_err("sandbox: cannot drop the old root: %s", strerror(errno));
		goto err_proc;
	}
	*proc_self_fd = proc_fd;
	return 0;

err_proc:
	close(proc_fd);
err:
	return ret;
}

/* ---- the user namespace of an unprivileged start ----------------------- */

/* Where newuidmap and newgidmap (Debian's uidmap package) are looked for. */
#define NEWUIDMAP "/usr/bin/newuidmap"
#define NEWGIDMAP "/usr/bin/newgidmap"
#define NOT_WITHOUT_USERNS " (user namespaces may be off here: sysctl " \
	"user.max_user_namespaces, kernel.unprivileged_userns_clone, an LSM; " \
	"--sandbox=none runs without a sandbox)"

static int write_proc_file(const char *path, const char *text)
{
	size_t len = strlen(text);
	int fd = open(path, O_WRONLY | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, text, len) != (ssize_t)len)
		ret = -errno;
	close(fd);
	return ret;
}

/* The single-id map of a start without --uid-map: the user is root inside,
 * and setgroups must be denied before an unprivileged gid_map is written. */
static int map_single_id(uid_t uid, gid_t gid)
{
	char line[64];
	int ret;

	snprintf(line, sizeof(line), "0 %u 1\n", (unsigned)uid);
	ret = write_proc_file("/proc/self/uid_map", line);
	if (ret)
		goto err;
	ret = write_proc_file("/proc/self/setgroups", "deny\n");
	if (ret)
		goto err;
	snprintf(line, sizeof(line), "0 %u 1\n", (unsigned)gid);
	ret = write_proc_file("/proc/self/gid_map", line);
	if (ret)
		goto err;
	creds_use_single_id();
	log_info("sandbox: user namespace with one id: uid %u and gid %u are "
		 "root inside; what the guest creates belongs to them and a "
		 "guest chown to another id fails (--uid-map/--gid-map map "
		 "ranges, docs/security.md)", (unsigned)uid, (unsigned)gid);
	return 0;
err:
	log_err("sandbox: cannot map uid %u gid %u into the user namespace: %s",
		(unsigned)uid, (unsigned)gid, strerror(-ret));
	return ret;
}

/* argv for newuidmap/newgidmap: PID then "NS HOST COUNT" per range. */
#define MAP_ARGV_MAX (2 + 3 * IDMAP_MAX_RULES + 1)
struct map_argv {
	char *argv[MAP_ARGV_MAX];
	char words[MAP_ARGV_MAX][24];
};

static void map_argv_build(struct map_argv *a, const char *prog, pid_t pid,
			   const struct idmap *m)
{
	unsigned n = 0;

	a->argv[n++] = (char *)prog;
	snprintf(a->words[n], sizeof(a->words[n]), "%d", (int)pid);
	a->argv[n] = a->words[n];
	n++;
	for (unsigned i = 0; i < m->nrules; i++) {
		const struct idmap_rule *r = &m->rules[i];

		if (r->kind != IDMAP_GUEST)
			continue;
		snprintf(a->words[n], sizeof(a->words[n]), "%" PRIu32, r->from);
		snprintf(a->words[n + 1], sizeof(a->words[n + 1]), "%" PRIu32, r->to);
		snprintf(a->words[n + 2], sizeof(a->words[n + 2]), "%" PRIu64, r->count);
		for (unsigned k = 0; k < 3; k++)
			a->argv[n + k] = a->words[n + k];
		n += 3;
	}
	a->argv[n] = NULL;
}

/* Runs a map helper for pid and waits: 0, or -EPERM when it failed. */
static int run_map_helper(struct map_argv *a)
{
	pid_t p = fork();
	int status;

	if (p < 0)
		return -errno;
	if (p == 0) {
		execv(a->argv[0], a->argv);
		fprintf(stderr, "ferryfsd: sandbox: cannot run %s: %s (Debian's "
			"uidmap package has it)\n", a->argv[0], strerror(errno));
		_exit(127);
	}
	while (waitpid(p, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EPERM;
}

/*
 * Unshares the user namespace while a helper child, still outside it,
 * waits on the pipe go to run newuidmap and newgidmap on us. Closes both
 * ends of go.
 */
static int unshare_with_map_helper(int go[2], struct map_argv *uargs,
				   struct map_argv *gargs)
{
	pid_t helper = fork();
	int status, ret = helper < 0 ? -errno : 0;
	char c = 0;

	if (helper == 0) {
		close(go[1]);
		if (read(go[0], &c, 1) != 1)
			_exit(1);
		_exit(run_map_helper(uargs) || run_map_helper(gargs) ? 1 : 0);
	}
	close(go[0]);
	if (ret)
		goto out;
	if (unshare(CLONE_NEWUSER) < 0) {
		ret = -errno;
		log_err("sandbox: cannot create a user namespace: %s" NOT_WITHOUT_USERNS,
			strerror(-ret));
	} else if (write(go[1], &c, 1) != 1) {
		ret = -errno;
	}
	/* Without the byte (unshare failed) the helper just exits. */
	close(go[1]);
	go[1] = -1;
	while (waitpid(helper, &status, 0) < 0) {
		if (errno != EINTR) {
			ret = ret ? ret : -errno;
			goto out;
		}
	}
	if (ret == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
		ret = -EPERM;
		log_err("sandbox: %s or %s refused the --uid-map/--gid-map ranges "
			"(its message is above): the host ids must be the user's own "
			"or in its /etc/subuid and /etc/subgid ranges", NEWUIDMAP,
			NEWGIDMAP);
	}
out:
	if (go[1] >= 0)
		close(go[1]);
	return ret;
}

/*
 * --uid-map/--gid-map ranges: newuidmap and newgidmap, setuid helpers that
 * check them against /etc/subuid and /etc/subgid, write the maps of a
 * process that is already in its new user namespace. A child still outside
 * does it for us, as the Rust virtiofsd does.
 */
static int map_ranges(const struct idmap *uid_map, const struct idmap *gid_map)
{
	struct map_argv *uargs = calloc(1, sizeof(*uargs));
	struct map_argv *gargs = calloc(1, sizeof(*gargs));
	int go[2], ret;

	if (!uargs || !gargs) {
		ret = -ENOMEM;
		goto out;
	}
	map_argv_build(uargs, NEWUIDMAP, getpid(), uid_map);
	map_argv_build(gargs, NEWGIDMAP, getpid(), gid_map);
	if (pipe2(go, O_CLOEXEC) < 0) {
		ret = -errno;
		goto out;
	}
	ret = unshare_with_map_helper(go, uargs, gargs);
	if (ret == 0)
		log_info("sandbox: user namespace with the --uid-map/--gid-map ranges");
out:
	free(uargs);
	free(gargs);
	return ret;
}

/*
 * The maps are written; the daemon serves as uid and gid 0 of its
 * namespace. When 0 inside is not the user's own id (libvirt's
 * <idmap><uid start='0' target='100000' .../>) the process still shows as
 * the overflow id there: it switches to 0 with the CAP_SETUID and
 * CAP_SETGID that creating the namespace gave it, so what the guest's root
 * creates belongs to the host id 0 maps to.
 */
static int become_namespace_root(uid_t own, uint32_t root_uid, uint32_t root_gid)
{
	if (getuid() == 0 && getgid() == 0)
		return 0;
	if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0) {
		int ret = -errno;

		log_err("sandbox: cannot become uid/gid 0 of the user namespace: %s",
			strerror(-ret));
		return ret;
	}
	log_info("sandbox: 0 inside is host uid %u gid %u, not your own uid %u: "
		 "files of yours in the share show as %u to the guest",
		 (unsigned)root_uid, (unsigned)root_gid, (unsigned)own,
		 IDMAP_OVERFLOW_ID);
	return 0;
}

/* Inside the namespace the guest's ids are already the namespace's: the
 * ranges become identities, and stay strict (an id outside them is still
 * refused with EPERM before any switch). */
static void map_to_identity(struct idmap *m)
{
	for (unsigned i = 0; i < m->nrules; i++) {
		struct idmap_rule *r = &m->rules[i];

		if (r->kind == IDMAP_GUEST)
			r->to = r->from;
		else
			r->from = r->to;
	}
}

/*
 * An unprivileged start: a user namespace in which the user is root (full
 * capabilities over what the namespace owns, nothing more on the host), so
 * the mount, pid and net namespaces can be made as root makes them.
 */
static int enter_user_namespace(struct idmap *uid_map, struct idmap *gid_map)
{
	uid_t uid = getuid();
	gid_t gid = getgid();
	uint32_t root_uid, root_gid;
	int ret;

	/* --uid-map/--gid-map make a map strict; --translate-* rules alone
	 * stay translations inside the one-id namespace. */
	if (!uid_map->strict && !gid_map->strict) {
		if (unshare(CLONE_NEWUSER) < 0) {
			ret = -errno;
			log_err("sandbox: cannot create a user namespace: %s"
				NOT_WITHOUT_USERNS, strerror(errno));
			return ret;
		}
		return map_single_id(uid, gid);
	}
	ret = sandbox_ranges_check(uid_map, "uid-map", uid, &root_uid);
	if (ret == 0)
		ret = sandbox_ranges_check(gid_map, "gid-map", gid, &root_gid);
	if (ret == 0)
		ret = map_ranges(uid_map, gid_map);
	if (ret == 0)
		ret = become_namespace_root(uid, root_uid, root_gid);
	if (ret)
		return ret;
	map_to_identity(uid_map);
	map_to_identity(gid_map);
	return 0;
}

static int enter_namespaces(const char *shared_dir, int *proc_self_fd)
{
	sigset_t stops;
	pid_t child;
	int ret;

	/* CLONE_NEWPID applies to children only, hence the fork. */
	if (unshare(CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET) < 0) {
		log_err("sandbox: cannot create namespaces: %s (--sandbox=chroot "
			"works where namespaces are not allowed)", strerror(errno));
		return -errno;
	}
	/*
	 * Stop signals wait while we fork: one that reached the parent
	 * before it could relay would be lost, and the child, pid 1 of its
	 * namespace, would serve on with nobody able to stop it but SIGKILL.
	 */
	sigemptyset(&stops);
	sigaddset(&stops, SIGTERM);
	sigaddset(&stops, SIGINT);
	sigaddset(&stops, SIGHUP);
	sigprocmask(SIG_BLOCK, &stops, NULL);
	child = fork();
	if (child < 0) {
		ret = -errno;
		sigprocmask(SIG_UNBLOCK, &stops, NULL);
		log_err("sandbox: fork: %s", strerror(-ret));
		return ret;
	}
	if (child > 0)
		wait_for_child(child, &stops);
	sigprocmask(SIG_UNBLOCK, &stops, NULL);
	/* A daemon outliving its parent would be a stray server. */
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0)
		return -errno;
	return enter_new_root(shared_dir, proc_self_fd);
}

static int enter_chroot(const char *shared_dir, int *proc_self_fd)
{
	int proc_fd = open_proc_self_fd(), ret;

	if (proc_fd < 0)
		return proc_fd;
	if (chdir(shared_dir) < 0 || chroot(".") < 0 || chdir("/") < 0) {
		ret = -errno;
		log_err("sandbox: chroot into %s: %s (--sandbox=none runs without "
			"one)", shared_dir, strerror(errno));
		close(proc_fd);
		return ret;
	}
	*proc_self_fd = proc_fd;
	return 0;
}

int sandbox_enter(enum sandbox_mode mode, const char *shared_dir,
		  struct idmap *uid_map, struct idmap *gid_map,
		  int *proc_self_fd, const char **root)
{
	int ret;

	*proc_self_fd = -1;
	*root = shared_dir;
	if (mode == SANDBOX_NONE)
		return 0;
	if (geteuid() != 0 && mode == SANDBOX_CHROOT) {
		log_err("sandbox: --sandbox=chroot needs root; without root the "
			"default --sandbox=namespace makes a user namespace, and "
			"--sandbox=none runs without a sandbox");
		return -EPERM;
	}
	if (geteuid() != 0) {
		ret = enter_user_namespace(uid_map, gid_map);
		if (ret)
			return ret;
	}
	if (mode == SANDBOX_NAMESPACE)
		ret = enter_namespaces(shared_dir, proc_self_fd);
	else
		ret = enter_chroot(shared_dir, proc_self_fd);
	if (ret == 0)
		*root = "/";
	return ret;
}
