/* --inode-file-handles decided per mount: a mount without handles below the share falls back (prefer) or is refused (mandatory); each mount logged once naming it, with handles or without; prefer takes a handle only when an idle inode gives back its fd; a reused inode number is a new inode. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fuse.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/passthrough.h"
#include "backend/pt_internal.h"
#include "common/log.h"
#include "../common/check.h"
#include "../common/fd_count.h"
#include "../common/scratch.h"

static const struct fs_ops *ops = &passthrough_ops;
static const struct fuse_request_ctx ctx = { .unique = 1 };
static char scratch[] = "/tmp/ferry-fhm-XXXXXX";
static char logpath[PATH_MAX];

static int lookup(struct passthrough *pt, uint64_t parent, const char *name, uint64_t *id)
{
	struct fuse_entry_out e;
	int ret = ops->lookup(pt, &ctx, parent, name, &e);

	*id = ret < 0 ? 0 : e.nodeid;
	return ret;
}

/* Lines of the captured log that contain both needles. */
static int log_lines(const char *a, const char *b)
{
	char line[2048];
	FILE *f = fopen(logpath, "r");
	int n = 0;

	while (f && fgets(line, sizeof(line), f))
		n += strstr(line, a) && strstr(line, b);
	if (f)
		fclose(f);
	return n;
}

static struct passthrough *open_share(const char *dir, enum inode_file_handles fh, int *ret)
{
	struct passthrough_opts opts = { .shared_dir = dir, .timeout = -1, .file_handles = fh };
	struct fuse_conn_params conn = { .proto_minor = 38 };
	struct passthrough *pt = NULL;

	*ret = passthrough_new(&pt, &opts);
	if (*ret == 0)
		CHECK_EQ(ops->init(pt, &conn), 0);
	return pt;
}

static void close_share(struct passthrough *pt)
{
	ops->destroy(pt);
	passthrough_free(pt);
}

/* procfs has no export operations (name_to_handle_at: EOPNOTSUPP), tmpfs
 * has; the share itself is on /tmp's file system, which must have them. */
static void test_prefer(void)
{
	char tmpfs_file[PATH_MAX + 16];
	uint64_t proc_id, sys_id, tmp_id, file_id;
	struct passthrough *pt;
	int ret, before;

	pt = open_share(scratch, FILE_HANDLES_PREFER, &ret);
	CHECK_EQ(ret, 0);
	if (!pt)
		return;
	CHECK_EQ(log_lines("no usable file handles", scratch), 0);
	/* The share's mount is judged at start and says it keeps handles. */
	CHECK_EQ(log_lines("--inode-file-handles=prefer: file handles on ", "once half the fds are used"), 1);
	/* tmpfs: its files can take handles, and while fds are plentiful
	 * keep their fds (test_lazy_handles: given back once they run short). */
	CHECK_EQ(lookup(pt, 1, "tmp", &tmp_id), 0);
	snprintf(tmpfs_file, sizeof(tmpfs_file), "%s/tmp/f", scratch);
	close(open(tmpfs_file, O_CREAT | O_WRONLY, 0644));
	before = fd_count();
	CHECK_EQ(lookup(pt, tmp_id, "f", &file_id), 0);
	CHECK_EQ(fd_count(), before + 1);
	/* procfs: found without handles on the first directory, logged once,
	 * its inodes keep fds and work. */
	CHECK_EQ(lookup(pt, 1, "proc", &proc_id), 0);
	before = fd_count();
	CHECK_EQ(lookup(pt, proc_id, "sys", &sys_id), 0);
	CHECK_EQ(fd_count(), before + 1);
	{
		struct fuse_getattr_in gin = { 0 };
		struct fuse_attr_out aout;

		CHECK_EQ(ops->getattr(pt, &ctx, sys_id, &gin, &aout), 0);
		CHECK(S_ISDIR(aout.attr.mode));
	}
	CHECK_EQ(log_lines("prefer: no usable file handles on", "/proc (proc, mount"), 1);
	CHECK_EQ(log_lines("no usable file handles", "/tmp (tmpfs"), 0);
	CHECK_EQ(log_lines("prefer: file handles on ", "/tmp (tmpfs"), 1);
	ops->forget(pt, sys_id, 1);
	ops->forget(pt, proc_id, 1);
	ops->forget(pt, file_id, 1);
	ops->forget(pt, tmp_id, 1);
	close_share(pt);
}

/* Half the fds used (fd_budget_half_used): a soft RLIMIT_NOFILE that
 * gives the guest FILL_LIMIT fds, and FILL_FILES files looked up and kept
 * take more than half of them. */
#define FD_RESERVE_OF_BACKEND 128       /* passthrough.c's FD_RESERVE */
#define FILL_LIMIT 172
#define FILL_FILES 100

/* A share under a soft RLIMIT_NOFILE that gives the guest FILL_LIMIT fds;
 * saved gets the limit to restore. */
static struct passthrough *open_share_few_fds(enum inode_file_handles fh, struct rlimit *saved)
{
	struct rlimit low = { .rlim_cur = FD_RESERVE_OF_BACKEND + FILL_LIMIT };
	struct passthrough *pt;
	int ret;

	CHECK_EQ(getrlimit(RLIMIT_NOFILE, saved), 0);
	low.rlim_max = saved->rlim_max;
	CHECK_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
	pt = open_share(scratch, fh, &ret);
	CHECK_EQ(ret, 0);
	return pt;
}

/* Looks up FILL_FILES new files in the test's ext4 (dir_id), kept: past
 * half the fds. While fds are plentiful an idle inode keeps its fd. */
static void fill_fds(struct passthrough *pt, uint64_t dir_id, uint64_t fill_id[FILL_FILES])
{
	char path[PATH_MAX + 32];
	int before;

	for (int i = 0; i < FILL_FILES; i++) {
		snprintf(path, sizeof(path), "%s/ext4/fill-%d", scratch, i);
		close(open(path, O_CREAT | O_WRONLY, 0644));
		before = fd_count();
		CHECK_EQ(lookup(pt, dir_id, strrchr(path, '/') + 1, &fill_id[i]), 0);
		if (i == 0)
			CHECK_EQ(fd_count(), before + 1);
	}
}

/* Forgets the files of fill_fds and their directory, and removes them and
 * the test's own file name in it. */
static void unfill_fds(struct passthrough *pt, uint64_t dir_id, const uint64_t fill_id[FILL_FILES],
		       const char *name)
{
	char path[PATH_MAX + 32];

	for (int i = 0; i < FILL_FILES; i++) {
		ops->forget(pt, fill_id[i], 1);
		snprintf(path, sizeof(path), "%s/ext4/fill-%d", scratch, i);
		unlink(path);
	}
	ops->forget(pt, dir_id, 1);
	snprintf(path, sizeof(path), "%s/ext4/%s", scratch, name);
	unlink(path);
}

/*
 * A deleted file's inode number taken by a new file while the guest still
 * knows the old one (no FORGET yet): the new file is a new inode that
 * works, and the old nodeid says its file is gone. Only an idle handle
 * inode without its fd can meet this (an fd pins the number), so only
 * once fds run short. On an ext4 of the test's own (below the share, as
 * "ext4"), where nothing else makes files: ext4 gives a new file the
 * lowest free number of its group, so the next file takes the number
 * just freed.
 */
static void test_number_reused(enum inode_file_handles mode)
{
	char old_path[PATH_MAX + 32], new_path[PATH_MAX + 32];
	struct rlimit saved;
	struct fuse_getattr_in gin = { 0 };
	struct fuse_attr_out aout;
	uint64_t dir_id, old_id, new_id = 0, fill_id[FILL_FILES];
	struct passthrough *pt;
	struct stat st;
	ino_t old_ino;
	int before;

	pt = open_share_few_fds(mode, &saved);
	if (!pt)
		goto out;
	CHECK_EQ(lookup(pt, 1, "ext4", &dir_id), 0);
	fill_fds(pt, dir_id, fill_id);
	/* Now they run short: an idle inode gives its fd back. */
	snprintf(old_path, sizeof(old_path), "%s/ext4/reused-old", scratch);
	snprintf(new_path, sizeof(new_path), "%s/ext4/reused-new", scratch);
	close(open(old_path, O_CREAT | O_WRONLY, 0644));
	CHECK_EQ(stat(old_path, &st), 0);
	old_ino = st.st_ino;
	before = fd_count();
	CHECK_EQ(lookup(pt, dir_id, "reused-old", &old_id), 0);
	CHECK_EQ(fd_count(), before);
	CHECK_EQ(unlink(old_path), 0);
	close(open(new_path, O_CREAT | O_WRONLY, 0644));
	CHECK_EQ(stat(new_path, &st), 0);
	CHECK_EQ((uint64_t)st.st_ino, (uint64_t)old_ino);
	CHECK_EQ(lookup(pt, dir_id, "reused-new", &new_id), 0);
	CHECK(new_id != old_id);
	CHECK_EQ(ops->getattr(pt, &ctx, new_id, &gin, &aout), 0);
	CHECK_EQ(aout.attr.ino, (uint64_t)st.st_ino);
	CHECK_EQ(ops->getattr(pt, &ctx, old_id, &gin, &aout), -ESTALE);
	/* The old nodeid forgotten, the new one still works; forgotten too,
	 * a lookup finds the file again. */
	ops->forget(pt, old_id, 1);
	CHECK_EQ(ops->getattr(pt, &ctx, new_id, &gin, &aout), 0);
	ops->forget(pt, new_id, 1);
	CHECK_EQ(lookup(pt, dir_id, "reused-new", &new_id), 0);
	CHECK_EQ(ops->getattr(pt, &ctx, new_id, &gin, &aout), 0);
	ops->forget(pt, new_id, 1);
	unfill_fds(pt, dir_id, fill_id, "reused-new");
	close_share(pt);
out:
	CHECK_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
}

/* What the table holds for nodeid, read under its shard's lock without
 * taking a reference (which would reopen a handle inode's fd). */
struct peek {
	uint64_t nodeid;
	bool found, has_handle;
	int fd;
};

static void peek_one(struct inode *inode, void *arg)
{
	struct peek *p = arg;

	if (inode->nodeid != p->nodeid)
		return;
	p->found = true;
	p->has_handle = inode->file_handle != NULL;
	p->fd = inode->fd;
}

static struct peek peek(struct passthrough *pt, uint64_t nodeid)
{
	struct peek p = { .nodeid = nodeid };

	inode_table_foreach(pt->inodes, peek_one, &p);
	CHECK(p.found);
	return p;
}

/*
 * prefer: a new file's inode takes no handle at its lookup (most keep
 * their fd for life); once half the fds are used it takes one as it goes
 * idle and gives back its fd, and a lookup of its name finds it again by
 * comparing handles. A file on a mount without handles keeps its fd.
 */
static void test_lazy_handles(void)
{
	char path[PATH_MAX + 32];
	struct rlimit saved;
	struct fuse_getattr_in gin = { 0 };
	struct fuse_attr_out aout;
	uint64_t dir_id, lazy_id, again_id, proc_id, sys_id, fill_id[FILL_FILES];
	struct passthrough *pt;
	struct peek p;

	pt = open_share_few_fds(FILE_HANDLES_PREFER, &saved);
	if (!pt)
		goto out;
	/* The first directory on a mount judges it at once. */
	CHECK_EQ(lookup(pt, 1, "ext4", &dir_id), 0);
	CHECK_EQ(log_lines("prefer: file handles on ", "/ext4 (ext4, mount"), 1);
	snprintf(path, sizeof(path), "%s/ext4/lazy", scratch);
	close(open(path, O_CREAT | O_WRONLY, 0644));
	CHECK_EQ(lookup(pt, dir_id, "lazy", &lazy_id), 0);
	p = peek(pt, lazy_id);
	CHECK(!p.has_handle);
	CHECK(p.fd >= 0);
	fill_fds(pt, dir_id, fill_id);
	/* Idle inodes now give back their fds, which keeps the budget just
	 * under half used; one more fd in use (an open file's) puts it at
	 * half: the next request on it leaves it with a handle and no fd. */
	CHECK(peek(pt, lazy_id).fd >= 0);
	CHECK_EQ(fd_budget_take(&pt->fds), 0);
	CHECK_EQ(ops->getattr(pt, &ctx, lazy_id, &gin, &aout), 0);
	p = peek(pt, lazy_id);
	CHECK(p.has_handle);
	CHECK_EQ(p.fd, -1);
	CHECK_EQ(lookup(pt, dir_id, "lazy", &again_id), 0);
	CHECK_EQ(again_id, lazy_id);
	CHECK_EQ(ops->getattr(pt, &ctx, lazy_id, &gin, &aout), 0);
	CHECK_EQ(peek(pt, lazy_id).fd, -1);
	/* procfs has no handles: its inodes keep their fds, and work. */
	CHECK_EQ(lookup(pt, 1, "proc", &proc_id), 0);
	CHECK_EQ(lookup(pt, proc_id, "sys", &sys_id), 0);
	CHECK_EQ(ops->getattr(pt, &ctx, sys_id, &gin, &aout), 0);
	p = peek(pt, sys_id);
	CHECK(!p.has_handle);
	CHECK(p.fd >= 0);
	fd_budget_give_back(&pt->fds);
	ops->forget(pt, sys_id, 1);
	ops->forget(pt, proc_id, 1);
	ops->forget(pt, lazy_id, 2);
	unfill_fds(pt, dir_id, fill_id, "lazy");
	close_share(pt);
out:
	CHECK_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
}

static void test_mandatory(void)
{
	char proc_dir[PATH_MAX + 8];
	struct passthrough *pt;
	uint64_t id;
	int ret;

	pt = open_share(scratch, FILE_HANDLES_MANDATORY, &ret);
	CHECK_EQ(ret, 0);
	if (!pt)
		return;
	CHECK_EQ(lookup(pt, 1, "tmp", &id), 0);
	ops->forget(pt, id, 1);
	CHECK_EQ(lookup(pt, 1, "proc", &id), -EOPNOTSUPP);
	CHECK_EQ(lookup(pt, 1, "proc", &id), -EOPNOTSUPP);
	CHECK_EQ(log_lines("mandatory: no usable file handles on", "/proc (proc, mount"), 1);
	close_share(pt);

	/* A share on such a mount is refused at start, naming it. */
	snprintf(proc_dir, sizeof(proc_dir), "%s/proc", scratch);
	pt = open_share(proc_dir, FILE_HANDLES_MANDATORY, &ret);
	CHECK_EQ(ret, -EOPNOTSUPP);
	CHECK(!pt);
	CHECK_EQ(log_lines("mandatory: no usable file handles on", "/proc (proc, mount"), 2);
}

int main(void)
{
	char path[PATH_MAX + 8];
	int logfd;

	if (geteuid() != 0) {
		printf("SKIP  needs root (mounts in a mount namespace of its own)\n");
		return TEST_SKIP;
	}
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		printf("SKIP  no private mount namespace (%s)\n", strerror(errno));
		return TEST_SKIP;
	}
	if (scratch_start(scratch) != 0)
		return 1;
	snprintf(path, sizeof(path), "%s/proc", scratch);
	CHECK_EQ(mkdir(path, 0755), 0);
	CHECK_EQ(mount("proc", path, "proc", 0, NULL), 0);
	snprintf(path, sizeof(path), "%s/tmp", scratch);
	CHECK_EQ(mkdir(path, 0755), 0);
	CHECK_EQ(mount("tmpfs", path, "tmpfs", 0, "size=1m"), 0);
	/* An ext4 of its own for test_number_reused, loop-mounted in this
	 * mount namespace (the loop device goes with the mount). */
	{
		char cmd[4 * PATH_MAX];

		snprintf(path, sizeof(path), "%s/ext4", scratch);
		CHECK_EQ(mkdir(path, 0755), 0);
		snprintf(cmd, sizeof(cmd), "truncate -s 16M %s.ext4 && mkfs.ext4 -q -F %s.ext4 && "
			 "mount -o loop %s.ext4 %s", scratch, scratch, scratch, path);
		CHECK_EQ(system(cmd), 0);
	}
	/* ferryfsd logs to stderr: captured in a file to count the lines. */
	snprintf(logpath, sizeof(logpath), "%s.log", scratch);
	logfd = open(logpath, O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0600);
	CHECK(logfd >= 0);
	ferry_log_init(LOG_LVL_INFO, false);
	fflush(stderr);
	int saved = dup(2);

	dup2(logfd, 2);
	test_prefer();
	test_lazy_handles();
	test_number_reused(FILE_HANDLES_MANDATORY);
	test_number_reused(FILE_HANDLES_PREFER);
	test_mandatory();
	fflush(stderr);
	dup2(saved, 2);
	{
		char line[2048];
		FILE *f = fopen(logpath, "r");

		while (f && fgets(line, sizeof(line), f))
			fprintf(stderr, "log: %s", line);
		if (f)
			fclose(f);
	}
	unlink(logpath);
	snprintf(path, sizeof(path), "%s/ext4", scratch);
	umount2(path, 0);
	snprintf(path, sizeof(path), "%s.ext4", scratch);
	unlink(path);
	snprintf(path, sizeof(path), "%s/tmp", scratch);
	umount2(path, MNT_DETACH);
	snprintf(path, sizeof(path), "%s/proc", scratch);
	umount2(path, MNT_DETACH);
	return scratch_finish(scratch, check_result());
}
