/* Guest half of guest612-current-test.sh (static): shared writable mmap + msync of a file, and set-group-ID creation as a supplementary-group member; the host builds it too, for `expect`. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
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
	fprintf(stderr, "usage: guest-612 mmap FILE SIZE SEED | expect SIZE SEED | sgid DIR UID GID SUPP\n");
	return 2;
}
