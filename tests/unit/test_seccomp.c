/* Loads ferryfsd's own seccomp filter in forked children: listed calls work, others kill, log or trap. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/seccomp.h"
#include "../common/check.h"

/* A bad magic number: even if the filter let it through, the kernel
 * refuses it with EINVAL before looking at anything else. */
static long harmless_reboot(void)
{
	return syscall(SYS_reboot, 0, 0, 0, NULL);
}

static void *thread_body(void *arg)
{
	return arg;
}

/* The daemon's everyday calls: files, a thread, stdio. Exit 0 if all work. */
static char scratch[] = "/tmp/ferry-seccomp-XXXXXX";

static int allowed_calls(void)
{
	char buf[4];
	pthread_t th;
	void *res;
	int dir, fd;

	dir = open(scratch, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return 11;
	fd = openat(dir, "f", O_CREAT | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0 || pwrite(fd, "abc", 3, 0) != 3 || pread(fd, buf, 3, 0) != 3 ||
	    fsync(fd) < 0 || ftruncate(fd, 1) < 0)
		return 12;
	close(fd);
	if (mkdirat(dir, "d", 0700) < 0 || renameat(dir, "d", dir, "e") < 0 ||
	    unlinkat(dir, "e", AT_REMOVEDIR) < 0 || unlinkat(dir, "f", 0) < 0)
		return 13;
	close(dir);
	if (pthread_create(&th, NULL, thread_body, scratch) || pthread_join(th, &res) ||
	    res != scratch)
		return 14;
	free(malloc(1 << 20));  /* mmap-sized: malloc's own calls */
	return 0;
}

enum probe { PROBE_ALLOWED, PROBE_REBOOT, PROBE_SOCKET, PROBE_UMOUNT };

/* Forks a child that loads the filter (host FUSE mode's with host_fuse)
 * and runs probe; returns its wait status. */
static int run_child_mode(enum seccomp_mode mode, bool host_fuse, enum probe probe)
{
	pid_t pid = fork();
	int status;

	if (pid < 0) {
		perror("fork");
		exit(1);
	}
	if (pid == 0) {
		scmp_filter_ctx ctx;

		if (seccomp_filter_build(mode, host_fuse, &ctx) < 0 || seccomp_load(ctx) < 0)
			_exit(2);
		switch (probe) {
		case PROBE_ALLOWED:
			_exit(allowed_calls());
		case PROBE_REBOOT:
			/* Survivors report how the call failed. */
			_exit(harmless_reboot() < 0 && errno == EINVAL ? 0 : 3);
		case PROBE_SOCKET:
			_exit(socket(AF_UNIX, SOCK_STREAM, 0) < 0 && errno == EACCES ? 0 : 3);
		case PROBE_UMOUNT:
			/* Nothing is mounted there: allowed, it fails with ENOENT. */
			_exit(umount2("/nonexistent-ferryfs-seccomp", MNT_DETACH) < 0 &&
			      errno == ENOENT ? 0 : 3);
		}
		_exit(4);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			exit(1);
	return status;
}

static int run_child(enum seccomp_mode mode, enum probe probe)
{
	return run_child_mode(mode, false, probe);
}

static bool exited_ok(int status)
{
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static bool killed_by_sigsys(int status)
{
	return WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS;
}

int main(void)
{
	scmp_filter_ctx ctx;
	int status;

	if (!mkdtemp(scratch)) {
		perror("mkdtemp");
		return 1;
	}
	CHECK_MSG(seccomp_filter_build(SECCOMP_NONE, false, &ctx) == -EINVAL,
	          "no filter is built for --seccomp=none");

	status = run_child(SECCOMP_KILL, PROBE_ALLOWED);
	CHECK_MSG(exited_ok(status), "kill: the daemon's everyday calls pass (status 0x%x)", status);

	status = run_child(SECCOMP_KILL, PROBE_REBOOT);
	CHECK_MSG(killed_by_sigsys(status), "kill: reboot(2) kills the process with SIGSYS "
	          "(status 0x%x)", status);

	status = run_child(SECCOMP_TRAP, PROBE_REBOOT);
	CHECK_MSG(killed_by_sigsys(status), "trap: reboot(2) raises SIGSYS (status 0x%x)", status);

	status = run_child(SECCOMP_LOG, PROBE_REBOOT);
	CHECK_MSG(exited_ok(status), "log: reboot(2) is logged and runs (EINVAL) "
	          "(status 0x%x)", status);

	status = run_child(SECCOMP_KILL, PROBE_SOCKET);
	CHECK_MSG(exited_ok(status), "kill: socket(2) fails with EACCES instead of killing "
	          "(status 0x%x)", status);

	/* --mount's filter adds the unmount at stop; vhost-user's has none. */
	status = run_child_mode(SECCOMP_KILL, true, PROBE_UMOUNT);
	CHECK_MSG(exited_ok(status), "kill, host FUSE mode: umount2 is allowed (status 0x%x)", status);
	status = run_child_mode(SECCOMP_KILL, true, PROBE_ALLOWED);
	CHECK_MSG(exited_ok(status), "kill, host FUSE mode: the everyday calls pass (status 0x%x)",
	          status);
	status = run_child(SECCOMP_KILL, PROBE_UMOUNT);
	CHECK_MSG(killed_by_sigsys(status), "kill, vhost-user mode: umount2 kills (status 0x%x)",
	          status);

	rmdir(scratch);
	return check_result();
}
