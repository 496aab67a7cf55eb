/* Writing a whole buffer to an fd: short writes and EINTR retried, the rest of the error returned. */
#ifndef FERRY_FD_IO_H
#define FERRY_FD_IO_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Writes all len bytes of buf to fd in calls of at most 1 MiB (so that a big
 * buffer never needs one huge syscall); returns 0 or -errno. With is_socket
 * the calls are send(MSG_NOSIGNAL), so that a peer that hangs up early gives
 * -EPIPE rather than SIGPIPE; otherwise write(2), which works on any fd.
 */
int ferry_write_all(int fd, const void *buf, size_t len, bool is_socket);

#endif
