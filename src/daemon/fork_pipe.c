/* A fork where one side waits on a pipe until the other writes a byte or exits (fork_pipe.h). */
#include "daemon/fork_pipe.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

pid_t fork_with_pipe(bool child_waits, int *fd)
{
	int p[2];
	pid_t pid;
	bool waits;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		pid = -errno;
		close(p[0]);
		close(p[1]);
		return pid;
	}
	/* Each side closes the end it does not use, so that the waiter sees
	 * EOF once the other side is gone. */
	waits = (pid == 0) == child_waits;
	close(p[waits ? 1 : 0]);
	*fd = p[waits ? 0 : 1];
	return pid;
}
