/* Guest side of migration-test.sh: holds files open across live migrations and uses them in each round the host starts. */
/*
 * Usage (in the guest): migrate DIR      (DIR is on the virtio-fs share, e.g. /mnt/mig)
 *
 * The host prepares DIR/held-read.dat, held-append.log, held-rw.dat, the directories sub/ and
 * cwd/deep/. This program opens the first three (read, append, read-write), a directory fd on
 * sub/ and chdir()s into cwd/deep/, then writes DIR/ready. From then on the host drives rounds:
 * it creates DIR/go.K (K = 1, 2, ...), whose words select extras: "io" keeps writing files into
 * DIR/io/ until the host creates DIR/io-stop.K (guest I/O during pre-copy), "user-open" starts
 * the non-root user (below), "user" has it use its fds again, "quit" ends the program. Every round uses every held fd, and reports through DIR/result.K (written under a
 * temporary name, then renamed, so the host never reads half a report) and the console:
 *   CHECK NAME PASS|FAIL detail   the guest's own oracle (read content, inode number, ...)
 *   G NAME first-line|ERR errno   what an fd on DIR/g-NAME.K-1, opened at the end of the round
 *                                  before, reads now (the host renames, deletes or replaces
 *                                  those files in between: it judges the answer)
 *   IO NAME SIZE FNV              a file written during the round, with the FNV-1a 64 of the
 *                                  bytes the guest wrote (the host hashes what it finds)
 *   END fails=N
 * Exit 0 after "quit" when no check ever failed, 1 otherwise.
 *
 * The non-root user: two children of uid 1000, gid 1000 and the supplementary group 2000, one on
 * DIR/u (the share) and one on /tmp/u (the guest's tmpfs, the oracle), each holding (a) own.dat,
 * its own, read-write, (b) grp.dat of 0:2000 mode 0664, read-write through the supplementary
 * group, (c) other.dat of 0:0 mode 0644, read-only as "other", and a cwd in home/, its own. On
 * each "user-open" or "user" round both run the same operations (user_ops) and every answer of
 * the share must equal the tmpfs's: CHECK user-OP lines.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define IO_FILE_SIZE (16 * 1024)
#define WAIT_SECONDS 900

static const char *dir;
static FILE *report;
static int round_fails, total_fails;

static void out(const char *fmt, ...)
{
	va_list ap;
	char line[512];

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	printf("MIG %s\n", line);
	fflush(stdout);
	if (report)
		fprintf(report, "%s\n", line);
}

static void check(const char *name, int ok, const char *fmt, ...)
{
	va_list ap;
	char detail[256];

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	out("CHECK %s %s %s", name, ok ? "PASS" : "FAIL", detail);
	if (!ok) {
		round_fails++;
		total_fails++;
	}
}

static uint64_t fnv(uint64_t h, const unsigned char *p, size_t n)
{
	while (n--) {
		h ^= *p++;
		h *= 0x100000001b3ULL;
	}
	return h;
}
#define FNV_INIT 0xcbf29ce484222325ULL

static void path(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(buf, len, "%s/", dir);

	va_start(ap, fmt);
	vsnprintf(buf + n, len - n, fmt, ap);
	va_end(ap);
}

static int exists(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0;
}

/* The host's markers arrive through the share itself: poll with stat (cache=never, so each
 * look-up reaches the daemon that serves the guest at that moment). */
static int wait_for(const char *p)
{
	for (int i = 0; i < WAIT_SECONDS * 4; i++) {
		if (exists(p))
			return 0;
		usleep(250 * 1000);
	}
	return -1;
}

/* Hash of a whole file read through fd with pread; -errno as a negative size on error. */
static long long fd_hash(int fd, uint64_t *h)
{
	unsigned char buf[8192];
	long long total = 0;
	ssize_t n;

	*h = FNV_INIT;
	while ((n = pread(fd, buf, sizeof(buf), total)) > 0) {
		*h = fnv(*h, buf, n);
		total += n;
	}
	return n < 0 ? -errno : total;
}

static uint64_t rng_state;
static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* Writes DIR/io/K.N files of pseudo-random bytes until DIR/io-stop.K appears. */
static void io_round(int k)
{
	static unsigned char buf[IO_FILE_SIZE];
	char p[256], stop[256];
	int files = 0;

	path(stop, sizeof(stop), "io-stop.%d", k);
	rng_state = 0x9e3779b97f4a7c15ULL ^ (uint64_t)k;
	while (!exists(stop) && files < 1000) {
		for (size_t i = 0; i < sizeof(buf); i += 8) {
			uint64_t v = rng();
			memcpy(buf + i, &v, 8);
		}
		path(p, sizeof(p), "io/%d.%d", k, files);
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		ssize_t w = fd < 0 ? -1 : write(fd, buf, sizeof(buf));
		if (fd < 0 || w != (ssize_t)sizeof(buf)) {
			check("io-write", 0, "%s: %s", p, strerror(errno));
			if (fd >= 0)
				close(fd);
			return;
		}
		close(fd);
		out("IO io/%d.%d %d %016" PRIx64, k, files, IO_FILE_SIZE,
		    fnv(FNV_INIT, buf, sizeof(buf)));
		files++;
		/* Paced, so that pre-copy overlaps a few hundred files, not thousands. */
		usleep(50 * 1000);
	}
	check("io-files", files > 0, "%d files of %d bytes", files, IO_FILE_SIZE);
}

#define USER_UID 1000
#define USER_GID 1000
#define USER_SUPP_GID 2000

/* A file of the user's tree, made by root: content, owner, mode. */
static int user_file(const char *root, const char *name, const char *content, uid_t uid,
		     gid_t gid, mode_t mode)
{
	char p[256];
	int fd, ok;

	snprintf(p, sizeof(p), "%s/%s", root, name);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return -errno;
	ok = write(fd, content, strlen(content)) == (ssize_t)strlen(content) &&
	     fchown(fd, uid, gid) == 0 && fchmod(fd, mode) == 0;
	ok = close(fd) == 0 && ok;
	return ok ? 0 : -errno;
}

/* ROOT/ (root's, 0755) with home/ (the user's), own.dat, grp.dat, other.dat. */
static int user_tree(const char *root)
{
	char p[256];
	int ret;

	if (mkdir(root, 0755) != 0 && errno != EEXIST)
		return -errno;
	snprintf(p, sizeof(p), "%s/home", root);
	if ((mkdir(p, 0755) != 0 && errno != EEXIST) || chown(p, USER_UID, USER_GID) != 0)
		return -errno;
	ret = user_file(root, "own.dat", "own-0000\n", USER_UID, USER_GID, 0644);
	if (!ret)
		ret = user_file(root, "grp.dat", "grp-0000\n", 0, USER_SUPP_GID, 0664);
	if (!ret)
		ret = user_file(root, "other.dat", "other\n", 0, 0, 0644);
	return ret;
}

/* "0" or the errno's name, for the comparison with the oracle. */
static const char *err_word(int ok)
{
	return ok ? "0" : strerrorname_np(errno) ? strerrorname_np(errno) : "E?";
}

/* One round of the user's operations on its fds; appends "op=answer " words to line. */
static void user_ops(int k, int last, int fa, int fb, int fc, char *line, size_t len)
{
	char want[16], got[16], name[32];
	size_t n = 0;
	ssize_t w, r;
	struct stat st;
	int fd;

#define WORD(op, fmt, ...) \
	n += snprintf(line + n, n < len ? len - n : 0, op "=" fmt " ", __VA_ARGS__)
	/* What the last round wrote through (a) and (b) is still there. */
	snprintf(want, sizeof(want), "own-%04d", last);
	r = pread(fa, got, 8, 0);
	WORD("a-kept", "%s", r == 8 && !memcmp(got, want, 8) ? "same" : err_word(0));
	snprintf(want, sizeof(want), "grp-%04d", last);
	r = pread(fb, got, 8, 0);
	WORD("b-kept", "%s", r == 8 && !memcmp(got, want, 8) ? "same" : err_word(0));
	/* Allowed: write and read back through (a) and (b); read (c). */
	snprintf(want, sizeof(want), "own-%04d", k);
	w = pwrite(fa, want, 8, 0);
	WORD("a-write", "%s", err_word(w == 8));
	r = pread(fa, got, 8, 0);
	WORD("a-read", "%s", r == 8 && !memcmp(got, want, 8) ? "same" : err_word(0));
	snprintf(want, sizeof(want), "grp-%04d", k);
	w = pwrite(fb, want, 8, 0);
	WORD("b-write", "%s", err_word(w == 8));
	r = pread(fb, got, 8, 0);
	WORD("b-read", "%s", r == 8 && !memcmp(got, want, 8) ? "same" : err_word(0));
	r = pread(fc, got, 6, 0);
	WORD("c-read", "%s", r == 6 && !memcmp(got, "other\n", 6) ? "same" : err_word(0));
	/* Not allowed: writing through the read-only fd, opening (c) to write. */
	w = pwrite(fc, "x", 1, 0);
	WORD("c-write", "%s", err_word(w == 1));
	fd = open("../other.dat", O_WRONLY);
	WORD("c-open-write", "%s", err_word(fd >= 0));
	if (fd >= 0)
		close(fd);
	/* A new open for writing through the supplementary group. */
	fd = open("../grp.dat", O_WRONLY);
	WORD("b-open-write", "%s", err_word(fd >= 0));
	if (fd >= 0)
		close(fd);
	/* The cwd: a file made there is the user's; none may be made in root's directory. */
	snprintf(name, sizeof(name), "cwd.%d", k);
	fd = open(name, O_WRONLY | O_CREAT | O_EXCL, 0644);
	WORD("cwd-create", "%s", err_word(fd >= 0 && fstat(fd, &st) == 0));
	if (fd >= 0) {
		WORD("cwd-owner", "%u:%u", (unsigned)st.st_uid, (unsigned)st.st_gid);
		close(fd);
	}
	snprintf(name, sizeof(name), "../made.%d", k);
	fd = open(name, O_WRONLY | O_CREAT | O_EXCL, 0644);
	WORD("parent-create", "%s", err_word(fd >= 0));
	if (fd >= 0)
		close(fd);
#undef WORD
}

/* The user's child on ROOT: drops to the user, opens (a), (b), (c), moves into home/, then
 * answers each round number read from cmd with one line of user_ops on res. */
static void user_child(const char *root, int cmd, int res)
{
	gid_t supp = USER_SUPP_GID;
	char p[256], line[1024];
	int fa, fb, fc, k, last = 0;

	if (setgroups(1, &supp) != 0 || setresgid(USER_GID, USER_GID, USER_GID) != 0 ||
	    setresuid(USER_UID, USER_UID, USER_UID) != 0) {
		dprintf(res, "setup=%s\n", err_word(0));
		_exit(1);
	}
	snprintf(p, sizeof(p), "%s/own.dat", root);
	fa = open(p, O_RDWR);
	snprintf(p, sizeof(p), "%s/grp.dat", root);
	fb = open(p, O_RDWR);
	snprintf(p, sizeof(p), "%s/other.dat", root);
	fc = open(p, O_RDONLY);
	snprintf(p, sizeof(p), "%s/home", root);
	if (fa < 0 || fb < 0 || fc < 0 || chdir(p) != 0) {
		dprintf(res, "setup=%s\n", err_word(0));
		_exit(1);
	}
	dprintf(res, "setup=0\n");
	while (read(cmd, &k, sizeof(k)) == sizeof(k)) {
		user_ops(k, last, fa, fb, fc, line, sizeof(line));
		last = k;
		dprintf(res, "%s\n", line);
	}
	_exit(0);
}

struct user_side {
	pid_t pid;
	int cmd;
	FILE *res;
};
static struct user_side user_share = { .pid = -1 }, user_tmpfs = { .pid = -1 };

/* One line from a child, without its newline; "" when it is gone. */
static void user_line(struct user_side *u, char *line, size_t len)
{
	if (!u->res || !fgets(line, len, u->res))
		line[0] = '\0';
	line[strcspn(line, "\n")] = '\0';
}

static int user_start(struct user_side *u, const char *root, char *line, size_t len)
{
	int cmd[2], res[2];

	if (pipe(cmd) != 0 || pipe(res) != 0)
		return -errno;
	u->pid = fork();
	if (u->pid < 0)
		return -errno;
	if (u->pid == 0) {
		/* The other child's pipe ends too: its EOF at quit must not wait for this one. */
		if (u != &user_share && user_share.res) {
			close(user_share.cmd);
			fclose(user_share.res);
		}
		close(cmd[1]);
		close(res[0]);
		user_child(root, cmd[0], res[1]);
	}
	close(cmd[0]);
	close(res[1]);
	u->cmd = cmd[1];
	u->res = fdopen(res[0], "r");
	user_line(u, line, len);
	return 0;
}

/* Both sides do round k's operations; each word of the share's answer against the tmpfs's. */
static void user_round(int k)
{
	char sl[1024], tl[1024], *ss, *ts, *sw, *tw;

	if (write(user_share.cmd, &k, sizeof(k)) != sizeof(k) ||
	    write(user_tmpfs.cmd, &k, sizeof(k)) != sizeof(k)) {
		check("user-round", 0, "a user child is gone: %s", strerror(errno));
		return;
	}
	user_line(&user_share, sl, sizeof(sl));
	user_line(&user_tmpfs, tl, sizeof(tl));
	/* The oracle itself must show the allowed and the refused: else nothing is compared. */
	check("user-oracle", strstr(tl, "a-write=0 ") && strstr(tl, "b-write=0 ") &&
	      strstr(tl, "c-write=EBADF ") && strstr(tl, "c-open-write=EACCES ") &&
	      strstr(tl, "parent-create=EACCES "), "tmpfs: %s", tl);
	sw = strtok_r(sl, " ", &ss);
	tw = strtok_r(tl, " ", &ts);
	if (!sw || !tw)
		check("user-answers", 0, "share '%s' tmpfs '%s'", sw ? sw : "", tw ? tw : "");
	for (; sw && tw; sw = strtok_r(NULL, " ", &ss), tw = strtok_r(NULL, " ", &ts)) {
		char op[32];

		snprintf(op, sizeof(op), "user-%.*s", (int)strcspn(tw, "="), tw);
		check(op, !strcmp(sw, tw), "share %s tmpfs %s", sw, tw);
	}
	if (sw || tw)
		check("user-answers", 0, "left over: share '%s' tmpfs '%s'", sw ? sw : "",
		      tw ? tw : "");
}

/* "user-open": both trees made by root, both children started (once). */
static void user_open(void)
{
	char p[256], sl[256], tl[256];
	int ret;

	path(p, sizeof(p), "u");
	ret = user_tree(p);
	if (!ret)
		ret = user_tree("/tmp/u");
	if (!ret)
		ret = user_start(&user_share, p, sl, sizeof(sl));
	if (!ret)
		ret = user_start(&user_tmpfs, "/tmp/u", tl, sizeof(tl));
	check("user-setup", !ret && !strcmp(sl, "setup=0") && !strcmp(tl, "setup=0"),
	      "%s; share %s tmpfs %s", ret ? strerror(-ret) : "trees made", sl, tl);
}

static void user_stop(struct user_side *u)
{
	if (u->pid <= 0)
		return;
	close(u->cmd);
	fclose(u->res);
	waitpid(u->pid, NULL, 0);
}

static const char *const gnames[] = {"rename", "delete", "replace"};
#define NG (sizeof(gnames) / sizeof(gnames[0]))

int main(int argc, char **argv)
{
	char p[256], tmp[256], buf[4096], cwd_want[256];
	int fr, fa, frw, fd_dir, gfd[NG];
	uint64_t r_ref;
	long long r_size;
	struct stat r_st;

	if (argc != 2) {
		fprintf(stderr, "usage: migrate DIR\n");
		return 2;
	}
	dir = argv[1];
	for (size_t i = 0; i < NG; i++)
		gfd[i] = -1;
	path(p, sizeof(p), "held-read.dat");
	fr = open(p, O_RDONLY);
	path(p, sizeof(p), "held-append.log");
	fa = open(p, O_WRONLY | O_APPEND);
	path(p, sizeof(p), "held-rw.dat");
	frw = open(p, O_RDWR);
	path(p, sizeof(p), "sub");
	fd_dir = open(p, O_RDONLY | O_DIRECTORY);
	path(cwd_want, sizeof(cwd_want), "cwd/deep");
	if (fr < 0 || fa < 0 || frw < 0 || fd_dir < 0 || chdir(cwd_want) != 0 ||
	    fstat(fr, &r_st) != 0) {
		printf("MIG SETUP FAIL %s\n", strerror(errno));
		return 1;
	}
	r_size = fd_hash(fr, &r_ref);
	path(p, sizeof(p), "ready");
	int rfd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (rfd < 0 || close(rfd) != 0) {
		printf("MIG SETUP FAIL ready: %s\n", strerror(errno));
		return 1;
	}
	printf("MIG READY read=%lld bytes\n", r_size);
	fflush(stdout);

	for (int k = 1;; k++) {
		char words[64] = "";
		path(p, sizeof(p), "go.%d", k);
		if (wait_for(p) != 0) {
			printf("MIG TIMEOUT waiting for %s\n", p);
			return 1;
		}
		int g = open(p, O_RDONLY);
		if (g >= 0) {
			ssize_t n = read(g, words, sizeof(words) - 1);
			words[n > 0 ? n : 0] = '\0';
			close(g);
		}
		if (strstr(words, "quit"))
			break;
		path(tmp, sizeof(tmp), "result.%d.tmp", k);
		report = fopen(tmp, "w");
		round_fails = 0;
		out("ROUND %d %s", k, words);

		/* What the fds held across the last move read now. */
		for (size_t i = 0; i < NG; i++) {
			if (gfd[i] < 0)
				continue;
			ssize_t n = pread(gfd[i], buf, 64, 0);
			if (n < 0) {
				out("G %s ERR %d", gnames[i], errno);
			} else {
				buf[n] = '\0';
				buf[strcspn(buf, "\n")] = '\0';
				out("G %s %s", gnames[i], n ? buf : "(empty)");
			}
			close(gfd[i]);
			gfd[i] = -1;
		}
		if (strstr(words, "io"))
			io_round(k);
		if (strstr(words, "user-open"))
			user_open();
		if (strstr(words, "user"))
			user_round(k);

		uint64_t h;
		long long n = fd_hash(fr, &h);
		check("read-fd", n == r_size && h == r_ref, "%lld bytes hash %s", n,
		      h == r_ref ? "same" : "differs");
		struct stat st;
		check("read-fd-inode", fstat(fr, &st) == 0 && st.st_ino == r_st.st_ino &&
		      st.st_size == r_st.st_size, "ino %llu", (unsigned long long)st.st_ino);

		int len = snprintf(buf, sizeof(buf), "round %d\n", k);
		ssize_t w = write(fa, buf, len);
		check("append-fd", w == len, "write %zd: %s", w, w < 0 ? strerror(errno) : "ok");

		char want[16], got[16] = "";
		len = snprintf(want, sizeof(want), "rw%06d", k);
		w = pwrite(frw, want, len, (off_t)k * 8);
		ssize_t r = pread(frw, got, len, (off_t)k * 8);
		check("rw-fd", w == len && r == len && !memcmp(want, got, len), "pwrite %zd pread %zd",
		      w, r);

		snprintf(buf, sizeof(buf), "via-dirfd.%d", k);
		int f = openat(fd_dir, buf, O_WRONLY | O_CREAT | O_EXCL, 0644);
		w = f < 0 ? -1 : write(f, "d", 1);
		check("dir-fd", f >= 0 && w == 1 && fstatat(fd_dir, buf, &st, 0) == 0 &&
		      st.st_size == 1, "openat %s: %s", buf, f < 0 ? strerror(errno) : "ok");
		if (f >= 0)
			close(f);

		snprintf(buf, sizeof(buf), "cwd.%d", k);
		f = open(buf, O_WRONLY | O_CREAT | O_EXCL, 0644);
		w = f < 0 ? -1 : write(f, "c", 1);
		char here[256];
		check("cwd", f >= 0 && w == 1 && getcwd(here, sizeof(here)) &&
		      !strcmp(here, cwd_want), "open %s: %s", buf, f < 0 ? strerror(errno) : "ok");
		if (f >= 0)
			close(f);

		/* Held across the next move; the host may change the files meanwhile. */
		for (size_t i = 0; i < NG; i++) {
			path(p, sizeof(p), "g-%s.%d", gnames[i], k);
			gfd[i] = open(p, O_RDONLY);
		}
		out("END fails=%d", round_fails);
		if (report) {
			fclose(report);
			report = NULL;
			path(p, sizeof(p), "result.%d", k);
			rename(tmp, p);
		}
	}
	user_stop(&user_share);
	user_stop(&user_tmpfs);
	printf("MIG QUIT fails=%d\n", total_fails);
	return total_fails ? 1 : 0;
}
