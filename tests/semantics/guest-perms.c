/* Guest program: the permissions matrix, one line per (scenario, operation, identity), for comparison between file systems. */
/*
 * Usage: gperms DIR [--acl] [--xattr] [--only SCENARIO,...]
 *        gperms --probe-xattr DIR (exit 0: user.* works there)
 * Runs as root in the guest. Every cell gets a fresh fixture under DIR, made
 * as root; a child takes on the cell's identity (uid, gid, supplementary
 * groups, or root with capabilities dropped) and does one operation; the
 * parent then looks at the result as root. The output is a sorted-stable
 * list "CELL scenario/op/identity RESULT [after-state]" that should be the
 * same, line for line, on any POSIX file system: the test compares a
 * virtio-fs share against the guest's own tmpfs (perms-test.sh).
 * --acl adds the POSIX ACL scenario, --xattr the user.* xattr operations
 * (tmpfs has user.* xattrs only from Linux 6.6 on), --only limits the run
 * to the named scenarios.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define OWNER 1000
#define GROUP 1234

struct identity {
	const char *name;
	uid_t uid;
	gid_t gid;
	int ngroups;
	gid_t groups[2];
	int dropped_caps[2];   /* for root: capabilities taken away (-1: none) */
};

static const struct identity identities[] = {
	{ "owner", OWNER, OWNER, 1, { OWNER }, { -1, -1 } },
	{ "group-primary", 1001, GROUP, 1, { GROUP }, { -1, -1 } },
	{ "group-supp", 1002, 1002, 2, { 1002, GROUP }, { -1, -1 } },
	{ "other", 1003, 1003, 1, { 1003 }, { -1, -1 } },
	{ "root", 0, 0, 0, { 0 }, { -1, -1 } },
	{ "root-nodac", 0, 0, 0, { 0 }, { CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH } },
	{ "root-nofowner", 0, 0, 0, { 0 }, { CAP_FOWNER, -1 } },
	{ "root-nofsetid", 0, 0, 0, { 0 }, { CAP_FSETID, -1 } },
};

/*
 * A scenario is the fixture: directory d (and its twin d2 for renames)
 * with mode dmode owned duid:dgid, file d/f with mode fmode owned
 * OWNER:GROUP holding "data\n", d/own (0644, OWNER:OWNER), d/e an empty
 * directory (0775, OWNER:GROUP) and d/x, a file with user.x set.
 */
struct scenario {
	const char *name;
	mode_t dmode;
	uid_t duid;
	gid_t dgid;
	mode_t fmode;
	bool acl;
};

static const struct scenario scenarios[] = {
	{ "group-rw", 0770, OWNER, GROUP, 0660, false },
	{ "group-ro", 0750, OWNER, GROUP, 0640, false },
	{ "other-not-group", 0755, OWNER, GROUP, 0604, false },
	{ "root-dir-group", 0770, 0, GROUP, 0660, false },   /* the d */
	{ "sgid-dir", 02770, OWNER, GROUP, 0660, false },
	{ "sticky", 01777, 0, 0, 0666, false },
	{ "setid-file", 0777, OWNER, GROUP, 06775, false },
	{ "acl", 0770, OWNER, GROUP, 0660, true },
};

/* POSIX ACL xattr blobs as the kernel takes them (little endian). */
struct acl_entry { uint16_t tag, perm; uint32_t id; };
enum { ACL_USER_OBJ = 1, ACL_USER = 2, ACL_GROUP_OBJ = 4, ACL_GROUP = 8,
       ACL_MASK = 0x10, ACL_OTHER = 0x20 };

static int set_acl(const char *path, const char *name, const struct acl_entry *e, int n)
{
	uint8_t blob[4 + 8 * 8];
	uint32_t version = 2;

	memcpy(blob, &version, 4);
	memcpy(blob + 4, e, 8 * (size_t)n);
	return setxattr(path, name, blob, 4 + 8 * (size_t)n, 0);
}

static char base[1024];
static bool with_xattr;

static void must(int ok, const char *what, const char *path)
{
	if (!ok) {
		printf("CELL-SETUP-FAILED %s %s: %s\n", what, path, strerror(errno));
		fflush(stdout);
		exit(2);
	}
}

static void make_file(const char *path, mode_t mode, uid_t uid, gid_t gid, const char *data)
{
	int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0600);

	must(fd >= 0, "create", path);
	must(write(fd, data, strlen(data)) == (ssize_t)strlen(data), "write", path);
	close(fd);
	must(chown(path, uid, gid) == 0, "chown", path);
	must(chmod(path, mode) == 0, "chmod", path);
}

static void make_dir(const char *path, mode_t mode, uid_t uid, gid_t gid)
{
	must(mkdir(path, 0700) == 0, "mkdir", path);
	must(chown(path, uid, gid) == 0, "chown", path);
	must(chmod(path, mode) == 0, "chmod", path);
}

/* The fixture of one cell in c, a fresh directory. */
static void setup(const char *c, const struct scenario *s)
{
	char p[1200];

	make_dir(c, 0755, 0, 0);
	snprintf(p, sizeof(p), "%s/d", c);
	make_dir(p, s->dmode, s->duid, s->dgid);
	snprintf(p, sizeof(p), "%s/d2", c);
	make_dir(p, s->dmode, s->duid, s->dgid);
	snprintf(p, sizeof(p), "%s/d/f", c);
	make_file(p, s->fmode, OWNER, GROUP, "data\n");
	if (s->acl) {
		/* user 1003 may read and write, but the mask allows reading */
		const struct acl_entry fa[] = {
			{ ACL_USER_OBJ, 6, ~0u }, { ACL_USER, 6, 1003 }, { ACL_GROUP_OBJ, 6, ~0u },
			{ ACL_MASK, 4, ~0u }, { ACL_OTHER, 0, ~0u },
		};
		/* user 1003 may work in d, and new entries inherit that */
		const struct acl_entry da[] = {
			{ ACL_USER_OBJ, 7, ~0u }, { ACL_USER, 7, 1003 }, { ACL_GROUP_OBJ, 7, ~0u },
			{ ACL_MASK, 7, ~0u }, { ACL_OTHER, 0, ~0u },
		};

		must(set_acl(p, "system.posix_acl_access", fa, 5) == 0, "acl", p);
		snprintf(p, sizeof(p), "%s/d", c);
		must(set_acl(p, "system.posix_acl_access", da, 5) == 0, "acl", p);
		must(set_acl(p, "system.posix_acl_default", da, 5) == 0, "default acl", p);
	}
	snprintf(p, sizeof(p), "%s/d/own", c);
	make_file(p, 0644, OWNER, OWNER, "own\n");
	snprintf(p, sizeof(p), "%s/d/e", c);
	make_dir(p, 0775, OWNER, GROUP);
	if (with_xattr) {
		snprintf(p, sizeof(p), "%s/d/x", c);
		make_file(p, 0664, OWNER, GROUP, "x\n");
		must(setxattr(p, "user.x", "v", 1, 0) == 0, "setxattr", p);
	}
}

/* ---- the operations, run in the child as the identity, in d ---------- */

static int ok(int ret)
{
	return ret < 0 ? -errno : 0;
}

static int do_open(const char *path, int flags, mode_t mode)
{
	int fd = open(path, flags, mode);

	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

static int op_open_r(void) { return do_open("f", O_RDONLY, 0); }
static int op_open_w(void) { return do_open("f", O_WRONLY, 0); }
static int op_open_trunc(void) { return do_open("f", O_WRONLY | O_TRUNC, 0); }
static int op_truncate(void) { return ok(truncate("f", 1)); }
static int op_unlink(void) { return ok(unlink("f")); }
static int op_rename_in(void) { return ok(rename("f", "g")); }
static int op_rename_across(void) { return ok(rename("f", "../d2/f")); }
static int op_rename_over(void) { return ok(rename("own", "f")); }
static int op_link(void) { return ok(link("f", "l")); }
static int op_rmdir(void) { return ok(rmdir("e")); }
static int op_create(void) { return do_open("new", O_CREAT | O_EXCL | O_WRONLY, 0644); }
static int op_create_sgid(void) { return do_open("new", O_CREAT | O_EXCL | O_WRONLY, 02755); }
static int op_mkdir(void) { return ok(mkdir("new", 0775)); }
static int op_mkdir_sgid(void) { return ok(mkdir("new", 02775)); }
static int op_symlink(void) { return ok(symlink("f", "new")); }
static int op_mkfifo(void) { return ok(mkfifo("new", 0664)); }
static int op_chmod(void) { return ok(chmod("f", 0640)); }
static int op_chmod_gs(void) { return ok(chmod("f", 02670)); }
static int op_chgrp_own(void) { return ok(chown("own", (uid_t)-1, GROUP)); }
static int op_chown_own_same_uid(void) { return ok(chown("own", OWNER, GROUP)); }
static int op_chown_give(void) { return ok(chown("f", 1003, (gid_t)-1)); }
static int op_chgrp_f(void) { return ok(chown("f", (uid_t)-1, 1002)); }
static int op_utime_now(void) { return ok(utimensat(AT_FDCWD, "f", NULL, 0)); }

static int op_utime_set(void)
{
	const struct timespec ts[2] = { { 1000000000, 0 }, { 1000000000, 0 } };

	return ok(utimensat(AT_FDCWD, "f", ts, 0));
}

static int op_write(void)
{
	int fd = open("f", O_WRONLY | O_APPEND);
	int ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, "w", 1) != 1)
		ret = -errno;
	close(fd);
	return ret;
}

static int op_readdir(void) { return do_open(".", O_RDONLY | O_DIRECTORY, 0); }

static int op_stat(void)
{
	struct stat st;

	return ok(stat("f", &st));
}

static int op_getxattr(void)
{
	char v[8];

	return getxattr("x", "user.x", v, sizeof(v)) < 0 ? -errno : 0;
}

static int op_setxattr(void) { return ok(setxattr("x", "user.y", "w", 1, 0)); }

/* The minimal access ACL of mode 0755: only the owner (or CAP_FOWNER) may
 * set it, and a setter outside the file's group loses S_ISGID with it. */
static int op_setacl(void)
{
	const struct acl_entry e[] = {
		{ ACL_USER_OBJ, 7, ~0u }, { ACL_GROUP_OBJ, 5, ~0u }, { ACL_OTHER, 5, ~0u },
	};

	return ok(set_acl("f", "system.posix_acl_access", e, 3));
}
static int op_removexattr(void) { return ok(removexattr("x", "user.x")); }

enum { NEEDS_XATTR = 1, NEEDS_ACL = 2 };

struct op {
	const char *name;
	int (*run)(void);
	const char *observe;    /* what the parent looks at afterwards */
	int needs;              /* NEEDS_XATTR: user.* xattrs; NEEDS_ACL: --acl */
};

static const struct op ops[] = {
	{ "open-r", op_open_r, "f", 0 },
	{ "open-w", op_open_w, "f", 0 },
	{ "open-trunc", op_open_trunc, "f", 0 },
	{ "write", op_write, "f", 0 },
	{ "truncate", op_truncate, "f", 0 },
	{ "unlink", op_unlink, "f", 0 },
	{ "rename-in-dir", op_rename_in, "g", 0 },
	{ "rename-across", op_rename_across, "../d2/f", 0 },
	{ "rename-over", op_rename_over, "f", 0 },
	{ "link", op_link, "l", 0 },
	{ "rmdir", op_rmdir, "e", 0 },
	{ "create", op_create, "new", 0 },
	{ "create-sgid-mode", op_create_sgid, "new", 0 },
	{ "mkdir", op_mkdir, "new", 0 },
	{ "mkdir-sgid-mode", op_mkdir_sgid, "new", 0 },
	{ "symlink", op_symlink, "new", 0 },
	{ "mkfifo", op_mkfifo, "new", 0 },
	{ "chmod", op_chmod, "f", 0 },
	{ "chmod-g+s", op_chmod_gs, "f", 0 },
	{ "chgrp-own-file", op_chgrp_own, "own", 0 },
	{ "chown-own-file-same-uid", op_chown_own_same_uid, "own", 0 },
	{ "chown-giveaway", op_chown_give, "f", 0 },
	{ "chgrp-to-own-group", op_chgrp_f, "f", 0 },
	{ "utimens-now", op_utime_now, "f", 0 },
	{ "utimens-set", op_utime_set, "f", 0 },
	{ "readdir", op_readdir, ".", 0 },
	{ "stat", op_stat, "f", 0 },
	{ "getxattr", op_getxattr, "x", NEEDS_XATTR },
	{ "setxattr", op_setxattr, "x", NEEDS_XATTR },
	{ "removexattr", op_removexattr, "x", NEEDS_XATTR },
	{ "setacl", op_setacl, "f", NEEDS_ACL },
};

/* ---- running a cell --------------------------------------------------- */

static int drop_caps(const int caps[2])
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d) < 0)
		return -1;
	for (int i = 0; i < 2; i++) {
		if (caps[i] < 0)
			continue;
		d[CAP_TO_INDEX(caps[i])].effective &= ~CAP_TO_MASK(caps[i]);
		d[CAP_TO_INDEX(caps[i])].permitted &= ~CAP_TO_MASK(caps[i]);
	}
	return syscall(SYS_capset, &h, d) < 0 ? -1 : 0;
}

static const char *errname(int e)
{
	static char buf[16];

	switch (e) {
	case 0: return "ok";
	case EPERM: return "EPERM";
	case ENOENT: return "ENOENT";
	case EACCES: return "EACCES";
	case EEXIST: return "EEXIST";
	case ENOTDIR: return "ENOTDIR";
	case EISDIR: return "EISDIR";
	case EINVAL: return "EINVAL";
	case ENOTEMPTY: return "ENOTEMPTY";
	case EROFS: return "EROFS";
	case ENODATA: return "ENODATA";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case EXDEV: return "EXDEV";
	}
	snprintf(buf, sizeof(buf), "E%d", e);
	return buf;
}

/* Runs op as id inside dir; its result as -errno, or 1000+ for a child
 * that could not become id. */
static int run_as(const struct identity *id, const struct op *op, const char *dir)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		umask(022);
		if (chdir(dir) < 0)
			_exit(200);
		if (id->uid == 0) {
			if (drop_caps(id->dropped_caps) < 0)
				_exit(201);
		} else if (setgroups((size_t)id->ngroups, id->groups) < 0 ||
			   setresgid(id->gid, id->gid, id->gid) < 0 ||
			   setresuid(id->uid, id->uid, id->uid) < 0) {
			_exit(202);
		}
		_exit(-op->run());
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return 1000;
	if (WEXITSTATUS(status) >= 200)
		return 1000 + WEXITSTATUS(status);
	return -WEXITSTATUS(status);
}

static void run_cell(int n, const struct scenario *s, const struct op *op,
		     const struct identity *id)
{
	char c[1100], d[1200], obs[1300];
	struct stat st;
	int ret;

	snprintf(c, sizeof(c), "%s/c%d", base, n);
	setup(c, s);
	snprintf(d, sizeof(d), "%s/d", c);
	ret = run_as(id, op, d);
	printf("CELL %s/%s/%s ", s->name, op->name, id->name);
	if (ret >= 1000) {
		printf("SETUP-FAILED %d\n", ret);
		return;
	}
	printf("%s", errname(-ret));
	snprintf(obs, sizeof(obs), "%s/%s", d, op->observe);
	if (lstat(obs, &st) == 0)
		/* the mode's type bits say what kind of node it is */
		printf(" %s uid=%u gid=%u mode=%o size=%lld", op->observe,
		       st.st_uid, st.st_gid, st.st_mode,
		       S_ISREG(st.st_mode) ? (long long)st.st_size : 0LL);
	else
		printf(" %s absent", op->observe);
	if (!strcmp(op->name, "utimens-set") && ret == 0)
		printf(" mtime=%lld", (long long)st.st_mtime);
	printf("\n");
}

/* Whether name is one of the comma-separated names in list. */
static bool listed(const char *list, const char *name)
{
	size_t len = strlen(name);

	for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, name, len) && (p[len] == ',' || p[len] == '\0'))
			return true;
	return false;
}

int main(int argc, char **argv)
{
	const char *only = NULL;
	bool with_acl = false;
	int n = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: gperms DIR [--acl] [--xattr] | --probe-xattr DIR\n");
		return 2;
	}
	if (!strcmp(argv[1], "--probe-xattr") && argc == 3) {
		char p[1200];
		int fd;

		snprintf(p, sizeof(p), "%s/.xattr-probe", argv[2]);
		fd = open(p, O_CREAT | O_WRONLY, 0600);
		if (fd < 0)
			return 2;
		close(fd);
		fd = setxattr(p, "user.probe", "1", 1, 0);
		unlink(p);
		return fd == 0 ? 0 : 1;
	}
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--acl"))
			with_acl = true;
		else if (!strcmp(argv[i], "--xattr"))
			with_xattr = true;
		else if (!strcmp(argv[i], "--only") && i + 1 < argc)
			only = argv[++i];
		else {
			fprintf(stderr, "gperms: unknown argument %s\n", argv[i]);
			return 2;
		}
	}
	snprintf(base, sizeof(base), "%s", argv[1]);
	if (mkdir(base, 0755) < 0 && errno != EEXIST)
		must(0, "mkdir", base);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (size_t s = 0; s < sizeof(scenarios) / sizeof(*scenarios); s++) {
		if (scenarios[s].acl && !with_acl)
			continue;
		if (only && !listed(only, scenarios[s].name))
			continue;
		for (size_t o = 0; o < sizeof(ops) / sizeof(*ops); o++) {
			if (((ops[o].needs & NEEDS_XATTR) && !with_xattr) ||
			    ((ops[o].needs & NEEDS_ACL) && !with_acl))
				continue;
			for (size_t i = 0; i < sizeof(identities) / sizeof(*identities); i++)
				run_cell(n++, &scenarios[s], &ops[o], &identities[i]);
		}
	}
	printf("CELLS %d\n", n);
	return 0;
}
