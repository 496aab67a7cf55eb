/* Unit tests: a vhost-user device serving one end of a socketpair on a thread, and the frontend's request/ack helpers. */
#include "vu_session.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static void *serve_thread(void *arg)
{
	struct session *s = arg;

	s->ret = vu_dev_serve(s->dev, s->dev_fd);
	return NULL;
}

void session_start(struct session *s, struct vu_dev *dev)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		perror("socketpair");
		exit(1);
	}
	s->dev = dev;
	s->fd = sv[0];
	s->dev_fd = sv[1];
	s->ret = 1;
	if (pthread_create(&s->thread, NULL, serve_thread, s) != 0)
		exit(1);
}

int session_end(struct session *s)
{
	close(s->fd);
	pthread_join(s->thread, NULL);
	return s->ret;
}

bool dropped(struct session *s)
{
	struct vu_msg_hdr h;
	char buf[64];
	int r = recv_reply(s->fd, &h, buf, sizeof(buf));

	pthread_join(s->thread, NULL);
	close(s->fd);
	return r == -ECONNRESET && s->ret < 0;
}

int recv_reply(int fd, struct vu_msg_hdr *h, void *payload, size_t max)
{
	return vu_client_recv(fd, h, payload, max, 2000);
}

/* Sends req with flags and reads the u64 reply: 0, -EIO, or -EPROTO
 * when the reply is not one well-formed u64 reply to req. */
static int exchange_u64(int fd, uint32_t req, uint32_t flags, const void *payload,
			uint32_t size, const int *fds, unsigned nfds, uint64_t *v)
{
	struct vu_msg_hdr h;

	if (vu_client_send(fd, req, flags, payload, size, fds, nfds) < 0)
		return -EIO;
	if (recv_reply(fd, &h, v, 8) < 0 || h.request != req || h.size != 8 ||
	    h.flags != (VU_VERSION | VU_FLAG_REPLY))
		return -EPROTO;
	return 0;
}

int request_u64(int fd, uint32_t req, const void *payload, uint32_t size, const int *fds,
		unsigned nfds, uint64_t *v)
{
	return exchange_u64(fd, req, 0, payload, size, fds, nfds, v);
}

int ack(int fd, uint32_t req, const void *payload, uint32_t size, const int *fds,
	unsigned nfds, uint64_t *status)
{
	return exchange_u64(fd, req, VU_FLAG_NEED_REPLY, payload, size, fds, nfds, status);
}

bool nacked(int fd, uint32_t req, const void *payload, uint32_t size, const int *fds,
	    unsigned nfds)
{
	uint64_t status = 0;

	return ack(fd, req, payload, size, fds, nfds, &status) == 0 && status != 0;
}

bool acked_ok(int fd, uint32_t req, const void *payload, uint32_t size, const int *fds,
	      unsigned nfds)
{
	uint64_t status = 1;

	return ack(fd, req, payload, size, fds, nfds, &status) == 0 && status == 0;
}

uint64_t get_u64(int fd, uint32_t req)
{
	struct vu_msg_hdr h;
	uint64_t v = 0;

	if (vu_client_send(fd, req, 0, NULL, 0, NULL, 0) < 0 || recv_reply(fd, &h, &v, 8) < 0 ||
	    h.size != 8 || h.request != req)
		return UINT64_MAX;
	return v;
}

uint64_t offered_protocol_features(struct vu_dev *dev)
{
	struct session s;
	uint64_t v;

	session_start(&s, dev);
	v = get_u64(s.fd, VU_GET_PROTOCOL_FEATURES);
	if (session_end(&s) != 0)
		return UINT64_MAX;
	return v;
}

bool wait_readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	uint64_t v;

	if (poll(&p, 1, ms) != 1)
		return false;
	return read(fd, &v, sizeof(v)) == sizeof(v);
}

bool wait_count(const int *counter, int n)
{
	for (int i = 0; i < 200; i++) {
		if (__atomic_load_n(counter, __ATOMIC_ACQUIRE) >= n)
			return true;
		usleep(10000);
	}
	return false;
}
