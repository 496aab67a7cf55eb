/* Unit tests: a vhost-user device serving one end of a socketpair on a thread, and the frontend's request/ack helpers. */
#ifndef FERRY_TEST_VU_SESSION_H
#define FERRY_TEST_VU_SESSION_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "transport/vhost_user.h"
#include "vu_client.h"

struct session {
	struct vu_dev *dev;
	int fd;        /* frontend end */
	int dev_fd;    /* device end, owned by vu_dev_serve */
	int ret;
	pthread_t thread;
};

/* Serves dev on a new socketpair from a thread of its own; exits on failure. */
void session_start(struct session *s, struct vu_dev *dev);
/* Closes our end (the frontend going away) and waits for serve to return. */
int session_end(struct session *s);
/* True if the device dropped the connection: EOF where a reply or nothing
 * was expected, and vu_dev_serve returned an error. */
bool dropped(struct session *s);

/* The device answers within 2 s or not at all. */
int recv_reply(int fd, struct vu_msg_hdr *h, void *payload, size_t max);
/* Sends req with NEED_REPLY and reads its u64 ack into *status: 0, or
 * -EIO/-EPROTO when sending failed or the reply is not a well-formed ack. */
int ack(int fd, uint32_t req, const void *payload, uint32_t size, const int *fds,
	unsigned nfds, uint64_t *status);
/* Sends a request that needs REPLY_ACK; true if the device answered failure. */
bool nacked(int fd, uint32_t req, const void *payload, uint32_t size, const int *fds,
	    unsigned nfds);
bool acked_ok(int fd, uint32_t req, const void *payload, uint32_t size, const int *fds,
	      unsigned nfds);
/* A request without payload whose reply is a u64; UINT64_MAX on failure. */
uint64_t get_u64(int fd, uint32_t req);
/* What dev offers in GET_PROTOCOL_FEATURES to a fresh session, which then
 * ends; UINT64_MAX if the request failed or the session did not end in
 * order. */
uint64_t offered_protocol_features(struct vu_dev *dev);
/* Sends req as given (no NEED_REPLY) and reads the u64 reply it defines:
 * 0 with *v set, or -errno. */
int request_u64(int fd, uint32_t req, const void *payload, uint32_t size, const int *fds,
		unsigned nfds, uint64_t *v);
/* Waits up to 2 s for *counter (bumped atomically, with release, by a
 * service) to reach n: the service's other globals are then safe to read. */
bool wait_count(const int *counter, int n);
/* Waits up to ms for the eventfd fd and reads it; true if it fired. */
bool wait_readable(int fd, int ms);

#endif
