/* Guest helper of gluster-twohosts-test.sh (built static on the host, run from the share): holds a POSIX lock and an flock in one guest, probes both from another. */
/*
 * Usage (in a guest):
 *   locks hold DIR     F_SETLK F_WRLCK on DIR/lk-posix and flock LOCK_EX on DIR/lk-flock,
 *                      then DIR/a-locked; keeps both until DIR/release exists (120 s at most)
 *   locks probe DIR    what this guest sees of those locks, one line each:
 *                        LOCK posix-getlk held|free|error ERRNO
 *                        LOCK posix-setlk refused|granted|error ERRNO
 *                        LOCK flock refused|granted|error ERRNO
 *                      (a lock granted here is released at once by closing)
 * Exit 0 when it ran (what it saw is the host's to judge), 1 on a failure to set up.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

static void at(char *buf, size_t n, const char *dir, const char *name)
{
	snprintf(buf, n, "%s/%s", dir, name);
}

static int hold(const char *dir)
{
	char p[4096], f[4096], m[4096], r[4096];
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	int pfd, ffd, i;

	at(p, sizeof(p), dir, "lk-posix");
	at(f, sizeof(f), dir, "lk-flock");
	at(m, sizeof(m), dir, "a-locked");
	at(r, sizeof(r), dir, "release");
	pfd = open(p, O_RDWR | O_CREAT, 0644);
	ffd = open(f, O_RDWR | O_CREAT, 0644);
	if (pfd < 0 || ffd < 0 || fcntl(pfd, F_SETLK, &fl) < 0 || flock(ffd, LOCK_EX | LOCK_NB) < 0) {
		printf("LOCK hold error %s\n", strerror(errno));
		return 1;
	}
	printf("LOCK hold both\n");
	close(open(m, O_CREAT | O_WRONLY, 0644));
	for (i = 0; i < 1200 && access(r, F_OK) < 0; i++)
		usleep(100000);
	close(pfd);
	close(ffd);
	return 0;
}

static int probe(const char *dir)
{
	char p[4096], f[4096];
	struct flock q = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	struct flock fl = q;
	int pfd, ffd;

	at(p, sizeof(p), dir, "lk-posix");
	at(f, sizeof(f), dir, "lk-flock");
	pfd = open(p, O_RDWR);
	ffd = open(f, O_RDWR);
	if (pfd < 0 || ffd < 0) {
		printf("LOCK probe error %s\n", strerror(errno));
		return 1;
	}
	if (fcntl(pfd, F_GETLK, &q) < 0)
		printf("LOCK posix-getlk error %s\n", strerror(errno));
	else
		printf("LOCK posix-getlk %s\n", q.l_type == F_UNLCK ? "free" : "held");
	if (fcntl(pfd, F_SETLK, &fl) == 0)
		printf("LOCK posix-setlk granted\n");
	else if (errno == EAGAIN || errno == EACCES)
		printf("LOCK posix-setlk refused\n");
	else
		printf("LOCK posix-setlk error %s\n", strerror(errno));
	if (flock(ffd, LOCK_EX | LOCK_NB) == 0)
		printf("LOCK flock granted\n");
	else if (errno == EWOULDBLOCK)
		printf("LOCK flock refused\n");
	else
		printf("LOCK flock error %s\n", strerror(errno));
	close(pfd);
	close(ffd);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc == 3 && !strcmp(argv[1], "hold"))
		return hold(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "probe"))
		return probe(argv[2]);
	fprintf(stderr, "usage: locks hold|probe DIR\n");
	return 2;
}
