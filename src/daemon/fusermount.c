/* Host FUSE mode without root: fusermount3 mounts and hands back the /dev/fuse fd. */
#include "daemon/fusermount.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "daemon/fork_pipe.h"

/* The fd fusermount3 sends over the socket (its "_FUSE_COMMFD" protocol,
 * as libfuse receives it). */
static int receive_fd(int sock, int *fd)
{
	char byte;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	union {
		struct cmsghdr hdr;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf),
	};
	struct cmsghdr *c;
	ssize_t n;

	do {
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	c = CMSG_FIRSTHDR(&msg);
	/* Nothing sent: fusermount3 refused (and said why) or is missing. */
	if (n == 0 || !c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
		return -EPERM;
	memcpy(fd, CMSG_DATA(c), sizeof(int));
	return 0;
}

/*
 * A child that outlives the daemon by a moment: it waits until the pipe's
 * write end (the daemon's keep_fd) closes, i.e. the daemon exited however
 * it did, then detaches the mount with fusermount3 -u -z, as an unmount
 * by root's daemon would. Stop signals sent to the whole group (a ^C) must
 * not end it first.
 */
static int start_unmount_watcher(const char *mountpoint, int fuse_fd, int *keep_fd)
{
	int fd;
	pid_t pid = fork_with_pipe(true, &fd);
	char c;

	if (pid < 0)
		return pid;
	if (pid > 0) {
		*keep_fd = fd;
		return 0;
	}
	/* The watcher must not keep the FUSE connection alive itself. */
	close(fuse_fd);
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	while (read(fd, &c, 1) < 0 && errno == EINTR)
		;
	execlp("fusermount3", "fusermount3", "-u", "-z", "-q", "--",
	       mountpoint, (char *)NULL);
	_exit(127);
}

int fusermount_mount(const char *mountpoint, const char *source, int *fuse_fd,
		     int *keep_fd)
{
	char opts[PATH_MAX + 128], commfd[16];
	int sv[2], status, ret;
	pid_t pid;

	/* A ',' would split the option list; then the name is only "ferryfs". */
	snprintf(opts, sizeof(opts), "default_permissions,nosuid,nodev,"
		 "subtype=ferryfs,fsname=%s",
		 strpbrk(source, ",\\") ? "ferryfs" : source);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		ret = -errno;
		goto out;
	}
	if (pid == 0) {
		/* The one fd fusermount3 needs, without CLOEXEC. */
		int fd = dup(sv[1]);

		snprintf(commfd, sizeof(commfd), "%d", fd);
		if (fd < 0 || setenv("_FUSE_COMMFD", commfd, 1) < 0)
			_exit(127);
		execlp("fusermount3", "fusermount3", "-o", opts, "--", mountpoint,
		       (char *)NULL);
		fprintf(stderr, "ferryfsd: cannot run fusermount3: %s (Debian's "
			"fuse3 package has it)\n", strerror(errno));
		_exit(127);
	}
	close(sv[1]);
	sv[1] = -1;
	ret = receive_fd(sv[0], fuse_fd);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (ret) {
		log_err("--mount: fusermount3 did not mount %s (its message is "
			"above)", mountpoint);
		goto out;
	}
	ret = start_unmount_watcher(mountpoint, *fuse_fd, keep_fd);
	if (ret) {
		log_err("--mount: no process to unmount %s at exit: %s",
			mountpoint, strerror(-ret));
		close(*fuse_fd);
		*fuse_fd = -1;
	}
out:
	close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	return ret;
}
