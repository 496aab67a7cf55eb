/* Writing a whole buffer to an fd: short writes and EINTR retried, the rest of the error returned. */
#include "common/fd_io.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#define WRITE_CHUNK ((size_t)1 << 20)

int ferry_write_all(int fd, const void *buf, size_t len, bool is_socket)
{
	const unsigned char *p = buf;

	while (len) {
		size_t chunk = len < WRITE_CHUNK ? len : WRITE_CHUNK;
		ssize_t n = is_socket ? send(fd, p, chunk, MSG_NOSIGNAL)
				      : write(fd, p, chunk);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}
