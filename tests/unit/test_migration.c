/* Live migration above the transport: two passthrough sessions on one share, the state saved by one and loaded by the other, and hostile states refused. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <linux/magic.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "../common/fd_count.h"
#include "../common/pt_session.h"
#include "../common/raw_req.h"
#include "../common/scratch.h"
#include "backend/passthrough.h"
#include "common/log.h"
#include "daemon/options_config.h"
#include "daemon/service.h"
#include "migration/stream.h"
#include "../common/check.h"

static char scratch[] = "/tmp/ferry-migration-XXXXXX";
/* What the sides serve, and the /proc/self/fd they get (-1: their own):
 * the scratch directory, or "/" inside a chroot into it. */
static const char *share = scratch;
static int given_proc_fd = -1;
static char outside[] = "/tmp/ferry-migration-out-XXXXXX";
static struct raw_reply rep;
static uint64_t next_unique = 1;

/* One daemon: a session, its backend and the state the hooks get. */
struct side {
	struct pt_session ps;
	struct daemon_state st;
	struct ferry_options o;
};

static uint32_t req(struct side *s, uint32_t opcode, uint64_t nodeid, const void *arg,
		    size_t arg_len, const void *b, size_t b_len)
{
	static uint8_t in[sizeof(struct fuse_in_header) + 8192];
	struct fuse_in_header h = { .opcode = opcode, .nodeid = nodeid,
				    .unique = next_unique++ };
	size_t len = raw_req_build(in, sizeof(in), h, arg, arg_len, b, b_len, NULL, 0);

	return raw_req_run(s->ps.w, in, len, sizeof(rep.h) + sizeof(rep.arg), NULL, &rep);
}

/* --inode-file-handles of the sessions side_open makes. */
static enum inode_file_handles side_file_handles = FILE_HANDLES_NEVER;

static int side_open(struct side *s, enum mig_mode mode, bool guest_error)
{
	struct passthrough_opts pt_opts = { .shared_dir = share, .cache = CACHE_NEVER,
					    .file_handles = side_file_handles,
					    .timeout = -1, .proc_self_fd_given = given_proc_fd >= 0,
					    .proc_self_fd = given_proc_fd >= 0 ? dup(given_proc_fd) : -1 };
	struct fuse_server_opts se_opts = { .max_write = 1024 * 1024, .posix_lock = true,
					     .flock = true, .readdirplus = true };

	memset(s, 0, sizeof(*s));
	s->o.migration_mode = mode;
	s->o.migration_on_error = guest_error ? MIGRATION_ON_ERROR_GUEST_ERROR :
		MIGRATION_ON_ERROR_ABORT;
	s->o.posix_lock = s->o.flock = s->o.readdirplus = true;
	s->o.cache = CACHE_NEVER;
	s->o.inode_file_handles = side_file_handles;
	if (pt_session_open(&s->ps, &pt_opts, &se_opts) < 0)
		return -1;
	s->st.session = s->ps.se;
	s->st.pt = s->ps.pt;
	options_to_migration(&s->o, &s->st.mig);
	return 0;
}

static void side_close(struct side *s)
{
	pt_session_close(&s->ps);
}

/* The source a and the destination b, both in mode; false after failing
 * the "sessions" check if either did not open. */
static bool sides_open(struct side *a, struct side *b, enum mig_mode mode, bool guest_error)
{
	if (side_open(a, mode, guest_error) == 0 && side_open(b, mode, guest_error) == 0)
		return true;
	CHECK_MSG(0, "sessions");
	return false;
}

static int init(struct side *s)
{
	struct fuse_init_in in = { .major = 7, .minor = 38, .max_readahead = 131072,
				   .flags = FUSE_INIT_EXT | FUSE_POSIX_LOCKS |
					    FUSE_FLOCK_LOCKS | FUSE_DO_READDIRPLUS |
					    FUSE_ASYNC_READ | FUSE_MAX_PAGES };

	req(s, FUSE_INIT, 0, &in, sizeof(in), NULL, 0);
	return rep.h.error;
}

static uint64_t lookup(struct side *s, uint64_t parent, const char *name)
{
	struct fuse_entry_out e;

	req(s, FUSE_LOOKUP, parent, name, strlen(name) + 1, NULL, 0);
	if (rep.h.error)
		return 0;
	memcpy(&e, rep.arg, sizeof(e));
	return e.nodeid;
}

static uint64_t open_node(struct side *s, uint64_t nodeid, uint32_t flags, bool dir)
{
	struct fuse_open_in in = { .flags = flags };
	struct fuse_open_out o;

	req(s, dir ? FUSE_OPENDIR : FUSE_OPEN, nodeid, &in, sizeof(in), NULL, 0);
	if (rep.h.error)
		return 0;
	memcpy(&o, rep.arg, sizeof(o));
	return o.fh;
}

/* READ of up to size bytes at 0 into buf (NUL-terminated); -errno. */
static int read_node(struct side *s, uint64_t nodeid, uint64_t fh, char *buf, size_t size)
{
	struct fuse_read_in in = { .fh = fh, .size = (uint32_t)size - 1 };
	size_t n;

	req(s, FUSE_READ, nodeid, &in, sizeof(in), NULL, 0);
	if (rep.h.error)
		return rep.h.error;
	n = rep.used - sizeof(rep.h);
	memcpy(buf, rep.arg, n);
	buf[n] = '\0';
	return 0;
}

static int write_node(struct side *s, uint64_t nodeid, uint64_t fh, uint64_t off,
		      const char *data)
{
	struct fuse_write_in in = { .fh = fh, .offset = off, .size = (uint32_t)strlen(data) };

	req(s, FUSE_WRITE, nodeid, &in, sizeof(in), data, strlen(data));
	return rep.h.error;
}

static int getattr_ino(struct side *s, uint64_t nodeid, uint64_t *ino)
{
	struct fuse_getattr_in in = { 0 };
	struct fuse_attr_out a;

	req(s, FUSE_GETATTR, nodeid, &in, sizeof(in), NULL, 0);
	if (rep.h.error)
		return rep.h.error;
	memcpy(&a, rep.arg, sizeof(a));
	*ino = a.attr.ino;
	return 0;
}

/* Whether READDIR through fh lists name. */
static bool readdir_has(struct side *s, uint64_t nodeid, uint64_t fh, const char *name)
{
	struct fuse_read_in in = { .fh = fh, .size = 4096 };
	size_t off = 0, len;

	req(s, FUSE_READDIR, nodeid, &in, sizeof(in), NULL, 0);
	if (rep.h.error)
		return false;
	len = rep.used - sizeof(rep.h);
	while (off + sizeof(struct fuse_dirent) <= len) {
		struct fuse_dirent d;

		memcpy(&d, rep.arg + off, sizeof(d));
		if (d.namelen == strlen(name) &&
		    !memcmp(rep.arg + off + sizeof(d), name, d.namelen))
			return true;
		off += FUSE_DIRENT_SIZE(&d);
	}
	return false;
}

static ino_t host_ino(const char *rel)
{
	char path[512];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", scratch, rel);
	return stat(path, &st) ? 0 : st.st_ino;
}

static void host_write(const char *rel, const char *data)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", scratch, rel);
	f = fopen(path, "w");
	if (f) {
		fputs(data, f);
		fclose(f);
	}
}

static void host_read(const char *rel, char *buf, size_t size)
{
	char path[512];
	FILE *f;
	size_t n = 0;

	snprintf(path, sizeof(path), "%s/%s", scratch, rel);
	f = fopen(path, "r");
	if (f) {
		n = fread(buf, 1, size - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
}

static void host_path(const char *rel, char *buf, size_t size)
{
	snprintf(buf, size, "%s/%s", scratch, rel);
}

/* The backends make /proc/self/fd the working directory: host paths are
 * absolute. */
static void host_unlink(const char *rel)
{
	char path[512];

	host_path(rel, path, sizeof(path));
	unlink(path);
}

static void host_rename(const char *from, const char *to)
{
	char a[512], b[512];

	host_path(from, a, sizeof(a));
	host_path(to, b, sizeof(b));
	CHECK_EQ(rename(a, b), 0);
}

static void host_mkdir(const char *rel)
{
	char path[512];

	host_path(rel, path, sizeof(path));
	mkdir(path, 0755);
}

/* A memfd holding what save wrote, rewound for load; -1 on failure. */
static int save(struct side *s, char *reason, size_t size, int *ret)
{
	int fd = memfd_create("state", MFD_CLOEXEC);

	*ret = s->st.pt ? migration_save(s->st.session, s->st.pt, &s->st.mig, fd, reason,
					  size) : -EINVAL;
	lseek(fd, 0, SEEK_SET);
	return fd;
}

static int load_fd(struct side *s, int fd, char *reason, size_t size)
{
	int ret;

	lseek(fd, 0, SEEK_SET);
	ret = migration_load(s->st.session, s->st.pt, &s->st.mig, fd, reason, size);
	return ret;
}

static int load_buf(struct side *s, const struct mig_buf *b, char *reason, size_t size)
{
	int fd = memfd_create("state", MFD_CLOEXEC), ret;

	if (write(fd, b->data, b->len) != (ssize_t)b->len) {
		close(fd);
		return -EIO;
	}
	ret = load_fd(s, fd, reason, size);
	close(fd);
	return ret;
}

/* ---- a whole migration ------------------------------------------------- */

static void test_round_trip(enum mig_mode mode)
{
	struct side a, b;
	char reason[512] = "", buf[256];
	uint64_t d, f1, ap, rw, fh_f1, fh_ap, fh_rw, fh_d, fh_root, ino = 0, fresh, fh_new;
	int fd, ret;

	printf("-- round trip, %s\n", mode == MIG_MODE_FIND_PATHS ? "find-paths" : "file-handles");
	host_mkdir("d");
	host_write("d/f1", "hello");
	host_write("ap", "append");
	host_write("rw", "readwrite");
	host_write("other", "other");
	if (!sides_open(&a, &b, mode, false))
		return;
	/* The source's own checks find nothing wrong on a quiet share. */
	a.st.mig.backend.verify_handles = a.st.mig.backend.confirm_paths = true;
	CHECK_EQ(init(&a), 0);
	d = lookup(&a, FUSE_ROOT_ID, "d");
	f1 = lookup(&a, d, "f1");
	ap = lookup(&a, FUSE_ROOT_ID, "ap");
	rw = lookup(&a, FUSE_ROOT_ID, "rw");
	CHECK(d && f1 && ap && rw);
	fh_f1 = open_node(&a, f1, O_RDONLY, false);
	fh_ap = open_node(&a, ap, O_WRONLY | O_APPEND, false);
	fh_rw = open_node(&a, rw, O_RDWR, false);
	fh_d = open_node(&a, d, O_RDONLY | O_DIRECTORY, true);
	fh_root = open_node(&a, FUSE_ROOT_ID, O_RDONLY | O_DIRECTORY, true);
	CHECK(fh_f1 && fh_ap && fh_rw && fh_d && fh_root);

	fd = save(&a, reason, sizeof(reason), &ret);
	CHECK_MSG(ret == 0, "save: %s", ret ? reason : "ok");
	/* The source keeps serving: a cancelled migration goes on. */
	CHECK_EQ(read_node(&a, f1, fh_f1, buf, sizeof(buf)), 0);
	CHECK(!strcmp(buf, "hello"));
	CHECK_EQ(lookup(&a, d, "f1"), f1);

	ret = load_fd(&b, fd, reason, sizeof(reason));
	CHECK_MSG(ret == 0, "load: %s", ret ? reason : "ok");
	close(fd);
	/* B had no INIT and serves A's ids and fhs. */
	CHECK_EQ(read_node(&b, f1, fh_f1, buf, sizeof(buf)), 0);
	CHECK_MSG(!strcmp(buf, "hello"), "B reads A's fh: '%s'", buf);
	CHECK_EQ(write_node(&b, ap, fh_ap, 0, "+B"), 0);
	host_read("ap", buf, sizeof(buf));
	CHECK_MSG(!strcmp(buf, "append+B"), "append through B: '%s'", buf);
	CHECK_EQ(write_node(&b, rw, fh_rw, 0, "RW"), 0);
	host_read("rw", buf, sizeof(buf));
	CHECK_MSG(!strcmp(buf, "RWadwrite"), "write through B: '%s'", buf);
	CHECK_EQ(read_node(&b, rw, fh_rw, buf, sizeof(buf)), 0);
	CHECK(readdir_has(&b, d, fh_d, "f1"));
	CHECK(readdir_has(&b, FUSE_ROOT_ID, fh_root, "rw"));
	CHECK_EQ(getattr_ino(&b, f1, &ino), 0);
	CHECK_EQ(ino, host_ino("d/f1"));
	CHECK_EQ(getattr_ino(&b, rw, &ino), 0);
	CHECK_EQ(ino, host_ino("rw"));
	/* The same file looked up again is the same node; a new one gets an
	 * id A never gave out, and a new open an fh A never gave out. */
	CHECK_EQ(lookup(&b, d, "f1"), f1);
	fresh = lookup(&b, FUSE_ROOT_ID, "other");
	CHECK(fresh && fresh != d && fresh != f1 && fresh != ap && fresh != rw);
	fh_new = open_node(&b, fresh, O_RDONLY, false);
	CHECK(fh_new > fh_d && fh_new > fh_rw);
	/* A second state does not load over a served one. */
	fd = save(&a, reason, sizeof(reason), &ret);
	CHECK_EQ(load_fd(&b, fd, reason, sizeof(reason)), -EBUSY);
	close(fd);
	side_close(&a);
	side_close(&b);
}

/* A child's end: its failures in its exit status (77: it could not
 * set up). */
static void child_exit(void)
{
	fflush(stdout);
	_exit(failures ? 1 : 0);
}

static void child_wait(pid_t pid, const char *skip)
{
	int status = 0;

	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
		SKIP_CASE("%s", skip);
	else
		CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's checks");
}

/*
 * A sandboxed daemon has a mount namespace of its own, where every mount id
 * differs: the destination, in a child in a new mount namespace, must still
 * find the migrated nodes when the guest looks the same names up again.
 */
static void test_other_namespace(void)
{
	enum { FILES = 64 };
	uint64_t ids[FILES];
	char name[32], reason[512] = "";
	struct side a, b;
	int fd, ret;
	pid_t pid;

	printf("-- the destination in another mount namespace\n");
	host_mkdir("ns");
	if (side_open(&a, MIG_MODE_FIND_PATHS, false)) {
		CHECK_MSG(0, "session");
		return;
	}
	init(&a);
	uint64_t dir = lookup(&a, FUSE_ROOT_ID, "ns");

	for (int i = 0; i < FILES; i++) {
		snprintf(name, sizeof(name), "ns/f%d", i);
		host_write(name, "x");
		ids[i] = lookup(&a, dir, name + 3);
	}
	fd = save(&a, reason, sizeof(reason), &ret);
	CHECK_MSG(ret == 0, "save: %s", ret ? reason : "ok");
	/* Replaced: the mount ids differ there, the file handle still tells. */
	host_unlink("ns/f0");
	host_write("ns/f0", "impostor");
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		uint64_t ino;
		int same = 0;

		if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
			_exit(77);
		if (side_open(&b, MIG_MODE_FIND_PATHS, true) ||
		    load_fd(&b, fd, reason, sizeof(reason)))
			_exit(1);
		for (int i = 1; i < FILES; i++) {
			snprintf(name, sizeof(name), "f%d", i);
			same += lookup(&b, dir, name) == ids[i];
		}
		CHECK_MSG(same == FILES - 1, "%d of %d names found as the same nodes", same,
			  FILES - 1);
		CHECK_EQ(getattr_ino(&b, ids[0], &ino), -EIO);
		CHECK(lookup(&b, dir, "f0") != ids[0]);
		side_close(&b);
		child_exit();
	}
	child_wait(pid, "no mount namespace here");
	close(fd);
	side_close(&a);
}

/* ---- the host changes the share between save and load ------------------ */

enum change { RENAME, DELETE, REPLACE };
static const char *const change_names[] = { "renamed", "deleted", "replaced" };

static void test_host_change(enum mig_mode mode, bool guest_error, enum change change)
{
	struct side a, b;
	char reason[512] = "", buf[256];
	uint64_t v, k, fh_v, ino = 0;
	int fd, ret, before;
	bool handles = mode == MIG_MODE_FILE_HANDLES;

	printf("-- %s, on-error %s, victim %s\n", handles ? "file-handles" : "find-paths",
	       guest_error ? "guest-error" : "abort", change_names[change]);
	host_write("victim", "original");
	host_write("keep", "kept");
	host_unlink("victim2");
	if (!sides_open(&a, &b, mode, guest_error))
		return;
	init(&a);
	v = lookup(&a, FUSE_ROOT_ID, "victim");
	k = lookup(&a, FUSE_ROOT_ID, "keep");
	fh_v = open_node(&a, v, O_RDONLY, false);
	fd = save(&a, reason, sizeof(reason), &ret);
	CHECK_MSG(ret == 0, "save: %s", ret ? reason : "ok");
	if (change == RENAME)
		host_rename("victim", "victim2");
	else if (change == DELETE)
		host_unlink("victim");
	else {
		host_unlink("victim");
		host_write("victim", "impostor");
	}
	before = fd_count();
	ret = load_fd(&b, fd, reason, sizeof(reason));
	if (handles) {
		/* The handle still opens the file A holds, wherever it is. */
		CHECK_MSG(ret == 0, "load: %s", ret ? reason : "ok");
		CHECK_EQ(read_node(&b, v, fh_v, buf, sizeof(buf)), 0);
		CHECK_MSG(!strcmp(buf, "original"), "B reads '%s'", buf);
	} else if (!guest_error) {
		CHECK_MSG(ret < 0, "refused: %s", reason);
		CHECK_EQ(fd_count(), before);   /* the stream's memfd still open */
		/* B keeps nothing of it and serves a guest of its own. */
		CHECK_EQ(init(&b), 0);
		CHECK(lookup(&b, FUSE_ROOT_ID, "keep") != 0);
	} else {
		CHECK_MSG(ret == 0, "load: %s", ret ? reason : "ok");
		/* Never the impostor: EIO on the victim alone. */
		CHECK_EQ(getattr_ino(&b, v, &ino), -EIO);
		CHECK(read_node(&b, v, fh_v, buf, sizeof(buf)) < 0);
		CHECK_EQ(getattr_ino(&b, k, &ino), 0);
		CHECK_EQ(ino, host_ino("keep"));
	}
	close(fd);
	side_close(&a);
	side_close(&b);
	host_unlink("victim");
	host_unlink("victim2");
}

/* ---- an unlinked file the guest still has open ------------------------- */

static void test_unlinked(enum mig_mode mode, bool guest_error)
{
	struct side a, b;
	char reason[512] = "", buf[256];
	uint64_t t, fh, ino = 0;
	int fd, ret;

	printf("-- unlinked but open, %s, %s\n",
	       mode == MIG_MODE_FILE_HANDLES ? "file-handles" : "find-paths",
	       guest_error ? "guest-error" : "abort");
	host_write("tmpfile", "still here");
	if (!sides_open(&a, &b, mode, guest_error))
		return;
	init(&a);
	t = lookup(&a, FUSE_ROOT_ID, "tmpfile");
	fh = open_node(&a, t, O_RDWR, false);
	host_unlink("tmpfile");
	fd = save(&a, reason, sizeof(reason), &ret);
	if (mode == MIG_MODE_FIND_PATHS && !guest_error) {
		CHECK_MSG(ret < 0 && strstr(reason, "tmpfile"), "save refused: %s", reason);
	} else {
		CHECK_MSG(ret == 0, "save: %s", ret ? reason : "ok");
		ret = load_fd(&b, fd, reason, sizeof(reason));
		CHECK_MSG(ret == 0, "load: %s", ret ? reason : "ok");
		if (mode == MIG_MODE_FILE_HANDLES) {
			CHECK_EQ(read_node(&b, t, fh, buf, sizeof(buf)), 0);
			CHECK_MSG(!strcmp(buf, "still here"), "B reads '%s'", buf);
			CHECK_EQ(write_node(&b, t, fh, 0, "STILL"), 0);
		} else {
			CHECK_EQ(getattr_ino(&b, t, &ino), -EIO);
		}
	}
	close(fd);
	side_close(&a);
	side_close(&b);
}

/* ---- options both sides must agree on ---------------------------------- */

static void test_options_mismatch(void)
{
	struct side a, b;
	char reason[512] = "";
	int fd, ret, before;

	printf("-- mismatched options\n");
	if (side_open(&a, MIG_MODE_FIND_PATHS, false) ||
	    side_open(&b, MIG_MODE_FILE_HANDLES, false)) {
		CHECK_MSG(0, "sessions");
		return;
	}
	init(&a);
	lookup(&a, FUSE_ROOT_ID, "keep");
	fd = save(&a, reason, sizeof(reason), &ret);
	before = fd_count();
	b.st.mig.agreed.flags ^= MIG_OPT_WRITEBACK;
	ret = load_fd(&b, fd, reason, sizeof(reason));
	CHECK_MSG(ret == -EINVAL && strstr(reason, "writeback"), "writeback: %s", reason);
	CHECK_EQ(fd_count(), before);
	b.st.mig.agreed.flags ^= MIG_OPT_WRITEBACK;
	/* The migration mode is how the source names its inodes: a
	 * file-handles destination reads a find-paths stream (and the other
	 * way round), as the Rust virtiofsd's does. */
	ret = load_fd(&b, fd, reason, sizeof(reason));
	CHECK_MSG(ret == 0, "then agreeing, in another migration mode: %s", ret ? reason : "ok");
	close(fd);
	side_close(&a);
	side_close(&b);
}

/*
 * A destination that keeps inodes by file handle (--inode-file-handles)
 * loads files the guest knows but holds no open handle on without an fd
 * each, as a LOOKUP would: so a guest may know more files than the fd
 * limit, and the destination still answers for every one.
 */
static void test_loaded_by_handle(void)
{
	enum { FILES = 64 };
	struct side a, b;
	char reason[512] = "", name[32];
	uint64_t dir, nodes[FILES], fh, ino;
	int fd, ret, before, ok = 0;

	printf("-- a destination keeping inodes by file handle\n");
	side_file_handles = FILE_HANDLES_PREFER;
	if (side_open(&a, MIG_MODE_FIND_PATHS, false) || side_open(&b, MIG_MODE_FIND_PATHS, false)) {
		side_file_handles = FILE_HANDLES_NEVER;
		CHECK_MSG(0, "sessions");
		return;
	}
	side_file_handles = FILE_HANDLES_NEVER;
	init(&a);
	host_mkdir("byhandle");
	for (int i = 0; i < FILES; i++) {
		snprintf(name, sizeof(name), "byhandle/f%d", i);
		host_write(name, "x");
	}
	dir = lookup(&a, FUSE_ROOT_ID, "byhandle");
	for (int i = 0; i < FILES; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		nodes[i] = lookup(&a, dir, name);
	}
	fh = open_node(&a, nodes[0], O_RDONLY, false);
	fd = save(&a, reason, sizeof(reason), &ret);
	CHECK_MSG(ret == 0, "save: %s", ret ? reason : "ok");
	before = fd_count();
	ret = load_fd(&b, fd, reason, sizeof(reason));
	CHECK_MSG(ret == 0, "load: %s", ret ? reason : "ok");
	/* The directory and the held file keep an fd, and the open handle one. */
	CHECK_MSG(fd_count() - before <= 4, "%d fds for %d loaded files", fd_count() - before,
		  FILES);
	for (int i = 0; i < FILES; i++)
		ok += getattr_ino(&b, nodes[i], &ino) == 0;
	CHECK_EQ(ok, FILES);
	CHECK_MSG(read_node(&b, nodes[0], fh, name, sizeof(name)) == 0 && !strcmp(name, "x"),
		  "READ through the held handle");
	close(fd);
	side_close(&a);
	side_close(&b);
}

/* ---- a host lock held -------------------------------------------------- */

static void test_lock_refused(void)
{
	struct side a;
	char reason[512] = "";
	uint64_t n, fh;
	struct fuse_lk_in lk = { .owner = 42, .lk = { .start = 0, .end = INT64_MAX,
						     .type = F_WRLCK, .pid = 1 } };
	int fd, ret;

	printf("-- a POSIX lock held\n");
	host_mkdir("locks");
	host_write("locks/held", "x");
	if (side_open(&a, MIG_MODE_FIND_PATHS, false)) {
		CHECK_MSG(0, "session");
		return;
	}
	init(&a);
	n = lookup(&a, lookup(&a, FUSE_ROOT_ID, "locks"), "held");
	fh = open_node(&a, n, O_RDWR, false);
	lk.fh = fh;
	req(&a, FUSE_SETLK, n, &lk, sizeof(lk), NULL, 0);
	CHECK_EQ(rep.h.error, 0);
	fd = save(&a, reason, sizeof(reason), &ret);
	CHECK_MSG(ret == -EBUSY && strstr(reason, "locks/held"), "refused: %s", reason);
	close(fd);
	lk.lk.type = F_UNLCK;
	req(&a, FUSE_SETLK, n, &lk, sizeof(lk), NULL, 0);
	fd = save(&a, reason, sizeof(reason), &ret);
	CHECK_MSG(ret == 0, "after the unlock: %s", ret ? reason : "ok");
	close(fd);

	printf("-- an flock held\n");
	lk.lk_flags = FUSE_LK_FLOCK;
	lk.lk.type = F_RDLCK;
	req(&a, FUSE_SETLK, n, &lk, sizeof(lk), NULL, 0);
	CHECK_EQ(rep.h.error, 0);
	fd = save(&a, reason, sizeof(reason), &ret);
	CHECK_MSG(ret == -EBUSY && strstr(reason, "locks/held"), "refused: %s", reason);
	close(fd);
	side_close(&a);
}

/* ---- hostile streams --------------------------------------------------- */

struct hostile {
	struct mig_session session;
	struct mig_options options;
	struct mig_counters counters;
	struct mig_inode inodes[4];
	size_t n;
	struct mig_file_handle fh;
	/* Bytes the encoder would refuse, written over its output as a hostile
	 * writer would (same length), with the checksum made right again. */
	const char *patch_from, *patch_to;
	size_t cut;             /* bytes cut off the end */
	uint32_t version;       /* not 0: written into the header */
};

static void hostile_base(struct hostile *h, const struct side *b)
{
	memset(h, 0, sizeof(*h));
	h->session = (struct mig_session){ .initialized = true, .major = 7, .minor = 38,
		.max_write = 1024 * 1024, .flags = FUSE_ASYNC_READ | FUSE_INIT_EXT,
		.max_readahead = 4096, .time_gran = 1, .max_pages = 256 };
	h->options = b->st.mig.agreed;
	h->counters.next_fh = 100;
	h->counters.shard_bits = 6;
	for (unsigned i = 0; i < 64; i++)
		h->counters.next_seq[i] = 100;
	h->inodes[0] = (struct mig_inode){ .nodeid = 1, .nlookup = 1, .type = S_IFDIR,
					   .flags = MIG_INODE_ROOT };
	h->n = 1;
}

static struct mig_inode *hostile_add(struct hostile *h, uint64_t nodeid, const char *name,
				     mode_t type)
{
	struct mig_inode *mi = &h->inodes[h->n++];

	*mi = (struct mig_inode){ .nodeid = nodeid, .nlookup = 1, .type = type,
				  .flags = MIG_INODE_PATH, .parent = 1, .name = name,
				  .name_len = strlen(name) };
	return mi;
}

/* Loads h (damaged by damage bytes appended or one byte flipped at flip
 * from the end, when not 0) into b: refused, no fd left, reason set. */
static void hostile_refused(struct side *b, struct hostile *h, const char *what,
			    int append, size_t flip, const char *expect)
{
	struct mig_arrays arr = { .session = &h->session, .options = &h->options,
				  .counters = &h->counters, .inodes = h->inodes,
				  .n_inodes = h->n };
	struct mig_buf buf = { 0 };
	char reason[512] = "";
	int before, ret;

	ret = mig_encode_arrays(&arr, &buf);
	if (ret) {
		/* The encoder's own checks stopped it (a hostile writer
		 * writes the bytes itself: test_migration_stream.c feeds such
		 * streams to the decoder). */
		CHECK_MSG(expect == NULL, "%s: the encoder refused it (%d)", what, ret);
		mig_buf_free(&buf);
		return;
	}
	if (h->patch_from) {
		size_t len = strlen(h->patch_from);
		unsigned char *at = memmem(buf.data, buf.len, h->patch_from, len);

		CHECK_MSG(at && strlen(h->patch_to) == len, "%s: patch", what);
		if (at)
			memcpy(at, h->patch_to, len);
		mig_fix_checksum(buf.data, buf.len);
	}
	if (h->version) {
		for (unsigned i = 0; i < 4; i++)
			buf.data[8 + i] = (unsigned char)(h->version >> (8 * i));
		mig_fix_checksum(buf.data, buf.len);
	}
	if (h->cut && h->cut < buf.len)
		buf.len -= h->cut;
	if (append) {
		unsigned char *grown = realloc(buf.data, buf.len + 1);

		if (!grown) {
			CHECK_MSG(0, "%s: out of memory", what);
			mig_buf_free(&buf);
			return;
		}
		buf.data = grown;
		buf.data[buf.len++] = 0;
	}
	if (flip && flip <= buf.len)
		buf.data[buf.len - flip] ^= 0x40;
	before = fd_count();
	ret = load_buf(b, &buf, reason, sizeof(reason));
	CHECK_MSG(ret < 0 && (!expect || strstr(reason, expect)), "%s: %d %s", what, ret,
		  reason);
	CHECK_EQ(fd_count(), before);
	mig_buf_free(&buf);
}

/* h, which is not hostile at all, must load. */
static void hostile_loads(struct side *b, struct hostile *h, const char *what)
{
	struct mig_arrays arr = { .session = &h->session, .options = &h->options,
				  .counters = &h->counters, .inodes = h->inodes,
				  .n_inodes = h->n };
	struct mig_buf buf = { 0 };
	char reason[512] = "";

	CHECK_EQ(mig_encode_arrays(&arr, &buf), 0);
	CHECK_MSG(load_buf(b, &buf, reason, sizeof(reason)) == 0, "%s: %s", what,
		  reason[0] ? reason : "loads");
	mig_buf_free(&buf);
}

/* The handle of the file at path into fh; false (and a SKIP) if none. */
static bool handle_of(const char *path, struct mig_file_handle *fh, const char *what)
{
	struct { struct file_handle fh; unsigned char bytes[MAX_HANDLE_SZ]; } fhb;
	int mount_id;

	fhb.fh.handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(AT_FDCWD, path, &fhb.fh, &mount_id, 0) != 0) {
		SKIP_CASE("%s: no file handle: %s", what, strerror(errno));
		return false;
	}
	fh->handle_type = fhb.fh.handle_type;
	fh->mount_id = (uint64_t)mount_id;
	fh->size = (uint16_t)fhb.fh.handle_bytes;
	memcpy(fh->bytes, fhb.fh.f_handle, fhb.fh.handle_bytes);
	return true;
}

/* A stream naming one file by its handle only; expect: what the reason
 * must say (NULL: the load must succeed). */
static void load_by_handle(struct side *b, const struct mig_file_handle *fh, mode_t type,
			   bool unlinked, const char *what, const char *expect)
{
	struct hostile h;

	hostile_base(&h, b);
	h.fh = *fh;
	h.inodes[h.n++] = (struct mig_inode){ .nodeid = 2 << 6 | 2, .nlookup = 1,
		.type = type, .flags = MIG_INODE_FILE_HANDLE | (unlinked ? MIG_INODE_UNLINKED : 0),
		.file_handle = &h.fh };
	if (expect)
		hostile_refused(b, &h, what, 0, 0, expect);
	else
		hostile_loads(b, &h, what);
}

/* A stream naming the file at path by its handle only, unlinked first if
 * unlinked (the caller holds it open): refused as outside the share. */
static void hostile_handle(struct side *b, const char *path, mode_t type, bool unlinked,
			   const char *what)
{
	struct mig_file_handle fh;

	if (!handle_of(path, &fh, what))
		return;
	if (unlinked)
		unlink(path);
	load_by_handle(b, &fh, type, unlinked, what, "outside");
}

static void test_hostile(void)
{
	struct side b;
	struct hostile h;
	char path[512];
	int fd;

	printf("-- hostile streams\n");
	host_write("x", "x");
	host_unlink("y");
	host_path("x", path, sizeof(path));
	{
		char ypath[512];

		host_path("y", ypath, sizeof(ypath));
		CHECK_EQ(link(path, ypath), 0);
	}
	if (side_open(&b, MIG_MODE_FILE_HANDLES, false)) {
		CHECK_MSG(0, "session");
		return;
	}
	hostile_base(&h, &b);
	hostile_add(&h, 2 << 6 | 2, "x", S_IFREG);
	hostile_refused(&b, &h, "trailing bytes", 1, 0, "");
	hostile_refused(&b, &h, "a bad checksum", 0, 1, "checksum");
	hostile_refused(&b, &h, "a damaged body", 0, 20, "");
	h.cut = 1;
	hostile_refused(&b, &h, "cut by a byte", 0, 0, "");
	h.cut = 100;
	hostile_refused(&b, &h, "cut in a record", 0, 0, "");
	h.cut = 0;
	h.version = 2;
	hostile_refused(&b, &h, "version 2", 0, 0, "version");
	h.version = 0;

	static const char *const bad_names[][2] = {
		{ "zz", ".." }, { "z", "." }, { "zzz", "a/b" }, { "zzzz", "../x" },
	};
	for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
		char what[64];

		hostile_base(&h, &b);
		hostile_add(&h, 2 << 6 | 2, bad_names[i][0], S_IFDIR);
		h.patch_from = bad_names[i][0];
		h.patch_to = bad_names[i][1];
		snprintf(what, sizeof(what), "the name '%s'", bad_names[i][1]);
		hostile_refused(&b, &h, what, 0, 0, "name");
	}
	hostile_base(&h, &b);
	hostile_add(&h, 2 << 6 | 2, "a", S_IFDIR)->parent = 3 << 6 | 3;
	hostile_add(&h, 3 << 6 | 3, "b", S_IFDIR)->parent = 2 << 6 | 2;
	hostile_refused(&b, &h, "a cycle", 0, 0, NULL);

	/* Two names for one host inode (a hard link): two node ids. */
	hostile_base(&h, &b);
	hostile_add(&h, 2 << 6 | 2, "x", S_IFREG);
	hostile_add(&h, 3 << 6 | 3, "y", S_IFREG);
	hostile_refused(&b, &h, "one host inode twice", 0, 0, "same host inode");

	/* A flag this server does not offer (writeback is off here). */
	hostile_base(&h, &b);
	h.session.flags |= FUSE_WRITEBACK_CACHE;
	hostile_refused(&b, &h, "an INIT flag not offered", 0, 0, "not offered");
	hostile_base(&h, &b);
	h.session.minor = 45;
	hostile_refused(&b, &h, "a newer minor", 0, 0, "minor");

	/* File handles of a file, a directory and an unlinked file (still
	 * open here) outside the share. */
	snprintf(path, sizeof(path), "%s/secret", outside);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	hostile_handle(&b, path, S_IFREG, false, "a file handle outside the share");
	hostile_handle(&b, outside, S_IFDIR, false, "a directory handle outside the share");
	{
		char gone[600];
		int gfd;

		snprintf(gone, sizeof(gone), "%s/gone", outside);
		gfd = open(gone, O_CREAT | O_WRONLY, 0600);
		hostile_handle(&b, gone, S_IFREG, true, "an unlinked file outside the share");
		close(gfd);
	}
	close(fd);
	/* B is still fresh and serves. */
	CHECK_EQ(init(&b), 0);
	CHECK(lookup(&b, FUSE_ROOT_ID, "x") != 0);
	unlink(path);
	side_close(&b);
}

/*
 * A sandboxed daemon serves its share as the process root, where the
 * kernel's name of a file gives no proof: outside a chroot a file is named
 * by its full path, outside a bind mount "/". In a child: chroot into the
 * scratch directory (bind-mounted onto itself in a mount namespace of its
 * own when bind), then handles of files outside must still be refused and
 * one of a file inside must still load.
 */
static void test_share_is_root(bool bind)
{
	struct mig_file_handle in_fh, secret_fh, dir_fh, gone_fh;
	char secret[600], gone[600], inside[600];
	struct side b;
	int fd, gfd;
	pid_t pid;

	printf("-- the share is the process root (%s)\n", bind ? "bind mount" : "chroot");
	snprintf(secret, sizeof(secret), "%s/secret2", outside);
	snprintf(gone, sizeof(gone), "%s/gone2", outside);
	fd = open(secret, O_CREAT | O_WRONLY, 0600);
	gfd = open(gone, O_CREAT | O_WRONLY, 0600);
	host_write("inside", "in");
	host_path("inside", inside, sizeof(inside));
	/* Taken here: inside the chroot those paths do not exist. */
	if (!handle_of(inside, &in_fh, "inside") || !handle_of(secret, &secret_fh, "secret") ||
	    !handle_of(outside, &dir_fh, "outside") || !handle_of(gone, &gone_fh, "gone")) {
		close(fd);
		close(gfd);
		return;
	}
	unlink(gone);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		given_proc_fd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (bind && (unshare(CLONE_NEWNS) ||
			     mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
			     mount(scratch, scratch, NULL, MS_BIND, NULL)))
			_exit(77);
		if (chroot(scratch) || chdir("/"))
			_exit(77);
		share = "/";
		if (side_open(&b, MIG_MODE_FILE_HANDLES, false))
			_exit(1);
		load_by_handle(&b, &secret_fh, S_IFREG, false, "a file outside the root", "outside");
		load_by_handle(&b, &dir_fh, S_IFDIR, false, "a directory outside the root",
			       "outside");
		load_by_handle(&b, &gone_fh, S_IFREG, true, "an unlinked file outside the root",
			       "outside");
		load_by_handle(&b, &in_fh, S_IFREG, false, "a file inside the root", NULL);
		side_close(&b);
		child_exit();
	}
	child_wait(pid, "no chroot or mount namespace here");
	close(fd);
	close(gfd);
	unlink(secret);
}

/*
 * Every byte of a real state changed in turn, its checksum made right so
 * that the change reaches the structural checks and the backend: each load
 * is refused with no fd left, or loads (a count or flag the rules allow);
 * a destination that refused still takes the undamaged state.
 */
static void test_every_byte(enum mig_mode mode)
{
	struct side a, b;
	struct mig_buf buf = { 0 };
	char reason[512];
	uint64_t d, f;
	int fd, ret, refused = 0, loaded = 0, leaks = 0;

	printf("-- every byte of a state changed, %s\n",
	       mode == MIG_MODE_FIND_PATHS ? "find-paths" : "file-handles");
	host_mkdir("d");
	host_write("d/f1", "hello");
	if (!sides_open(&a, &b, mode, true))
		return;
	init(&a);
	d = lookup(&a, FUSE_ROOT_ID, "d");
	f = lookup(&a, d, "f1");
	open_node(&a, f, O_RDWR, false);
	open_node(&a, d, O_RDONLY, true);
	fd = save(&a, reason, sizeof(reason), &ret);
	CHECK_MSG(ret == 0, "save: %s", ret ? reason : "ok");
	buf.len = (size_t)lseek(fd, 0, SEEK_END);
	buf.data = malloc(buf.len);
	CHECK(buf.data && pread(fd, buf.data, buf.len, 0) == (ssize_t)buf.len);
	close(fd);
	for (size_t i = 0; buf.data && i + MIG_END_SIZE < buf.len; i++) {
		int before = fd_count();

		buf.data[i] ^= 0x5a;
		mig_fix_checksum(buf.data, buf.len);
		ret = load_buf(&b, &buf, reason, sizeof(reason));
		buf.data[i] ^= 0x5a;
		if (ret == 0) {
			loaded++;
			side_close(&b);
			if (side_open(&b, mode, true))
				break;
			continue;
		}
		refused++;
		leaks += fd_count() != before;
	}
	mig_fix_checksum(buf.data, buf.len);
	printf("      %d refused, %d loaded\n", refused, loaded);
	CHECK_EQ(leaks, 0);
	CHECK(refused > 0);
	CHECK_MSG(load_buf(&b, &buf, reason, sizeof(reason)) == 0, "the undamaged state: %s",
		  reason);
	free(buf.data);
	side_close(&a);
	side_close(&b);
}

/* ---- a FUSE share: another mount's handle of the same file ------------- */

/*
 * A FUSE handle is the node id one FUSE server gave the inode on one mount:
 * GlusterFS mounted on two hosts (or twice on one) gives the same file
 * other handle bytes on each. A find-paths stream from the other mount
 * names f by its path and carries that mount's handle: the destination
 * must serve the file its path names, not refuse it as "another file". On
 * a local file system the same unequal bytes still mean another file. The
 * FUSE mount here is ferryfsd's own --mount of a directory; the other
 * mount's handle is this one's with the node id changed and a mount id
 * this daemon does not have.
 */
static void path_and_handle(struct side *b, const char *path, const char *what, bool loads)
{
	struct hostile h;
	struct mig_inode *mi;

	hostile_base(&h, b);
	if (!handle_of(path, &h.fh, what))
		return;
	for (unsigned i = 0; i < 4 && i < h.fh.size; i++)
		h.fh.bytes[i] ^= 0x5a;
	h.fh.mount_id += 100000;
	mi = hostile_add(&h, 2 << 6 | 2, "f", S_IFREG);
	mi->flags |= MIG_INODE_FILE_HANDLE;
	mi->file_handle = &h.fh;
	if (loads)
		hostile_loads(b, &h, what);
	else
		hostile_refused(b, &h, what, 0, 0, "another file");
}

static bool is_fuse(const char *path)
{
	struct statfs sfs;

	return statfs(path, &sfs) == 0 && sfs.f_type == FUSE_SUPER_MAGIC;
}

static void test_fuse_other_mount(void)
{
	char exe[PATH_MAX], src[PATH_MAX], mnt[PATH_MAX], path[PATH_MAX + 8];
	const char *ferryfsd = getenv("FERRYFSD");
	struct side b;
	ssize_t n;
	pid_t pid;

	printf("-- find-paths, the handle from another mount of a FUSE share\n");
	host_write("f", "local");
	host_path("f", path, sizeof(path));
	if (side_open(&b, MIG_MODE_FIND_PATHS, false) == 0) {
		path_and_handle(&b, path, "local share, unequal handle", false);
		side_close(&b);
	}
	/* ferryfsd of this build: $FERRYFSD, else build/ferryfsd next to build/tests/unit/. */
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 32);
	if (!ferryfsd && n > 0) {
		char *slash = exe;

		exe[n] = 0;
		for (int up = 0; up < 3 && slash; up++) {
			slash = strrchr(exe, '/');
			if (slash)
				*slash = 0;
		}
		if (slash) {
			strcat(exe, "/ferryfsd");
			ferryfsd = exe;
		}
	}
	if (!ferryfsd || access(ferryfsd, X_OK)) {
		SKIP_CASE("FUSE share: no ferryfsd built");
		return;
	}
	host_mkdir("fusesrc");
	host_path("fusesrc", src, sizeof(src));
	snprintf(path, sizeof(path), "%s/f", src);
	close(open(path, O_CREAT | O_WRONLY, 0644));
	snprintf(mnt, sizeof(mnt), "%s/fuse", outside);
	mkdir(mnt, 0755);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		char m[PATH_MAX + 16], d[PATH_MAX + 16];
		int null = open("/dev/null", O_RDWR);

		snprintf(m, sizeof(m), "--mount=%s", mnt);
		snprintf(d, sizeof(d), "--shared-dir=%s", src);
		dup2(null, 1);
		dup2(null, 2);
		execl(ferryfsd, ferryfsd, m, d, "--sandbox=none", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 100 && pid > 0 && !is_fuse(mnt); i++)
		usleep(50000);
	if (pid < 0 || !is_fuse(mnt)) {
		SKIP_CASE("FUSE share: ferryfsd --mount did not mount %s", mnt);
	} else {
		share = mnt;
		snprintf(path, sizeof(path), "%s/f", mnt);
		if (side_open(&b, MIG_MODE_FIND_PATHS, false) == 0) {
			path_and_handle(&b, path, "FUSE share, the other mount's handle", true);
			side_close(&b);
		} else {
			CHECK_MSG(0, "a session on the FUSE share");
		}
		share = scratch;
		umount2(mnt, MNT_DETACH);
	}
	if (pid > 0) {
		kill(pid, SIGTERM);
		waitpid(pid, NULL, 0);
	}
	rmdir(mnt);
	host_unlink("f");
}

int main(void)
{
	ferry_log_init(LOG_LVL_ERROR, false);
	if (!mkdtemp(scratch) || !mkdtemp(outside)) {
		perror("scratch");
		return 1;
	}
	/* open_by_handle_at() needs CAP_DAC_READ_SEARCH. */
	bool handles = geteuid() == 0;

	if (!handles)
		SKIP_CASE("file-handles mode: needs root (CAP_DAC_READ_SEARCH)");
	test_round_trip(MIG_MODE_FIND_PATHS);
	if (handles)
		test_round_trip(MIG_MODE_FILE_HANDLES);
	for (int m = 0; m < (handles ? 2 : 1); m++)
		for (int g = 0; g < 2; g++)
			for (int c = RENAME; c <= REPLACE; c++)
				test_host_change(m ? MIG_MODE_FILE_HANDLES : MIG_MODE_FIND_PATHS,
						 g, c);
	if (handles)
		test_unlinked(MIG_MODE_FILE_HANDLES, false);
	test_unlinked(MIG_MODE_FIND_PATHS, false);
	test_unlinked(MIG_MODE_FIND_PATHS, true);
	if (handles)
		test_other_namespace();
	if (handles) {
		test_loaded_by_handle();
		test_options_mismatch();
		test_hostile();
		test_share_is_root(false);
		test_share_is_root(true);
	}
	test_lock_refused();
	if (handles)
		test_fuse_other_mount();
	test_every_byte(MIG_MODE_FIND_PATHS);
	if (handles)
		test_every_byte(MIG_MODE_FILE_HANDLES);
	rmdir(outside);
	return scratch_finish(scratch, check_result());
}
