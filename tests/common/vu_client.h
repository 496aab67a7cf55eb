/* Unit tests and the vhost-user fuzzer: the front-end end of a vhost-user socket, on the public wire header. */
#ifndef FERRY_TEST_VU_CLIENT_H
#define FERRY_TEST_VU_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "transport/vhost_user_wire.h"

/* The most fds one message carries here (a test sends 9 to see them refused). */
#define VU_CLIENT_MAX_FDS 16

/*
 * Sends the header h as given (its size is not checked against len: the
 * fuzzer lies on purpose), len bytes of payload and nfds fds (copies go to
 * the receiver; ours stay open). msg_flags are added to MSG_NOSIGNAL.
 * Returns sendmsg's result; -1 with EINVAL for more than VU_CLIENT_MAX_FDS.
 */
ssize_t vu_client_send_raw(int fd, const struct vu_msg_hdr *h, const void *payload, size_t len,
			   const int *fds, unsigned nfds, int msg_flags);

/* Sends request req with flags (VU_VERSION is added) and size bytes of
 * payload; 0 when all of it went, -1 otherwise. */
int vu_client_send(int fd, uint32_t req, uint32_t flags, const void *payload, uint32_t size,
		   const int *fds, unsigned nfds);

/* Reads one reply of at most max payload bytes: 0, -ECONNRESET on EOF,
 * -ETIMEDOUT when nothing came within timeout_ms, -EPROTO when malformed. */
int vu_client_recv(int fd, struct vu_msg_hdr *h, void *payload, size_t max, int timeout_ms);

#endif
