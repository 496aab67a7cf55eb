/* --request-timeout through the real passthrough and a FUSE session: host calls that block (an open of a file under a lease) are answered ETIMEDOUT at the deadline, never write into the guest's buffers afterwards, give back their fds when they return, and stop at the cap. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <linux/fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/fd_count.h"
#include "../common/pt_session.h"
#include "../common/raw_req.h"
#include "../common/scratch.h"
#include "common/clock.h"
#include "common/log.h"
#include "daemon/deadline.h"
#include "../common/check.h"

/*
 * An open of a file on which another open file holds a write lease is the
 * host call that hangs on any machine (and in any process): it waits for
 * the holder to give the lease up, up to /proc/sys/fs/lease-break-time.
 * The test holds the lease, and plays the hung server's return by letting
 * it go.
 */

#define DEADLINE_S 0.2
#define POISON 0xa5

static char scratch[] = "/tmp/ferry-deadline-XXXXXX";
static struct pt_session ses;
static struct deadline *dl;
static struct deadline_worker *dw;

/* The guest's buffers of one request: what it sent and the room for the
 * reply, which starts poisoned so that any write into it shows. */
static uint8_t guest_rd[8192];
static uint8_t guest_wr[65536];

/* Serves one request through the deadline; its reply's error (0 or
 * -errno, 1 without a reply) and how long it took in *took_s. */
static int serve(uint32_t opcode, uint64_t nodeid, const void *a, size_t a_len,
		 const char *name, double *took_s)
{
	static uint64_t unique = 1;
	struct fuse_in_header h = { .opcode = opcode, .nodeid = nodeid, .unique = unique++ };
	size_t len = raw_req_build(guest_rd, sizeof(guest_rd), h, a, a_len,
				   name, name ? strlen(name) + 1 : 0, NULL, 0);
	struct iovec rd = { .iov_base = guest_rd, .iov_len = len };
	struct iovec wr = { .iov_base = guest_wr, .iov_len = sizeof(guest_wr) };
	struct ferry_req req = { .rd = &rd, .rd_cnt = 1, .wr = &wr, .wr_cnt = 1 };
	struct fuse_out_header out;
	uint64_t start = ferry_monotonic_ns();
	uint32_t got;

	memset(guest_wr, POISON, sizeof(guest_wr));
	got = deadline_serve(dw, &req);
	if (took_s)
		*took_s = (double)(ferry_monotonic_ns() - start) / 1e9;
	if (got < sizeof(out))
		return 1;
	memcpy(&out, guest_wr, sizeof(out));
	return out.error;
}

/* Whether the guest's reply room past the first used bytes is untouched. */
static int poison_kept(size_t used)
{
	for (size_t i = used; i < sizeof(guest_wr); i++)
		if (guest_wr[i] != POISON)
			return 0;
	return 1;
}

static unsigned stuck_after(double wait_s)
{
	uint64_t until = ferry_monotonic_ns() + (uint64_t)(wait_s * 1e9);
	unsigned n;

	while ((n = deadline_stuck(dl)) > 0 && ferry_monotonic_ns() < until)
		usleep(10000);
	return n;
}

static uint64_t lookup(const char *name)
{
	struct fuse_entry_out e;

	if (serve(FUSE_LOOKUP, FUSE_ROOT_ID, NULL, 0, name, NULL) != 0)
		return 0;
	memcpy(&e, guest_wr + sizeof(struct fuse_out_header), sizeof(e));
	return e.nodeid;
}

static void test_in_time(void)
{
	CHECK_MSG(lookup("file") != 0, "a LOOKUP done in time is answered as inline");
	CHECK_MSG(serve(FUSE_GETATTR, FUSE_ROOT_ID, &(struct fuse_getattr_in){ 0 },
			sizeof(struct fuse_getattr_in), NULL, NULL) == 0 &&
		  poison_kept(sizeof(struct fuse_out_header) + sizeof(struct fuse_attr_out)),
		  "a GETATTR done in time writes its reply and nothing past it");
}

/* Holds a write lease on name: the fd, or -1. */
static int lease_take(const char *name)
{
	char path[256];
	int fd;

	scratch_path(path, sizeof(path), scratch, name);
	fd = open(path, O_RDWR);
	if (fd >= 0 && fcntl(fd, F_SETLEASE, F_WRLCK) < 0) {
		printf("FAIL  F_SETLEASE on %s: %s\n", name, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* Lets the lease go: the opens waiting for it return. */
static void lease_drop(int fd)
{
	if (fd < 0)
		return;
	fcntl(fd, F_SETLEASE, F_UNLCK);
	close(fd);
}

/* An OPEN that hangs: ETIMEDOUT at the deadline; once it returns, the fd
 * it opened is released, and its late reply never reaches the guest. */
static void test_open_times_out(void)
{
	struct fuse_open_in in = { .flags = O_RDONLY };
	uint64_t node = lookup("leased");
	int before = fd_count(), lease = lease_take("leased"), err;
	double took;

	err = serve(FUSE_OPEN, node, &in, sizeof(in), NULL, &took);
	CHECK_MSG(err == -ETIMEDOUT && took >= DEADLINE_S && took < DEADLINE_S + 2,
		  "an OPEN whose host open hangs gets ETIMEDOUT at the deadline (%d after %.2f s)",
		  err, took);
	/* 0 only on a machine so busy that no thread took the job in time. */
	CHECK_MSG(deadline_stuck(dl) <= 1, "at most one call stuck (%u)", deadline_stuck(dl));
	lease_drop(lease);
	CHECK_MSG(stuck_after(5) == 0, "the stuck OPEN returned once the lease was gone");
	CHECK_MSG(fd_count() == before, "its fd was released with its dropped reply "
		  "(%d fds before, %d after)", before, fd_count());
	CHECK_MSG(poison_kept(sizeof(struct fuse_out_header)),
		  "nothing but the error reached the guest's reply buffer, before or after");
}

/* Past the cap, requests fail at once without a thread; when the stuck
 * calls return, everything is served again and no fd is left. */
static void test_cap(void)
{
	struct fuse_open_in in = { .flags = O_RDONLY };
	uint64_t node = lookup("leased");
	struct deadline_counts c;
	int before = fd_count(), lease = lease_take("leased"), err;
	unsigned sent = 0;
	double took;

	/* A job no thread took before its deadline never runs, and is not
	 * stuck once one takes it: on a busy machine more than the cap may
	 * be needed to reach it. */
	while (deadline_stuck(dl) < DEADLINE_STUCK_MAX && sent < 4 * DEADLINE_STUCK_MAX) {
		serve(FUSE_OPEN, node, &in, sizeof(in), NULL, NULL);
		sent++;
	}
	CHECK_MSG(deadline_stuck(dl) == DEADLINE_STUCK_MAX, "%u calls stuck, the cap (%u)",
		  DEADLINE_STUCK_MAX, deadline_stuck(dl));
	err = serve(FUSE_GETATTR, FUSE_ROOT_ID, &(struct fuse_getattr_in){ 0 },
		    sizeof(struct fuse_getattr_in), NULL, &took);
	CHECK_MSG(err == -ETIMEDOUT && took < DEADLINE_S / 2,
		  "at the cap a request fails at once (%d after %.3f s)", err, took);
	deadline_get_counts(dl, &c);
	CHECK_MSG(c.refused == 1 && c.stuck == DEADLINE_STUCK_MAX,
		  "the stats count it refused (%llu) and the stuck ones (%u)",
		  (unsigned long long)c.refused, c.stuck);
	lease_drop(lease);
	CHECK_MSG(stuck_after(5) == 0, "every stuck OPEN returned");
	CHECK_MSG(fd_count() == before, "every fd they opened was released (%d before, %d after)",
		  before, fd_count());
	CHECK_MSG(serve(FUSE_GETATTR, FUSE_ROOT_ID, &(struct fuse_getattr_in){ 0 },
			sizeof(struct fuse_getattr_in), NULL, NULL) == 0,
		  "below the cap requests are served again");
	deadline_get_counts(dl, &c);
	CHECK_MSG(c.timed_out == c.returned_late && c.timed_out == sent + 1,
		  "each timed-out call returned (%llu timed out, %llu returned)",
		  (unsigned long long)c.timed_out, (unsigned long long)c.returned_late);
}

int main(void)
{
	struct passthrough_opts pt_opts = { .shared_dir = scratch, .cache = CACHE_NEVER,
					    .timeout = -1 };
	struct fuse_server_opts se_opts = { .max_write = 1024 * 1024 };
	struct fuse_init_in init = { .major = FUSE_KERNEL_VERSION,
				     .minor = FUSE_KERNEL_MINOR_VERSION,
				     .flags = FUSE_INIT_EXT };
	static const char *const files[] = { "file", "leased" };
	char path[256];
	int fd;

	ferry_log_init(LOG_LVL_ERROR, false);
	/* A lease break signals its holder, by default with SIGIO. */
	signal(SIGIO, SIG_IGN);
	if (scratch_start(scratch) != 0)
		return 1;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		scratch_path(path, sizeof(path), scratch, files[i]);
		fd = open(path, O_CREAT | O_WRONLY, 0644);
		if (fd >= 0)
			close(fd);
	}
	if (pt_session_open(&ses, &pt_opts, &se_opts) < 0 ||
	    deadline_new(&dl, DEADLINE_S, ses.se, 1 << 20) < 0 ||
	    deadline_worker_new(dl, &dw) < 0) {
		printf("FAIL  setup: %s\n", strerror(errno));
		return scratch_finish(scratch, 1);
	}
	CHECK_MSG(serve(FUSE_INIT, 0, &init, sizeof(init), NULL, NULL) == 0, "INIT, inline");
	test_in_time();
	test_open_times_out();
	test_cap();
	deadline_worker_free(dw);
	CHECK_MSG(deadline_free(dl) == 0, "nothing stuck at the end");
	pt_session_close(&ses);
	return scratch_finish(scratch, check_result());
}
