/* A slot's FUSE request laid out in guest buffers as descriptors, generic reply checks, the file data pattern. */
#ifndef FERRY_LOAD_FUSE_CLIENT_H
#define FERRY_LOAD_FUSE_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/fuse.h>

#include "frontend.h"

/* Each slot's control page: device-readable half, then device-writable half. */
#define FC_CTRL_SIZE 4096u
#define FC_CTRL_RD   0u
#define FC_CTRL_WR   2048u

/* One request position in a queue: its guest buffers and the request in
 * flight. (What a workload keeps between requests lives beside it.) */
struct fc_slot {
	uint16_t index;
	uint8_t *ctrl;
	uint64_t ctrl_gpa;
	uint8_t *data;
	uint64_t data_gpa;
	uint32_t data_cap;

	struct fe_seg seg[VU_MAX_SEGS];
	unsigned nseg;
	uint32_t rd_off, wr_off;
	uint32_t in_len;
	uint32_t out_cap;      /* bytes of device-writable buffer */
	bool has_reply;

	uint64_t unique;
	uint32_t opcode;
	bool busy;
	uint64_t t_submit;
	uint32_t expect_len;   /* exact out.len on success, 0 = up to out_cap */
	int32_t allow_err;     /* a negative errno also accepted, or 0 */
	/* A reply of no bytes at all also accepted (a known quirk of a
	 * backend: the Rust virtiofsd answers DESTROY that way); fc_check
	 * sets empty_reply when it saw one. */
	bool allow_empty;
	bool empty_reply;
	uint32_t data_len;     /* bytes of data moved (for MiB/s) */
	bool full_check;       /* READ: check every word (see fc_pattern_verify) */
};

void fc_begin(struct fc_slot *s, uint32_t opcode, uint64_t nodeid, uint64_t unique);
/* Appends a device-readable argument copied into the control page. */
int fc_arg(struct fc_slot *s, const void *p, uint32_t len);
/* Appends len bytes of the slot's data buffer as device-readable (WRITE). */
int fc_data_in(struct fc_slot *s, uint32_t len);
/* Appends the out header and argsize bytes of reply arguments. */
int fc_reply(struct fc_slot *s, uint32_t argsize);
/* Appends len bytes of the data buffer as device-writable (READ, READDIR). */
int fc_data_out(struct fc_slot *s, uint32_t len);
/* Fills in the in header's length; the chain is then ready for fe_queue_add. */
void fc_finish(struct fc_slot *s);

static inline struct fuse_out_header *fc_out_hdr(struct fc_slot *s)
{
	return (struct fuse_out_header *)(s->ctrl + FC_CTRL_WR);
}

static inline void *fc_out_args(struct fc_slot *s)
{
	return s->ctrl + FC_CTRL_WR + sizeof(struct fuse_out_header);
}

/* Checks the used length, unique id, error code and length of a completed
 * request. Returns 0 when it is right, -EBADMSG with a reason in why. */
int fc_check(struct fc_slot *s, uint32_t used_len, char *why, size_t whylen);

const char *fc_opname(uint32_t opcode);

/*
 * The data every file offset must hold: a function of the offset alone, so
 * any read of any block can be checked, whatever writes came before. Each
 * 512-byte sector opens with a word unique to its offset, where a misplaced,
 * stale or shifted sector shows; the rest of every sector is one fixed
 * template. Filling a WRITE's block is then a copy plus one word per sector,
 * what a guest's own copy of its data costs, and not a hash per word, which
 * made ferryfs-load's 64 KiB and 1 MiB WRITEs the driver's pace, not the
 * daemon's.
 */
#define FC_PATTERN_SECTOR 512u

static inline uint64_t fc_pattern_mix(uint64_t x)
{
	x = (x ^ 0x6a09e667f3bcc908ull) * 0x9e3779b97f4a7c15ull;
	return x ^ (x >> 29);
}

static inline uint64_t fc_pattern(uint64_t off)
{
	uint64_t in_sector = off & (FC_PATTERN_SECTOR - 1);

	/* The template's words are mixed from a different range than any
	 * sector offset's, so no template word equals a sector's first. */
	return fc_pattern_mix(in_sector ? in_sector ^ 0xbb67ae8584caa73bull : off);
}

/* Writes the pattern of [off, off + len); off and len are multiples of 8. */
void fc_pattern_fill(void *buf, uint64_t off, uint32_t len);
/* Returns 0, or -EBADMSG with the first bad offset in *bad. */
int fc_pattern_check(const void *buf, uint64_t off, uint32_t len, uint64_t *bad);

/*
 * Reads are checked in two strengths. Warmup: every word, after poisoning
 * one word per 512 bytes. Measured interval: only one word per 4 KiB page,
 * poisoned before the read and checked after it, in ferryfs-load and in the
 * --host-pread baseline alike, so a daemon's bandwidth is compared with
 * pread's under the same consumer-side work (a full check costs as much
 * CPU as the copy it checks).
 */
#define FC_POISON_STRIDE_FULL 512u
#define FC_CHECK_STRIDE_SPARSE 4096u
/* Writes a wrong word every stride bytes of a buffer about to receive the
 * data at file offset off. */
void fc_pattern_poison(void *buf, uint64_t off, uint32_t len, uint32_t stride);
/* Full check, or one word per FC_CHECK_STRIDE_SPARSE; as fc_pattern_check. */
int fc_pattern_verify(const void *buf, uint64_t off, uint32_t len, bool full,
		      uint64_t *bad);

#endif
