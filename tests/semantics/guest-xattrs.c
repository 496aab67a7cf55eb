/* Guest program for xattr-test.sh: xattrs, POSIX ACLs, security labels and capabilities through a mapped share; one CHECK line each. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

static void check_result(const char *name, int ok, const char *why)
{
	printf("CHECK %s %s%s%s\n", name, ok ? "PASS" : "FAIL", ok ? "" : " ", ok ? "" : why);
	fflush(stdout);
}

/* The condition runs before the reason is read: a function's arguments have no order (gcc
 * evaluates the last first), so a strerror(errno) argument named the previous call's error. */
#define check(name, cond, why)                         \
	do {                                           \
		int ok_ = (cond);                      \
		check_result((name), ok_, (why));      \
	} while (0)

/* A new file with the mode the umask (or a default ACL) leaves. */
static int create_file(const char *path, mode_t mode)
{
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, mode);

	if (fd < 0)
		return -1;
	if (write(fd, "data", 4) != 4) {
		close(fd);
		return -1;
	}
	return close(fd);
}

/* A new file with exactly this mode. */
static int make_file(const char *path, mode_t mode)
{
	return create_file(path, mode) ? -1 : chmod(path, mode);
}

/* POSIX ACL xattr: version 2, then (tag, perm, id) entries in order. */
struct acl_entry { uint16_t tag, perm; uint32_t id; };
#define A_USER_OBJ 0x01
#define A_USER 0x02
#define A_GROUP_OBJ 0x04
#define A_MASK 0x10
#define A_OTHER 0x20
#define NOID 0xffffffffu

static int set_acl(const char *path, const char *name, const struct acl_entry *e, size_t n)
{
	unsigned char buf[4 + 16 * sizeof(struct acl_entry)];
	uint32_t version = 2;

	memcpy(buf, &version, 4);
	memcpy(buf + 4, e, n * sizeof(*e));
	return setxattr(path, name, buf, 4 + n * sizeof(*e), 0);
}

/* Runs fn as uid/gid 1000 (no supplementary groups) in a child; its exit status. */
static int as_user(int (*fn)(const char *), const char *arg)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		if (setgroups(0, NULL) || setresgid(1000, 1000, 1000) || setresuid(1000, 1000, 1000))
			_exit(99);
		_exit(fn(arg));
	}
	if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/* 0 when path opens with flags, 1 when access is denied, 2 otherwise. */
static int try_open(const char *path, int flags)
{
	int fd = open(path, flags);

	if (fd < 0)
		return errno == EACCES ? 1 : 2;
	close(fd);
	return 0;
}

/* as_user() takes one argument: one wrapper per access mode. */
static int try_read(const char *path)
{
	return try_open(path, O_RDONLY);
}

static int try_write(const char *path)
{
	return try_open(path, O_WRONLY);
}

static int set_minimal_acl(const char *path)
{
	const struct acl_entry e[] = {
		{ A_USER_OBJ, 7, NOID }, { A_GROUP_OBJ, 7, NOID }, { A_OTHER, 0, NOID },
	};

	return set_acl(path, "system.posix_acl_access", e, 3) ? 1 : 0;
}

static int list_has(const char *list, ssize_t len, const char *name)
{
	for (ssize_t i = 0; i < len; i += (ssize_t)strlen(list + i) + 1)
		if (!strcmp(list + i, name))
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	char path[256], other[256], list[4096], val[64];
	struct stat st;
	ssize_t n;

	if (argc != 2 || chdir(argv[1])) {
		printf("usage: guest-xattrs DIR\n");
		return 2;
	}

	/* names through the map ':map:security.:user.guest.:' */
	make_file("x", 0644);
	check("xattr-user", setxattr("x", "user.plain", "p", 1, 0) == 0, strerror(errno));
	check("xattr-security-mapped", setxattr("x", "security.test", "s", 1, 0) == 0 &&
	      getxattr("x", "security.test", val, sizeof(val)) == 1 && val[0] == 's', strerror(errno));
	check("xattr-trusted", setxattr("x", "trusted.t", "t", 1, 0) == 0 &&
	      getxattr("x", "trusted.t", val, sizeof(val)) == 1, strerror(errno));
	errno = 0;
	check("xattr-mapped-name-refused", setxattr("x", "user.guest.x", "g", 1, 0) < 0 &&
	      errno == EPERM, strerror(errno));
	n = listxattr("hostset", list, sizeof(list));
	check("xattr-list-unmapped", n > 0 && list_has(list, n, "security.fromhost") &&
	      list_has(list, n, "user.hostplain"), "security.fromhost or user.hostplain missing");
	check("xattr-list-hidden", n > 0 && !list_has(list, n, "security.hostonly") &&
	      !list_has(list, n, "user.guest.security.fromhost"),
	      "host security.* or a mapped name listed");
	n = listxattr("hostset", NULL, 0);
	check("xattr-list-probe", n > 0 && listxattr("hostset", list, (size_t)n) > 0,
	      "size probe did not fit the list");

	/* ACLs set from the guest, enforced by the guest */
	{
		const struct acl_entry acc[] = {
			{ A_USER_OBJ, 6, NOID }, { A_USER, 4, 1000 }, { A_GROUP_OBJ, 0, NOID },
			{ A_MASK, 4, NOID }, { A_OTHER, 0, NOID },
		};

		make_file("aclf", 0600);
		make_file("noacl", 0600);
		check("acl-set", set_acl("aclf", "system.posix_acl_access", acc, 5) == 0,
		      strerror(errno));
		check("acl-allows-read", as_user(try_read, "aclf") == 0, "uid 1000 cannot read aclf");
		check("acl-denies-write", as_user(try_write, "aclf") == 1, "uid 1000 could write aclf");
		check("acl-none-denies", as_user(try_read, "noacl") == 1, "uid 1000 could read noacl");
	}
	{
		const struct acl_entry def[] = {
			{ A_USER_OBJ, 7, NOID }, { A_USER, 7, 1000 }, { A_GROUP_OBJ, 5, NOID },
			{ A_MASK, 7, NOID }, { A_OTHER, 5, NOID },
		};
		mode_t old;

		mkdir("dacl", 0755);
		check("acl-default-set", set_acl("dacl", "system.posix_acl_default", def, 5) == 0,
		      strerror(errno));
		old = umask(077);
		create_file("dacl/f", 0666);
		mkdir("dacl/sub", 0777);
		umask(old);
		snprintf(path, sizeof(path), "mode %o", stat("dacl/f", &st) ? 0 : st.st_mode & 07777);
		check("acl-default-no-umask", stat("dacl/f", &st) == 0 && (st.st_mode & 0777) == 0664, path);
		check("acl-default-inherited", as_user(try_write, "dacl/f") == 0 &&
		      getxattr("dacl/sub", "system.posix_acl_default", list, sizeof(list)) > 0,
		      "uid 1000 cannot write dacl/f or sub has no default ACL");
		create_file("umasked", 0666);
		snprintf(other, sizeof(other), "mode %o", stat("umasked", &st) ? 0 : st.st_mode & 07777);
		check("umask-without-default-acl", stat("umasked", &st) == 0 &&
		      (st.st_mode & 0777) == (0666 & ~old), other);
	}
	/* a non-member setting an access ACL loses sgid */
	make_file("sg", 0770);
	check("acl-sgid-setup", chown("sg", 1000, 2000) == 0 && chmod("sg", 02770) == 0,
	      strerror(errno));
	check("acl-sgid-cleared", as_user(set_minimal_acl, "sg") == 0 && stat("sg", &st) == 0 &&
	      !(st.st_mode & S_ISGID), "sgid kept or ACL refused");

	/* security.capability lives under its mapped name; a write clears it */
	{
		/* VFS_CAP_REVISION_2 | effective, permitted CAP_NET_RAW */
		const uint32_t cap[5] = { 0x02000001, 1u << 13, 0, 0, 0 };

		make_file("capf", 0755);
		check("cap-set", setxattr("capf", "security.capability", cap, sizeof(cap), 0) == 0,
		      strerror(errno));
		int fd = open("capf", O_WRONLY | O_APPEND);
		check("cap-write", fd >= 0 && write(fd, "more", 4) == 4, strerror(errno));
		if (fd >= 0)
			close(fd);
		errno = 0;
		check("cap-cleared-in-guest", getxattr("capf", "security.capability", val,
						       sizeof(val)) < 0 && errno == ENODATA,
		      "security.capability survived a write");
	}

	/* a new file; with an LSM in the guest it carries a label */
	make_file("labelled", 0644);
	{
		int fd = open("/sys/kernel/security/lsm", O_RDONLY);

		n = fd >= 0 ? read(fd, list, sizeof(list) - 1) : -1;
		list[n > 0 ? n : 0] = '\0';
		printf("GUEST lsm=%s\n", list);
		if (fd >= 0)
			close(fd);
	}
	return 0;
}
