/* Hostile guest against a running ferryfsd: raw FUSE requests, a broken queue, a bad vhost-user message, over the real socket. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuse_client.h"
#include "frontend.h"
#include "../common/check.h"

/*
 * Usage: attack-client SOCKET CANARY_DIR
 * Speaks to ferryfsd through ferryfs-load's frontend (load/), the guest's
 * side of the protocol. Prints one line per check; exits 0 when all pass.
 * Ends by closing the connection: the daemon must then exit with 0.
 */
#define SLOTS 4
#define DATA_CAP 65536u

static struct fe_dev dev = { .sock = -1, .memfd = -1 };
static struct fc_slot slots[2][SLOTS];
static uint64_t next_unique = 2;

/* Submits slot s on queue qi and waits (up to timeout_ms) for its used
 * entry. Returns the used length, or -ETIMEDOUT. */
static int call(unsigned qi, struct fc_slot *s, int timeout_ms)
{
	struct fe_queue *q = &dev.queues[qi];
	uint16_t idx;
	uint32_t len;
	int got;

	if (fe_queue_add(q, s->index, s->seg, s->nseg) || fe_queue_kick(q))
		return -EIO;
	for (int waited = 0;; waited += 10) {
		struct pollfd p = { .fd = q->callfd, .events = POLLIN };

		got = fe_queue_get_used(q, &idx, &len);
		if (got != 0)
			break;
		if (waited >= timeout_ms)
			return -ETIMEDOUT;
		if (poll(&p, 1, 10) == 1)
			fe_queue_clear_call(q);
	}
	if (got < 0 || idx != s->index)
		return -EPROTO;
	return (int)len;
}

/* One request with a reply; returns the FUSE error (0, -errno), or 1 for
 * no reply within 10 s, 2 for a malformed reply. */
static int request(unsigned qi, uint32_t opcode, uint64_t nodeid, const void *arg,
		   uint32_t arg_len, const char *name, const char *name2, uint32_t reply_len)
{
	struct fc_slot *s = &slots[qi][0];
	char why[256];
	int used;

	fc_begin(s, opcode, nodeid, next_unique);
	next_unique += 2;
	if ((arg_len && fc_arg(s, arg, arg_len)) ||
	    (name && fc_arg(s, name, (uint32_t)strlen(name) + 1)) ||
	    (name2 && fc_arg(s, name2, (uint32_t)strlen(name2) + 1)) ||
	    fc_reply(s, reply_len))
		return 2;
	fc_finish(s);
	used = call(qi, s, 10000);
	if (used < 0)
		return 1;
	s->allow_err = fc_out_hdr(s)->error;
	if (fc_check(s, (uint32_t)used, why, sizeof(why)) && fc_out_hdr(s)->error == 0) {
		printf("      bad reply: %s\n", why);
		return 2;
	}
	return fc_out_hdr(s)->error;
}

static uint64_t entry_nodeid(unsigned qi)
{
	const struct fuse_entry_out *e = fc_out_args(&slots[qi][0]);

	return e->nodeid;
}

/* A vhost-user message with NEED_REPLY; returns the ack status, or
 * UINT64_MAX if no ack came. */
static uint64_t raw_vhost(uint32_t request, const void *payload, uint32_t size)
{
	struct { uint32_t request, flags, size; } __attribute__((packed)) h = {
		request, 0x1 | 0x8, size,
	}, rh;
	uint64_t status = UINT64_MAX;

	if (write(dev.sock, &h, sizeof(h)) != sizeof(h) ||
	    (size && write(dev.sock, payload, size) != (ssize_t)size))
		return UINT64_MAX;
	if (recv(dev.sock, &rh, sizeof(rh), MSG_WAITALL) != sizeof(rh) || rh.size != 8 ||
	    recv(dev.sock, &status, 8, MSG_WAITALL) != 8)
		return UINT64_MAX;
	return status;
}

static int setup(const char *sock)
{
	const uint16_t nslots[2] = { SLOTS, SLOTS };

	if (fe_connect(&dev, sock) || fe_negotiate(&dev, -1) ||
	    fe_mem_create(&dev, 8u << 20) || fe_queues_create(&dev, 2, nslots))
		return -1;
	for (unsigned qi = 0; qi < 2; qi++) {
		for (unsigned i = 0; i < SLOTS; i++) {
			struct fc_slot *s = &slots[qi][i];

			s->index = (uint16_t)i;
			s->ctrl = fe_alloc(&dev, FC_CTRL_SIZE, 4096, &s->ctrl_gpa);
			s->data = fe_alloc(&dev, DATA_CAP, 4096, &s->data_gpa);
			s->data_cap = DATA_CAP;
			if (!s->ctrl || !s->data)
				return -1;
		}
	}
	return fe_start(&dev);
}

int main(int argc, char **argv)
{
	struct fuse_init_in init = {
		.major = FUSE_KERNEL_VERSION, .minor = 38, .flags = FUSE_MAX_PAGES,
	};
	struct fuse_getattr_in ga = { 0 };
	char target[4096];
	uint64_t id;
	int ret;

	if (argc != 3) {
		fprintf(stderr, "usage: %s SOCKET CANARY_DIR\n", argv[0]);
		return 2;
	}
	if (setup(argv[1]) < 0) {
		fprintf(stderr, "attack-client: cannot set up the device\n");
		return 1;
	}
	CHECK_MSG(request(1, FUSE_LOOKUP, FUSE_ROOT_ID, NULL, 0, "f", NULL, sizeof(struct fuse_entry_out)) ==
	          -EIO, "LOOKUP before INIT: EIO");
	CHECK_MSG(request(1, FUSE_INIT, 0, &init, sizeof(init), NULL, NULL,
		          sizeof(struct fuse_init_out)) == 0, "INIT");
	CHECK_MSG(request(1, FUSE_LOOKUP, FUSE_ROOT_ID, NULL, 0, "../canary", NULL,
		          sizeof(struct fuse_entry_out)) == -EINVAL, "LOOKUP '../canary': EINVAL");
	ret = request(1, FUSE_LOOKUP, FUSE_ROOT_ID, NULL, 0, "..", NULL, sizeof(struct fuse_entry_out));
	CHECK_MSG(ret < 0 || (ret == 0 && entry_nodeid(1) == FUSE_ROOT_ID),
	          "LOOKUP '..' at the root: the root or an error");
	CHECK_MSG(request(1, 1000, FUSE_ROOT_ID, NULL, 0, NULL, NULL, 0) == -ENOSYS,
	          "unknown opcode 1000: ENOSYS");
	{
		struct fuse_mknod_in mn = { .mode = S_IFIFO | 0666 };
		struct fuse_open_in oi = { .flags = O_RDONLY };

		CHECK_MSG(request(1, FUSE_MKNOD, FUSE_ROOT_ID, &mn, sizeof(mn), "fifo", NULL,
			          sizeof(struct fuse_entry_out)) == 0, "MKNOD a FIFO");
		id = entry_nodeid(1);
		ret = request(1, FUSE_OPEN, id, &oi, sizeof(oi), NULL, NULL,
			      sizeof(struct fuse_open_out));
		CHECK_MSG(ret < 0 && ret != 1, "OPEN of the FIFO answered at once with an error (%d)", ret);
	}
	snprintf(target, sizeof(target), "%s/secret", argv[2]);
	CHECK_MSG(request(1, FUSE_SYMLINK, FUSE_ROOT_ID, NULL, 0, "esc", target,
		          sizeof(struct fuse_entry_out)) == 0, "SYMLINK to the canary's file (contents only)");
	{
		struct fuse_open_in oi = { .flags = O_WRONLY | O_TRUNC };

		id = entry_nodeid(1);
		CHECK_MSG(request(1, FUSE_OPEN, id, &oi, sizeof(oi), NULL, NULL,
			          sizeof(struct fuse_open_out)) < 0, "OPEN O_TRUNC of that symlink refused");
	}
	{
		/* in.len 100 bytes past the chain */
		struct fc_slot *s = &slots[1][0];
		int used;

		fc_begin(s, FUSE_LOOKUP, FUSE_ROOT_ID, next_unique);
		next_unique += 2;
		fc_arg(s, "f", 2);
		fc_reply(s, sizeof(struct fuse_entry_out));
		fc_finish(s);
		((struct fuse_in_header *)(s->ctrl + FC_CTRL_RD))->len += 100;
		used = call(1, s, 10000);
		CHECK_MSG(used == sizeof(struct fuse_out_header) && fc_out_hdr(s)->error == -EINVAL,
		          "in.len past the chain: EINVAL");
	}
	{
		struct fuse_forget_in fg = { .nlookup = UINT64_MAX };
		struct fc_slot *s = &slots[1][0];

		fc_begin(s, FUSE_FORGET, FUSE_ROOT_ID, next_unique);
		next_unique += 2;
		fc_arg(s, &fg, sizeof(fg));
		fc_finish(s);
		CHECK_MSG(call(1, s, 10000) == 0, "FORGET of the root with 2^64-1: used, no reply");
		CHECK_MSG(request(1, FUSE_GETATTR, FUSE_ROOT_ID, &ga, sizeof(ga), NULL, NULL,
			          sizeof(struct fuse_attr_out)) == 0, "the root still answers GETATTR");
	}
	{
		/* A buffer far outside guest memory breaks queue 1. */
		struct fc_slot *s = &slots[1][1];

		fc_begin(s, FUSE_GETATTR, FUSE_ROOT_ID, next_unique);
		next_unique += 2;
		fc_arg(s, &ga, sizeof(ga));
		fc_reply(s, sizeof(struct fuse_attr_out));
		s->seg[s->nseg - 1].gpa = 1ull << 40;
		fc_finish(s);
		CHECK_MSG(call(1, s, 1000) == -ETIMEDOUT, "queue 1 with a buffer outside memory: no answer");
	}
	CHECK_MSG(request(0, FUSE_GETATTR, FUSE_ROOT_ID, &ga, sizeof(ga), NULL, NULL,
		          sizeof(struct fuse_attr_out)) == 0, "queue 0 still answers GETATTR");
	{
		struct { uint32_t index, num; } st = { 300, 8 };
		uint64_t status = raw_vhost(8, &st, sizeof(st));

		CHECK_MSG(status != 0 && status != UINT64_MAX, "SET_VRING_NUM for queue 300: NACK");
		st.index = 0;
		st.num = 100;
		status = raw_vhost(8, &st, sizeof(st));
		CHECK_MSG(status != 0 && status != UINT64_MAX, "SET_VRING_NUM 100 on a running queue: NACK");
	}
	CHECK_MSG(request(0, FUSE_GETATTR, FUSE_ROOT_ID, &ga, sizeof(ga), NULL, NULL,
		          sizeof(struct fuse_attr_out)) == 0, "queue 0 answers after the bad messages");
	fe_close(&dev);
	return check_result();
}
