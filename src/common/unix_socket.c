/* Unix-socket listeners for the daemon's sockets: stale socket files, modes, groups, accept. */
#include "common/unix_socket.h"

#include <errno.h>
#include <grp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"

static int lookup_group(const char *name, gid_t *gid)
{
	struct group grp, *found = NULL;
	size_t len = 16384;
	char *buf;
	int ret;

	buf = malloc(len);
	if (!buf)
		return -ENOMEM;
	ret = getgrnam_r(name, &grp, buf, len, &found);
	if (ret != 0) {
		ret = -ret;
		goto out;
	}
	if (!found) {
		log_err("group %s does not exist", name);
		ret = -ENOENT;
		goto out;
	}
	*gid = grp.gr_gid;
	ret = 0;
out:
	free(buf);
	return ret;
}

/* A socket file nobody listens on is left over from a dead daemon. */
static int remove_stale_socket(const char *path, const struct sockaddr_un *addr)
{
	struct stat st;
	int fd, ret;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode)) {
		log_err("%s exists and is not a socket", path);
		return -EEXIST;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	ret = connect(fd, (const struct sockaddr *)addr, sizeof(*addr));
	close(fd);
	if (ret == 0) {
		log_err("%s: another process is listening there", path);
		return -EADDRINUSE;
	}
	if (unlink(path) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

int ferry_unix_listen(const char *path, const char *group, int *listen_fd)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	gid_t gid = 0;
	int fd, ret;

	if (strlen(path) >= sizeof(addr.sun_path))
		return -ENAMETOOLONG;
	memcpy(addr.sun_path, path, strlen(path) + 1);
	if (group) {
		ret = lookup_group(group, &gid);
		if (ret < 0)
			return ret;
	}
	ret = remove_stale_socket(path, &addr);
	if (ret < 0)
		return ret;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (const struct sockaddr *)&addr, sizeof(addr)) < 0) {
		ret = -errno;
		log_err("bind %s: %s", path, strerror(errno));
		goto err_close;
	}
	/* Permissions are fixed before listen(): until then nobody can
	 * connect, so the umask-derived mode is never usable. */
	if (group && chown(path, (uid_t)-1, gid) < 0) {
		ret = -errno;
		log_err("chown %s: %s", path, strerror(errno));
		goto err_unlink;
	}
	if (chmod(path, group ? 0660 : 0600) < 0) {
		ret = -errno;
		log_err("chmod %s: %s", path, strerror(errno));
		goto err_unlink;
	}
	if (listen(fd, 1) < 0) {
		ret = -errno;
		goto err_unlink;
	}
	*listen_fd = fd;
	return 0;

err_unlink:
	unlink(path);
err_close:
	close(fd);
	return ret;
}

int ferry_unix_accept(int listen_fd, int *conn_fd)
{
	int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);

	if (fd < 0)
		return -errno;
	*conn_fd = fd;
	return 0;
}
