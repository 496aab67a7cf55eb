/* Hostile raw FUSE requests through the real protocol and passthrough backend, with a canary directory next to the share. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "../common/canary.h"
#include "../common/fd_count.h"
#include "../common/pt_session.h"
#include "../common/raw_req.h"
#include "backend/passthrough.h"
#include "common/log.h"
#include "protocol/fuse_server.h"
#include "../common/check.h"

#define MAX_WRITE (128u * 1024u)

static struct canary cy;
static struct pt_session ses;
static uint64_t next_unique = 1;

static struct raw_reply rep;

/* Sends buf as one readable iovec, with room bytes of reply room. */
static uint32_t send_raw_on(struct fuse_worker *w, const void *buf, size_t len, size_t room)
{
	return raw_req_run(w, buf, len, room, NULL, &rep);
}

/* Builds header + arg + up to two names (each as given, with its own
 * length: a name without a NUL is sent without one) and returns the
 * reply's error, or 1 when no reply came. */
static int send_req_on(struct fuse_worker *w, uint32_t opcode, uint64_t nodeid,
		       const void *arg, size_t arg_len, const void *n1, size_t n1_len,
		       const void *n2, size_t n2_len)
{
	static uint8_t buf[sizeof(struct fuse_in_header) + 2 * 65536 + 8192];
	struct fuse_in_header h = {
		.opcode = opcode, .nodeid = nodeid, .unique = next_unique++,
	};
	size_t len = raw_req_build(buf, sizeof(buf), h, arg, arg_len, n1, n1_len, n2, n2_len);

	if (send_raw_on(w, buf, len, sizeof(rep.h) + sizeof(rep.arg)) == 0)
		return 1;
	return rep.h.error;
}

#define send_req(...) send_req_on(ses.w, __VA_ARGS__)

static int lookup(uint64_t parent, const char *name, uint64_t *nodeid)
{
	int err = send_req(FUSE_LOOKUP, parent, NULL, 0, NM(name), NULL, 0);

	if (err == 0 && nodeid) {
		struct fuse_entry_out e;

		memcpy(&e, rep.arg, sizeof(e));
		*nodeid = e.nodeid;
	}
	return err;
}

static bool host_exists(const char *rel)
{
	char path[sizeof(cy.base) + 256];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", cy.base, rel);
	return lstat(path, &st) == 0;
}

static void test_before_init(void)
{
	struct fuse_getattr_in g = { 0 };

	CHECK_MSG(lookup(FUSE_ROOT_ID, "f", NULL) == -EIO, "LOOKUP before INIT: EIO");
	CHECK_MSG(send_req(FUSE_GETATTR, FUSE_ROOT_ID, &g, sizeof(g), NULL, 0, NULL, 0) == -EIO,
	          "GETATTR before INIT: EIO");
	CHECK_MSG(send_req(4242, FUSE_ROOT_ID, NULL, 0, NULL, 0, NULL, 0) == -EIO,
	          "unknown opcode before INIT: EIO");
}

static void do_init(void)
{
	struct fuse_init_in in = {
		.major = FUSE_KERNEL_VERSION, .minor = 38, .max_readahead = 1 << 20,
		.flags = FUSE_INIT_EXT | FUSE_MAX_PAGES | FUSE_BIG_WRITES,
	};

	CHECK_MSG(send_req(FUSE_INIT, 0, &in, sizeof(in), NULL, 0, NULL, 0) == 0, "INIT");
	CHECK_MSG(send_req(FUSE_INIT, 0, &in, sizeof(in), NULL, 0, NULL, 0) == -EIO,
	          "second INIT refused");
}

static void test_header_lengths(void)
{
	struct {
		struct fuse_in_header h;
		char name[8];
	} r = { .h = { .opcode = FUSE_LOOKUP, .nodeid = FUSE_ROOT_ID, .unique = 77 },
		.name = "f" };

	r.h.len = sizeof(r.h) - 1;
	CHECK_MSG(send_raw_on(ses.w, &r, sizeof(r), 4096) == sizeof(struct fuse_out_header) &&
	          rep.h.error == -EINVAL && rep.h.unique == 77,
	          "in.len shorter than the header: EINVAL");
	r.h.len = sizeof(r) + 1;
	CHECK_MSG(send_raw_on(ses.w, &r, sizeof(r), 4096) == sizeof(struct fuse_out_header) &&
	          rep.h.error == -EINVAL, "in.len past the readable chain: EINVAL");
	r.h.len = UINT32_MAX;
	CHECK_MSG(send_raw_on(ses.w, &r, sizeof(r), 4096) == sizeof(struct fuse_out_header) &&
	          rep.h.error == -EINVAL, "in.len 4 GiB: EINVAL");
	r.h.len = sizeof(r);
	r.h.total_extlen = 0xffff;
	CHECK_MSG(send_raw_on(ses.w, &r, sizeof(r), 4096) == sizeof(struct fuse_out_header) &&
	          rep.h.error == -EINVAL, "extensions longer than the request: EINVAL");
	r.h.total_extlen = 0;
	CHECK_MSG(send_raw_on(ses.w, &r, sizeof(r.h) - 1, 4096) == 0,
	          "chain shorter than a header: dropped without a reply");
	CHECK_MSG(send_raw_on(ses.w, &r, sizeof(r), sizeof(struct fuse_out_header) - 1) == 0,
	          "no room for a reply header: dropped without a reply");
	CHECK_MSG(send_raw_on(ses.w, &r, sizeof(r), sizeof(struct fuse_out_header) + 8) ==
	          sizeof(struct fuse_out_header) && rep.h.error == -ERANGE,
	          "no room for the entry: ERANGE (and no lookup reference leaks)");
	CHECK_MSG(send_raw_on(ses.w, &r, sizeof(r), 4096) > sizeof(struct fuse_out_header) &&
	          rep.h.error == 0, "the same LOOKUP, well-formed, still works");
}

static void test_unknown_opcodes(void)
{
	/* Never assigned, the one after the table's last (STATX), CUSE's
	 * INIT, INIT byte-swapped, and the top. */
	const uint32_t ops[] = { 0, 7, 19, 53, 1000, 4096, 436207616, UINT32_MAX };

	for (unsigned i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		CHECK_MSG(send_req(ops[i], FUSE_ROOT_ID, NULL, 0, NULL, 0, NULL, 0) == -ENOSYS,
		          "opcode %u: ENOSYS", ops[i]);
}

static void test_names(void)
{
	struct fuse_mkdir_in md = { .mode = 0755 };
	struct fuse_mknod_in mn = { .mode = S_IFREG | 0644 };
	char longname[300];
	uint64_t id;

	memset(longname, 'a', sizeof(longname));
	longname[256] = 0;
	CHECK_MSG(send_req(FUSE_MKDIR, FUSE_ROOT_ID, &md, sizeof(md), NM("a/b"), NULL, 0) == -EINVAL,
	          "MKDIR 'a/b': EINVAL");
	CHECK_MSG(send_req(FUSE_MKDIR, FUSE_ROOT_ID, &md, sizeof(md), NM("../escape"), NULL, 0) == -EINVAL,
	          "MKDIR '../escape': EINVAL");
	CHECK_MSG(send_req(FUSE_MKDIR, FUSE_ROOT_ID, &md, sizeof(md), NM(".."), NULL, 0) == -EINVAL,
	          "MKDIR '..': EINVAL");
	CHECK_MSG(send_req(FUSE_MKDIR, FUSE_ROOT_ID, &md, sizeof(md), NM("."), NULL, 0) == -EINVAL,
	          "MKDIR '.': EINVAL");
	CHECK_MSG(send_req(FUSE_MKDIR, FUSE_ROOT_ID, &md, sizeof(md), NM(""), NULL, 0) == -EINVAL,
	          "MKDIR '': EINVAL");
	CHECK_MSG(send_req(FUSE_MKNOD, FUSE_ROOT_ID, &mn, sizeof(mn), "unterminated", 12, NULL, 0) ==
	          -EINVAL, "MKNOD with an unterminated name: EINVAL");
	CHECK_MSG(send_req(FUSE_MKNOD, FUSE_ROOT_ID, &mn, sizeof(mn), NM(longname), NULL, 0) ==
	          -ENAMETOOLONG, "MKNOD with a 256-byte name: ENAMETOOLONG");
	CHECK_MSG(lookup(FUSE_ROOT_ID, "a/b", NULL) == -EINVAL, "LOOKUP 'a/b': EINVAL");
	CHECK_MSG(lookup(FUSE_ROOT_ID, "", NULL) == -EINVAL, "LOOKUP '': EINVAL");
	CHECK_MSG(send_req(FUSE_LOOKUP, FUSE_ROOT_ID, NULL, 0, "f", 1, NULL, 0) == -EINVAL,
	          "LOOKUP with an unterminated name: EINVAL");
	/* LOOKUP of '..' is legal FUSE (NFS export); at the root it must
	 * stay at the root, never reach the share's parent. */
	id = 0;
	CHECK_MSG(lookup(FUSE_ROOT_ID, "..", &id) < 0 || id == FUSE_ROOT_ID,
	          "LOOKUP '..' at the root stays inside (error or the root itself)");
	CHECK_MSG(lookup(FUSE_ROOT_ID, "canary", NULL) == -ENOENT,
	          "LOOKUP of the canary's name: ENOENT (it is outside)");
	CHECK_MSG(send_req(FUSE_UNLINK, FUSE_ROOT_ID, NULL, 0, NM(".."), NULL, 0) == -EINVAL,
	          "UNLINK '..': EINVAL");
	CHECK_MSG(send_req(FUSE_RMDIR, FUSE_ROOT_ID, NULL, 0, NM("../canary"), NULL, 0) == -EINVAL,
	          "RMDIR '../canary': EINVAL");
	CHECK_MSG(!host_exists("escape") && !host_exists("share/a"), "nothing was created");
}

static void test_symlink_link_rename(void)
{
	char target[sizeof(cy.canary) + 16];
	struct fuse_open_in oin = { .flags = O_RDWR };
	struct fuse_create_in cin = { .flags = O_RDWR | O_CREAT, .mode = S_IFREG | 0644 };
	struct fuse_mkdir_in md = { .mode = 0755 };
	struct fuse_link_in lin = { 0 };
	struct fuse_rename_in rin = { 0 };
	struct fuse_rename2_in r2 = { 0 };
	uint64_t abs_id = 0, rel_id = 0, file_id = 0;

	snprintf(target, sizeof(target), "%s/secret", cy.canary);
	CHECK_MSG(send_req(FUSE_SYMLINK, FUSE_ROOT_ID, NULL, 0, NM("abs"), NM(target)) == 0,
	          "SYMLINK with an absolute target outside: created (contents only)");
	CHECK_MSG(send_req(FUSE_SYMLINK, FUSE_ROOT_ID, NULL, 0, NM("rel"), NM("../canary")) == 0,
	          "SYMLINK '../canary': created (contents only)");
	CHECK_MSG(lookup(FUSE_ROOT_ID, "abs", &abs_id) == 0 && lookup(FUSE_ROOT_ID, "rel", &rel_id) == 0,
	          "both links looked up");
	CHECK_MSG(send_req(FUSE_OPEN, abs_id, &oin, sizeof(oin), NULL, 0, NULL, 0) < 0,
	          "OPEN of the absolute link is refused, not followed");
	CHECK_MSG(lookup(rel_id, "secret", NULL) < 0, "LOOKUP through '../canary' refused");
	CHECK_MSG(send_req(FUSE_CREATE, rel_id, &cin, sizeof(cin), NM("planted"), NULL, 0) < 0,
	          "CREATE inside the '../canary' link refused");
	CHECK_MSG(send_req(FUSE_MKDIR, rel_id, &md, sizeof(md), NM("planted"), NULL, 0) < 0,
	          "MKDIR inside the '../canary' link refused");
	{
		struct fuse_setattr_in sa = { .valid = FATTR_SIZE, .size = 0 };

		CHECK_MSG(send_req(FUSE_SETATTR, abs_id, &sa, sizeof(sa), NULL, 0, NULL, 0) < 0,
		          "SETATTR truncate on the absolute link refused (not followed)");
	}

	CHECK_MSG(send_req(FUSE_CREATE, FUSE_ROOT_ID, &cin, sizeof(cin), NM("file"), NULL, 0) == 0,
	          "CREATE file");
	CHECK_MSG(lookup(FUSE_ROOT_ID, "file", &file_id) == 0, "LOOKUP file");
	lin.oldnodeid = file_id;
	CHECK_MSG(send_req(FUSE_LINK, 0xdead0000beefull, &lin, sizeof(lin), NM("l"), NULL, 0) == -EBADF,
	          "LINK into a newparent that does not exist: EBADF");
	lin.oldnodeid = 0xdead0000beefull;
	CHECK_MSG(send_req(FUSE_LINK, FUSE_ROOT_ID, &lin, sizeof(lin), NM("l"), NULL, 0) == -EBADF,
	          "LINK of an oldnodeid that does not exist: EBADF");
	lin.oldnodeid = file_id;
	CHECK_MSG(send_req(FUSE_LINK, FUSE_ROOT_ID, &lin, sizeof(lin), NM("../l"), NULL, 0) == -EINVAL,
	          "LINK to '../l': EINVAL");
	CHECK_MSG(send_req(FUSE_LINK, rel_id, &lin, sizeof(lin), NM("l"), NULL, 0) < 0,
	          "LINK into the '../canary' link refused");

	rin.newdir = 0xdead0000beefull;
	CHECK_MSG(send_req(FUSE_RENAME, FUSE_ROOT_ID, &rin, sizeof(rin), NM("file"), NM("x")) == -EBADF,
	          "RENAME into a newdir that does not exist: EBADF");
	rin.newdir = FUSE_ROOT_ID;
	CHECK_MSG(send_req(FUSE_RENAME, FUSE_ROOT_ID, &rin, sizeof(rin), NM("file"), NM("../x")) == -EINVAL,
	          "RENAME to '../x': EINVAL");
	CHECK_MSG(send_req(FUSE_RENAME, FUSE_ROOT_ID, &rin, sizeof(rin), NM("file"), NM("..")) == -EINVAL,
	          "RENAME to '..': EINVAL");
	rin.newdir = rel_id;
	CHECK_MSG(send_req(FUSE_RENAME, FUSE_ROOT_ID, &rin, sizeof(rin), NM("file"), NM("x")) < 0,
	          "RENAME into the '../canary' link refused");
	r2.newdir = FUSE_ROOT_ID;
	r2.flags = 0xffffffffu;
	CHECK_MSG(send_req(FUSE_RENAME2, FUSE_ROOT_ID, &r2, sizeof(r2), NM("file"), NM("y")) == -EINVAL,
	          "RENAME2 with unknown flags: EINVAL");
	CHECK_MSG(host_exists("share/file") && !host_exists("x") && !host_exists("canary/x") &&
	          !host_exists("canary/planted") && !host_exists("canary/l"),
	          "the file stayed where it was; nothing appeared outside");
	{
		struct fuse_forget_in fg = { .nlookup = 1 };

		send_req(FUSE_FORGET, abs_id, &fg, sizeof(fg), NULL, 0, NULL, 0);
		send_req(FUSE_FORGET, rel_id, &fg, sizeof(fg), NULL, 0, NULL, 0);
		send_req(FUSE_FORGET, file_id, &fg, sizeof(fg), NULL, 0, NULL, 0);
	}
}

static void on_alarm(int sig)
{
	static const char msg[] = "FAIL  a request on a special file blocked (host open?)\n";

	(void)sig;
	if (write(STDOUT_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

/* OPEN, SETATTR(size) and GETXATTR on FIFOs, sockets and device nodes must
 * not open the host file: a FIFO open would block, a device open would
 * reach host hardware. An alarm turns a hang into a failure. */
static void test_special_files(void)
{
	struct { const char *name; mode_t mode; dev_t rdev; } files[] = {
		{ "fifo", S_IFIFO | 0666, 0 },
		{ "sock", S_IFSOCK | 0666, 0 },
		{ "null", S_IFCHR | 0666, makedev(1, 3) },
		{ "loop", S_IFBLK | 0666, makedev(7, 0) },
	};
	int fds_before = fd_count();

	signal(SIGALRM, on_alarm);
	for (unsigned i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char path[sizeof(cy.share) + 16];
		struct fuse_open_in oin = { .flags = O_RDWR };
		struct fuse_setattr_in sa = { .valid = FATTR_SIZE, .size = 0 };
		struct fuse_getxattr_in gx = { .size = 256 };
		uint64_t id = 0;

		snprintf(path, sizeof(path), "%s/%s", cy.share, files[i].name);
		/* Root (main() checked) makes each of them, devices too. */
		if (mknod(path, files[i].mode, files[i].rdev) < 0) {
			CHECK_MSG(0, "mknod %s: %s", files[i].name, strerror(errno));
			continue;
		}
		CHECK_MSG(lookup(FUSE_ROOT_ID, files[i].name, &id) == 0, "LOOKUP %s", files[i].name);
		alarm(10);
		oin.flags = O_RDWR;
		CHECK_MSG(send_req(FUSE_OPEN, id, &oin, sizeof(oin), NULL, 0, NULL, 0) < 0,
		          "OPEN O_RDWR of %s refused", files[i].name);
		oin.flags = O_RDONLY | O_NONBLOCK;
		CHECK_MSG(send_req(FUSE_OPEN, id, &oin, sizeof(oin), NULL, 0, NULL, 0) < 0,
		          "OPEN O_RDONLY|O_NONBLOCK of %s refused", files[i].name);
		CHECK_MSG(send_req(FUSE_SETATTR, id, &sa, sizeof(sa), NULL, 0, NULL, 0) < 0,
		          "SETATTR truncate of %s refused", files[i].name);
		CHECK_MSG(send_req(FUSE_GETXATTR, id, &gx, sizeof(gx), NM("user.x"), NULL, 0) < 0,
		          "GETXATTR of %s answered with an error", files[i].name);
		CHECK_MSG(send_req(FUSE_LISTXATTR, id, &gx, sizeof(gx), NULL, 0, NULL, 0) <= 0,
		          "LISTXATTR of %s answered", files[i].name);
		alarm(0);
		{
			struct fuse_forget_in fg = { .nlookup = 1 };

			send_req(FUSE_FORGET, id, &fg, sizeof(fg), NULL, 0, NULL, 0);
		}
	}
	CHECK_MSG(fd_count() == fds_before, "no fd left open by special-file requests (%d -> %d)",
	          fds_before, fd_count());
}

static void test_forget(void)
{
	struct fuse_getattr_in g = { 0 };
	struct fuse_forget_in fg = { .nlookup = UINT64_MAX };
	uint64_t id = 0, id2 = 0;

	CHECK_MSG(lookup(FUSE_ROOT_ID, "f", &id) == 0 && lookup(FUSE_ROOT_ID, "f", NULL) == 0,
	          "LOOKUP f twice");
	CHECK_MSG(send_req(FUSE_FORGET, id, &fg, sizeof(fg), NULL, 0, NULL, 0) == 1,
	          "FORGET with count 2^64-1: no reply");
	CHECK_MSG(send_req(FUSE_FORGET, id, &fg, sizeof(fg), NULL, 0, NULL, 0) == 1,
	          "the same FORGET again: no reply");
	CHECK_MSG(send_req(FUSE_GETATTR, id, &g, sizeof(g), NULL, 0, NULL, 0) == -EBADF,
	          "GETATTR on the forgotten nodeid: EBADF (no use after free)");
	CHECK_MSG(send_req(FUSE_FORGET, FUSE_ROOT_ID, &fg, sizeof(fg), NULL, 0, NULL, 0) == 1 &&
	          send_req(FUSE_GETATTR, FUSE_ROOT_ID, &g, sizeof(g), NULL, 0, NULL, 0) == 0,
	          "FORGET of the root with a huge count: the root lives on");
	{
		struct {
			struct fuse_batch_forget_in b;
			struct fuse_forget_one one[2];
		} bf = { .b = { .count = 1000000 } };

		CHECK_MSG(lookup(FUSE_ROOT_ID, "f", &id2) == 0, "LOOKUP f again");
		bf.one[0].nodeid = id2;
		bf.one[0].nlookup = UINT64_MAX;
		CHECK_MSG(send_req(FUSE_BATCH_FORGET, 0, &bf, sizeof(bf), NULL, 0, NULL, 0) == 1,
		          "BATCH_FORGET claiming 10^6 entries in 2: no reply");
		bf.b.count = 2;
		bf.one[1].nodeid = id2;
		CHECK_MSG(send_req(FUSE_BATCH_FORGET, 0, &bf, sizeof(bf), NULL, 0, NULL, 0) == 1,
		          "BATCH_FORGET naming one nodeid twice: no reply");
		CHECK_MSG(send_req(FUSE_GETATTR, id2, &g, sizeof(g), NULL, 0, NULL, 0) == -EBADF,
		          "GETATTR after the batch: EBADF");
	}
}

/* FORGETs with huge counts on one worker while another keeps using the
 * same nodeids: under ASan (or TSan) a use after free is a report. */
static atomic_bool race_stop;
static atomic_uint race_ok, race_badf, race_other;

static void *race_user(void *arg)
{
	struct fuse_worker *w = arg;

	while (!atomic_load(&race_stop)) {
		struct fuse_in_header h = { .opcode = FUSE_LOOKUP, .nodeid = FUSE_ROOT_ID };
		uint8_t req[sizeof(h) + 2], out[256];
		struct iovec rd = { req, sizeof(req) }, wr = { out, sizeof(out) };
		struct fuse_out_header oh;
		struct fuse_entry_out e;
		struct {
			struct fuse_in_header h;
			struct fuse_getattr_in g;
		} ga = { .h = { .len = sizeof(ga), .opcode = FUSE_GETATTR } };

		h.len = sizeof(req);
		memcpy(req, &h, sizeof(h));
		memcpy(req + sizeof(h), "f", 2);
		if (fuse_worker_process(w, &(struct ferry_req){ .rd = &rd, .rd_cnt = 1,
							.wr = &wr, .wr_cnt = 1 }) <
		    sizeof(oh) + sizeof(e))
			continue;
		memcpy(&e, out + sizeof(oh), sizeof(e));
		ga.h.nodeid = e.nodeid;
		rd = (struct iovec){ &ga, sizeof(ga) };
		fuse_worker_process(w, &(struct ferry_req){ .rd = &rd, .rd_cnt = 1,
						    .wr = &wr, .wr_cnt = 1 });
		memcpy(&oh, out, sizeof(oh));
		if (oh.error == 0)
			atomic_fetch_add(&race_ok, 1);
		else if (oh.error == -EBADF)
			atomic_fetch_add(&race_badf, 1);
		else
			atomic_fetch_add(&race_other, 1);
	}
	return NULL;
}

static void test_forget_race(void)
{
	struct fuse_worker *w2, *w3;
	pthread_t user;
	uint64_t id = 0;
	int bad = 0;

	CHECK_MSG(fuse_worker_new(ses.se, &w2) == 0 && fuse_worker_new(ses.se, &w3) == 0, "two more workers");
	pthread_create(&user, NULL, race_user, w2);
	/* At least 2000 rounds, and on until the other thread got 200
	 * GETATTRs in: on a loaded machine it may start late. */
	for (int i = 0; i < 2000 || (atomic_load(&race_ok) + atomic_load(&race_badf) < 200 &&
				    i < 1000000); i++) {
		struct fuse_forget_in fg = { .nlookup = UINT64_MAX };

		if (send_req_on(w3, FUSE_LOOKUP, FUSE_ROOT_ID, NULL, 0, NM("f"), NULL, 0) == 0)
			memcpy(&id, rep.arg, sizeof(id));
		else
			bad++;
		send_req_on(w3, FUSE_FORGET, id, &fg, sizeof(fg), NULL, 0, NULL, 0);
	}
	atomic_store(&race_stop, true);
	pthread_join(user, NULL);
	CHECK_MSG(bad == 0, "LOOKUP kept working while FORGETs raced GETATTRs");
	CHECK_MSG(atomic_load(&race_ok) + atomic_load(&race_badf) >= 200 &&
	          atomic_load(&race_other) == 0,
	          "racing GETATTRs answered: %u ok, %u EBADF, %u anything else",
	          atomic_load(&race_ok), atomic_load(&race_badf), atomic_load(&race_other));
	fuse_worker_free(w2);
	fuse_worker_free(w3);
}

static void test_write_limits(void)
{
	struct fuse_create_in cin = { .flags = O_RDWR | O_CREAT, .mode = S_IFREG | 0644 };
	struct fuse_open_out oo;
	struct fuse_entry_out e;
	static uint8_t big[sizeof(struct fuse_write_in) + MAX_WRITE + 4096];
	struct fuse_write_in *wi = (struct fuse_write_in *)big;
	struct stat st;
	char path[sizeof(cy.share) + 16];

	CHECK_MSG(send_req(FUSE_CREATE, FUSE_ROOT_ID, &cin, sizeof(cin), NM("w"), NULL, 0) == 0,
	          "CREATE w");
	memcpy(&e, rep.arg, sizeof(e));
	memcpy(&oo, rep.arg + sizeof(e), sizeof(oo));
	memset(big, 'x', sizeof(big));
	memset(wi, 0, sizeof(*wi));
	wi->fh = oo.fh;
	wi->size = MAX_WRITE + 4096;
	CHECK_MSG(send_req(FUSE_WRITE, e.nodeid, big, sizeof(big), NULL, 0, NULL, 0) == -EINVAL,
	          "WRITE of max_write + 4096 bytes: EINVAL");
	wi->size = MAX_WRITE + 4096 + 1;
	CHECK_MSG(send_req(FUSE_WRITE, e.nodeid, big, sizeof(big), NULL, 0, NULL, 0) == -EINVAL,
	          "WRITE claiming more bytes than it carries: EINVAL");
	wi->size = 100;
	CHECK_MSG(send_req(FUSE_WRITE, e.nodeid, big, sizeof(*wi) + 10, NULL, 0, NULL, 0) == -EINVAL,
	          "WRITE of 100 bytes carrying 10: EINVAL");
	snprintf(path, sizeof(path), "%s/w", cy.share);
	CHECK_MSG(stat(path, &st) == 0 && st.st_size == 0, "nothing was written");
	wi->size = MAX_WRITE;
	CHECK_MSG(send_req(FUSE_WRITE, e.nodeid, big, sizeof(*wi) + MAX_WRITE, NULL, 0, NULL, 0) == 0,
	          "WRITE of exactly max_write works");
	CHECK_MSG(stat(path, &st) == 0 && st.st_size == MAX_WRITE, "max_write bytes landed");
}

int main(void)
{
	struct passthrough_opts pt_opts = { .cache = CACHE_AUTO, .timeout = -1, .xattr = true };
	struct fuse_server_opts se_opts = { .max_write = MAX_WRITE, .xattr = true };
	char before[8192], after[8192];
	char path[sizeof(cy.share) + 16];
	int fd, fds_start, ret;

	ferry_log_init(LOG_LVL_ERROR, false);
	if (geteuid() != 0) {
		printf("SKIP  needs root (device nodes, credential switching)\n");
		return TEST_SKIP;
	}
	ret = canary_setup(&cy, NULL, "ferry-attack");
	if (ret < 0) {
		fprintf(stderr, "canary_setup: %s\n", strerror(-ret));
		return 1;
	}
	snprintf(path, sizeof(path), "%s/f", cy.share);
	fd = open(path, O_CREAT | O_WRONLY, 0644);
	if (fd < 0 || write(fd, "data", 4) != 4)
		return 1;
	close(fd);
	if (canary_snapshot(&cy, before, sizeof(before)) < 0)
		return 1;
	fds_start = fd_count();
	pt_opts.shared_dir = cy.share;
	if (pt_session_open(&ses, &pt_opts, &se_opts) < 0) {
		fprintf(stderr, "cannot set up the session\n");
		return 1;
	}

	test_before_init();
	do_init();
	test_header_lengths();
	test_unknown_opcodes();
	test_names();
	test_symlink_link_rename();
	test_special_files();
	test_forget();
	test_forget_race();
	test_write_limits();

	pt_session_close(&ses);
	CHECK_MSG(fd_count() == fds_start, "every fd closed at the end (%d -> %d)",
	          fds_start, fd_count());
	CHECK_MSG(canary_snapshot(&cy, after, sizeof(after)) == 0 && strcmp(before, after) == 0,
	          "nothing outside the share changed");
	canary_remove(&cy);
	return check_result();
}
