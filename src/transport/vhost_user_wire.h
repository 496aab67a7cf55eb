/* The vhost-user wire format (QEMU's docs/interop/vhost-user.rst) as ferryfsd speaks it: requests, bits, payloads. */
#ifndef FERRY_VHOST_USER_WIRE_H
#define FERRY_VHOST_USER_WIRE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Public so that the device, its unit test and its fuzzer name requests and
 * lay out payloads from one definition instead of raw numbers. The load
 * generator (load/frontend_wire.h) keeps a copy of its own on purpose: it is
 * a second reading of the spec that checks this one. All fields are in the
 * host's byte order, as the spec says: both ends run on one host.
 */

/* Front-end requests the device knows; any other number is refused. */
enum vu_request_type {
	VU_GET_FEATURES = 1,
	VU_SET_FEATURES = 2,
	VU_SET_OWNER = 3,
	VU_RESET_OWNER = 4,
	VU_SET_MEM_TABLE = 5,
	VU_SET_LOG_BASE = 6,
	VU_SET_LOG_FD = 7,
	VU_SET_VRING_NUM = 8,
	VU_SET_VRING_ADDR = 9,
	VU_SET_VRING_BASE = 10,
	VU_GET_VRING_BASE = 11,
	VU_SET_VRING_KICK = 12,
	VU_SET_VRING_CALL = 13,
	VU_SET_VRING_ERR = 14,
	VU_GET_PROTOCOL_FEATURES = 15,
	VU_SET_PROTOCOL_FEATURES = 16,
	VU_GET_QUEUE_NUM = 17,
	VU_SET_VRING_ENABLE = 18,
	VU_SET_BACKEND_REQ_FD = 21,
	VU_GET_CONFIG = 24,
	VU_SET_CONFIG = 25,
	VU_GET_MAX_MEM_SLOTS = 36,
	VU_ADD_MEM_REG = 37,
	VU_REM_MEM_REG = 38,
	VU_SET_DEVICE_STATE_FD = 42,
	VU_CHECK_DEVICE_STATE = 43,
};

/* Header flags: the version in the low bits, then reply and need-reply. */
#define VU_VERSION            0x1u
#define VU_VERSION_MASK       0x3u
#define VU_FLAG_REPLY         0x4u
#define VU_FLAG_NEED_REPLY    0x8u

/* Virtio feature bit (GET/SET_FEATURES) that enables the protocol features. */
#define VU_F_PROTOCOL_FEATURES 30
/* VHOST_F_LOG_ALL: while acked (and a log is mapped), every write into
 * guest memory is marked in the dirty log; set and cleared on live rings. */
#define VU_F_LOG_ALL 26

/* Protocol feature bit numbers (GET/SET_PROTOCOL_FEATURES). */
#define VU_PROTO_F_MQ                  0
#define VU_PROTO_F_LOG_SHMFD           1   /* SET_LOG_BASE carries a memfd */
#define VU_PROTO_F_REPLY_ACK           3
#define VU_PROTO_F_BACKEND_REQ         5
#define VU_PROTO_F_CONFIG              9
#define VU_PROTO_F_CONFIGURE_MEM_SLOTS 15
#define VU_PROTO_F_DEVICE_STATE        19  /* SET_DEVICE_STATE_FD, CHECK_DEVICE_STATE */

/* The u64 of SET_VRING_KICK/CALL/ERR: the ring index, and a bit that says
 * no fd rides along; any other bit is reserved. */
#define VU_VRING_IDX_MASK   0xffull
#define VU_VRING_NOFD_MASK  0x100ull

/* SET_VRING_ADDR flags: bit 0 asks for the used ring's writes to be
 * logged at the guest-physical address in vu_vring_addr.log. */
#define VU_VRING_F_LOG 0x1u

/* The dirty log: one bit per page of guest-physical memory from 0. */
#define VU_LOG_PAGE_SIZE 4096u

/* SET_DEVICE_STATE_FD: what the back-end does with the fd, and when. */
#define VU_TRANSFER_SAVE 0u           /* back-end writes its state */
#define VU_TRANSFER_LOAD 1u           /* back-end reads a state */
#define VU_TRANSFER_PHASE_STOPPED 0u  /* the only phase: all rings stopped */
/* Its u64 reply: bits 0-7 an error, bit 8 "no fd in the reply". */
#define VU_DEVICE_STATE_ERR_MASK 0xffull
#define VU_DEVICE_STATE_NOFD     0x100ull

/* SET_MEM_TABLE carries at most this many regions (and fds). */
#define VU_MEM_TABLE_REGIONS 8
/* GET_CONFIG/SET_CONFIG: the most config space bytes one message moves. */
#define VU_CONFIG_MAX 256

struct vu_msg_hdr {
	uint32_t request;             /* enum vu_request_type */
	uint32_t flags;
	uint32_t size;                /* payload bytes after the header */
} __attribute__((packed));

/* SET_VRING_NUM, SET/GET_VRING_BASE, SET_VRING_ENABLE. */
struct vu_vring_state {
	uint32_t index;
	uint32_t num;
};

/* SET_VRING_ADDR: front-end virtual addresses of the three ring parts. */
struct vu_vring_addr {
	uint32_t index;
	uint32_t flags;
	uint64_t desc;
	uint64_t used;
	uint64_t avail;
	uint64_t log;
};

struct vu_mem_region {
	uint64_t gpa;
	uint64_t size;
	uint64_t uva;
	uint64_t mmap_offset;
};

/* SET_LOG_BASE: the log is the memfd's bytes [mmap_offset, + mmap_size). */
struct vu_log {
	uint64_t mmap_size;
	uint64_t mmap_offset;
};

/* SET_DEVICE_STATE_FD, with one pipe fd. */
struct vu_transfer_state {
	uint32_t direction;           /* VU_TRANSFER_SAVE or _LOAD */
	uint32_t phase;               /* VU_TRANSFER_PHASE_STOPPED */
};

/* SET_MEM_TABLE: only nregions regions are sent, one fd each. */
struct vu_mem_table {
	uint32_t nregions;
	uint32_t padding;
	struct vu_mem_region regions[VU_MEM_TABLE_REGIONS];
};

/* Bytes of SET_MEM_TABLE before its first region. */
#define VU_MEM_TABLE_HDR_SIZE 8u

/* ADD_MEM_REG, REM_MEM_REG. */
struct vu_mem_single {
	uint64_t padding;
	struct vu_mem_region region;
};

/* GET_CONFIG, SET_CONFIG: only size bytes of data are sent. */
struct vu_config {
	uint32_t offset;
	uint32_t size;
	uint32_t flags;
	uint8_t data[VU_CONFIG_MAX];
};

/* Bytes of GET/SET_CONFIG before its data. */
#define VU_CONFIG_HDR_SIZE 12u

/* The sizes the spec gives: a compiler that pads differently would break
 * the wire silently. */
_Static_assert(sizeof(struct vu_msg_hdr) == 12, "vhost-user header");
_Static_assert(sizeof(struct vu_vring_state) == 8, "vring state");
_Static_assert(sizeof(struct vu_vring_addr) == 40, "vring address");
_Static_assert(sizeof(struct vu_mem_region) == 32, "memory region");
_Static_assert(sizeof(struct vu_mem_single) == 40, "single memory region");
_Static_assert(sizeof(struct vu_log) == 16, "log base");
_Static_assert(sizeof(struct vu_transfer_state) == 8, "device state transfer");
_Static_assert(offsetof(struct vu_mem_table, regions) == VU_MEM_TABLE_HDR_SIZE,
	       "memory table header");
_Static_assert(offsetof(struct vu_config, data) == VU_CONFIG_HDR_SIZE,
	       "config header");

#endif
