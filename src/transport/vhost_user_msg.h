/* vhost-user message I/O: one message in with its fds, one reply out, header and sizes checked. */
#ifndef FERRY_VHOST_USER_MSG_H
#define FERRY_VHOST_USER_MSG_H

#include <stdint.h>

#include "transport/vhost_user_wire.h"

/* SET_MEM_TABLE carries the most fds: one per region. */
#define VU_MAX_FDS VU_MEM_TABLE_REGIONS
/* Larger than any message we accept; a bigger size is a broken frontend
 * and we would not know where the next header starts. */
#define VU_MAX_PAYLOAD 4096

union vu_payload {
	uint64_t u64;
	struct vu_vring_state state;
	struct vu_vring_addr addr;
	struct vu_mem_table mem;
	struct vu_mem_single mem_single;
	struct vu_config config;
	struct vu_log log;
	struct vu_transfer_state transfer;
	uint8_t raw[VU_MAX_PAYLOAD];
};

struct vu_msg {
	struct vu_msg_hdr hdr;
	union vu_payload p;
	int fds[VU_MAX_FDS];
	unsigned nfds;
};

/* The request's name for log messages; "unknown" if it has none. */
const char *vu_request_name(uint32_t req);
/* Receives one message: 1, 0 when the frontend went away, or -errno. */
int vu_msg_recv(int conn_fd, struct vu_msg *m);
/* Sends a reply to request with the given payload. */
int vu_msg_send_reply(int conn_fd, uint32_t request, const void *payload,
		      uint32_t size);
/* Closes the fds a message still holds. */
void vu_msg_close_fds(struct vu_msg *m);
/* Takes fd number i out of the message, so closing the message keeps it. */
int vu_msg_take_fd(struct vu_msg *m, unsigned i);

#endif
