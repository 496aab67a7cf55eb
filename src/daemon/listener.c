/* The vhost-user socket: listened on (or inherited) before the sandbox, with the pid file locked beside it. */
#include "daemon/listener.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/unix_socket.h"
#include "daemon/lifecycle.h"

/*
 * Locks PID_PATH (the socket path plus ".pid") for the daemon's lifetime, as
 * the Rust virtiofsd does. It must happen before the socket is touched:
 * probing a socket another daemon listens on would be taken as its frontend,
 * and unlinking it would orphan that daemon.
 */
static int lock_pid_file(const char *pid_path, const char *socket_path,
			 int *pid_fd)
{
	struct stat held, named;
	char owner[32] = "";
	ssize_t n;
	int fd, ret;

	for (;;) {
		fd = open(pid_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0) {
			ret = -errno;
			log_err("pid file %s (beside --socket-path): %s; its "
				"directory must exist and be writable", pid_path,
				strerror(-ret));
			goto out;
		}
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			ret = -errno;
			if (ret != -EWOULDBLOCK) {
				log_err("cannot lock pid file %s: %s", pid_path,
					strerror(-ret));
				goto out_close;
			}
			n = pread(fd, owner, sizeof(owner) - 1, 0);
			owner[n > 0 ? n : 0] = '\0';
			owner[strcspn(owner, "\n")] = '\0';
			log_err("another ferryfsd (pid %s) is serving %s: its pid file "
				"%s is locked; not touching the socket (stop that "
				"daemon or choose another --socket-path)",
				owner[0] ? owner : "unknown", socket_path, pid_path);
			ret = -EADDRINUSE;
			goto out_close;
		}
		/* A daemon that exits unlinks the file while holding the lock;
		 * a lock won on that unlinked inode guards nothing. */
		if (fstat(fd, &held) == 0 && stat(pid_path, &named) == 0 &&
		    held.st_dev == named.st_dev && held.st_ino == named.st_ino)
			break;
		close(fd);
	}
	*pid_fd = fd;
	return 0;

out_close:
	close(fd);
out:
	return ret;
}

static int write_pid(int pid_fd)
{
	char buf[32];
	int len = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());

	if (ftruncate(pid_fd, 0) < 0 || pwrite(pid_fd, buf, len, 0) != len)
		return -errno;
	return 0;
}

/* An inherited fd must already be a listening stream socket: accepting on
 * anything else would fail later with a message that hides the cause. */
static int check_inherited_socket(int fd)
{
	int type = 0, listening = 0;
	socklen_t len = sizeof(type);

	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0)
		return -errno;
	len = sizeof(listening);
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) < 0)
		return -errno;
	if (type != SOCK_STREAM || !listening)
		return -EINVAL;
	/* Inherited without CLOEXEC; nothing we start should keep it. */
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		return -errno;
	return 0;
}

/* The vhost-user socket is set up before the sandbox hides host paths. */
int listen_vhost_user(const struct ferry_options *o, struct vu_listener *l)
{
	int ret;

	if (o->listen_fd >= 0) {
		l->fd = o->listen_fd;
		l->inherited = true;
		snprintf(l->where, sizeof(l->where), "%s fd %d",
			 o->socket_activated ? "the socket-activated" : "the inherited",
			 l->fd);
		ret = check_inherited_socket(l->fd);
		if (ret)
			log_err("%s is not a listening stream socket (%s): %s",
				l->where, ret == -EINVAL ? "wrong type or not listening" :
				strerror(-ret), o->socket_activated ?
				"the socket unit needs one ListenStream=" :
				"--fd=N must name a socket the caller listens on");
		return ret;
	}
	ret = absolute_path(o->socket_path, &l->socket_path);
	if (!ret && asprintf(&l->pid_path, "%s.pid", l->socket_path) < 0) {
		l->pid_path = NULL;
		ret = -ENOMEM;
	}
	if (ret) {
		log_err("--socket-path: %s", strerror(-ret));
		return ret;
	}
	ret = lock_pid_file(l->pid_path, l->socket_path, &l->pid_fd);
	if (ret)
		return ret;
	ret = ferry_unix_listen(l->socket_path, o->socket_group, &l->fd);
	if (ret) {
		log_err("cannot listen on %s: %s (--socket-path needs an "
			"existing, writable directory)", l->socket_path,
			strerror(-ret));
		/* The pid file is ours, the socket is not. */
		free(l->socket_path);
		l->socket_path = NULL;
		return ret;
	}
	ret = write_pid(l->pid_fd);
	if (ret)
		log_err("cannot write pid file %s: %s", l->pid_path, strerror(-ret));
	return ret;
}

/* Ends what listen_vhost_user began; the socket and pid file are removed
 * only when this daemon created them and still sees the host's paths (in a
 * sandbox the same path would name a file in the share). */
void unlisten_vhost_user(struct vu_listener *l, bool paths_reachable)
{
	if (l->fd >= 0 && !l->inherited)
		close(l->fd);
	l->fd = -1;
	/* unlinkat: the seccomp filter allows it, not unlink. */
	if (paths_reachable && l->socket_path && l->pid_fd >= 0)
		unlinkat(AT_FDCWD, l->socket_path, 0);
	/* Unlinked while still locked, so no other daemon can hold a lock on
	 * this file's inode meanwhile (see lock_pid_file). */
	if (l->pid_fd >= 0) {
		if (paths_reachable)
			unlinkat(AT_FDCWD, l->pid_path, 0);
		close(l->pid_fd);
		l->pid_fd = -1;
	}
	free(l->pid_path);
	free(l->socket_path);
	l->pid_path = l->socket_path = NULL;
}
