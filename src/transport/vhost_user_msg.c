/* vhost-user message I/O: one message in with its fds, one reply out, header and sizes checked. */
#include "transport/vhost_user_msg.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"

const char *vu_request_name(uint32_t req)
{
	static const char *const names[] = {
		[VU_GET_FEATURES] = "GET_FEATURES",
		[VU_SET_FEATURES] = "SET_FEATURES",
		[VU_SET_OWNER] = "SET_OWNER",
		[VU_RESET_OWNER] = "RESET_OWNER",
		[VU_SET_MEM_TABLE] = "SET_MEM_TABLE",
		[VU_SET_LOG_BASE] = "SET_LOG_BASE",
		[VU_SET_LOG_FD] = "SET_LOG_FD",
		[VU_SET_VRING_NUM] = "SET_VRING_NUM",
		[VU_SET_VRING_ADDR] = "SET_VRING_ADDR",
		[VU_SET_VRING_BASE] = "SET_VRING_BASE",
		[VU_GET_VRING_BASE] = "GET_VRING_BASE",
		[VU_SET_VRING_KICK] = "SET_VRING_KICK",
		[VU_SET_VRING_CALL] = "SET_VRING_CALL",
		[VU_SET_VRING_ERR] = "SET_VRING_ERR",
		[VU_GET_PROTOCOL_FEATURES] = "GET_PROTOCOL_FEATURES",
		[VU_SET_PROTOCOL_FEATURES] = "SET_PROTOCOL_FEATURES",
		[VU_GET_QUEUE_NUM] = "GET_QUEUE_NUM",
		[VU_SET_VRING_ENABLE] = "SET_VRING_ENABLE",
		[VU_SET_BACKEND_REQ_FD] = "SET_BACKEND_REQ_FD",
		[VU_GET_CONFIG] = "GET_CONFIG",
		[VU_SET_CONFIG] = "SET_CONFIG",
		[VU_GET_MAX_MEM_SLOTS] = "GET_MAX_MEM_SLOTS",
		[VU_ADD_MEM_REG] = "ADD_MEM_REG",
		[VU_REM_MEM_REG] = "REM_MEM_REG",
		[VU_SET_DEVICE_STATE_FD] = "SET_DEVICE_STATE_FD",
		[VU_CHECK_DEVICE_STATE] = "CHECK_DEVICE_STATE",
	};

	if (req < sizeof(names) / sizeof(names[0]) && names[req])
		return names[req];
	return "unknown";
}

void vu_msg_close_fds(struct vu_msg *m)
{
	for (unsigned i = 0; i < m->nfds; i++) {
		/* -1 where a handler took the fd (vu_msg_take_fd). */
		if (m->fds[i] >= 0)
			close(m->fds[i]);
		m->fds[i] = -1;
	}
	m->nfds = 0;
}

/* Reads exactly len bytes. 0, or -ECONNRESET at end of stream. */
static int read_full(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ECONNRESET;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * Receives one message with its fds. 1 on success, 0 when the frontend
 * went away between messages, -errno otherwise. On any failure no fd is
 * left open.
 */
int vu_msg_recv(int conn_fd, struct vu_msg *m)
{
	union {
		char buf[CMSG_SPACE(VU_MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} control;
	struct iovec iov = { .iov_base = &m->hdr, .iov_len = sizeof(m->hdr) };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = control.buf, .msg_controllen = sizeof(control.buf),
	};
	struct cmsghdr *cmsg;
	bool too_many_fds = false;
	ssize_t n;
	int ret;

	m->nfds = 0;
	do {
		n = recvmsg(conn_fd, &mh, MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == ECONNRESET ? 0 : -errno;
	if (n == 0)
		return 0;

	for (cmsg = CMSG_FIRSTHDR(&mh); cmsg; cmsg = CMSG_NXTHDR(&mh, cmsg)) {
		size_t cnt;

		if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS)
			continue;
		cnt = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < cnt; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
			if (m->nfds < VU_MAX_FDS) {
				m->fds[m->nfds++] = fd;
			} else {
				close(fd);
				too_many_fds = true;
			}
		}
	}
	/* The kernel drops fds that did not fit; the message is unusable. */
	if (too_many_fds || (mh.msg_flags & MSG_CTRUNC)) {
		log_err("vhost-user message with more than %d fds", VU_MAX_FDS);
		ret = -EPROTO;
		goto err_fds;
	}
	if ((size_t)n < sizeof(m->hdr)) {
		ret = read_full(conn_fd, (uint8_t *)&m->hdr + n, sizeof(m->hdr) - (size_t)n);
		if (ret < 0)
			goto err_fds;
	}
	if ((m->hdr.flags & VU_VERSION_MASK) != VU_VERSION) {
		log_err("vhost-user message with version %u",
			m->hdr.flags & VU_VERSION_MASK);
		ret = -EPROTO;
		goto err_fds;
	}
	if (m->hdr.size > sizeof(m->p)) {
		log_err("vhost-user %s with payload of %u bytes (max %zu)",
			vu_request_name(m->hdr.request), m->hdr.size, sizeof(m->p));
		ret = -EPROTO;
		goto err_fds;
	}
	ret = read_full(conn_fd, &m->p, m->hdr.size);
	if (ret < 0)
		goto err_fds;
	return 1;

err_fds:
	vu_msg_close_fds(m);
	return ret;
}

int vu_msg_send_reply(int conn_fd, uint32_t request, const void *payload,
		      uint32_t size)
{
	struct vu_msg_hdr hdr = {
		.request = request, .flags = VU_VERSION | VU_FLAG_REPLY, .size = size,
	};
	struct iovec iov[2] = {
		{ .iov_base = &hdr, .iov_len = sizeof(hdr) },
		{ .iov_base = (void *)payload, .iov_len = size },
	};
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = size ? 2 : 1 };
	size_t left = sizeof(hdr) + size;

	while (left > 0) {
		/* MSG_NOSIGNAL: a vanished frontend is an error, not SIGPIPE. */
		ssize_t n = sendmsg(conn_fd, &mh, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		left -= (size_t)n;
		while (n > 0 && mh.msg_iovlen > 0) {
			if ((size_t)n >= mh.msg_iov->iov_len) {
				n -= (ssize_t)mh.msg_iov->iov_len;
				mh.msg_iov++;
				mh.msg_iovlen--;
			} else {
				mh.msg_iov->iov_base = (uint8_t *)mh.msg_iov->iov_base + n;
				mh.msg_iov->iov_len -= (size_t)n;
				n = 0;
			}
		}
	}
	return 0;
}

/* Takes fd number i out of the message so the dispatcher does not close it. */
int vu_msg_take_fd(struct vu_msg *m, unsigned i)
{
	int fd = m->fds[i];

	m->fds[i] = -1;
	return fd;
}
