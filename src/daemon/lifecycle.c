/* The daemon process around the service: --daemonize and its ready byte, stdio, the open-file limit. */
#include "daemon/lifecycle.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/log.h"
#include "daemon/fork_pipe.h"

int raise_nofile_limit(const struct ferry_options *o)
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

/* *out = path made absolute (NULL for NULL); the caller frees it. */
int absolute_path(const char *path, char **out)
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

/*
 * --daemonize: forks; the parent waits until the child calls daemon_ready()
 * (it listens or is mounted), then exits 0, or 1 if the child failed first,
 * so whatever is started after the parent returns can connect. Runs before
 * the backend is set up: threads do not follow fork, and the backend's
 * /proc/self/fd handle would stay the parent's (the guest then saw an empty
 * share once the parent exited).
 */
int daemonize(int *ready_fd)
{
	pid_t pid = fork_with_pipe(false, ready_fd);
	char status;

	if (pid < 0)
		return pid;
	if (pid > 0) {
		if (read(*ready_fd, &status, 1) == 1 && status == 0)
			_exit(0);
		fprintf(stderr, "ferryfsd: the background daemon failed to start "
			"(its messages are above, or in syslog with --syslog)\n");
		_exit(1);
	}
	setsid();
	return 0;
}

/* Before the sandbox: its relay process outside keeps whatever stdio it
 * has, and the caller's output must not stay open for the daemon's life. */
void daemon_detach_stdio(void)
{
	int null_fd = open("/dev/null", O_RDWR);

	if (null_fd < 0)
		return;
	dup2(null_fd, STDIN_FILENO);
	dup2(null_fd, STDOUT_FILENO);
	dup2(null_fd, STDERR_FILENO);
	if (null_fd > STDERR_FILENO)
		close(null_fd);
}

/* Leaves the working directory (relative paths are resolved by now) and
 * lets the waiting parent exit. */
void daemon_ready(int ready_fd)
{
	char ok = 0;

	if (ready_fd < 0)
		return;
	if (chdir("/") < 0)
		log_warn("chdir /: %s", strerror(errno));
	if (write(ready_fd, &ok, 1) != 1)
		log_warn("could not tell the parent we are ready: %s", strerror(errno));
	close(ready_fd);
}
