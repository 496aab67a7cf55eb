/* Guest half of guest612-current-test.sh (static): shared writable mmap + msync of a file, set-group-ID creation as a supplementary-group member, birth time through statx, and an idmapped mount of a directory; the host builds it too, for `expect` and `btime`. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* The byte at offset i of a file made with SEED: no page looks like another. */
static unsigned char pattern(size_t i, unsigned seed)
{
	uint32_t x = (uint32_t)i * 2654435761u ^ (seed * 40503u + (uint32_t)(i >> 12));

	return (unsigned char)(x >> 13 ^ x);
}

/*
 * mmap FILE SIZE SEED: creates FILE, maps it MAP_SHARED read-write, fills it
 * through the mapping (the first half, msync, then the rest, msync again),
 * unmaps and reads it back with read(2). Prints one "MMAP ..." line.
 * Exit 0 done and read back intact, 2 the mapping was refused (errno
 * printed), 1 anything else.
 */
static int cmd_mmap(const char *file, size_t size, unsigned seed)
{
	int fd = open(file, O_RDWR | O_CREAT | O_TRUNC, 0644);
	unsigned char *p, *back;
	size_t i;

	if (fd < 0 || ftruncate(fd, (off_t)size) < 0) {
		printf("MMAP %s setup-failed errno %d\n", file, errno);
		return 1;
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		printf("MMAP %s refused errno %d (%s)\n", file, errno, strerrorname_np(errno));
		close(fd);
		return 2;
	}
	for (i = 0; i < size / 2; i++)
		p[i] = pattern(i, seed);
	if (msync(p, size, MS_SYNC) < 0) {
		printf("MMAP %s msync-1 errno %d\n", file, errno);
		return 1;
	}
	for (; i < size; i++)
		p[i] = pattern(i, seed);
	if (msync(p, size, MS_SYNC) < 0 || munmap(p, size) < 0) {
		printf("MMAP %s msync-2 errno %d\n", file, errno);
		return 1;
	}
	back = malloc(size);
	if (!back || pread(fd, back, size, 0) != (ssize_t)size) {
		printf("MMAP %s read-back-short errno %d\n", file, errno);
		return 1;
	}
	for (i = 0; i < size; i++)
		if (back[i] != pattern(i, seed)) {
			printf("MMAP %s read-back-differs at %zu\n", file, i);
			return 1;
		}
	close(fd);
	printf("MMAP %s ok %zu bytes\n", file, size);
	return 0;
}

/* expect SIZE SEED: the bytes `mmap` leaves in the file, on stdout. */
static int cmd_expect(size_t size, unsigned seed)
{
	for (size_t i = 0; i < size; i++)
		putchar(pattern(i, seed));
	return fflush(stdout) ? 1 : 0;
}

/*
 * sgid DIR UID GID SUPP: as UID with primary group GID and the one
 * supplementary group SUPP (the group of DIR, a set-group-ID directory),
 * umask 0, creates DIR/file (02755, open O_CREAT), DIR/dir (02775, mkdir)
 * and DIR/node (02644, mknod), then prints "SGID name mode gid" for each
 * (or "SGID name errno N").
 */
static int cmd_sgid(const char *dir, uid_t uid, gid_t gid, gid_t supp)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return 1;
	if (pid == 0) {
		static const char *const names[] = { "file", "dir", "node" };
		char p[512];
		struct stat sb;
		int fd;

		if (setgroups(1, &supp) || setresgid(gid, gid, gid) || setresuid(uid, uid, uid)) {
			printf("SGID setup errno %d\n", errno);
			_exit(1);
		}
		umask(0);
		snprintf(p, sizeof(p), "%s/file", dir);
		fd = open(p, O_CREAT | O_EXCL | O_WRONLY, 02755);
		if (fd >= 0)
			close(fd);
		snprintf(p, sizeof(p), "%s/dir", dir);
		if (mkdir(p, 02775) < 0)
			printf("SGID dir mkdir errno %d\n", errno);
		snprintf(p, sizeof(p), "%s/node", dir);
		if (mknod(p, S_IFREG | 02644, 0) < 0)
			printf("SGID node mknod errno %d\n", errno);
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
			snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
			if (stat(p, &sb) < 0)
				printf("SGID %s errno %d\n", names[i], errno);
			else
				printf("SGID %s %04o %u\n", names[i], (unsigned)(sb.st_mode & 07777),
				       (unsigned)sb.st_gid);
		}
		fflush(stdout);
		_exit(0);
	}
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st))
		return 1;
	return WEXITSTATUS(st);
}

/*
 * btime FILE: statx asking for the basic fields and the birth time. Prints
 * "BTIME FILE yes SEC.NSEC" when the answer has STATX_BTIME, "BTIME FILE no"
 * when not, "BTIME FILE errno N" on failure.
 */
static int cmd_btime(const char *file)
{
	struct statx sx;

	if (statx(AT_FDCWD, file, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS | STATX_BTIME, &sx) < 0) {
		printf("BTIME %s errno %d\n", file, errno);
		return 1;
	}
	if (sx.stx_mask & STATX_BTIME)
		printf("BTIME %s yes %lld.%09u\n", file, (long long)sx.stx_btime.tv_sec,
		       sx.stx_btime.tv_nsec);
	else
		printf("BTIME %s no\n", file);
	return 0;
}

/* What a step of cmd_idmap does as one user. */
enum idmap_step { STEP_CREATE, STEP_MKDIR, STEP_OPEN_RW, STEP_OPEN_RO };

/* Runs one step as uid:gid (no supplementary group) in a child and prints
 * "IDMAP LABEL ok" or "IDMAP LABEL errno N". */
static void as_user(const char *label, uid_t uid, gid_t gid, enum idmap_step step,
		    const char *path)
{
	pid_t pid = fork();
	int st, fd = -1, rc = 0;

	if (pid < 0)
		return;
	if (pid == 0) {
		if (setgroups(0, NULL) || setresgid(gid, gid, gid) || setresuid(uid, uid, uid)) {
			printf("IDMAP %s setup-errno %d\n", label, errno);
			_exit(1);
		}
		umask(022);
		switch (step) {
		case STEP_CREATE: fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0600); break;
		case STEP_MKDIR: rc = mkdir(path, 0755); break;
		case STEP_OPEN_RW: fd = open(path, O_RDWR); break;
		case STEP_OPEN_RO: fd = open(path, O_RDONLY); break;
		}
		if (step != STEP_MKDIR)
			rc = fd < 0 ? -1 : close(fd);
		if (rc < 0)
			printf("IDMAP %s errno %d\n", label, errno);
		else
			printf("IDMAP %s ok\n", label);
		fflush(stdout);
		_exit(0);
	}
	waitpid(pid, &st, 0);
}

static void print_owner(const char *label, const char *path)
{
	struct stat sb;

	if (stat(path, &sb) < 0)
		printf("IDMAP %s errno %d\n", label, errno);
	else
		printf("IDMAP %s %u:%u\n", label, (unsigned)sb.st_uid, (unsigned)sb.st_gid);
}

/*
 * idmap DIR MNT: mounts DIR again at MNT, idmapped through a user namespace
 * whose ids 0..99 are 5000..5099 outside it (on-disk id N shows as 5000+N,
 * a caller 5000+N creates as N). In DIR/idm (made here, 0777): the owner of
 * a root-made file seen through MNT; files and a directory made through MNT
 * as 5001 and their owners on disk (through DIR); opens that follow the
 * mapped owner (5001 may, 5002 may not; through DIR 5001 may not); a chown
 * through MNT; a caller the mount cannot map. Prints "IDMAP ..." lines.
 */
static int cmd_idmap(const char *dir, const char *mnt)
{
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP };
	char path[512], p[640], q[640];
	int sync_pipe[2], ready_pipe[2], nsfd, tree;
	char c;
	pid_t ns_pid;
	FILE *f;

	if (pipe(sync_pipe) < 0 || pipe(ready_pipe) < 0)
		return 1;
	ns_pid = fork();
	if (ns_pid == 0) {
		close(sync_pipe[1]);
		close(ready_pipe[0]);
		if (unshare(CLONE_NEWUSER) < 0)
			_exit(1);
		/* In the namespace; holds it until the parent has its fd. */
		(void)!write(ready_pipe[1], "r", 1);
		(void)!read(sync_pipe[0], &c, 1);
		_exit(0);
	}
	close(sync_pipe[0]);
	close(ready_pipe[1]);
	if (read(ready_pipe[0], &c, 1) != 1) {
		printf("IDMAP setup unshare failed\n");
		return 1;
	}
	snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)ns_pid);
	f = fopen(path, "w");
	if (!f || fprintf(f, "0 5000 100\n") < 0 || fclose(f)) {
		printf("IDMAP setup uid_map errno %d\n", errno);
		return 1;
	}
	snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)ns_pid);
	f = fopen(path, "w");
	if (!f || fprintf(f, "0 5000 100\n") < 0 || fclose(f)) {
		printf("IDMAP setup gid_map errno %d\n", errno);
		return 1;
	}
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)ns_pid);
	nsfd = open(path, O_RDONLY | O_CLOEXEC);
	close(sync_pipe[1]);
	waitpid(ns_pid, NULL, 0);
	if (nsfd < 0) {
		printf("IDMAP setup userns errno %d\n", errno);
		return 1;
	}
	snprintf(p, sizeof(p), "%s/idm", dir);
	if ((mkdir(p, 0777) < 0 && errno != EEXIST) || chmod(p, 0777) < 0) {
		printf("IDMAP setup mkdir errno %d\n", errno);
		return 1;
	}
	snprintf(p, sizeof(p), "%s/idm/by-root", dir);
	close(open(p, O_CREAT | O_WRONLY, 0644));
	attr.userns_fd = (uint64_t)nsfd;
	tree = (int)syscall(SYS_open_tree, AT_FDCWD, dir, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (tree < 0 || syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0 ||
	    syscall(SYS_move_mount, tree, "", AT_FDCWD, mnt, MOVE_MOUNT_F_EMPTY_PATH) < 0) {
		printf("IDMAP mount errno %d\n", errno);
		return 1;
	}
	printf("IDMAP mount ok\n");
	snprintf(q, sizeof(q), "%s/idm/by-root", mnt);
	print_owner("root-file-seen-as", q);
	snprintf(q, sizeof(q), "%s/idm/new", mnt);
	as_user("create-as-5001", 5001, 5001, STEP_CREATE, q);
	snprintf(p, sizeof(p), "%s/idm/new", dir);
	print_owner("created-on-disk", p);
	print_owner("created-seen-as", q);
	snprintf(q, sizeof(q), "%s/idm/newdir", mnt);
	as_user("mkdir-as-5001", 5001, 5001, STEP_MKDIR, q);
	snprintf(p, sizeof(p), "%s/idm/newdir", dir);
	print_owner("mkdir-on-disk", p);
	snprintf(q, sizeof(q), "%s/idm/new", mnt);
	as_user("owner-opens-rw", 5001, 5001, STEP_OPEN_RW, q);
	as_user("other-opens-ro", 5002, 5002, STEP_OPEN_RO, q);
	snprintf(p, sizeof(p), "%s/idm/new", dir);
	as_user("owner-via-plain-mount", 5001, 5001, STEP_OPEN_RO, p);
	as_user("disk-owner-via-plain-mount", 1, 1, STEP_OPEN_RW, p);
	snprintf(q, sizeof(q), "%s/idm/unmapped", mnt);
	as_user("create-as-unmapped-1000", 1000, 1000, STEP_CREATE, q);
	snprintf(q, sizeof(q), "%s/idm/new", mnt);
	if (chown(q, 5003, 5004) < 0)
		printf("IDMAP chown errno %d\n", errno);
	print_owner("chowned-on-disk", p);
	umount2(mnt, MNT_DETACH);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 5 && !strcmp(argv[1], "mmap"))
		return cmd_mmap(argv[2], strtoul(argv[3], NULL, 0), (unsigned)strtoul(argv[4], NULL, 0));
	if (argc == 4 && !strcmp(argv[1], "expect"))
		return cmd_expect(strtoul(argv[2], NULL, 0), (unsigned)strtoul(argv[3], NULL, 0));
	if (argc == 6 && !strcmp(argv[1], "sgid"))
		return cmd_sgid(argv[2], (uid_t)strtoul(argv[3], NULL, 0), (gid_t)strtoul(argv[4], NULL, 0),
				(gid_t)strtoul(argv[5], NULL, 0));
	if (argc == 3 && !strcmp(argv[1], "btime"))
		return cmd_btime(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "idmap"))
		return cmd_idmap(argv[2], argv[3]);
	fprintf(stderr, "usage: guest-612 mmap FILE SIZE SEED | expect SIZE SEED | sgid DIR UID GID SUPP"
		" | btime FILE | idmap DIR MNT\n");
	return 2;
}
