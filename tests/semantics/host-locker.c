/* Host side of locks-test.sh: holds, probes or waits for POSIX and flock locks on shared files. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

static int open_rw(const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT, 0644);
    if (fd < 0)
        fprintf(stderr, "host-locker: open %s: %s\n", path, strerror(errno));
    return fd;
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    int pfd = open_rw(argv[2]), ffd = open_rw(argv[3]);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (pfd < 0 || ffd < 0)
        return 2;
    if (!strcmp(argv[1], "hold") && argc == 5) {
        /* Classic POSIX lock, as most host programs take. */
        if (fcntl(pfd, F_SETLK, &fl) < 0 || flock(ffd, LOCK_EX | LOCK_NB) < 0)
            return 3;
        printf("held\n");
        fflush(stdout);
        for (int i = 0; i < 3000 && access(argv[4], F_OK) < 0; i++)
            usleep(100000);
        return access(argv[4], F_OK) == 0 ? 0 : 4;
    }
    if (!strcmp(argv[1], "probe")) {
        struct flock q = fl;
        int r1 = fcntl(pfd, F_SETLK, &fl) < 0 && (errno == EAGAIN || errno == EACCES);
        int r2 = fcntl(pfd, F_GETLK, &q) == 0 && q.l_type == F_WRLCK;
        int r3 = flock(ffd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK;
        printf("setlk-blocked=%d getlk-sees=%d flock-blocked=%d\n", r1, r2, r3);
        return r1 && r2 && r3 ? 0 : 1;
    }
    if (!strcmp(argv[1], "wait")) {
        alarm(120);
        if (fcntl(pfd, F_SETLKW, &fl) < 0 || flock(ffd, LOCK_EX) < 0) {
            printf("wait failed: %s\n", strerror(errno));
            return 1;
        }
        printf("acquired\n");
        return 0;
    }
    return 2;
}
