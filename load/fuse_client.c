/* A slot's FUSE request laid out in guest buffers as descriptors, generic reply checks, the file data pattern. */
#include "fuse_client.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void fc_begin(struct fc_slot *s, uint32_t opcode, uint64_t nodeid, uint64_t unique)
{
	struct fuse_in_header *in = (struct fuse_in_header *)(s->ctrl + FC_CTRL_RD);

	memset(in, 0, sizeof(*in));
	in->opcode = opcode;
	in->unique = unique;
	in->nodeid = nodeid;
	in->pid = (uint32_t)getpid();
	/* Like the Linux driver: each argument in its own descriptor, header
	 * first, so backends see the layout a real guest produces. */
	s->nseg = 1;
	s->seg[0] = (struct fe_seg){ s->ctrl_gpa + FC_CTRL_RD, sizeof(*in), false };
	s->rd_off = FC_CTRL_RD + sizeof(*in);
	s->wr_off = FC_CTRL_WR;
	s->in_len = sizeof(*in);
	s->out_cap = 0;
	s->has_reply = false;
	s->unique = unique;
	s->opcode = opcode;
	s->expect_len = 0;
	s->allow_err = 0;
	s->allow_empty = false;
	s->empty_reply = false;
	s->data_len = 0;
}

static int add_seg(struct fc_slot *s, uint64_t gpa, uint32_t len, bool wr)
{
	if (s->nseg >= VU_MAX_SEGS)
		return -E2BIG;
	s->seg[s->nseg++] = (struct fe_seg){ gpa, len, wr };
	if (wr)
		s->out_cap += len;
	else
		s->in_len += len;
	return 0;
}

int fc_arg(struct fc_slot *s, const void *p, uint32_t len)
{
	if (s->has_reply || s->rd_off + len > FC_CTRL_WR)
		return -E2BIG;
	memcpy(s->ctrl + s->rd_off, p, len);
	s->rd_off += len;
	return add_seg(s, s->ctrl_gpa + s->rd_off - len, len, false);
}

int fc_data_in(struct fc_slot *s, uint32_t len)
{
	if (s->has_reply || len > s->data_cap)
		return -E2BIG;
	return add_seg(s, s->data_gpa, len, false);
}

int fc_reply(struct fc_slot *s, uint32_t argsize)
{
	int ret;

	if (s->has_reply || FC_CTRL_WR + sizeof(struct fuse_out_header) + argsize > FC_CTRL_SIZE)
		return -E2BIG;
	s->has_reply = true;
	/* Poison the reply area so a reply that claims bytes it never wrote
	 * cannot pass as the previous request's answer. */
	memset(s->ctrl + FC_CTRL_WR, 0xa5, sizeof(struct fuse_out_header) + argsize);
	ret = add_seg(s, s->ctrl_gpa + FC_CTRL_WR, sizeof(struct fuse_out_header), true);
	if (ret || !argsize)
		return ret;
	return add_seg(s, s->ctrl_gpa + FC_CTRL_WR + sizeof(struct fuse_out_header),
		       argsize, true);
}

int fc_data_out(struct fc_slot *s, uint32_t len)
{
	if (!s->has_reply || len > s->data_cap)
		return -E2BIG;
	return add_seg(s, s->data_gpa, len, true);
}

void fc_finish(struct fc_slot *s)
{
	struct fuse_in_header *in = (struct fuse_in_header *)(s->ctrl + FC_CTRL_RD);

	in->len = s->in_len;
}

int fc_check(struct fc_slot *s, uint32_t used_len, char *why, size_t whylen)
{
	const struct fuse_out_header *out = fc_out_hdr(s);

	if (!s->has_reply) {
		/* FORGET and BATCH_FORGET: the device returns the buffer and
		 * writes nothing. */
		if (used_len != 0) {
			snprintf(why, whylen, "%s: used len %u for a request without reply",
				 fc_opname(s->opcode), used_len);
			return -EBADMSG;
		}
		return 0;
	}
	if (used_len == 0 && s->allow_empty) {
		s->empty_reply = true;
		return 0;
	}
	if (used_len < sizeof(*out) || used_len > s->out_cap) {
		snprintf(why, whylen, "%s: used len %u outside [16, %u]",
			 fc_opname(s->opcode), used_len, s->out_cap);
		return -EBADMSG;
	}
	if (out->unique != s->unique) {
		snprintf(why, whylen, "%s: reply unique %llu, request unique %llu",
			 fc_opname(s->opcode), (unsigned long long)out->unique,
			 (unsigned long long)s->unique);
		return -EBADMSG;
	}
	if (out->len != used_len) {
		snprintf(why, whylen, "%s: out.len %u != used len %u",
			 fc_opname(s->opcode), out->len, used_len);
		return -EBADMSG;
	}
	if (out->error) {
		if (out->error != s->allow_err) {
			snprintf(why, whylen, "%s: error %d (%s)", fc_opname(s->opcode),
				 out->error, out->error < 0 ? strerror(-out->error) : "positive");
			return -EBADMSG;
		}
		if (out->len != sizeof(*out)) {
			snprintf(why, whylen, "%s: error reply of %u bytes",
				 fc_opname(s->opcode), out->len);
			return -EBADMSG;
		}
		return 0;
	}
	if (s->expect_len && out->len != s->expect_len) {
		snprintf(why, whylen, "%s: out.len %u, expected %u",
			 fc_opname(s->opcode), out->len, s->expect_len);
		return -EBADMSG;
	}
	return 0;
}

const char *fc_opname(uint32_t opcode)
{
	switch (opcode) {
	case FUSE_LOOKUP: return "LOOKUP";
	case FUSE_FORGET: return "FORGET";
	case FUSE_GETATTR: return "GETATTR";
	case FUSE_MKDIR: return "MKDIR";
	case FUSE_UNLINK: return "UNLINK";
	case FUSE_RMDIR: return "RMDIR";
	case FUSE_OPEN: return "OPEN";
	case FUSE_READ: return "READ";
	case FUSE_WRITE: return "WRITE";
	case FUSE_RELEASE: return "RELEASE";
	case FUSE_INIT: return "INIT";
	case FUSE_OPENDIR: return "OPENDIR";
	case FUSE_RELEASEDIR: return "RELEASEDIR";
	case FUSE_CREATE: return "CREATE";
	case FUSE_DESTROY: return "DESTROY";
	case FUSE_BATCH_FORGET: return "BATCH_FORGET";
	case FUSE_READDIRPLUS: return "READDIRPLUS";
	default: return "OP?";
	}
}

/* 128 sectors' template words; each sector's first word is left to the fill,
 * which copies up to 64 KiB at a time, as cheaply as one memcpy. */
#define PATTERN_TEMPLATE (128 * FC_PATTERN_SECTOR)
static uint64_t pattern_template[PATTERN_TEMPLATE / 8];

__attribute__((constructor)) static void pattern_template_init(void)
{
	for (uint32_t i = 0; i < PATTERN_TEMPLATE / 8; i++)
		pattern_template[i] = fc_pattern(8ull * i);
}

void fc_pattern_fill(void *buf, uint64_t off, uint32_t len)
{
	uint8_t *p = buf;

	len &= ~7u;
	while (len) {
		uint32_t in_sector = (uint32_t)(off & (FC_PATTERN_SECTOR - 1));
		uint32_t n = PATTERN_TEMPLATE - in_sector;
		uint32_t first = in_sector ? FC_PATTERN_SECTOR - in_sector : 0;

		if (n > len)
			n = len;
		memcpy(p, (const uint8_t *)pattern_template + in_sector, n);
		for (; first < n; first += FC_PATTERN_SECTOR) {
			uint64_t word = fc_pattern(off + first);

			memcpy(p + first, &word, sizeof(word));
		}
		p += n;
		off += n;
		len -= n;
	}
}

int fc_pattern_check(const void *buf, uint64_t off, uint32_t len, uint64_t *bad)
{
	const uint64_t *w = buf;
	uint32_t i;

	for (i = 0; i < len / 8; i++) {
		if (w[i] != fc_pattern(off + 8ull * i)) {
			*bad = off + 8ull * i;
			return -EBADMSG;
		}
	}
	return 0;
}

void fc_pattern_poison(void *buf, uint64_t off, uint32_t len, uint32_t stride)
{
	for (uint32_t i = 0; i + 8 <= len; i += stride) {
		uint64_t word = ~fc_pattern(off + i);

		memcpy((uint8_t *)buf + i, &word, sizeof(word));
	}
}

int fc_pattern_verify(const void *buf, uint64_t off, uint32_t len, bool full,
		      uint64_t *bad)
{
	if (full)
		return fc_pattern_check(buf, off, len, bad);
	for (uint32_t i = 0; i + 8 <= len; i += FC_CHECK_STRIDE_SPARSE) {
		uint64_t word;

		memcpy(&word, (const uint8_t *)buf + i, sizeof(word));
		if (word != fc_pattern(off + i)) {
			*bad = off + i;
			return -EBADMSG;
		}
	}
	return 0;
}
