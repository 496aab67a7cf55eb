/* Drives passthrough_ops directly on a scratch directory, as a hostile or honest guest would. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/scratch.h"
#include "backend/passthrough.h"
#include "../common/check.h"

static const struct fs_ops *ops = &passthrough_ops;
static struct passthrough *pt;
static char scratch[] = "/tmp/ferry-pt-XXXXXX";
static const struct fuse_request_ctx root_ctx = { .unique = 1 };
static const struct fuse_request_ctx user_ctx = { .unique = 2, .uid = 1000, .gid = 1000 };
static bool is_root;

static int count_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static uint64_t lookup(uint64_t parent, const char *name, struct fuse_attr *attr)
{
	struct fuse_entry_out e;
	int ret = ops->lookup(pt, &root_ctx, parent, name, &e);

	if (ret < 0)
		return 0;
	if (attr)
		*attr = e.attr;
	return e.nodeid;
}

static uint64_t create(const struct fuse_request_ctx *ctx, uint64_t parent,
		       const char *name, uint32_t mode, uint64_t *fh)
{
	struct fuse_create_in in = { .flags = O_RDWR, .mode = S_IFREG | mode };
	struct fuse_entry_out e;
	struct fuse_open_out o;
	int ret = ops->create(pt, ctx, parent, name, &in, &e, &o);

	if (ret < 0) {
		fprintf(stderr, "create %s: %s\n", name, strerror(-ret));
		return 0;
	}
	*fh = o.fh;
	return e.nodeid;
}

static ssize_t write_str(uint64_t nodeid, uint64_t fh, uint64_t off, const char *s)
{
	size_t len = strlen(s), half = len / 2;
	/* two iovecs: the guest's buffers are rarely one piece */
	struct iovec iov[2] = {
		{ .iov_base = (void *)s, .iov_len = half },
		{ .iov_base = (void *)(s + half), .iov_len = len - half },
	};
	struct fuse_write_in in = { .fh = fh, .offset = off, .size = len };

	return ops->write(pt, &root_ctx, nodeid, &in, iov, 2);
}

static ssize_t read_buf(uint64_t nodeid, uint64_t fh, uint64_t off, char *buf,
			size_t size)
{
	struct iovec iov[3] = {
		{ .iov_base = buf, .iov_len = 1 },
		{ .iov_base = buf + 1, .iov_len = 2 },
		{ .iov_base = buf + 3, .iov_len = size - 3 },
	};
	struct fuse_read_in in = { .fh = fh, .offset = off, .size = size };

	return ops->read(pt, &root_ctx, nodeid, &in, iov, 3);
}

static int release(uint64_t nodeid, uint64_t fh)
{
	struct fuse_release_in in = { .fh = fh };

	return ops->release(pt, &root_ctx, nodeid, &in);
}

static int open_as(const struct fuse_request_ctx *ctx, uint64_t nodeid,
		   uint32_t flags, uint64_t *fh)
{
	struct fuse_open_in in = { .flags = flags };
	struct fuse_open_out out;
	int ret = ops->open(pt, ctx, nodeid, &in, &out);

	if (ret == 0)
		*fh = out.fh;
	return ret;
}

static int open_node(uint64_t nodeid, uint32_t flags, uint64_t *fh)
{
	struct fuse_open_in in = { .flags = flags };
	struct fuse_open_out out;
	int ret = ops->open(pt, &root_ctx, nodeid, &in, &out);

	if (ret == 0)
		*fh = out.fh;
	return ret;
}

/* Names seen by READDIR(PLUS) over the whole directory, in chunks small
 * enough that the offset has to carry the listing across calls. */
struct listing {
	char names[64][NAME_MAX + 1];
	uint64_t nodeids[64];
	int count;
	int calls;
};

static int list_dir(uint64_t nodeid, bool plus, size_t bufsize, struct listing *l)
{
	struct fuse_open_in oin = { .flags = O_RDONLY };
	struct fuse_open_out oout;
	char *buf = malloc(bufsize);
	uint64_t off = 0;
	int ret;

	memset(l, 0, sizeof(*l));
	ret = ops->opendir(pt, &root_ctx, nodeid, &oin, &oout);
	if (ret < 0)
		goto out;
	for (;;) {
		struct fuse_read_in in = { .fh = oout.fh, .offset = off, .size = bufsize };
		struct fuse_dirbuf db = { .buf = buf, .size = bufsize };
		size_t pos = 0;

		ret = ops->readdir(pt, &root_ctx, nodeid, &in, plus, &db);
		l->calls++;
		if (ret < 0 || db.len == 0 || l->calls > 100)
			break;
		while (pos < db.len) {
			struct fuse_dirent *d;
			uint64_t id = 0;

			if (plus) {
				struct fuse_direntplus *dp = (void *)(buf + pos);

				d = &dp->dirent;
				id = dp->entry_out.nodeid;
				pos += FUSE_DIRENTPLUS_SIZE(dp);
			} else {
				d = (void *)(buf + pos);
				pos += FUSE_DIRENT_SIZE(d);
			}
			if (l->count < 64) {
				memcpy(l->names[l->count], d->name, d->namelen);
				l->names[l->count][d->namelen] = '\0';
				l->nodeids[l->count] = id;
				l->count++;
			}
			off = d->off;
		}
	}
	{
		struct fuse_release_in rin = { .fh = oout.fh };

		CHECK_EQ(ops->releasedir(pt, &root_ctx, nodeid, &rin), 0);
	}
out:
	free(buf);
	return ret;
}

static int find_name(const struct listing *l, const char *name)
{
	int seen = -1;

	for (int i = 0; i < l->count; i++) {
		if (!strcmp(l->names[i], name)) {
			if (seen >= 0)
				return -2;      /* listed twice: offsets broken */
			seen = i;
		}
	}
	return seen;
}

static void test_root_and_dots(void)
{
	struct fuse_attr attr;

	CHECK_EQ(lookup(FUSE_ROOT_ID, ".", NULL), FUSE_ROOT_ID);
	/* ".." of the shared dir must stay inside it */
	CHECK_EQ(lookup(FUSE_ROOT_ID, "..", &attr), FUSE_ROOT_ID);
	CHECK(S_ISDIR(attr.mode));
}

static void test_create_write_read(void)
{
	struct fuse_getattr_in gin = { 0 };
	struct fuse_attr_out aout;
	char buf[16] = { 0 };
	uint64_t fh, id = create(&root_ctx, FUSE_ROOT_ID, "a", 0644, &fh);

	CHECK(id > FUSE_ROOT_ID);
	CHECK_EQ(write_str(id, fh, 0, "hello world"), 11);
	CHECK_EQ(read_buf(id, fh, 0, buf, sizeof(buf)), 11);
	CHECK(!memcmp(buf, "hello world", 11));
	/* a short read at EOF returns what there is */
	CHECK_EQ(read_buf(id, fh, 6, buf, sizeof(buf)), 5);
	CHECK(!memcmp(buf, "world", 5));
	CHECK_EQ(ops->getattr(pt, &root_ctx, id, &gin, &aout), 0);
	CHECK_EQ(aout.attr.size, 11);
	CHECK_EQ(aout.attr.mode, S_IFREG | 0644);
	CHECK_EQ(release(id, fh), 0);
	/* the same inode comes back for the same file */
	CHECK_EQ(lookup(FUSE_ROOT_ID, "a", NULL), id);
	ops->forget(pt, id, 2);
}

static void test_readdir(void)
{
	struct fuse_mkdir_in min = { .mode = 0755 };
	struct fuse_entry_out e;
	struct listing l;
	uint64_t fh, ids[6];
	char name[8];

	CHECK_EQ(ops->mkdir(pt, &root_ctx, FUSE_ROOT_ID, "dir", &min, &e), 0);
	for (int i = 0; i < 6; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		ids[i] = create(&root_ctx, e.nodeid, name, 0600, &fh);
		CHECK_EQ(release(ids[i], fh), 0);
	}

	/* 100 bytes hold about three entries: the listing spans calls */
	CHECK_EQ(list_dir(e.nodeid, false, 100, &l), 0);
	CHECK_EQ(l.count, 8);
	CHECK(l.calls > 2);
	CHECK(find_name(&l, ".") >= 0);
	CHECK(find_name(&l, "..") >= 0);
	for (int i = 0; i < 6; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		CHECK(find_name(&l, name) >= 0);
	}

	/* plus: entries carry the nodeids lookups give, "." and ".." none */
	CHECK_EQ(list_dir(e.nodeid, true, 400, &l), 0);
	CHECK_EQ(l.count, 8);
	CHECK(l.calls > 2);
	CHECK_EQ(l.nodeids[find_name(&l, ".")], 0);
	CHECK_EQ(l.nodeids[find_name(&l, "..")], 0);
	for (int i = 0; i < 6; i++) {
		int at;

		snprintf(name, sizeof(name), "f%d", i);
		at = find_name(&l, name);
		CHECK(at >= 0);
		if (at >= 0)
			CHECK_EQ(l.nodeids[at], ids[i]);
	}
	/* each READDIRPLUS entry took one lookup, the create took one: after
	 * forgetting both the inode must be gone */
	for (int i = 0; i < 6; i++)
		ops->forget(pt, ids[i], 2);
	{
		struct fuse_getattr_in gin = { 0 };
		struct fuse_attr_out aout;

		CHECK_EQ(ops->getattr(pt, &root_ctx, ids[0], &gin, &aout), -EBADF);
	}
	ops->forget(pt, e.nodeid, 1);
}

/* One READDIR call into buf; returns the bytes encoded and sets *last_off
 * to the cookie of the last entry (or leaves it). */
static size_t readdir_once(uint64_t nodeid, uint64_t fh, uint64_t off,
			   char *buf, size_t bufsize, uint64_t *last_off)
{
	struct fuse_read_in in = { .fh = fh, .offset = off, .size = bufsize };
	struct fuse_dirbuf db = { .buf = buf, .size = bufsize };
	size_t pos = 0;

	CHECK_EQ(ops->readdir(pt, &root_ctx, nodeid, &in, false, &db), 0);
	while (pos < db.len) {
		struct fuse_dirent *d = (void *)(buf + pos);

		*last_off = d->off;
		pos += FUSE_DIRENT_SIZE(d);
	}
	return db.len;
}

/* A full reply buffer leaves an entry read but unsent; continuing, going
 * back to an earlier cookie and repeating a call must all list exactly
 * what a fresh stream at that cookie would. */
static void test_readdir_resume(void)
{
	struct fuse_mkdir_in min = { .mode = 0755 };
	struct fuse_open_in oin = { .flags = O_RDONLY };
	struct fuse_release_in rin;
	struct fuse_open_out oout;
	struct fuse_entry_out e;
	char first[100], second[100], again[100], name[8];
	uint64_t fh, off1 = 0, off2 = 0, off_again = 0;
	size_t len1, len2, len;

	CHECK_EQ(ops->mkdir(pt, &root_ctx, FUSE_ROOT_ID, "resume", &min, &e), 0);
	for (int i = 0; i < 10; i++) {
		uint64_t id;

		snprintf(name, sizeof(name), "g%d", i);
		id = create(&root_ctx, e.nodeid, name, 0600, &fh);
		CHECK_EQ(release(id, fh), 0);
		ops->forget(pt, id, 1);
	}
	CHECK_EQ(ops->opendir(pt, &root_ctx, e.nodeid, &oin, &oout), 0);
	len1 = readdir_once(e.nodeid, oout.fh, 0, first, sizeof(first), &off1);
	len2 = readdir_once(e.nodeid, oout.fh, off1, second, sizeof(second), &off2);
	CHECK(len1 > 0 && len2 > 0);
	CHECK(off2 != off1);
	/* the guest asks for the second chunk again: same bytes */
	len = readdir_once(e.nodeid, oout.fh, off1, again, sizeof(again), &off_again);
	CHECK_EQ(len, len2);
	CHECK(!memcmp(again, second, len2));
	CHECK_EQ(off_again, off2);
	/* back to the start, then on from there: the same two chunks */
	len = readdir_once(e.nodeid, oout.fh, 0, again, sizeof(again), &off_again);
	CHECK_EQ(len, len1);
	CHECK(!memcmp(again, first, len1));
	len = readdir_once(e.nodeid, oout.fh, off1, again, sizeof(again), &off_again);
	CHECK_EQ(len, len2);
	CHECK(!memcmp(again, second, len2));
	rin = (struct fuse_release_in){ .fh = oout.fh };
	CHECK_EQ(ops->releasedir(pt, &root_ctx, e.nodeid, &rin), 0);
	ops->forget(pt, e.nodeid, 1);
}

/* A lookup of a known inode opens nothing; a name that now names another
 * file (the old one unlinked but still known) gets a new nodeid. */
static void test_lookup_known_and_replaced(void)
{
	uint64_t fh, id, again, fresh;
	int fds;

	id = create(&root_ctx, FUSE_ROOT_ID, "lk", 0644, &fh);
	CHECK(id > FUSE_ROOT_ID);
	CHECK_EQ(release(id, fh), 0);
	fds = count_open_fds();
	for (int i = 0; i < 10; i++)
		CHECK_EQ(lookup(FUSE_ROOT_ID, "lk", NULL), id);
	CHECK_EQ(count_open_fds(), fds);
	CHECK_EQ(lookup(FUSE_ROOT_ID, "lk-missing", NULL), 0);

	CHECK_EQ(ops->unlink(pt, &root_ctx, FUSE_ROOT_ID, "lk"), 0);
	fresh = create(&root_ctx, FUSE_ROOT_ID, "lk", 0600, &fh);
	CHECK_EQ(release(fresh, fh), 0);
	CHECK(fresh != id && fresh > FUSE_ROOT_ID);
	again = lookup(FUSE_ROOT_ID, "lk", NULL);
	CHECK_EQ(again, fresh);
	ops->forget(pt, id, 11);
	ops->forget(pt, fresh, 2);
	CHECK_EQ(ops->unlink(pt, &root_ctx, FUSE_ROOT_ID, "lk"), 0);
}

static void test_rename_link_unlink(void)
{
	struct fuse_getattr_in gin = { 0 };
	struct fuse_attr_out aout;
	struct fuse_entry_out e;
	uint64_t fh, id = create(&root_ctx, FUSE_ROOT_ID, "r1", 0644, &fh);

	CHECK_EQ(release(id, fh), 0);
	CHECK_EQ(ops->rename(pt, &root_ctx, FUSE_ROOT_ID, "r1", FUSE_ROOT_ID, "r2", 0), 0);
	CHECK_EQ(lookup(FUSE_ROOT_ID, "r1", NULL), 0);
	CHECK_EQ(lookup(FUSE_ROOT_ID, "r2", NULL), id);
	ops->forget(pt, id, 1);
	CHECK_EQ(ops->rename(pt, &root_ctx, FUSE_ROOT_ID, "r2", FUSE_ROOT_ID, "a",
			     RENAME_NOREPLACE), -EEXIST);
	CHECK_EQ(ops->rename(pt, &root_ctx, FUSE_ROOT_ID, "r2", FUSE_ROOT_ID, "x",
			     0x80), -EINVAL);

	CHECK_EQ(ops->link(pt, &root_ctx, id, FUSE_ROOT_ID, "r3", &e), 0);
	CHECK_EQ(e.nodeid, id);
	CHECK_EQ(e.attr.nlink, 2);
	CHECK_EQ(ops->unlink(pt, &root_ctx, FUSE_ROOT_ID, "r2"), 0);
	CHECK_EQ(ops->getattr(pt, &root_ctx, id, &gin, &aout), 0);
	CHECK_EQ(aout.attr.nlink, 1);
	CHECK_EQ(ops->unlink(pt, &root_ctx, FUSE_ROOT_ID, "r3"), 0);
	CHECK_EQ(ops->unlink(pt, &root_ctx, FUSE_ROOT_ID, "r3"), -ENOENT);
	/* the inode outlives its names until the guest forgets it */
	CHECK_EQ(ops->getattr(pt, &root_ctx, id, &gin, &aout), 0);
	CHECK_EQ(aout.attr.nlink, 0);
	ops->forget(pt, id, 2);
	CHECK_EQ(ops->getattr(pt, &root_ctx, id, &gin, &aout), -EBADF);
}

static void test_forget_while_in_use(void)
{
	struct fuse_getattr_in gin = { 0 };
	struct fuse_attr_out aout;
	char buf[8] = { 0 };
	uint64_t fh, id = create(&root_ctx, FUSE_ROOT_ID, "busy", 0644, &fh);

	CHECK_EQ(write_str(id, fh, 0, "data"), 4);
	/* a hostile FORGET far beyond the lookups, while a handle uses it */
	ops->forget(pt, id, UINT64_MAX);
	ops->forget(pt, id, UINT64_MAX);
	CHECK_EQ(read_buf(id, fh, 0, buf, sizeof(buf)), 4);
	CHECK(!memcmp(buf, "data", 4));
	CHECK_EQ(ops->getattr(pt, &root_ctx, id, &gin, &aout), 0);
	/* the last user gone, the nodeid stops working, and stays dead even
	 * once the same file is looked up again (new nodeid) */
	CHECK_EQ(release(id, fh), 0);
	CHECK_EQ(ops->getattr(pt, &root_ctx, id, &gin, &aout), -EBADF);
	{
		uint64_t again = lookup(FUSE_ROOT_ID, "busy", NULL);

		CHECK(again != 0 && again != id);
		ops->forget(pt, again, 1);
	}
	/* the root ignores FORGET */
	ops->forget(pt, FUSE_ROOT_ID, UINT64_MAX);
	CHECK_EQ(lookup(FUSE_ROOT_ID, ".", NULL), FUSE_ROOT_ID);
}

static void test_garbage_ids(void)
{
	struct fuse_getattr_in gin = { 0 };
	struct fuse_attr_out aout;
	struct fuse_entry_out e;
	char buf[8];
	uint64_t fh, id = create(&root_ctx, FUSE_ROOT_ID, "g", 0644, &fh);
	/* below 64 no nodeid is ever handed out; the others are far ahead */
	const uint64_t junk[] = { 0, 2, 63, (1ULL << 40) | 5, 0xdeadbeef, UINT64_MAX };

	for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
		CHECK_EQ(ops->getattr(pt, &root_ctx, junk[i], &gin, &aout), -EBADF);
		CHECK_EQ(ops->lookup(pt, &root_ctx, junk[i], "a", &e), -EBADF);
		ops->forget(pt, junk[i], 1);
		CHECK(read_buf(id, junk[i], 0, buf, sizeof(buf)) == -EBADF);
		CHECK_EQ(release(id, junk[i]), -EBADF);
	}
	/* a real fh paired with another nodeid is refused too */
	CHECK(read_buf(FUSE_ROOT_ID, fh, 0, buf, sizeof(buf)) == -EBADF);
	CHECK_EQ(release(FUSE_ROOT_ID, fh), -EBADF);
	CHECK_EQ(release(id, fh), 0);
	/* released: the fh is dead */
	CHECK(read_buf(id, fh, 0, buf, sizeof(buf)) == -EBADF);
	CHECK_EQ(release(id, fh), -EBADF);
	ops->forget(pt, id, 1);
}

static void expect_never_opened(const char *name, uint32_t mode, uint32_t rdev)
{
	struct fuse_mknod_in in = { .mode = mode, .rdev = rdev };
	struct fuse_entry_out e;
	uint64_t fh = 0;
	int fds_before;

	CHECK_EQ(ops->mknod(pt, &root_ctx, FUSE_ROOT_ID, name, &in, &e), 0);
	CHECK_EQ(e.attr.mode & S_IFMT, mode & S_IFMT);
	fds_before = count_open_fds();
	/* opening a FIFO on the host would block here: alarm fails the test */
	alarm(10);
	CHECK_EQ(open_node(e.nodeid, O_RDONLY, &fh), -EBADF);
	CHECK_EQ(open_node(e.nodeid, O_WRONLY, &fh), -EBADF);
	CHECK_EQ(open_node(e.nodeid, O_RDWR | O_NONBLOCK, &fh), -EBADF);
	alarm(0);
	CHECK_EQ(count_open_fds(), fds_before);
	ops->forget(pt, e.nodeid, 1);
}

static void test_special_files_not_opened(void)
{
	expect_never_opened("fifo", S_IFIFO | 0666, 0);
	expect_never_opened("sock", S_IFSOCK | 0666, 0);
	if (is_root)
		/* like /dev/null: 1,3 in the guest's new_encode_dev form */
		expect_never_opened("null", S_IFCHR | 0666, (1 << 8) | 3);
	else
		SKIP_CASE("special files: a device node needs root");
}

static void test_symlinks_stay_inside(void)
{
	struct fuse_open_in oin = { .flags = O_RDONLY };
	struct fuse_open_out oout;
	struct fuse_entry_out e;
	struct fuse_attr attr;
	char target[64];
	uint64_t id, fh;

	CHECK_EQ(ops->symlink(pt, &root_ctx, FUSE_ROOT_ID, "out", "/etc", &e), 0);
	id = lookup(FUSE_ROOT_ID, "out", &attr);
	CHECK_EQ(id, e.nodeid);
	/* the link itself, never what it points at on the host */
	CHECK(S_ISLNK(attr.mode));
	CHECK_EQ(ops->readlink(pt, &root_ctx, id, target, sizeof(target)), 4);
	CHECK(!memcmp(target, "/etc", 4));
	CHECK(lookup(id, "passwd", NULL) == 0);
	CHECK(ops->opendir(pt, &root_ctx, id, &oin, &oout) < 0);
	CHECK_EQ(open_node(id, O_RDONLY, &fh), -EBADF);
	ops->forget(pt, id, 2);

	/* names with a slash never reach the host */
	CHECK_EQ(ops->mkdir(pt, &root_ctx, FUSE_ROOT_ID, "../x",
			    &(struct fuse_mkdir_in){ .mode = 0755 }, &e), -EINVAL);
	CHECK_EQ(ops->lookup(pt, &root_ctx, FUSE_ROOT_ID, "../etc", &e), -EINVAL);
	CHECK_EQ(ops->unlink(pt, &root_ctx, FUSE_ROOT_ID, ".."), -EINVAL);
}

static void test_setattr_misc(void)
{
	struct fuse_setattr_in sin = { 0 };
	struct fuse_attr_out aout;
	struct fuse_kstatfs sfs;
	uint64_t fh, fh2, id = create(&root_ctx, FUSE_ROOT_ID, "s", 0644, &fh);
	uint64_t id2 = create(&root_ctx, FUSE_ROOT_ID, "s2", 0644, &fh2);
	char buf[16] = { 0 };

	CHECK_EQ(write_str(id, fh, 0, "0123456789"), 10);
	sin.valid = FATTR_SIZE;
	sin.size = 4;
	CHECK_EQ(ops->setattr(pt, &root_ctx, id, &sin, &aout), 0);
	CHECK_EQ(aout.attr.size, 4);
	sin.valid = FATTR_MODE | FATTR_MTIME;
	sin.mode = 04755;
	sin.mtime = 1000000000;
	sin.mtimensec = 123456789;
	CHECK_EQ(ops->setattr(pt, &root_ctx, id, &sin, &aout), 0);
	CHECK_EQ(aout.attr.mode, S_IFREG | 04755);
	CHECK_EQ(aout.attr.mtime, 1000000000);
	CHECK_EQ(aout.attr.mtimensec, 123456789);
	sin.valid = FATTR_KILL_SUIDGID;
	CHECK_EQ(ops->setattr(pt, &root_ctx, id, &sin, &aout), 0);
	CHECK_EQ(aout.attr.mode, S_IFREG | 0755);
	sin.valid = FATTR_FH | FATTR_SIZE;
	sin.fh = fh;
	sin.size = 2;
	CHECK_EQ(ops->setattr(pt, &root_ctx, id, &sin, &aout), 0);
	CHECK_EQ(aout.attr.size, 2);
	sin.fh = 999999;
	CHECK_EQ(ops->setattr(pt, &root_ctx, id, &sin, &aout), -EBADF);

	CHECK_EQ(ops->statfs(pt, &root_ctx, id, &sfs), 0);
	CHECK(sfs.bsize > 0);
	{
		struct fuse_fsync_in fin = { .fh = fh, .fsync_flags = FUSE_FSYNC_FDATASYNC };
		struct fuse_flush_in flin = { .fh = fh };

		CHECK_EQ(ops->fsync(pt, &root_ctx, id, &fin), 0);
		CHECK_EQ(ops->flush(pt, &root_ctx, id, &flin), 0);
	}
	{
		struct fuse_fallocate_in fin = { .fh = fh, .offset = 0, .length = 8192 };
		struct fuse_lseek_in lin = { .fh = fh, .offset = 0, .whence = SEEK_DATA };
		struct fuse_lseek_out lout;

		CHECK_EQ(ops->fallocate(pt, &root_ctx, id, &fin), 0);
		CHECK_EQ(ops->lseek(pt, &root_ctx, id, &lin, &lout), 0);
		CHECK_EQ(lout.offset, 0);
	}
	{
		struct fuse_copy_file_range_in cin = {
			.fh_in = fh, .off_in = 0, .nodeid_out = id2,
			.fh_out = fh2, .off_out = 0, .len = 2,
		};

		CHECK_EQ(ops->copy_file_range(pt, &root_ctx, id, &cin), 2);
		CHECK_EQ(read_buf(id2, fh2, 0, buf, sizeof(buf)), 2);
		CHECK(!memcmp(buf, "01", 2));
		cin.fh_out = fh;        /* fh of another nodeid */
		CHECK_EQ(ops->copy_file_range(pt, &root_ctx, id, &cin), -EBADF);
	}
	CHECK_EQ(ops->syncfs(pt, &root_ctx, FUSE_ROOT_ID), 0);
	CHECK_EQ(release(id, fh), 0);
	CHECK_EQ(release(id2, fh2), 0);
	ops->forget(pt, id, 1);
	ops->forget(pt, id2, 1);
}

static void test_xattr(void)
{
	char val[16];
	uint64_t fh, id = create(&root_ctx, FUSE_ROOT_ID, "x", 0644, &fh);
	int ret = ops->setxattr(pt, &root_ctx, id, "user.k", "v1", 2, 0, 0);

	CHECK_EQ(release(id, fh), 0);
	if (ret == -EOPNOTSUPP) {
		SKIP_CASE("xattr: user.* not supported by %s", scratch);
	} else {
		CHECK_EQ(ret, 0);
		CHECK_EQ(ops->getxattr(pt, &root_ctx, id, "user.k", NULL, 0), 2);
		CHECK_EQ(ops->getxattr(pt, &root_ctx, id, "user.k", val, sizeof(val)), 2);
		CHECK(!memcmp(val, "v1", 2));
		CHECK(ops->listxattr(pt, &root_ctx, id, val, sizeof(val)) >= 7);
		CHECK_EQ(ops->removexattr(pt, &root_ctx, id, "user.k"), 0);
		CHECK_EQ(ops->getxattr(pt, &root_ctx, id, "user.k", val, sizeof(val)),
			 -ENODATA);
	}
	if (ret == 0) {
		/* FUSE_SECURITY_CTX: the label lands on the new inode; a label
		 * the host refuses leaves no unlabelled node behind */
		struct fuse_request_ctx lctx = { .secctx_name = "user.label",
					     .secctx_value = "L", .secctx_size = 1 };
		struct fuse_mkdir_in min = { .mode = 0755 };
		struct fuse_entry_out e;

		CHECK_EQ(ops->mkdir(pt, &lctx, FUSE_ROOT_ID, "labelled", &min, &e), 0);
		CHECK_EQ(ops->getxattr(pt, &root_ctx, e.nodeid, "user.label", val,
				       sizeof(val)), 1);
		ops->forget(pt, e.nodeid, 1);
		lctx.secctx_name = "bogus.label";
		CHECK(ops->mkdir(pt, &lctx, FUSE_ROOT_ID, "unlabelled", &min, &e) < 0);
		CHECK_EQ(lookup(FUSE_ROOT_ID, "unlabelled", NULL), 0);
		CHECK(create(&lctx, FUSE_ROOT_ID, "unlabelled", 0644, &fh) == 0);
		CHECK_EQ(lookup(FUSE_ROOT_ID, "unlabelled", NULL), 0);
	}
	/* ACLs were not negotiated: the guest must not see them */
	CHECK_EQ(ops->getxattr(pt, &root_ctx, id, "system.posix_acl_access", val,
			       sizeof(val)), -EOPNOTSUPP);
	ops->forget(pt, id, 1);
}

static void test_tmpfile(void)
{
	struct fuse_create_in in = { .flags = O_RDWR, .mode = S_IFREG | 0600 };
	struct fuse_entry_out e, le;
	struct fuse_open_out o;
	char buf[8] = { 0 };
	uint64_t id;

	CHECK_EQ(ops->tmpfile(pt, &root_ctx, FUSE_ROOT_ID, &in, &e, &o), 0);
	CHECK_EQ(e.attr.nlink, 0);
	CHECK_EQ(write_str(e.nodeid, o.fh, 0, "tmp"), 3);
	CHECK_EQ(ops->link(pt, &root_ctx, e.nodeid, FUSE_ROOT_ID, "named", &le), 0);
	CHECK_EQ(le.nodeid, e.nodeid);
	CHECK_EQ(release(e.nodeid, o.fh), 0);
	id = lookup(FUSE_ROOT_ID, "named", NULL);
	CHECK_EQ(id, e.nodeid);
	{
		uint64_t fh;

		CHECK_EQ(open_node(id, O_RDONLY, &fh), 0);
		CHECK_EQ(read_buf(id, fh, 0, buf, sizeof(buf)), 3);
		CHECK(!memcmp(buf, "tmp", 3));
		CHECK_EQ(release(id, fh), 0);
	}
	ops->forget(pt, id, 3);
}

/* This thread's effective capability set, from /proc. */
static unsigned long long cap_eff(void)
{
	char line[256];
	unsigned long long v = 0;
	FILE *f = fopen("/proc/thread-self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

static struct fuse_attr attr_of(uint64_t id)
{
	struct fuse_getattr_in gin = { 0 };
	struct fuse_attr_out aout = { 0 };

	CHECK_EQ(ops->getattr(pt, &root_ctx, id, &gin, &aout), 0);
	return aout.attr;
}

/*
 * The request contract (creds.h): the guest's kernel has judged a request
 * with the caller's full credentials before sending it, so the backend
 * does what it asks; the caller's ids decide only who owns what is
 * created, and FUSE_ACCESS, which asks for the host's own judgement.
 */
static void test_creds(void)
{
	struct fuse_mkdir_in min = { .mode = 0700 };
	const unsigned long long full_caps = cap_eff();
	struct fuse_attr_out aout;
	struct fuse_entry_out e;
	uint64_t fh, id;

	if (!is_root) {
		SKIP_CASE("creds: needs root");
		return;
	}
	/* supplementary groups were dropped by passthrough_new */
	CHECK_EQ(getgroups(0, NULL), 0);

	id = create(&user_ctx, FUSE_ROOT_ID, "owned", 0644, &fh);
	CHECK(id != 0);
	CHECK_EQ(attr_of(id).uid, 1000);
	CHECK_EQ(attr_of(id).gid, 1000);
	CHECK_EQ(release(id, fh), 0);
	CHECK_EQ(open_as(&user_ctx, id, O_RDWR, &fh), 0);
	CHECK_EQ(release(id, fh), 0);
	{
		uint64_t rid = lookup(FUSE_ROOT_ID, "a", NULL);

		/* root's 0644 file for writing: the guest's kernel said yes
		 * (a group or capability the request cannot carry) */
		CHECK_EQ(open_as(&user_ctx, rid, O_RDWR, &fh), 0);
		CHECK_EQ(release(rid, fh), 0);
		ops->forget(pt, rid, 1);
	}
	{
		struct fuse_entry_out le;

		CHECK_EQ(ops->link(pt, &user_ctx, id, FUSE_ROOT_ID, "owned2", &le), 0);
		CHECK_EQ(le.attr.nlink, 2);
		ops->forget(pt, id, 1);
	}
	/* the thread is back to root, with every capability, after each
	 * request */
	CHECK_EQ(geteuid(), 0);
	CHECK_EQ(getegid(), 0);
	CHECK_EQ(cap_eff(), full_caps);

	CHECK_EQ(ops->mkdir(pt, &root_ctx, FUSE_ROOT_ID, "private", &min, &e), 0);
	/* FUSE_ACCESS is the host's judgement of the bare ids */
	CHECK_EQ(ops->access(pt, &user_ctx, e.nodeid, R_OK), -EACCES);
	CHECK_EQ(ops->access(pt, &user_ctx, e.nodeid, 0), 0);
	CHECK_EQ(cap_eff(), full_caps);
	CHECK_EQ(ops->access(pt, &root_ctx, e.nodeid, R_OK | W_OK | X_OK), 0);
	{
		struct fuse_create_in cin = { .flags = O_RDWR, .mode = S_IFREG | 0644 };
		struct fuse_entry_out ce;
		struct fuse_open_out co;

		/* in root's 0700 directory, yet the caller's own file */
		CHECK_EQ(ops->create(pt, &user_ctx, e.nodeid, "yes", &cin, &ce, &co), 0);
		CHECK_EQ(ce.attr.uid, 1000);
		CHECK_EQ(ce.attr.gid, 1000);
		CHECK_EQ(release(ce.nodeid, co.fh), 0);
		CHECK_EQ(ops->unlink(pt, &user_ctx, e.nodeid, "yes"), 0);
		ops->forget(pt, ce.nodeid, 1);
	}
	{
		struct fuse_setattr_in sin = { .valid = FATTR_MODE, .mode = 0750 };

		CHECK_EQ(ops->setattr(pt, &user_ctx, e.nodeid, &sin, &aout), 0);
		CHECK_EQ(aout.attr.mode & 07777, 0750);
	}
	{
		uint64_t pfh, pid = create(&root_ctx, e.nodeid, "p", 0666, &pfh);

		CHECK_EQ(release(pid, pfh), 0);
		CHECK_EQ(ops->unlink(pt, &user_ctx, e.nodeid, "p"), 0);
		CHECK_EQ(ops->unlink(pt, &root_ctx, e.nodeid, "p"), -ENOENT);
		ops->forget(pt, pid, 1);
	}
	/* the id the guest uses for "unmapped" must not mean "keep root",
	 * whether the op switches ids or not */
	{
		struct fuse_request_ctx bad = { .uid = UINT32_MAX, .gid = UINT32_MAX };
		uint64_t bfh, bid = create(&root_ctx, e.nodeid, "b", 0666, &bfh);

		CHECK_EQ(release(bid, bfh), 0);
		CHECK_EQ(ops->access(pt, &bad, e.nodeid, R_OK), -EPERM);
		CHECK_EQ(ops->unlink(pt, &bad, e.nodeid, "b"), -EPERM);
		CHECK_EQ(open_as(&bad, bid, O_RDONLY, &bfh), -EPERM);
		CHECK_EQ(ops->unlink(pt, &root_ctx, e.nodeid, "b"), 0);
		ops->forget(pt, bid, 1);
	}
	CHECK_EQ(geteuid(), 0);
	CHECK_EQ(cap_eff(), full_caps);
	ops->forget(pt, e.nodeid, 1);
}

/* Creates name in parent as ctx and checks what the new file became on the
 * host: its owner, group and mode bits. Closes and forgets it. */
static void create_as(const struct fuse_request_ctx *ctx, uint64_t parent, const char *name,
		      uint32_t mode, uint32_t want_uid, uint32_t want_gid, uint32_t want_mode)
{
	uint64_t fh, id = create(ctx, parent, name, mode, &fh);
	struct fuse_attr a;

	CHECK(id != 0);
	if (!id)
		return;
	a = attr_of(id);
	CHECK_EQ(a.uid, want_uid);
	CHECK_EQ(a.gid, want_gid);
	CHECK_EQ(a.mode & 07777, want_mode);
	CHECK_EQ(release(id, fh), 0);
	ops->forget(pt, id, 1);
}

/* The host path of a name in the scratch directory. */
static const char *host_path(char path[PATH_MAX], const char *name)
{
	snprintf(path, PATH_MAX, "%s/%s", scratch, name);
	return path;
}

/*
 * Issue 12's table: a directory shared by group 1234 (0770, and 02770
 * set-group-ID), used by uid 1000 whose primary group is 1000 and who is a
 * member of 1234 only in the guest. Every request the guest's kernel allowed
 * is served, and what is created belongs to the caller as it would locally.
 */
static void test_group_shared_dir(void)
{
	struct fuse_mkdir_in min = { .mode = 0755 };
	struct fuse_entry_out e, d, sd;
	struct fuse_attr_out aout;
	char path[PATH_MAX];
	uint64_t fh, f, own;
	int fd;

	if (!is_root) {
		SKIP_CASE("group_shared_dir: needs root");
		return;
	}
	CHECK_EQ(ops->mkdir(pt, &root_ctx, FUSE_ROOT_ID, "shared", &min, &d), 0);
	CHECK_EQ(chown(host_path(path, "shared"), 0, 1234), 0);
	CHECK_EQ(chmod(path, 0770), 0);
	fd = open(host_path(path, "shared/f"), O_CREAT | O_WRONLY, 0660);
	CHECK(fd >= 0 && write(fd, "data\n", 5) == 5);
	close(fd);
	CHECK_EQ(chown(path, 0, 1234), 0);
	CHECK_EQ(chmod(path, 0660), 0);
	fd = open(host_path(path, "own"), O_CREAT | O_WRONLY, 0644);
	close(fd);
	CHECK_EQ(chown(path, 1000, 1000), 0);

	f = lookup(d.nodeid, "f", NULL);
	CHECK_EQ(open_as(&user_ctx, f, O_RDONLY, &fh), 0);
	CHECK_EQ(release(f, fh), 0);
	{
		struct fuse_setattr_in sin = { .valid = FATTR_SIZE, .size = 0 };

		CHECK_EQ(ops->setattr(pt, &user_ctx, f, &sin, &aout), 0);
		CHECK_EQ(aout.attr.size, 0);
	}
	CHECK_EQ(ops->unlink(pt, &user_ctx, d.nodeid, "f"), 0);
	ops->forget(pt, f, 1);
	create_as(&user_ctx, d.nodeid, "new", 0640, 1000, 1000, 0640);
	CHECK_EQ(ops->mkdir(pt, &user_ctx, d.nodeid, "sub", &min, &sd), 0);
	CHECK_EQ(sd.attr.uid, 1000);
	CHECK_EQ(sd.attr.gid, 1000);
	ops->forget(pt, sd.nodeid, 1);
	/* the owner moves its file into a group of its own (uid unchanged,
	 * and uid given as itself) */
	own = lookup(FUSE_ROOT_ID, "own", NULL);
	{
		struct fuse_setattr_in sin = { .valid = FATTR_GID, .gid = 1234 };

		CHECK_EQ(ops->setattr(pt, &user_ctx, own, &sin, &aout), 0);
		CHECK_EQ(aout.attr.gid, 1234);
		sin.valid = FATTR_UID | FATTR_GID;
		sin.uid = 1000;
		sin.gid = 1000;
		CHECK_EQ(ops->setattr(pt, &user_ctx, own, &sin, &aout), 0);
		CHECK_EQ(aout.attr.uid, 1000);
		CHECK_EQ(aout.attr.gid, 1000);
	}
	ops->forget(pt, own, 1);
	/* set-group-ID directory: the group and, for directories, the bit
	 * are inherited */
	CHECK_EQ(chmod(host_path(path, "shared"), 02770), 0);
	create_as(&user_ctx, d.nodeid, "in-sgid", 0640, 1000, 1234, 0640);
	CHECK_EQ(ops->mkdir(pt, &user_ctx, d.nodeid, "sgid-sub", &min, &e), 0);
	CHECK_EQ(e.attr.gid, 1234);
	CHECK_EQ(e.attr.mode & 07777, 02755);
	ops->forget(pt, e.nodeid, 1);
	CHECK_EQ(getgroups(0, NULL), 0);
	CHECK_EQ(geteuid(), 0);
	ops->forget(pt, d.nodeid, 1);
}

/*
 * Set-group-ID bits of new files in a set-group-ID directory of group 4242,
 * created by uid 1000 (primary group 1000). A guest at FUSE 7.37+ (Linux
 * 6.1+) strips the bit itself for a caller outside the group before it
 * sends the mode, so the mode it sends is kept. An older guest leaves that
 * to the host: there the bit stays only with the group FUSE_CREATE_SUPP_GROUP
 * names. Either way the group is gone after the request.
 */
static void test_supp_group(void)
{
	struct fuse_request_ctx member = user_ctx;
	struct fuse_mkdir_in min = { .mode = 0777 };
	struct fuse_conn_params old_guest = { .proto_minor = 36 };
	struct fuse_conn_params new_guest = { .proto_minor = 38 };
	struct fuse_entry_out e;
	char path[PATH_MAX];

	if (!is_root) {
		SKIP_CASE("supp_group: needs root");
		return;
	}
	member.has_supp_gid = true;
	member.supp_gid = 4242;
	CHECK_EQ(ops->mkdir(pt, &root_ctx, FUSE_ROOT_ID, "sgid-dir", &min, &e), 0);
	CHECK_EQ(chown(host_path(path, "sgid-dir"), 0, 4242), 0);
	CHECK_EQ(chmod(path, 02777), 0);

	create_as(&user_ctx, e.nodeid, "sent-as-is", 02755, 1000, 4242, 02755);

	CHECK_EQ(ops->init(pt, &old_guest), 0);
	create_as(&user_ctx, e.nodeid, "plain", 02755, 1000, 4242, 0755);
	create_as(&member, e.nodeid, "member", 02755, 1000, 4242, 02755);
	{
		struct fuse_mknod_in nin = { .mode = S_IFREG | 02750 };
		struct fuse_entry_out ne;

		CHECK_EQ(ops->mknod(pt, &member, e.nodeid, "node", &nin, &ne), 0);
		CHECK_EQ(ne.attr.mode & 07777, 02750);
		ops->forget(pt, ne.nodeid, 1);
	}
	/* The group does not outlive the request, nor a failed one. */
	CHECK_EQ(getgroups(0, NULL), 0);
	{
		struct fuse_request_ctx bad = member;
		struct fuse_entry_out e2;

		bad.uid = UINT32_MAX;
		CHECK_EQ(ops->mkdir(pt, &bad, e.nodeid, "never", &min, &e2), -EPERM);
	}
	CHECK_EQ(ops->init(pt, &new_guest), 0);
	CHECK_EQ(getgroups(0, NULL), 0);
	CHECK_EQ(geteuid(), 0);
	CHECK_EQ(getegid(), 0);
	ops->forget(pt, e.nodeid, 1);
}

/*
 * FUSE_STATX: what the host's statx says of the file, birth time included
 * where the host keeps one, and only the fields asked for; the oracle is
 * the host's own statx of the same file.
 */
static void test_statx(void)
{
	struct fuse_create_in cin = { .flags = O_RDWR, .mode = S_IFREG | 0640 };
	struct fuse_statx_in in = { .sx_mask = STATX_BASIC_STATS | STATX_BTIME };
	struct fuse_statx_out out;
	struct fuse_entry_out e;
	struct fuse_open_out o;
	struct statx host;
	char path[PATH_MAX];

	CHECK_EQ(ops->create(pt, &root_ctx, FUSE_ROOT_ID, "statx-file", &cin, &e, &o), 0);
	CHECK_EQ(statx(AT_FDCWD, host_path(path, "statx-file"), AT_SYMLINK_NOFOLLOW,
		       STATX_BASIC_STATS | STATX_BTIME, &host), 0);
	memset(&out, 0, sizeof(out));
	CHECK_EQ(ops->statx(pt, &root_ctx, e.nodeid, &in, &out), 0);
	CHECK_EQ(out.stat.mask, host.stx_mask & (STATX_BASIC_STATS | STATX_BTIME));
	CHECK_EQ(out.stat.ino, host.stx_ino);
	CHECK_EQ(out.stat.mode, host.stx_mode);
	CHECK_EQ(out.stat.size, 0);
	CHECK_EQ(out.stat.mtime.tv_sec, host.stx_mtime.tv_sec);
	CHECK_EQ(out.stat.mtime.tv_nsec, host.stx_mtime.tv_nsec);
	if (host.stx_mask & STATX_BTIME) {
		CHECK_EQ(out.stat.btime.tv_sec, host.stx_btime.tv_sec);
		CHECK_EQ(out.stat.btime.tv_nsec, host.stx_btime.tv_nsec);
	} else {
		SKIP_CASE("statx: the scratch file system keeps no birth time");
	}
	CHECK(out.attr_valid != 0 || out.attr_valid_nsec != 0);
	/* Basic stats only: no birth time in the reply. */
	in.sx_mask = STATX_BASIC_STATS;
	memset(&out, 0, sizeof(out));
	CHECK_EQ(ops->statx(pt, &root_ctx, e.nodeid, &in, &out), 0);
	CHECK_EQ(out.stat.mask & STATX_BTIME, 0);
	CHECK_EQ(out.stat.btime.tv_sec, 0);
	ops->release(pt, &root_ctx, e.nodeid, &(struct fuse_release_in){ .fh = o.fh });
	ops->forget(pt, e.nodeid, 1);
	CHECK_EQ(ops->statx(pt, &root_ctx, 0xdeadbeef, &in, &out), -EBADF);
}

/*
 * FUSE_ALLOW_IDMAP: requests that create nothing come with both ids
 * FUSE_INVALID_UIDGID and run as the daemon; creating ones still need an
 * owner. Without the flag such a request is refused as before, and a
 * backend whose id options refuse some callers, or that serves killpriv v2,
 * withdraws the flag.
 */
static void test_unnamed_callers(void)
{
	struct fuse_conn_params idmap41 = { .proto_minor = 41, .flags = FUSE_ALLOW_IDMAP };
	struct fuse_conn_params plain38 = { .proto_minor = 38 };
	struct fuse_request_ctx unnamed = { .unique = 3, .uid = FUSE_INVALID_UIDGID,
					    .gid = FUSE_INVALID_UIDGID };
	struct fuse_setattr_in sa = { .valid = FATTR_MODE, .mode = 0600 };
	struct fuse_mkdir_in min = { .mode = 0755 };
	struct passthrough_opts fo = { .cache = CACHE_AUTO, .timeout = -1 };
	struct fuse_attr_out ao;
	struct fuse_entry_out e;
	struct passthrough *forbidding;
	char path[PATH_MAX];
	uint64_t id;

	if (!is_root) {
		SKIP_CASE("unnamed_callers: needs root (the daemon refuses -1 only when it switches ids)");
		return;
	}
	close(open(host_path(path, "unnamed"), O_CREAT | O_WRONLY, 0644));
	id = lookup(FUSE_ROOT_ID, "unnamed", NULL);
	CHECK_EQ(ops->init(pt, &idmap41), 0);
	CHECK_EQ(idmap41.flags, FUSE_ALLOW_IDMAP);
	CHECK_EQ(ops->setattr(pt, &unnamed, id, &sa, &ao), 0);
	CHECK_EQ(ao.attr.mode & 07777, 0600);
	CHECK_EQ(ops->mkdir(pt, &unnamed, FUSE_ROOT_ID, "unnamed-dir", &min, &e), -EPERM);
	CHECK_EQ(ops->access(pt, &unnamed, id, R_OK), -EPERM);
	CHECK_EQ(geteuid(), 0);
	CHECK_EQ(ops->init(pt, &plain38), 0);
	sa.mode = 0644;
	CHECK_EQ(ops->setattr(pt, &unnamed, id, &sa, &ao), -EPERM);
	ops->forget(pt, id, 1);

	fo.shared_dir = scratch;
	CHECK_EQ(idmap_add_translate(&fo.uid_map, "forbid-guest:5000:1"), 0);
	CHECK_EQ(passthrough_new(&forbidding, &fo), 0);
	idmap41.flags = FUSE_ALLOW_IDMAP;
	CHECK_EQ(passthrough_ops.init(forbidding, &idmap41), 0);
	CHECK_EQ(idmap41.flags, 0);
	passthrough_free(forbidding);
	/* Killpriv v2 has the host judge the writer's group: withdrawn too. */
	idmap41.flags = FUSE_ALLOW_IDMAP | FUSE_HANDLE_KILLPRIV_V2;
	CHECK_EQ(ops->init(pt, &idmap41), 0);
	CHECK_EQ(idmap41.flags, FUSE_HANDLE_KILLPRIV_V2);
	CHECK_EQ(ops->init(pt, &plain38), 0);
}

/*
 * A daemon that is not root takes on no ids and bypasses nothing: the
 * host refuses what its own user may not do, with the host's error. Run in
 * a child that drops to uid/gid 65534 for good.
 */
static void test_unprivileged_daemon(void)
{
	struct passthrough_opts o = { .cache = CACHE_AUTO, .timeout = -1 };
	char dir[PATH_MAX / 2], path[PATH_MAX];
	pid_t child;
	int status = -1;

	if (!is_root) {
		SKIP_CASE("unprivileged_daemon: needs root");
		return;
	}
	snprintf(dir, sizeof(dir), "%s/unpriv", scratch);
	CHECK_EQ(mkdir(dir, 0755), 0);
	snprintf(path, sizeof(path), "%s/secret", dir);
	close(open(path, O_CREAT | O_WRONLY, 0600));
	snprintf(path, sizeof(path), "%s/mine", dir);
	CHECK_EQ(mkdir(path, 0755), 0);
	CHECK_EQ(chown(path, 65534, 65534), 0);
	child = fork();
	if (child == 0) {
		struct passthrough *up;
		struct fuse_conn_params conn = { .proto_minor = 38 };
		struct fuse_create_in cin = { .flags = O_RDWR, .mode = S_IFREG | 0644 };
		struct fuse_open_in oin = { .flags = O_RDONLY };
		struct fuse_open_out oo;
		struct fuse_entry_out ce, se, me;
		int bad = 0;

		/* as a daemon a user started: without the bit this process's
		 * passthrough_new set, setresuid drops every capability */
		if (prctl(PR_SET_SECUREBITS, 0) || setgroups(0, NULL) ||
		    setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
			_exit(2);
		o.shared_dir = dir;
		if (passthrough_new(&up, &o) < 0 || passthrough_ops.init(up, &conn))
			_exit(3);
		/* the guest's root asks; the host still says no to 65534 */
		bad |= passthrough_ops.lookup(up, &root_ctx, FUSE_ROOT_ID, "secret", &se) != 0;
		bad |= (passthrough_ops.open(up, &root_ctx, se.nodeid, &oin, &oo) != -EACCES) << 1;
		bad |= (passthrough_ops.create(up, &root_ctx, FUSE_ROOT_ID, "no", &cin,
					       &ce, &oo) != -EACCES) << 2;
		bad |= passthrough_ops.lookup(up, &root_ctx, FUSE_ROOT_ID, "mine", &me) << 3;
		bad |= (passthrough_ops.create(up, &root_ctx, me.nodeid, "yes", &cin,
					       &ce, &oo) != 0) << 4;
		bad |= (ce.attr.uid != 65534) << 5;
		_exit(bad ? 10 + bad : 0);
	}
	CHECK(child > 0);
	CHECK_EQ(waitpid(child, &status, 0), child);
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), 0);
}

/* FORGETs from the hiprio thread racing lookups and getattrs on the
 * request thread: under ASan a premature free shows up here. */
struct race { _Atomic uint64_t id; _Atomic bool stop; };

static void *forgetter(void *arg)
{
	struct race *r = arg;

	while (!r->stop)
		ops->forget(pt, r->id, UINT64_MAX / 2);
	return NULL;
}

static void test_forget_race(void)
{
	struct fuse_getattr_in gin = { 0 };
	struct fuse_attr_out aout;
	struct race r = { 0 };
	pthread_t t;
	uint64_t fh;

	r.id = create(&root_ctx, FUSE_ROOT_ID, "race", 0644, &fh);
	CHECK_EQ(release(r.id, fh), 0);
	CHECK_EQ(pthread_create(&t, NULL, forgetter, &r), 0);
	for (int i = 0; i < 20000; i++) {
		uint64_t id = lookup(FUSE_ROOT_ID, "race", NULL);
		int ret;

		CHECK(id != 0);
		ret = ops->getattr(pt, &root_ctx, id, &gin, &aout);
		CHECK(ret == 0 || ret == -EBADF);
		r.id = id;
	}
	r.stop = true;
	pthread_join(t, NULL);
	ops->forget(pt, r.id, UINT64_MAX);
}

/* A directory dir_name below the root with n empty files named prefix0,
 * prefix1, ...; their nodeids (one lookup each, for the caller to forget)
 * go to ids. Returns how many were made: all n, or the test failed. */
static int make_files(const char *dir_name, const char *prefix, uint64_t *ids,
		      int n, struct fuse_entry_out *dir)
{
	struct fuse_mkdir_in min = { .mode = 0755 };
	struct fuse_mknod_in in = { .mode = S_IFREG | 0644 };
	struct fuse_entry_out e;
	char name[16];
	int made = 0;

	CHECK_EQ(ops->mkdir(pt, &root_ctx, FUSE_ROOT_ID, dir_name, &min, dir), 0);
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "%s%d", prefix, i);
		if (ops->mknod(pt, &root_ctx, dir->nodeid, name, &in, &e) < 0)
			break;
		ids[made++] = e.nodeid;
	}
	CHECK_EQ(made, n);
	return made;
}

/* Thousands of inodes make the shards grow; the root must still be found
 * by its identity afterwards, or ".." would give it a second nodeid. */
static void test_many_inodes(void)
{
	static uint64_t ids[6000];
	struct fuse_entry_out dir;
	int made = make_files("many", "m", ids, 6000, &dir);

	CHECK_EQ(lookup(dir.nodeid, "..", NULL), FUSE_ROOT_ID);
	for (int i = 0; i < made; i++) {
		struct fuse_getattr_in gin = { 0 };
		struct fuse_attr_out aout;

		CHECK_EQ(ops->getattr(pt, &root_ctx, ids[i], &gin, &aout), 0);
		ops->forget(pt, ids[i], 1);
	}
	ops->forget(pt, dir.nodeid, 1);
}

/* --inode-file-handles=mandatory: inodes the guest holds pin at most half
 * the fd budget (the rest give their fds back while idle), yet all work; a
 * file deleted behind the guest's back gives an error, not a crash. */
#define HANDLES_FD_LIMIT 200    /* the budget under the test's RLIMIT_NOFILE */
static void test_file_handles(void)
{
	struct passthrough_opts opts = {
		.shared_dir = scratch, .timeout = -1,
		.file_handles = FILE_HANDLES_MANDATORY,
	};
	struct passthrough *saved = pt;
	struct fuse_getattr_in gin = { 0 };
	struct fuse_attr_out aout;
	struct fuse_entry_out dir;
	static uint64_t ids[1000];
	struct rlimit saved_nofile, nofile = { .rlim_cur = 128 + HANDLES_FD_LIMIT };
	int before, made, ret;
	uint64_t data, fh;

	if (!is_root) {
		SKIP_CASE("file handles: needs root (CAP_DAC_READ_SEARCH)");
		return;
	}
	/* passthrough.c keeps 128 fds for the daemon itself. */
	CHECK_EQ(getrlimit(RLIMIT_NOFILE, &saved_nofile), 0);
	nofile.rlim_max = saved_nofile.rlim_max;
	CHECK_EQ(setrlimit(RLIMIT_NOFILE, &nofile), 0);
	ret = passthrough_new(&pt, &opts);
	setrlimit(RLIMIT_NOFILE, &saved_nofile);
	if (ret < 0) {
		CHECK(!"passthrough_new with mandatory file handles");
		pt = saved;
		return;
	}
	before = count_open_fds();
	made = make_files("handles", "h", ids, 1000, &dir);
	CHECK(count_open_fds() - before <= HANDLES_FD_LIMIT / 2 + 1);
	for (int i = 0; i < made; i++)
		CHECK_EQ(ops->getattr(pt, &root_ctx, ids[i], &gin, &aout), 0);
	CHECK(count_open_fds() - before <= HANDLES_FD_LIMIT / 2 + 1);
	CHECK_EQ(lookup(dir.nodeid, "h5", NULL), ids[5]);
	ops->forget(pt, ids[5], 1);

	data = create(&root_ctx, dir.nodeid, "data", 0644, &fh);
	CHECK(data != 0);
	CHECK_EQ(write_str(data, fh, 0, "by handle"), 9);
	CHECK_EQ(release(data, fh), 0);
	CHECK_EQ(ops->getattr(pt, &root_ctx, data, &gin, &aout), 0);
	CHECK_EQ(aout.attr.size, 9);

	char path[64];

	/* The last file made gave its fd back: nothing pins it. */
	snprintf(path, sizeof(path), "%s/handles/h%d", scratch, made - 1);
	CHECK_EQ(unlink(path), 0);
	CHECK(ops->getattr(pt, &root_ctx, ids[made - 1], &gin, &aout) < 0);

	for (int i = 0; i < made; i++)
		ops->forget(pt, ids[i], 1);
	ops->destroy(pt);
	passthrough_free(pt);
	pt = saved;
}

/* A guest holding many inodes gets ENFILE, and the daemon keeps serving. */
static void test_fd_limit(void)
{
	struct passthrough_opts opts = { .shared_dir = scratch, .timeout = -1 };
	struct passthrough *small;
	struct rlimit old, low;
	struct fuse_entry_out e;
	struct fuse_mknod_in in = { .mode = S_IFREG | 0644 };
	int enfile = 0, ok = 0;
	char name[16];

	getrlimit(RLIMIT_NOFILE, &old);
	low = old;
	low.rlim_cur = 300;     /* budget: 300 - 128 reserved */
	/* Lowering one's own soft limit is always allowed. */
	if (setrlimit(RLIMIT_NOFILE, &low) < 0) {
		CHECK_MSG(0, "fd limit: RLIMIT_NOFILE lowered to 300: %s", strerror(errno));
		return;
	}
	CHECK_EQ(passthrough_new(&small, &opts), 0);
	setrlimit(RLIMIT_NOFILE, &old);
	for (int i = 0; i < 250; i++) {
		int ret;

		snprintf(name, sizeof(name), "n%d", i);
		ret = passthrough_ops.mknod(small, &root_ctx, FUSE_ROOT_ID, name, &in, &e);
		if (ret == -ENFILE)
			enfile++;
		else if (ret == 0)
			ok++;
	}
	CHECK(ok >= 160 && ok <= 172);
	CHECK(enfile > 0);
	CHECK_EQ(passthrough_ops.lookup(small, &root_ctx, FUSE_ROOT_ID, ".", &e), 0);
	passthrough_free(small);
}

int main(void)
{
	struct passthrough_opts opts = {
		.cache = CACHE_AUTO, .timeout = -1, .xattr = true,
	};
	struct fuse_conn_params conn = { .proto_minor = 38 };

	is_root = geteuid() == 0;
	{
		/* room for test_many_inodes: one O_PATH fd per inode */
		struct rlimit rl;

		getrlimit(RLIMIT_NOFILE, &rl);
		if (rl.rlim_cur < 16384)
			rl.rlim_cur = rl.rlim_max < 16384 ? rl.rlim_max : 16384;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (scratch_start(scratch) != 0)
		return 1;
	chmod(scratch, 0777);   /* uid 1000 creates here in test_creds */
	opts.shared_dir = scratch;
	if (passthrough_new(&pt, &opts) < 0) {
		fprintf(stderr, "passthrough_new failed\n");
		return 1;
	}
	CHECK_EQ(ops->init(pt, &conn), 0);

	test_root_and_dots();
	test_create_write_read();
	test_readdir();
	test_lookup_known_and_replaced();
	test_readdir_resume();
	test_rename_link_unlink();
	test_forget_while_in_use();
	test_garbage_ids();
	test_special_files_not_opened();
	test_symlinks_stay_inside();
	test_setattr_misc();
	test_statx();
	test_unnamed_callers();
	test_xattr();
	test_tmpfile();
	test_creds();
	test_supp_group();
	test_group_shared_dir();
	test_unprivileged_daemon();
	test_forget_race();
	test_many_inodes();
	test_file_handles();
	test_fd_limit();

	ops->destroy(pt);
	passthrough_free(pt);
	return scratch_finish(scratch, check_result());
}
