/* Unit tests and the vhost-user fuzzer: the front-end end of a vhost-user socket, on the public wire header. */
#include "vu_client.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

ssize_t vu_client_send_raw(int fd, const struct vu_msg_hdr *h, const void *payload, size_t len,
			   const int *fds, unsigned nfds, int msg_flags)
{
	union {
		char buf[CMSG_SPACE(VU_CLIENT_MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} control;
	struct iovec iov[2] = {
		{ .iov_base = (void *)h, .iov_len = sizeof(*h) },
		{ .iov_base = (void *)payload, .iov_len = len },
	};
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };

	if (nfds > VU_CLIENT_MAX_FDS) {
		errno = EINVAL;
		return -1;
	}
	if (nfds) {
		struct cmsghdr *c;

		memset(&control, 0, sizeof(control));
		mh.msg_control = control.buf;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	}
	return sendmsg(fd, &mh, MSG_NOSIGNAL | msg_flags);
}

int vu_client_send(int fd, uint32_t req, uint32_t flags, const void *payload, uint32_t size,
		   const int *fds, unsigned nfds)
{
	struct vu_msg_hdr h = { req, VU_VERSION | flags, size };

	return vu_client_send_raw(fd, &h, payload, size, fds, nfds, 0) ==
	       (ssize_t)(sizeof(h) + size) ? 0 : -1;
}

int vu_client_recv(int fd, struct vu_msg_hdr *h, void *payload, size_t max, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	ssize_t n;

	if (poll(&p, 1, timeout_ms) <= 0)
		return -ETIMEDOUT;
	n = recv(fd, h, sizeof(*h), MSG_WAITALL);
	if (n == 0 || (n < 0 && errno == ECONNRESET))
		return -ECONNRESET;
	if (n != sizeof(*h) || h->size > max)
		return -EPROTO;
	if (h->size && recv(fd, payload, h->size, MSG_WAITALL) != h->size)
		return -EPROTO;
	return 0;
}
