/* Unit test: the Unix-socket listener shared by the vhost-user and stats sockets. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "common/unix_socket.h"
#include "../common/check.h"

static void test_listen(void)
{
	char dir[] = "/tmp/ferry-sock-XXXXXX", path[128], file[128];
	struct stat st;
	int lfd = -1, lfd2 = -1, cfd, afd = -1, ret;

	printf("-- ferry_unix_listen / ferry_unix_accept\n");
	if (!mkdtemp(dir))
		exit(1);
	snprintf(path, sizeof(path), "%s/sock", dir);
	snprintf(file, sizeof(file), "%s/file", dir);
	ret = ferry_unix_listen(path, NULL, &lfd);
	CHECK_MSG(ret == 0 && stat(path, &st) == 0 && S_ISSOCK(st.st_mode) &&
	          (st.st_mode & 0777) == 0600, "listening socket with mode 0600");
	CHECK_MSG(ferry_unix_listen(path, NULL, &lfd2) == -EADDRINUSE,
	          "a socket someone listens on is not removed");
	cfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	{
		struct sockaddr_un a = { .sun_family = AF_UNIX };

		strcpy(a.sun_path, path);
		CHECK_MSG(connect(cfd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
		          ferry_unix_accept(lfd, &afd) == 0 && (fcntl(afd, F_GETFD) & FD_CLOEXEC),
		          "ferry_unix_accept returns a close-on-exec connection");
	}
	close(cfd);
	close(afd);
	close(lfd);
	CHECK_MSG(ferry_unix_listen(path, NULL, &lfd) == 0, "stale socket file replaced");
	close(lfd);
	close(open(file, O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
	CHECK_MSG(ferry_unix_listen(file, NULL, &lfd2) == -EEXIST && stat(file, &st) == 0,
	          "a regular file at the path is left alone");
	CHECK_MSG(ferry_unix_listen(path, "no-such-group-ferry", &lfd2) == -ENOENT,
	          "unknown group refused");
	unlink(path);
	unlink(file);
	rmdir(dir);
}

int main(void)
{
	ferry_log_init(getenv("T_DEBUG") ? LOG_LVL_DEBUG : LOG_LVL_ERROR, false);
	test_listen();
	return check_result();
}
