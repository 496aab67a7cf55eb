/* Guest half of the semantics tests: one "CHECK name PASS|FAIL reason" line per check, run from the share. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

static int failures;

static void check(const char *name, int ok, const char *fmt, ...)
{
	va_list ap;

	printf("CHECK %s %s", name, ok ? "PASS" : "FAIL");
	if (!ok) {
		failures++;
		printf(" ");
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
	}
	printf("\n");
	fflush(stdout);
}

static char *path(const char *dir, const char *name)
{
	static char buf[8][512];
	static int next;
	char *p = buf[next++ % 8];

	snprintf(p, sizeof(buf[0]), "%s/%s", dir, name);
	return p;
}

static void drop_caches(void)
{
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);

	if (fd >= 0) {
		if (write(fd, "3", 1) != 1)
			perror("drop_caches");
		close(fd);
	}
}

static int put(const char *p, const char *data, mode_t mode)
{
	int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, mode);

	if (fd < 0)
		return -errno;
	if (write(fd, data, strlen(data)) != (ssize_t)strlen(data)) {
		close(fd);
		return -EIO;
	}
	return close(fd) < 0 ? -errno : 0;
}

/* Reads up to size-1 bytes at offset 0 through fd; "" on error. */
static const char *pread_str(int fd, char *buf, size_t size)
{
	ssize_t n = pread(fd, buf, size - 1, 0);

	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

static const char *read_str(const char *p, char *buf, size_t size)
{
	int fd = open(p, O_RDONLY);

	buf[0] = '\0';
	if (fd < 0)
		return buf;
	pread_str(fd, buf, size);
	close(fd);
	return buf;
}

static void touch_marker(const char *dir, const char *name)
{
	int fd = open(path(dir, name), O_CREAT | O_WRONLY, 0644);

	if (fd >= 0)
		close(fd);
}

/* Polls for a marker the host creates; new names are looked up afresh. */
static int wait_marker(const char *dir, const char *name, int seconds)
{
	struct stat st;

	for (int i = 0; i < seconds * 10; i++) {
		if (stat(path(dir, name), &st) == 0)
			return 0;
		usleep(100000);
	}
	return -ETIMEDOUT;
}

/* Runs fn as uid:gid in a child; returns its result (0 or -errno). */
static int as_user(uid_t uid, gid_t gid, int (*fn)(void *), void *arg)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		if (setgroups(0, NULL) || setresgid(gid, gid, gid) || setresuid(uid, uid, uid))
			_exit(200);
		int r = fn(arg);
		_exit(r < 0 ? -r : 0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
		return -ECHILD;
	return -WEXITSTATUS(status);
}

static int fn_put(void *p)
{
	return put(p, "by-user", 0644);
}

static int fn_read(void *p)
{
	char buf[64];
	int fd = open(p, O_RDONLY);

	if (fd < 0)
		return -errno;
	pread_str(fd, buf, sizeof(buf));
	close(fd);
	return strcmp(buf, "secret") ? -EBADMSG : 0;
}

static int fn_write_x(void *p)
{
	int fd = open(p, O_WRONLY);

	if (fd < 0)
		return -errno;
	if (pwrite(fd, "x", 1, 0) != 1) {
		close(fd);
		return -errno;
	}
	return close(fd) < 0 ? -errno : 0;
}

static int fn_truncate(void *p)
{
	return truncate(p, 0) < 0 ? -errno : 0;
}

static int fn_chown_1000(void *p)
{
	return chown(p, 1000, -1) < 0 ? -errno : 0;
}

static int fn_open_trunc(void *p)
{
	int fd = open(p, O_WRONLY | O_TRUNC);

	if (fd < 0)
		return -errno;
	return close(fd) < 0 ? -errno : 0;
}

/* ---- submounts ---- */

static int mounts_has(const char *mnt)
{
	char line[1024], want[600];
	FILE *f = fopen("/proc/mounts", "r");
	int found = 0;

	snprintf(want, sizeof(want), " %s virtiofs ", mnt);
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, want))
			found = 1;
	if (f)
		fclose(f);
	return found;
}

static int sync_file(const char *p)
{
	int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644), ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, "synced", 6) != 6 || syncfs(fd) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

static void cmd_submounts(const char *mnt, const char *nosub)
{
	struct stat top, sub, made, ntop, nsub;
	char buf[64];

	int ok = stat(mnt, &top) == 0 && stat(path(mnt, "sub/."), &sub) == 0;
	check("submount-dev", ok && top.st_dev != sub.st_dev,
	      "st_dev %lx and %lx", (long)top.st_dev, (long)sub.st_dev);
	check("submount-in-proc-mounts", mounts_has(path(mnt, "sub")),
	      "no virtiofs line for %s/sub in /proc/mounts", mnt);
	ok = put(path(mnt, "sub/fromguest"), "in-tmpfs", 0644) == 0 &&
	     stat(path(mnt, "sub/fromguest"), &made) == 0;
	check("submount-file-dev", ok && made.st_dev == sub.st_dev, "created file's st_dev");
	/* The host made sub/same-ino and top-ino so that (dev, ino) of
	 * files on either side may only differ by st_dev. */
	check("submount-read", !strcmp(read_str(path(mnt, "sub/hostfile"), buf, sizeof(buf)),
				       "host-tmpfs"), "read '%s'", buf);
	check("submount-syncfs", sync_file(path(mnt, "sub/synced")) == 0, "syncfs failed");

	ok = stat(nosub, &ntop) == 0 && stat(path(nosub, "sub/."), &nsub) == 0;
	check("nosub-same-dev", ok && ntop.st_dev == nsub.st_dev,
	      "--no-announce-submounts: st_dev %lx vs %lx", (long)ntop.st_dev, (long)nsub.st_dev);
	check("nosub-not-in-proc-mounts", !mounts_has(path(nosub, "sub")), "submount shown");
	check("nosub-syncfs", sync_file(path(nosub, "sub/synced-nosub")) == 0, "syncfs failed");
}

/* ---- O_DIRECT / O_NOATIME reach the host ---- */

static void cmd_hold(const char *mnt, const char *nosub)
{
	int fds[4] = {
		open(path(mnt, "direct"), O_RDONLY | O_DIRECT),
		open(path(mnt, "noatime"), O_RDONLY | O_NOATIME),
		open(path(nosub, "direct2"), O_RDONLY | O_DIRECT),
		open(path(nosub, "noatime2"), O_RDONLY | O_NOATIME),
	};
	int all = fds[0] >= 0 && fds[1] >= 0 && fds[2] >= 0 && fds[3] >= 0;

	check("hold-open", all, "open: %d %d %d %d", fds[0], fds[1], fds[2], fds[3]);
	touch_marker(mnt, "held");
	check("hold-host-checked", wait_marker(mnt, "checked", 300) == 0,
	      "host never answered");
	for (int i = 0; i < 4; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* ---- readonly ---- */

static void expect_erofs(const char *name, int ret)
{
	check(name, ret < 0 && errno == EROFS, "ret %d errno %d (%s)", ret, errno,
	      strerror(errno));
}

static void cmd_readonly(const char *ro)
{
	char buf[64];
	struct timespec ts[2] = { { 0, UTIME_NOW }, { 0, UTIME_NOW } };

	check("ro-read", !strcmp(read_str(path(ro, "file"), buf, sizeof(buf)), "keep"),
	      "read '%s'", buf);
	expect_erofs("ro-open-wronly", open(path(ro, "file"), O_WRONLY));
	expect_erofs("ro-open-rdwr", open(path(ro, "file"), O_RDWR));
	expect_erofs("ro-open-trunc", open(path(ro, "file"), O_RDONLY | O_TRUNC));
	expect_erofs("ro-create", open(path(ro, "new"), O_CREAT | O_WRONLY, 0644));
	expect_erofs("ro-mkdir", mkdir(path(ro, "newdir"), 0755));
	expect_erofs("ro-mknod", mknod(path(ro, "fifo"), S_IFIFO | 0644, 0));
	expect_erofs("ro-symlink", symlink("file", path(ro, "sl")));
	expect_erofs("ro-link", link(path(ro, "file"), path(ro, "hl")));
	expect_erofs("ro-unlink", unlink(path(ro, "file")));
	expect_erofs("ro-rmdir", rmdir(path(ro, "dir")));
	expect_erofs("ro-rename", rename(path(ro, "file"), path(ro, "moved")));
	expect_erofs("ro-chmod", chmod(path(ro, "file"), 0600));
	expect_erofs("ro-chown", chown(path(ro, "file"), 1000, 1000));
	expect_erofs("ro-truncate", truncate(path(ro, "file"), 0));
	expect_erofs("ro-utimens", utimensat(AT_FDCWD, path(ro, "file"), ts, 0));
	check("ro-access-r", access(path(ro, "file"), R_OK) == 0, "errno %d", errno);
}

/* ---- uid/gid translation ---- */

static void expect_owner(const char *name, const char *p, uid_t uid, gid_t gid)
{
	struct stat st;
	int ok = stat(p, &st) == 0;

	check(name, ok && st.st_uid == uid && st.st_gid == gid, "%s: %u:%u, want %u:%u",
	      p, ok ? st.st_uid : 0, ok ? st.st_gid : 0, uid, gid);
}

static void cmd_translate(const char *xl)
{
	expect_owner("xl-host-map", path(xl, "h5003"), 1003, 1003);
	expect_owner("xl-host-squash", path(xl, "h8002"), 3000, 0);
	expect_owner("xl-host-unmapped", path(xl, "h1234"), 1234, 1234);
	check("xl-creds-mapped", as_user(1003, 1003, fn_read, path(xl, "h5003")) == 0,
	      "guest 1003 (host 5003) cannot read its 0600 file");
	int r = as_user(1000, 1000, fn_read, path(xl, "h5003"));
	check("xl-creds-other", r == -EACCES, "guest 1000 (host 5000) got %d", r);
	r = as_user(1000, 1000, fn_put, path(xl, "g1000"));
	check("xl-create-map", r == 0, "create as 1000: %d", r);
	expect_owner("xl-create-map-attr", path(xl, "g1000"), 1000, 1000);
	r = as_user(2003, 2003, fn_put, path(xl, "g2003"));
	check("xl-create-squash", r == 0, "create as 2003: %d", r);
	expect_owner("xl-create-squash-attr", path(xl, "g2003"), 7000, 7000);
	r = as_user(4001, 4001, fn_put, path(xl, "g4001"));
	check("xl-forbid-create", r == -EPERM, "create as forbidden 4001: %d", r);
	check("xl-chown-root-create", put(path(xl, "g0"), "root", 0644) == 0, "create");
	check("xl-chown-map", chown(path(xl, "g0"), 1005, 1005) == 0, "errno %d", errno);
	drop_caches();
	expect_owner("xl-chown-map-attr", path(xl, "g0"), 1005, 1005);
	r = chown(path(xl, "g0"), 4002, -1);
	check("xl-forbid-chown", r < 0 && errno == EPERM, "chown to 4002: %d errno %d", r, errno);
}

/* ---- suid/sgid/capability clearing ---- */

static int mode_of(const char *p)
{
	struct stat st;

	drop_caches();
	return stat(p, &st) == 0 ? (int)(st.st_mode & 07777) : -1;
}

/* A v2 file capability: cap_net_raw in permitted, effective bit set. */
static const uint32_t cap_v2[5] = { 0x02000001, 1u << 13, 0, 0, 0 };

static void cmd_killpriv(const char *dir)
{
	char d[256];
	char name[64];
	int r, m;

	snprintf(d, sizeof(d), "%s/kp", dir);
	mkdir(d, 0777);
	chmod(d, 0777);

#define MAKE(f, mode, uid) (put(path(d, f), "data", 0600) == 0 && \
			    chown(path(d, f), uid, uid) == 0 && chmod(path(d, f), mode) == 0)

	check("kp-setup", MAKE("w-owner", 06755, 1000) && MAKE("w-other", 04777, 0) &&
	      MAKE("w-root", 04777, 0) && MAKE("trunc", 06777, 1000) &&
	      MAKE("otrunc", 06777, 1000) && MAKE("chown", 04755, 0) &&
	      MAKE("sgid-noexec", 02764, 1000) && MAKE("cap-root", 0755, 0) &&
	      MAKE("cap-user", 0777, 1000), "errno %d", errno);

	static const struct {
		const char *check, *file;
		int (*op)(void *);
		uid_t uid;              /* 0: as root */
		int want_mode;
	} cases[] = {
		{ "kp-write-owner", "w-owner", fn_write_x, 1000, 0755 },
		{ "kp-write-other", "w-other", fn_write_x, 1000, 0777 },
		{ "kp-write-root-keeps", "w-root", fn_write_x, 0, 04777 },
		{ "kp-truncate", "trunc", fn_truncate, 1000, 0777 },
		{ "kp-open-trunc", "otrunc", fn_open_trunc, 1000, 0777 },
		{ "kp-chown", "chown", fn_chown_1000, 0, 0755 },
		{ "kp-sgid-without-gx-kept", "sgid-noexec", fn_write_x, 1000, 02764 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		char *p = path(d, cases[i].file);

		r = cases[i].uid ? as_user(cases[i].uid, cases[i].uid, cases[i].op, p) :
				   cases[i].op(p);
		m = mode_of(p);
		check(cases[i].check, r == 0 && m == cases[i].want_mode, "r %d mode %o", r, m);
	}

	for (int i = 0; i < 2; i++) {
		const char *f = i ? "cap-user" : "cap-root";

		r = setxattr(path(d, f), "security.capability", cap_v2, sizeof(cap_v2), 0);
		check(i ? "kp-cap-set-user" : "kp-cap-set-root", r == 0, "errno %d", errno);
		r = i ? as_user(1000, 1000, fn_write_x, path(d, f)) : fn_write_x(path(d, f));
		drop_caches();
		ssize_t n = getxattr(path(d, f), "security.capability", name, sizeof(name));
		check(i ? "kp-cap-cleared-user" : "kp-cap-cleared-root",
		      r == 0 && n < 0 && errno == ENODATA, "r %d getxattr %zd errno %d", r, n, errno);
	}
#undef MAKE
}

/* ---- page cache per cache mode ---- */

struct cache_want {
	int open_sees_new;      /* a fresh open right after the change */
	int fd_sees_new;        /* the old fd right after the change */
	int attr_sees_new;      /* stat right after the change */
	int later_sees_new;     /* the old fd 2.5 s later */
	int later_attr_new;     /* stat 2.5 s later */
};

static void cmd_cache(const char *mnt, const char *mode)
{
	static const struct { const char *mode; struct cache_want w; } table[] = {
		/* -1: not asserted (depends on how long the handshake took) */
		{ "never", { 1, 1, 1, 1, 1 } },
		{ "metadata", { 1, 1, 0, 1, 0 } },
		{ "always", { 0, 0, 0, 0, 0 } },
		{ "auto", { 1, -1, -1, 1, 1 } },
		/* cache=always with -o timeout=1: kept across opens, but the
		 * expired attrs reveal the change (AUTO_INVAL_DATA) */
		{ "always-timeout1", { -1, -1, -1, 1, 1 } },
	};
	const struct cache_want *w = NULL;
	char buf[64], name[96];
	struct stat st;

	for (size_t i = 0; i < sizeof(table) / sizeof(*table); i++)
		if (!strcmp(table[i].mode, mode))
			w = &table[i].w;
	if (!w) {
		check("cache-mode", 0, "unknown mode %s", mode);
		return;
	}
	int fd = open(path(mnt, "data"), O_RDONLY);
	snprintf(name, sizeof(name), "cache-%s-first-read", mode);
	check(name, fd >= 0 && !strcmp(pread_str(fd, buf, sizeof(buf)), "old-content-1"),
	      "read '%s'", buf);
	int sized_ok = stat(path(mnt, "sized"), &st) == 0 && st.st_size == 3;
	snprintf(name, sizeof(name), "cache-%s-first-stat", mode);
	check(name, sized_ok, "size %ld", (long)st.st_size);

	touch_marker(mnt, "ready");
	snprintf(name, sizeof(name), "cache-%s-host-changed", mode);
	check(name, wait_marker(mnt, "changed", 300) == 0, "host never changed the files");

	char fresh[64];
	read_str(path(mnt, "data"), fresh, sizeof(fresh));
	pread_str(fd, buf, sizeof(buf));
	int size_now = stat(path(mnt, "sized"), &st) == 0 ? (int)st.st_size : -1;
	if (w->open_sees_new >= 0) {
		snprintf(name, sizeof(name), "cache-%s-open-%s", mode,
			 w->open_sees_new ? "sees-new" : "keeps-old");
		check(name, !strcmp(fresh, w->open_sees_new ? "new-content-2" : "old-content-1"),
		      "fresh open read '%s'", fresh);
	}
	if (w->fd_sees_new >= 0) {
		snprintf(name, sizeof(name), "cache-%s-fd-%s", mode,
			 w->fd_sees_new ? "sees-new" : "keeps-old");
		check(name, !strcmp(buf, w->fd_sees_new ? "new-content-2" : "old-content-1"),
		      "open fd read '%s'", buf);
	}
	if (w->attr_sees_new >= 0) {
		snprintf(name, sizeof(name), "cache-%s-attr-%s", mode,
			 w->attr_sees_new ? "sees-new" : "keeps-old");
		check(name, size_now == (w->attr_sees_new ? 6 : 3), "size %d", size_now);
	}
	/* Past the 1 s timeout of auto, far inside the 86400 s of always. */
	usleep(2500000);
	pread_str(fd, buf, sizeof(buf));
	size_now = stat(path(mnt, "sized"), &st) == 0 ? (int)st.st_size : -1;
	snprintf(name, sizeof(name), "cache-%s-later-%s", mode,
		 w->later_sees_new ? "sees-new" : "keeps-old");
	check(name, !strcmp(buf, w->later_sees_new ? "new-content-2" : "old-content-1"),
	      "open fd read '%s'", buf);
	snprintf(name, sizeof(name), "cache-%s-later-attr-%s", mode,
		 w->later_attr_new ? "sees-new" : "keeps-old");
	check(name, size_now == (w->later_attr_new ? 6 : 3), "size %d", size_now);
	if (fd >= 0)
		close(fd);
}

/* The bytes cmd_mmap writes through a shared mapping, and where: the host
 * finds them in the file (cache-test.sh). */
#define MMAP_SHARED_TEXT "written-through-a-shared-mapping"
#define MMAP_SHARED_OFF  4096

/* Shared and private mappings of a DIRECT_IO (cache=never) file. */
static void cmd_mmap(const char *mnt)
{
	int fd = open(path(mnt, "mapped"), O_RDWR);
	char *p = fd >= 0 ? mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
	char back[sizeof(MMAP_SHARED_TEXT)] = "";
	const char *how = "refused";
	int err = 0;

	check("mmap-private", p != MAP_FAILED && !memcmp(p, "mapped", 6), "errno %d", errno);
	if (p != MAP_FAILED)
		munmap(p, 4096);
	p = fd >= 0 ? mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
	if (p == MAP_FAILED) {
		err = errno;
	} else {
		/* Written through the mapping and synced: the host must then
		 * hold it, and read(2) in the guest see it. */
		memcpy(p + MMAP_SHARED_OFF, MMAP_SHARED_TEXT, strlen(MMAP_SHARED_TEXT));
		if (msync(p, 8192, MS_SYNC) < 0)
			err = errno, how = "msync-failed";
		else if (pread(fd, back, strlen(MMAP_SHARED_TEXT), MMAP_SHARED_OFF) !=
			 (ssize_t)strlen(MMAP_SHARED_TEXT) || strcmp(back, MMAP_SHARED_TEXT))
			how = "read-back-differs";
		else
			how = "worked";
		munmap(p, 8192);
	}
	/* Whether this may work depends on the guest's kernel (a 6.1 guest
	 * predates FUSE_DIRECT_IO_ALLOW_MMAP and refuses with ENODEV; 6.6+
	 * maps once it is agreed): the host judges this line. */
	printf("MMAP-SHARED %s errno %d\n", how, err);
	fflush(stdout);
	if (fd >= 0)
		close(fd);
}

/* Writeback cache: data on the host after fsync; O_APPEND lands at the end. */
static void cmd_writeback(const char *mnt)
{
	int fd = open(path(mnt, "wb"), O_CREAT | O_WRONLY | O_TRUNC, 0644);
	int ok = fd >= 0 && write(fd, "written-back", 12) == 12 && fsync(fd) == 0;

	check("wb-write-fsync", ok, "errno %d", errno);
	touch_marker(mnt, "wb-synced");
	check("wb-host-checked", wait_marker(mnt, "wb-checked", 300) == 0, "host never answered");
	if (fd >= 0)
		close(fd);
	fd = open(path(mnt, "app"), O_WRONLY | O_APPEND);
	ok = fd >= 0 && write(fd, "ab", 2) == 2 && write(fd, "cd", 2) == 2 && fsync(fd) == 0;
	check("wb-append", ok, "errno %d", errno);
	if (fd >= 0)
		close(fd);
	char buf[64];
	check("wb-append-read", !strcmp(read_str(path(mnt, "app"), buf, sizeof(buf)),
					"0123456789abcd"), "read '%s'", buf);
}

/* The commands: one directory argument, or two (then two is set). */
static const struct command {
	const char *name;
	void (*one)(const char *);
	void (*two)(const char *, const char *);
} commands[] = {
	{ "submounts", NULL, cmd_submounts },
	{ "hold", NULL, cmd_hold },
	{ "readonly", cmd_readonly, NULL },
	{ "translate", cmd_translate, NULL },
	{ "killpriv", cmd_killpriv, NULL },
	{ "cache", NULL, cmd_cache },
	{ "mmap", cmd_mmap, NULL },
	{ "writeback", cmd_writeback, NULL },
};

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (size_t i = 0; argc >= 2 && i < sizeof(commands) / sizeof(commands[0]); i++) {
		const struct command *c = &commands[i];

		if (strcmp(argv[1], c->name) || argc != (c->two ? 4 : 3))
			continue;
		if (c->two)
			c->two(argv[2], argv[3]);
		else
			c->one(argv[2]);
		return failures ? 1 : 0;
	}
	fprintf(stderr, "usage: gsem submounts|hold MNT NOSUB | readonly|translate|"
		"killpriv|mmap|writeback DIR | cache DIR MODE\n");
	return 2;
}
