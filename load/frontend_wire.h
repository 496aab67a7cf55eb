/* Inside ferryfs-load's vhost-user frontend: the wire format, and the message calls the frontend*.c files share. */
#ifndef FERRY_LOAD_FRONTEND_WIRE_H
#define FERRY_LOAD_FRONTEND_WIRE_H

#include <stdbool.h>
#include <stdint.h>

#include "frontend.h"

/*
 * Message numbers, bits and payloads from QEMU's docs/interop/vhost-user.rst.
 * A copy of src/transport/vhost_user_wire.h on purpose: the load generator
 * plays an independent frontend, so a number the daemon's header gets
 * wrong shows up here as a refused or misread message instead of being
 * agreed on by both ends. Keep it written from the spec, not from that
 * header. The same goes for the socket I/O (fe_recv_all and the message
 * framing, frontend.c): ferryfs-load shares no code with src/
 * (load/meson.build), so `duplicates` pairing these files with
 * src/transport/ is expected, and issue 13 keeps these copies as the
 * independent oracle.
 */
enum {
	VHOST_USER_GET_FEATURES = 1,
	VHOST_USER_SET_FEATURES = 2,
	VHOST_USER_SET_OWNER = 3,
	VHOST_USER_SET_MEM_TABLE = 5,
	VHOST_USER_SET_LOG_BASE = 6,
	VHOST_USER_SET_VRING_NUM = 8,
	VHOST_USER_SET_VRING_ADDR = 9,
	VHOST_USER_SET_VRING_BASE = 10,
	VHOST_USER_GET_VRING_BASE = 11,
	VHOST_USER_SET_VRING_KICK = 12,
	VHOST_USER_SET_VRING_CALL = 13,
	VHOST_USER_GET_PROTOCOL_FEATURES = 15,
	VHOST_USER_SET_PROTOCOL_FEATURES = 16,
	VHOST_USER_GET_QUEUE_NUM = 17,
	VHOST_USER_SET_VRING_ENABLE = 18,
	VHOST_USER_SET_DEVICE_STATE_FD = 42,
	VHOST_USER_CHECK_DEVICE_STATE = 43,
};

#define VHOST_USER_VERSION      0x1u
#define VHOST_USER_REPLY_MASK   (1u << 2)
#define VHOST_USER_NEED_REPLY   (1u << 3)
#define VHOST_USER_F_PROTOCOL_FEATURES 30

#define PROTO_F_MQ        0
#define PROTO_F_LOG_SHMFD 1
#define PROTO_F_REPLY_ACK 3
#define PROTO_F_CONFIG    9
#define PROTO_F_DEVICE_STATE 19
#define F_LOG_ALL            26  /* VHOST_F_LOG_ALL, a feature bit of vhost itself */
#define VRING_F_LOG          0   /* vring addr flag: log writes to the used ring */

/* SET_DEVICE_STATE_FD's reply: bits 0-7 an error, bit 8 "no fd in the
 * reply" (the backend uses ours). */
#define DEVICE_STATE_ERR_MASK 0xffull
#define DEVICE_STATE_NO_FD    (1ull << 8)

struct vu_msg_hdr {
	uint32_t request;
	uint32_t flags;
	uint32_t size;
} __attribute__((packed));

struct vu_mem_region {
	uint64_t guest_phys_addr;
	uint64_t memory_size;
	uint64_t userspace_addr;
	uint64_t mmap_offset;
};

struct vu_mem_payload {
	uint32_t nregions;
	uint32_t padding;
	struct vu_mem_region regions[8];
};

struct vu_vring_state {
	uint32_t index;
	uint32_t num;
};

struct vu_vring_addr {
	uint32_t index;
	uint32_t flags;
	uint64_t desc_user_addr;
	uint64_t used_user_addr;
	uint64_t avail_user_addr;
	uint64_t log_guest_addr;
};

/* ---- Messages (frontend.c): 0 or -errno ---- */

/* Sends req with flags, size bytes of payload and fd (-1: none). */
int fe_send_msg(struct fe_dev *d, uint32_t req, uint32_t flags, const void *payload,
		uint32_t size, int fd);
/* Reads exactly len bytes from fd. */
int fe_recv_all(int fd, void *buf, size_t len);
/* Reads the reply to req; payload must be exactly size bytes. */
int fe_recv_reply(struct fe_dev *d, uint32_t req, void *payload, uint32_t size);
/* Sends a message that has no reply of its own, with REPLY_ACK's ack
 * checked when it is negotiated. */
int fe_send_cmd(struct fe_dev *d, uint32_t req, const void *payload, uint32_t size, int fd);
/* Sends req and reads its u64 reply. */
int fe_get_u64(struct fe_dev *d, uint32_t req, uint64_t *val);
/* Whether protocol feature bit was acked. */
bool fe_has_proto(const struct fe_dev *d, unsigned bit);

#endif
