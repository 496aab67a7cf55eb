/* Confines ferryfsd to the shared directory: namespaces + pivot_root, or chroot. */
#include <cap-ng.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "daemon/sandbox.h"

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
		  int *proc_self_fd, const char **root)
{
	int ret;

	*proc_self_fd = -1;
	*root = shared_dir;
	if (mode == SANDBOX_NONE)
		return 0;
	if (geteuid() != 0) {
		log_err("sandbox: --sandbox=%s needs root; --sandbox=none runs "
			"without one", mode == SANDBOX_CHROOT ? "chroot" : "namespace");
		return -EPERM;
	}
	if (mode == SANDBOX_NAMESPACE)
		ret = enter_namespaces(shared_dir, proc_self_fd);
	else
		ret = enter_chroot(shared_dir, proc_self_fd);
	if (ret == 0)
		*root = "/";
	return ret;
}
