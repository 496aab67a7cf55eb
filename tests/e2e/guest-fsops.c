/* Guest-side virtio-fs conformance test: drives every FUSE opcode a Linux 6.1 guest sends and leaves artifacts for host checks. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <linux/fs.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif
#define FUSE_SUPER_MAGIC 0x65735546

#define KiB (1024LL)
#define MiB (1024LL * 1024)
#define GiB (1024LL * 1024 * 1024)

/* Sizes shared by the guest checks and the host's --expect mode. */
#define BIG_SIZE (32 * MiB)
#define HOSTPAT_SIZE 1000003
#define MMAP_SIZE (3 * 4096 + 100)
#define COPY_SRC_OFF (1 * MiB + 3)
#define COPY_LEN (5 * MiB + 17)
#define PUNCH_SIZE (1 * MiB)
#define PUNCH_OFF (64 * KiB + 100)
#define PUNCH_LEN 200000
#define UNALIGNED_SIZE (3 * 65536 + 123)
#define HUGE_OFF (5 * GiB)

static char *reason;    /* shared with the parent so a check's failure text survives the child */
static const char *W;   /* work dir: MNT/fsops */
static const char *MNT;

/* ---------- helpers ---------- */

static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Position-addressable pattern so any byte range can be regenerated independently. */
static void pattern(uint64_t seed, uint64_t off, unsigned char *buf, size_t len)
{
    for (size_t i = 0; i < len;) {
        uint64_t pos = off + i;
        uint64_t w = mix64((seed << 40) ^ (pos >> 3));
        unsigned sh = (unsigned)(pos & 7);
        while (sh < 8 && i < len) {
            buf[i++] = (unsigned char)(w >> (sh * 8));
            sh++;
        }
    }
}

static const char *en(int e)
{
    const char *n = strerrorname_np(e);
    return n ? n : "E?";
}

static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, 200, fmt, ap);
    va_end(ap);
    for (char *p = reason; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    return 1;
}

#define CK(cond, ...)                                                                              \
    do {                                                                                           \
        if (!(cond))                                                                               \
            return fail(__VA_ARGS__);                                                              \
    } while (0)
/* A syscall failing with ENOSYS/EOPNOTSUPP reports the errno name, which is how daemon gaps show. */
#define SYS(tag, call)                                                                             \
    do {                                                                                           \
        if ((call) < 0)                                                                            \
            return fail("%s: %s", tag, en(errno));                                                 \
    } while (0)
#define EXPECT_ERR(tag, call, err)                                                                 \
    do {                                                                                           \
        errno = 0;                                                                                 \
        long r_ = (long)(call);                                                                    \
        if (r_ >= 0)                                                                               \
            return fail("%s: succeeded, want %s", tag, en(err));                                   \
        if (errno != (err))                                                                        \
            return fail("%s: %s, want %s", tag, en(errno), en(err));                               \
    } while (0)

static char *P(const char *fmt, ...)
{
    static char bufs[8][PATH_MAX];
    static int n;
    char rel[PATH_MAX / 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof rel, fmt, ap);
    va_end(ap);
    char *b = bufs[n++ & 7];
    snprintf(b, PATH_MAX, "%s/%s", W, rel);
    return b;
}

/* Dropping the dentry/inode caches makes the kernel send FORGET now and LOOKUP/GETATTR again later. */
static void drop_caches(void)
{
    sync();
    int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
    if (fd >= 0) {
        if (write(fd, "3\n", 2) < 0) {
        }
        close(fd);
    }
}

static int write_all(int fd, const void *buf, size_t len, off_t off)
{
    const char *p = buf;
    while (len) {
        ssize_t n = pwrite(fd, p, len, off);
        if (n < 0)
            return -1;
        if (n == 0) {
            errno = EIO;
            return -1;
        }
        p += n, len -= (size_t)n, off += n;
    }
    return 0;
}

static ssize_t read_all(int fd, void *buf, size_t len, off_t off)
{
    char *p = buf;
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, p + got, len - got, off + (off_t)got);
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

static int put_file(const char *path, const char *content, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    if (fd < 0)
        return -1;
    if (write_all(fd, content, strlen(content), 0) < 0) {
        close(fd);
        return -1;
    }
    return close(fd);
}

/* Returns the file's content (NUL-terminated, truncated to cap-1) or -1. */
static ssize_t get_file(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t n = read_all(fd, buf, cap - 1, 0);
    int e = errno;
    close(fd);
    errno = e;
    if (n >= 0)
        buf[n] = 0;
    return n;
}

static long first_diff(const unsigned char *a, const unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return (long)i;
    return -1;
}

/* ---------- expected artifact contents (also used by the host) ---------- */

struct uop {
    off_t off;
    size_t len;
};
/* Odd offsets and sizes straddling 4 KiB pages and 64 KiB/128 KiB request sizes. */
static const struct uop uops[] = {
    {4095, 3},        {1, 8190},     {8191, 5000},   {65535, 2},     {12289, 70001},
    {131071, 65539},  {3, 1},        {100000, 7},    {196607, 100},  {40960, 4096},
    {UNALIGNED_SIZE - 10, 10},       {77777, 33333}, {0, 1},         {150001, 40000},
};
#define NUOPS (sizeof uops / sizeof uops[0])

static void expect_unaligned(unsigned char *model)
{
    memset(model, 0, UNALIGNED_SIZE);
    for (size_t i = 0; i < NUOPS; i++)
        pattern(100 + i, (uint64_t)uops[i].off, model + uops[i].off, uops[i].len);
}

static unsigned char *expect_artifact(const char *name, size_t *len)
{
    unsigned char *b = NULL;
    if (!strcmp(name, "big")) {
        *len = BIG_SIZE;
        b = malloc(*len);
        pattern(1, 0, b, *len);
    } else if (!strcmp(name, "hostpat")) {
        *len = HOSTPAT_SIZE;
        b = malloc(*len);
        pattern(7, 0, b, *len);
    } else if (!strcmp(name, "mmap")) {
        *len = MMAP_SIZE;
        b = malloc(*len);
        pattern(3, 0, b, *len);
    } else if (!strcmp(name, "copy")) {
        *len = COPY_LEN;
        b = malloc(*len);
        pattern(1, COPY_SRC_OFF, b, *len);
    } else if (!strcmp(name, "punched")) {
        *len = PUNCH_SIZE;
        b = malloc(*len);
        pattern(4, 0, b, *len);
        memset(b + PUNCH_OFF, 0, PUNCH_LEN);
    } else if (!strcmp(name, "unaligned")) {
        *len = UNALIGNED_SIZE;
        b = malloc(*len);
        expect_unaligned(b);
    }
    return b;
}

/* ---------- checks ---------- */

static int c_statfs(void)
{
    struct statfs s;
    SYS("statfs", statfs(MNT, &s));
    CK(s.f_type == FUSE_SUPER_MAGIC, "f_type %#lx", (unsigned long)s.f_type);
    CK(s.f_blocks > 0 && s.f_bsize > 0, "blocks %llu bsize %ld", (unsigned long long)s.f_blocks,
       (long)s.f_bsize);
    CK(s.f_bfree <= s.f_blocks, "bfree > blocks");
    return 0;
}

static int c_host_file_read(void)
{
    char buf[256], path[PATH_MAX];
    snprintf(path, sizeof path, "%s/host/hello.txt", MNT);
    SYS("open hello.txt", get_file(path, buf, sizeof buf));
    CK(!strcmp(buf, "hello from the host\n"), "hello.txt content mismatch");
    size_t len;
    unsigned char *want = expect_artifact("hostpat", &len);
    unsigned char *got = malloc(len + 1);
    snprintf(path, sizeof path, "%s/host/pattern.bin", MNT);
    int fd = open(path, O_RDONLY);
    SYS("open pattern.bin", fd);
    ssize_t n = read_all(fd, got, len + 1, 0);
    SYS("read pattern.bin", n);
    CK((size_t)n == len, "pattern.bin size %zd", n);
    long d = first_diff(got, want, len);
    CK(d < 0, "pattern.bin differs at %ld", d);
    close(fd);
    return 0;
}

static int c_mkdir_rmdir(void)
{
    struct stat st;
    SYS("mkdir", mkdir(P("d1"), 0755));
    SYS("stat", stat(P("d1"), &st));
    CK(S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0755, "mode %o", st.st_mode);
    CK(st.st_nlink >= 2, "dir nlink %lu", (unsigned long)st.st_nlink);
    EXPECT_ERR("mkdir again", mkdir(P("d1"), 0755), EEXIST);
    SYS("mkdir nested", mkdir(P("d1/sub"), 0700));
    SYS("put", put_file(P("d1/f"), "x", 0644));
    EXPECT_ERR("rmdir nonempty", rmdir(P("d1")), ENOTEMPTY);
    EXPECT_ERR("rmdir file", rmdir(P("d1/f")), ENOTDIR);
    SYS("unlink", unlink(P("d1/f")));
    SYS("rmdir sub", rmdir(P("d1/sub")));
    SYS("rmdir", rmdir(P("d1")));
    EXPECT_ERR("stat removed", stat(P("d1"), &st), ENOENT);
    return 0;
}

static int c_create_write_read(void)
{
    struct stat st;
    char buf[64];
    int fd = open(P("small"), O_CREAT | O_EXCL | O_WRONLY, 0640);
    SYS("create", fd);
    SYS("write", write(fd, "hello world\n", 12));
    SYS("fstat", fstat(fd, &st));
    CK(S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0640, "mode %o", st.st_mode);
    CK(st.st_size == 12, "size %lld", (long long)st.st_size);
    SYS("close", close(fd));
    EXPECT_ERR("O_EXCL existing", open(P("small"), O_CREAT | O_EXCL | O_WRONLY, 0640), EEXIST);
    SYS("read back", get_file(P("small"), buf, sizeof buf));
    CK(!strcmp(buf, "hello world\n"), "content mismatch");
    EXPECT_ERR("open missing", open(P("nonexistent"), O_RDONLY), ENOENT);
    EXPECT_ERR("O_DIRECTORY on file", open(P("small"), O_RDONLY | O_DIRECTORY), ENOTDIR);
    return 0;
}

static int c_open_flags(void)
{
    struct stat st;
    char buf[64];
    SYS("put", put_file(P("flags"), "abc", 0644));
    int fd = open(P("flags"), O_WRONLY | O_APPEND);
    SYS("open append", fd);
    SYS("write append", write(fd, "def", 3));
    close(fd);
    SYS("read", get_file(P("flags"), buf, sizeof buf));
    CK(!strcmp(buf, "abcdef"), "append gave '%s'", buf);
    fd = open(P("flags"), O_RDWR | O_TRUNC);
    SYS("open trunc", fd);
    SYS("fstat", fstat(fd, &st));
    CK(st.st_size == 0, "O_TRUNC size %lld", (long long)st.st_size);
    close(fd);
    return 0;
}

static int c_flush_close(void)
{
    char buf[64];
    int fd = open(P("flush"), O_CREAT | O_RDWR | O_TRUNC, 0644);
    SYS("create", fd);
    int fd2 = dup(fd);
    SYS("dup", fd2);
    SYS("write1", write(fd2, "one,", 4));
    SYS("close dup (FLUSH)", close(fd2));
    SYS("write2", write(fd, "two", 3));
    SYS("close (FLUSH+RELEASE)", close(fd));
    SYS("read", get_file(P("flush"), buf, sizeof buf));
    CK(!strcmp(buf, "one,two"), "got '%s'", buf);
    return 0;
}

static int c_forget_relookup(void)
{
    struct stat a, b;
    char buf[64];
    SYS("stat", stat(P("small"), &a));
    drop_caches();
    SYS("stat after drop", stat(P("small"), &b));
    CK(a.st_ino == b.st_ino, "ino changed %llu -> %llu", (unsigned long long)a.st_ino,
       (unsigned long long)b.st_ino);
    CK(b.st_size == 12 && b.st_nlink == 1, "size %lld nlink %lu", (long long)b.st_size,
       (unsigned long)b.st_nlink);
    SYS("read after drop", get_file(P("small"), buf, sizeof buf));
    CK(!strcmp(buf, "hello world\n"), "content mismatch");
    /* Many lookups/forgets of the same inode must keep the daemon's lookup count consistent. */
    for (int i = 0; i < 20; i++) {
        SYS("stat loop", stat(P("small"), &b));
        if (i % 5 == 0)
            drop_caches();
    }
    CK(a.st_ino == b.st_ino, "ino changed in loop");
    return 0;
}

static int c_getattr(void)
{
    struct stat st, fst;
    drop_caches();
    SYS("stat", stat(P("small"), &st));
    CK(st.st_uid == 0 && st.st_gid == 0, "owner %u:%u", st.st_uid, st.st_gid);
    CK((st.st_mode & 07777) == 0640, "mode %o", st.st_mode);
    CK(st.st_blksize > 0, "blksize 0");
    CK(st.st_mtim.tv_sec > 1600000000, "mtime %lld", (long long)st.st_mtim.tv_sec);
    int fd = open(P("small"), O_RDONLY);
    SYS("open", fd);
    SYS("fstat", fstat(fd, &fst));
    close(fd);
    CK(fst.st_ino == st.st_ino && fst.st_size == st.st_size, "fstat differs from stat");
    SYS("stat root", stat(MNT, &st));
    CK(S_ISDIR(st.st_mode), "root not dir");
    return 0;
}

static int c_setattr_chmod(void)
{
    struct stat st;
    SYS("put", put_file(P("keep/mode0751"), "mode\n", 0644));
    SYS("chmod", chmod(P("keep/mode0751"), 0751));
    SYS("stat", stat(P("keep/mode0751"), &st));
    CK((st.st_mode & 07777) == 0751, "mode %o", st.st_mode & 07777);
    int fd = open(P("keep/mode0751"), O_RDONLY);
    SYS("open", fd);
    SYS("fchmod", fchmod(fd, 0600));
    SYS("fstat", fstat(fd, &st));
    CK((st.st_mode & 07777) == 0600, "fchmod mode %o", st.st_mode & 07777);
    SYS("fchmod back", fchmod(fd, 0751));
    close(fd);
    drop_caches();
    SYS("stat after drop", stat(P("keep/mode0751"), &st));
    CK((st.st_mode & 07777) == 0751, "mode after drop %o", st.st_mode & 07777);
    return 0;
}

static int c_setattr_chown(void)
{
    struct stat st;
    SYS("chown", chown(P("keep/mode0751"), 1234, 2000));
    drop_caches();
    SYS("stat", stat(P("keep/mode0751"), &st));
    CK(st.st_uid == 1234 && st.st_gid == 2000, "owner %u:%u", st.st_uid, st.st_gid);
    SYS("lchown -1", lchown(P("keep/mode0751"), (uid_t)-1, 2000));
    SYS("stat2", stat(P("keep/mode0751"), &st));
    CK(st.st_uid == 1234, "uid changed by -1");
    return 0;
}

static int c_setattr_truncate(void)
{
    struct stat st;
    char buf[16];
    unsigned char big[10000];
    SYS("put", put_file(P("trunc"), "0123456789", 0644));
    SYS("truncate", truncate(P("trunc"), 4));
    SYS("stat", stat(P("trunc"), &st));
    CK(st.st_size == 4, "size after shrink %lld", (long long)st.st_size);
    SYS("read", get_file(P("trunc"), buf, sizeof buf));
    CK(!strcmp(buf, "0123"), "content '%s'", buf);
    int fd = open(P("trunc"), O_RDWR);
    SYS("open", fd);
    SYS("ftruncate grow", ftruncate(fd, 10000));
    close(fd);
    drop_caches();
    fd = open(P("trunc"), O_RDONLY);
    SYS("reopen", fd);
    ssize_t n = read_all(fd, big, sizeof big, 0);
    close(fd);
    CK(n == 10000, "read %zd", n);
    CK(!memcmp(big, "0123", 4), "prefix lost");
    for (int i = 4; i < 10000; i++)
        CK(big[i] == 0, "nonzero at %d", i);
    return 0;
}

static int c_setattr_utimens_ns(void)
{
    struct stat st;
    struct timespec ts[2] = {{1234567890, 123456789}, {1500000000, 987654321}};
    SYS("put", put_file(P("keep/mtime_ns"), "t\n", 0644));
    SYS("utimensat", utimensat(AT_FDCWD, P("keep/mtime_ns"), ts, 0));
    drop_caches();
    SYS("stat", stat(P("keep/mtime_ns"), &st));
    CK(st.st_atim.tv_sec == ts[0].tv_sec && st.st_atim.tv_nsec == ts[0].tv_nsec,
       "atime %lld.%09ld", (long long)st.st_atim.tv_sec, st.st_atim.tv_nsec);
    CK(st.st_mtim.tv_sec == ts[1].tv_sec && st.st_mtim.tv_nsec == ts[1].tv_nsec,
       "mtime %lld.%09ld", (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    /* UTIME_OMIT must leave mtime alone while UTIME_NOW moves atime. */
    struct timespec ts2[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
    SYS("put2", put_file(P("utime2"), "t\n", 0644));
    SYS("utimensat2", utimensat(AT_FDCWD, P("utime2"), ts, 0));
    SYS("utimensat now/omit", utimensat(AT_FDCWD, P("utime2"), ts2, 0));
    drop_caches();
    SYS("stat2", stat(P("utime2"), &st));
    CK(st.st_mtim.tv_sec == ts[1].tv_sec && st.st_mtim.tv_nsec == ts[1].tv_nsec,
       "UTIME_OMIT changed mtime");
    CK(st.st_atim.tv_sec > 1600000000, "UTIME_NOW atime %lld", (long long)st.st_atim.tv_sec);
    int fd = open(P("utime2"), O_RDWR);
    SYS("open", fd);
    SYS("futimens", futimens(fd, ts));
    close(fd);
    SYS("stat3", stat(P("utime2"), &st));
    CK(st.st_mtim.tv_nsec == ts[1].tv_nsec, "futimens nsec %ld", st.st_mtim.tv_nsec);
    return 0;
}

static int c_symlink_readlink(void)
{
    char buf[PATH_MAX];
    struct stat st;
    const char *target = "some/target/../path";
    SYS("symlink", symlink(target, P("keep/symlink")));
    ssize_t n = readlink(P("keep/symlink"), buf, sizeof buf);
    SYS("readlink", n);
    CK((size_t)n == strlen(target) && !memcmp(buf, target, (size_t)n), "target mismatch");
    SYS("lstat", lstat(P("keep/symlink"), &st));
    CK(S_ISLNK(st.st_mode) && st.st_size == (off_t)strlen(target), "lstat mode %o size %lld",
       st.st_mode, (long long)st.st_size);
    EXPECT_ERR("symlink exists", symlink("x", P("keep/symlink")), EEXIST);
    drop_caches();
    n = readlink(P("keep/symlink"), buf, sizeof buf);
    SYS("readlink after drop", n);
    CK((size_t)n == strlen(target), "len after drop %zd", n);
    SYS("symlink rel", symlink("../small", P("keep/to_small")));
    SYS("follow", get_file(P("keep/to_small"), buf, sizeof buf));
    CK(!strcmp(buf, "hello world\n"), "follow content mismatch");
    return 0;
}

static int c_mknod_fifo(void)
{
    struct stat st;
    char c = 0;
    SYS("mkfifo", mkfifo(P("keep/fifo"), 0644));
    drop_caches();
    SYS("lstat", lstat(P("keep/fifo"), &st));
    CK(S_ISFIFO(st.st_mode) && (st.st_mode & 0777) == 0644, "mode %o", st.st_mode);
    /* FIFOs are served by the guest kernel; the daemon must not open them on the host. */
    int fd = open(P("keep/fifo"), O_RDWR | O_NONBLOCK);
    SYS("open fifo", fd);
    SYS("write fifo", write(fd, "z", 1));
    SYS("read fifo", read(fd, &c, 1));
    close(fd);
    CK(c == 'z', "fifo data");
    return 0;
}

static int c_mknod_chr(void)
{
    struct stat st;
    SYS("mknod", mknod(P("keep/chardev"), S_IFCHR | 0600, makedev(1, 3)));
    drop_caches();
    SYS("lstat", lstat(P("keep/chardev"), &st));
    CK(S_ISCHR(st.st_mode), "mode %o", st.st_mode);
    CK(major(st.st_rdev) == 1 && minor(st.st_rdev) == 3, "rdev %u:%u", major(st.st_rdev),
       minor(st.st_rdev));
    SYS("mknod reg", mknod(P("mknod_reg"), S_IFREG | 0644, 0));
    SYS("stat reg", stat(P("mknod_reg"), &st));
    CK(S_ISREG(st.st_mode) && st.st_size == 0, "mknod S_IFREG mode %o", st.st_mode);
    return 0;
}

static int c_link_nlink(void)
{
    struct stat a, b, c;
    SYS("put", put_file(P("keep/hardlink_a"), "linked\n", 0644));
    SYS("link b", link(P("keep/hardlink_a"), P("keep/hardlink_b")));
    SYS("link c", link(P("keep/hardlink_a"), P("keep/hardlink_c")));
    SYS("link d", link(P("keep/hardlink_a"), P("hardlink_d")));
    SYS("stat a", stat(P("keep/hardlink_a"), &a));
    CK(a.st_nlink == 4, "nlink %lu want 4", (unsigned long)a.st_nlink);
    SYS("unlink d", unlink(P("hardlink_d")));
    EXPECT_ERR("link onto existing", link(P("keep/hardlink_a"), P("keep/hardlink_b")), EEXIST);
    drop_caches();
    SYS("stat a2", stat(P("keep/hardlink_a"), &a));
    SYS("stat b", stat(P("keep/hardlink_b"), &b));
    SYS("stat c", stat(P("keep/hardlink_c"), &c));
    CK(a.st_nlink == 3 && b.st_nlink == 3 && c.st_nlink == 3, "nlink %lu/%lu/%lu want 3",
       (unsigned long)a.st_nlink, (unsigned long)b.st_nlink, (unsigned long)c.st_nlink);
    CK(a.st_ino == b.st_ino && b.st_ino == c.st_ino, "inode numbers differ");
    return 0;
}

static int c_unlink(void)
{
    struct stat st;
    char buf[16];
    SYS("put", put_file(P("unl"), "still here", 0644));
    int fd = open(P("unl"), O_RDONLY);
    SYS("open", fd);
    SYS("unlink", unlink(P("unl")));
    EXPECT_ERR("stat after unlink", stat(P("unl"), &st), ENOENT);
    EXPECT_ERR("unlink missing", unlink(P("unl")), ENOENT);
    EXPECT_ERR("unlink dir", unlink(P("keep")), EISDIR);
    /* An open-unlinked file must stay readable through its handle. */
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    SYS("read unlinked", n);
    buf[n] = 0;
    CK(!strcmp(buf, "still here"), "unlinked read '%s'", buf);
    SYS("fstat unlinked", fstat(fd, &st));
    CK(st.st_nlink == 0, "unlinked nlink %lu", (unsigned long)st.st_nlink);
    close(fd);
    return 0;
}

static int c_rename(void)
{
    char buf[16];
    struct stat st;
    SYS("put r1", put_file(P("r1"), "R1", 0644));
    SYS("rename", rename(P("r1"), P("r2")));
    EXPECT_ERR("old name", stat(P("r1"), &st), ENOENT);
    SYS("read r2", get_file(P("r2"), buf, sizeof buf));
    CK(!strcmp(buf, "R1"), "r2 content");
    SYS("put r3", put_file(P("r3"), "R3", 0644));
    int oldfd = open(P("r3"), O_RDONLY);
    SYS("open r3", oldfd);
    SYS("rename over", rename(P("r2"), P("r3")));
    ssize_t rn = pread(oldfd, buf, sizeof buf - 1, 0);
    close(oldfd);
    SYS("read replaced", rn);
    buf[rn] = 0;
    CK(!strcmp(buf, "R3"), "replaced file's open fd reads '%s'", buf);
    SYS("read r3", get_file(P("r3"), buf, sizeof buf));
    CK(!strcmp(buf, "R1"), "overwrite content '%s'", buf);
    SYS("mkdir", mkdir(P("rd1"), 0755));
    SYS("mkdir2", mkdir(P("rd2"), 0755));
    SYS("put in dir", put_file(P("rd1/inner"), "I", 0644));
    SYS("rename dir", rename(P("rd1"), P("rd2/moved")));
    drop_caches();
    SYS("read moved", get_file(P("rd2/moved/inner"), buf, sizeof buf));
    CK(!strcmp(buf, "I"), "moved content");
    SYS("rename across dirs", rename(P("r3"), P("rd2/moved/r3")));
    SYS("stat across", stat(P("rd2/moved/r3"), &st));
    SYS("mkdir3", mkdir(P("rd3"), 0755));
    EXPECT_ERR("dir onto nonempty dir", rename(P("rd3"), P("rd2")), ENOTEMPTY);
    return 0;
}

static int c_rename2_noreplace(void)
{
    char buf[16];
    SYS("put a", put_file(P("nr_a"), "A", 0644));
    SYS("put b", put_file(P("nr_b"), "B", 0644));
    EXPECT_ERR("noreplace existing",
               syscall(SYS_renameat2, AT_FDCWD, P("nr_a"), AT_FDCWD, P("nr_b"), RENAME_NOREPLACE),
               EEXIST);
    SYS("noreplace new",
        syscall(SYS_renameat2, AT_FDCWD, P("nr_a"), AT_FDCWD, P("nr_c"), RENAME_NOREPLACE));
    SYS("read c", get_file(P("nr_c"), buf, sizeof buf));
    CK(!strcmp(buf, "A"), "moved content");
    SYS("read b", get_file(P("nr_b"), buf, sizeof buf));
    CK(!strcmp(buf, "B"), "target clobbered");
    return 0;
}

static int c_rename2_exchange(void)
{
    char buf[16];
    struct stat st;
    SYS("put a", put_file(P("keep/exchange_a"), "A", 0644));
    SYS("put b", put_file(P("keep/exchange_b"), "B", 0644));
    SYS("exchange", syscall(SYS_renameat2, AT_FDCWD, P("keep/exchange_a"), AT_FDCWD,
                            P("keep/exchange_b"), RENAME_EXCHANGE));
    drop_caches();
    SYS("read a", get_file(P("keep/exchange_a"), buf, sizeof buf));
    CK(!strcmp(buf, "B"), "a has '%s'", buf);
    SYS("read b", get_file(P("keep/exchange_b"), buf, sizeof buf));
    CK(!strcmp(buf, "A"), "b has '%s'", buf);
    EXPECT_ERR("exchange missing",
               syscall(SYS_renameat2, AT_FDCWD, P("keep/exchange_a"), AT_FDCWD, P("nope"),
                       RENAME_EXCHANGE),
               ENOENT);
    /* Exchanging a file with a directory swaps the types too. */
    SYS("mkdir", mkdir(P("xdir"), 0755));
    SYS("put", put_file(P("xfile"), "F", 0644));
    SYS("exchange dir/file", syscall(SYS_renameat2, AT_FDCWD, P("xdir"), AT_FDCWD, P("xfile"),
                                     RENAME_EXCHANGE));
    SYS("stat xdir", stat(P("xdir"), &st));
    CK(S_ISREG(st.st_mode), "xdir not a file after exchange");
    return 0;
}

#define NDIR 1000
static int scan_dir1000(const char *tag, int check_types)
{
    static unsigned char seen[NDIR];
    memset(seen, 0, sizeof seen);
    int dots = 0, total = 0;
    DIR *d = opendir(P("keep/dir1000"));
    if (!d)
        return fail("%s opendir: %s", tag, en(errno));
    struct dirent *e;
    errno = 0;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) {
            dots++;
            continue;
        }
        int idx;
        char extra;
        if (sscanf(e->d_name, "f%4d%c", &idx, &extra) != 1 || idx < 0 || idx >= NDIR) {
            closedir(d);
            return fail("%s unexpected name '%.40s'", tag, e->d_name);
        }
        if (seen[idx]++) {
            closedir(d);
            return fail("%s duplicate %s", tag, e->d_name);
        }
        if (check_types && e->d_type != DT_REG && e->d_type != DT_UNKNOWN) {
            closedir(d);
            return fail("%s d_type %d for %s", tag, e->d_type, e->d_name);
        }
        total++;
    }
    int err = errno;
    /* rewinddir must restart the stream from offset 0. */
    rewinddir(d);
    int again = 0;
    while ((e = readdir(d)))
        again++;
    closedir(d);
    CK(!err, "%s readdir: %s", tag, en(err));
    CK(total == NDIR, "%s saw %d of %d", tag, total, NDIR);
    CK(dots == 2, "%s saw %d dot entries", tag, dots);
    CK(again == NDIR + 2, "%s rewinddir saw %d", tag, again);
    return 0;
}

static int c_readdir_1000(void)
{
    SYS("mkdir", mkdir(P("keep/dir1000"), 0755));
    for (int i = 0; i < NDIR; i++) {
        int fd = open(P("keep/dir1000/f%04d", i), O_CREAT | O_EXCL | O_WRONLY, 0644);
        SYS("create entry", fd);
        close(fd);
    }
    if (scan_dir1000("fresh", 1))
        return 1;
    drop_caches();
    if (scan_dir1000("after drop", 1))
        return 1;
    /* readdir's d_ino must match what LOOKUP reports. */
    DIR *d = opendir(P("keep/dir1000"));
    if (!d)
        return fail("opendir: %s", en(errno));
    struct dirent *e;
    int checked = 0;
    while ((e = readdir(d)) && checked < 50) {
        if (e->d_name[0] != 'f')
            continue;
        struct stat st;
        if (stat(P("keep/dir1000/%s", e->d_name), &st) < 0) {
            closedir(d);
            return fail("stat entry: %s", en(errno));
        }
        if (st.st_ino != e->d_ino) {
            closedir(d);
            return fail("d_ino %llu != st_ino %llu", (unsigned long long)e->d_ino,
                        (unsigned long long)st.st_ino);
        }
        checked++;
    }
    closedir(d);
    return 0;
}

/* A raw getdents64 walk through a buffer of the caller's size: a small one makes the kernel send
 * many READDIR requests, each resuming from the offset the daemon gave the entry before. */
struct dirent_walk {
    int fd;
    char *buf;
    size_t size;
    long len, off;
};
#define DIRENT_WALK(dir_fd, buffer) { .fd = (dir_fd), .buf = (buffer), .size = sizeof(buffer) }

/* Sets *name to the next entry's (struct linux_dirent64: d_reclen at 16, d_name at 19) and
 * returns 1; 0 at the end; -1 with errno when getdents64 fails. */
static int dirent_next(struct dirent_walk *w, const char **name)
{
    if (w->off >= w->len) {
        w->len = syscall(SYS_getdents64, w->fd, w->buf, w->size);
        w->off = 0;
        if (w->len <= 0)
            return w->len < 0 ? -1 : 0;
    }
    *name = w->buf + w->off + 19;
    w->off += *(unsigned short *)(w->buf + w->off + 16);
    return 1;
}

static int c_readdir_small_buf(void)
{
    int fd = open(P("keep/dir1000"), O_RDONLY | O_DIRECTORY);
    SYS("open dir", fd);
    char buf[256];
    struct dirent_walk w = DIRENT_WALK(fd, buf);
    const char *name;
    int total = 0, more;
    while ((more = dirent_next(&w, &name)) > 0)
        total++;
    SYS("getdents64", more);
    close(fd);
    CK(total == NDIR + 2, "saw %d entries", total);
    return 0;
}

static int c_fsyncdir(void)
{
    int fd = open(P("keep"), O_RDONLY | O_DIRECTORY);
    SYS("open dir", fd);
    SYS("fsync dir", fsync(fd));
    SYS("fdatasync dir", fdatasync(fd));
    close(fd);
    return 0;
}

static int c_fsync(void)
{
    int fd = open(P("fsync"), O_CREAT | O_RDWR, 0644);
    SYS("create", fd);
    SYS("write", write(fd, "data", 4));
    SYS("fsync", fsync(fd));
    SYS("write2", write(fd, "more", 4));
    SYS("fdatasync", fdatasync(fd));
    close(fd);
    return 0;
}

/* virtiofs mounts with default_permissions, so the guest kernel answers access() itself and
 * never sends FUSE_ACCESS; this checks the permission results the daemon's attributes produce. */
static int c_access(void)
{
    SYS("access rwx", access(P("keep/mode0751"), R_OK | W_OK | X_OK));
    SYS("access F_OK", access(P("small"), F_OK));
    EXPECT_ERR("access missing", access(P("nope"), F_OK), ENOENT);
    EXPECT_ERR("root X_OK on 0640", access(P("small"), X_OK), EACCES);
    SYS("faccessat", faccessat(AT_FDCWD, P("keep"), R_OK | X_OK, AT_EACCESS));
    return 0;
}

static int c_fallocate(void)
{
    struct stat st;
    int fd = open(P("falloc"), O_CREAT | O_RDWR | O_TRUNC, 0644);
    SYS("create", fd);
    SYS("fallocate", fallocate(fd, 0, 0, 1 * MiB));
    SYS("fstat", fstat(fd, &st));
    CK(st.st_size == 1 * MiB, "size %lld", (long long)st.st_size);
    CK(st.st_blocks >= 2048, "blocks %lld", (long long)st.st_blocks);
    SYS("fallocate keep_size", fallocate(fd, FALLOC_FL_KEEP_SIZE, 1 * MiB, 1 * MiB));
    drop_caches();
    SYS("fstat2", fstat(fd, &st));
    CK(st.st_size == 1 * MiB, "KEEP_SIZE changed size to %lld", (long long)st.st_size);
    CK(st.st_blocks >= 4096, "KEEP_SIZE blocks %lld", (long long)st.st_blocks);
    close(fd);
    return 0;
}

static int c_fallocate_punch_hole(void)
{
    struct stat before, after;
    size_t len;
    unsigned char *want = expect_artifact("punched", &len);
    unsigned char *buf = malloc(len);
    pattern(4, 0, buf, len);
    int fd = open(P("keep/punched.bin"), O_CREAT | O_RDWR | O_TRUNC, 0644);
    SYS("create", fd);
    SYS("write", write_all(fd, buf, len, 0));
    SYS("fsync", fsync(fd));
    SYS("fstat", fstat(fd, &before));
    SYS("punch", fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, PUNCH_OFF, PUNCH_LEN));
    close(fd);
    drop_caches();
    fd = open(P("keep/punched.bin"), O_RDONLY);
    SYS("reopen", fd);
    SYS("fstat2", fstat(fd, &after));
    CK(after.st_size == (off_t)len, "size %lld", (long long)after.st_size);
    CK(after.st_blocks < before.st_blocks, "blocks %lld -> %lld", (long long)before.st_blocks,
       (long long)after.st_blocks);
    ssize_t n = read_all(fd, buf, len, 0);
    close(fd);
    CK(n == (ssize_t)len, "read %zd", n);
    long d = first_diff(buf, want, len);
    CK(d < 0, "content differs at %ld", d);
    return 0;
}

static int c_lseek_data_hole(void)
{
    unsigned char blk[4096];
    memset(blk, 0xab, sizeof blk);
    int fd = open(P("seek"), O_CREAT | O_RDWR | O_TRUNC, 0644);
    SYS("create", fd);
    SYS("ftruncate", ftruncate(fd, 2 * MiB));
    SYS("write0", write_all(fd, blk, sizeof blk, 0));
    SYS("write1M", write_all(fd, blk, sizeof blk, 1 * MiB));
    SYS("fsync", fsync(fd));
    off_t h = lseek(fd, 0, SEEK_HOLE);
    SYS("SEEK_HOLE", h);
    /* Without FUSE_LSEEK the kernel falls back to "all data", so the hole lands at EOF. */
    CK(h != 2 * MiB, "SEEK_HOLE at EOF: no FUSE_LSEEK (ENOSYS fallback)");
    CK(h == 4096, "SEEK_HOLE(0)=%lld", (long long)h);
    off_t d = lseek(fd, 4096, SEEK_DATA);
    SYS("SEEK_DATA", d);
    CK(d == 1 * MiB, "SEEK_DATA(4096)=%lld", (long long)d);
    h = lseek(fd, 1 * MiB, SEEK_HOLE);
    CK(h == 1 * MiB + 4096, "SEEK_HOLE(1M)=%lld", (long long)h);
    EXPECT_ERR("SEEK_DATA past last data", lseek(fd, 1 * MiB + 4096, SEEK_DATA), ENXIO);
    EXPECT_ERR("SEEK_DATA past EOF", lseek(fd, 3 * MiB, SEEK_DATA), ENXIO);
    off_t e = lseek(fd, 0, SEEK_END);
    CK(e == 2 * MiB, "SEEK_END=%lld", (long long)e);
    close(fd);
    return 0;
}

static int c_big_file_32m(void)
{
    size_t len;
    unsigned char *want = expect_artifact("big", &len);
    int fd = open(P("keep/big.bin"), O_CREAT | O_RDWR | O_TRUNC, 0644);
    SYS("create", fd);
    for (size_t off = 0; off < len; off += 1 * MiB)
        SYS("write", write_all(fd, want + off, 1 * MiB, (off_t)off));
    SYS("fsync", fsync(fd));
    close(fd);
    drop_caches();
    unsigned char *got = malloc(len);
    fd = open(P("keep/big.bin"), O_RDONLY);
    SYS("reopen", fd);
    struct stat st;
    SYS("fstat", fstat(fd, &st));
    CK(st.st_size == (off_t)len, "size %lld", (long long)st.st_size);
    ssize_t n = read_all(fd, got, len, 0);
    SYS("read", n);
    close(fd);
    CK(n == (ssize_t)len, "short read %zd", n);
    long d = first_diff(got, want, len);
    CK(d < 0, "content differs at %ld", d);
    return 0;
}

static int c_copy_file_range(void)
{
    size_t len;
    unsigned char *want = expect_artifact("copy", &len);
    int in = open(P("keep/big.bin"), O_RDONLY);
    SYS("open src", in);
    int out = open(P("keep/copy.bin"), O_CREAT | O_RDWR | O_TRUNC, 0644);
    SYS("open dst", out);
    loff_t ioff = COPY_SRC_OFF, ooff = 0;
    size_t left = len;
    while (left) {
        ssize_t n = copy_file_range(in, &ioff, out, &ooff, left, 0);
        SYS("copy_file_range", n);
        CK(n > 0, "copy_file_range returned 0 with %zu left", left);
        left -= (size_t)n;
    }
    close(in);
    close(out);
    drop_caches();
    unsigned char *got = malloc(len + 1);
    out = open(P("keep/copy.bin"), O_RDONLY);
    SYS("reopen", out);
    ssize_t n = read_all(out, got, len + 1, 0);
    close(out);
    CK(n == (ssize_t)len, "dst size %zd", n);
    long d = first_diff(got, want, len);
    CK(d < 0, "content differs at %ld", d);
    return 0;
}

static int c_unaligned_io(void)
{
    unsigned char *model = calloc(1, UNALIGNED_SIZE), *tmp = malloc(UNALIGNED_SIZE);
    int fd = open(P("keep/unaligned.bin"), O_CREAT | O_RDWR | O_TRUNC, 0644);
    SYS("create", fd);
    for (size_t i = 0; i < NUOPS; i++) {
        pattern(100 + i, (uint64_t)uops[i].off, tmp, uops[i].len);
        memcpy(model + uops[i].off, tmp, uops[i].len);
        ssize_t n = pwrite(fd, tmp, uops[i].len, uops[i].off);
        SYS("pwrite", n);
        CK((size_t)n == uops[i].len, "short pwrite %zd", n);
    }
    close(fd);
    drop_caches();
    /* O_DIRECT bypasses the guest page cache, so the daemon sees odd-sized READs too. */
    fd = open(P("keep/unaligned.bin"), O_RDONLY | O_DIRECT);
    if (fd >= 0 && pread(fd, tmp, 3, 1) < 0 && errno == EINVAL) {
        close(fd); /* host filesystems may insist on aligned O_DIRECT */
        fd = -1;
    }
    if (fd < 0)
        fd = open(P("keep/unaligned.bin"), O_RDONLY);
    SYS("reopen", fd);
    struct stat st;
    SYS("fstat", fstat(fd, &st));
    CK(st.st_size == UNALIGNED_SIZE, "size %lld", (long long)st.st_size);
    for (size_t i = 0; i < NUOPS; i++) {
        off_t off = uops[i].off > 7 ? uops[i].off - 7 : 0;
        size_t len = uops[i].len + 13;
        if (off + (off_t)len > UNALIGNED_SIZE)
            len = (size_t)(UNALIGNED_SIZE - off);
        ssize_t n = read_all(fd, tmp, len, off);
        SYS("pread", n);
        CK((size_t)n == len, "short pread %zd at %lld", n, (long long)off);
        long d = first_diff(tmp, model + off, len);
        CK(d < 0, "differs at %lld", (long long)(off + d));
    }
    close(fd);
    fd = open(P("keep/unaligned.bin"), O_RDONLY);
    SYS("reopen cached", fd);
    ssize_t n = read_all(fd, tmp, UNALIGNED_SIZE, 0);
    close(fd);
    CK(n == UNALIGNED_SIZE, "full read %zd", n);
    long d = first_diff(tmp, model, UNALIGNED_SIZE);
    CK(d < 0, "full content differs at %ld", d);
    return 0;
}

static int c_large_file_5g(void)
{
    struct stat st;
    char buf[8];
    int fd = open(P("keep/huge.bin"), O_CREAT | O_RDWR | O_TRUNC, 0644);
    SYS("create", fd);
    SYS("pwrite at 5GiB", write_all(fd, "END!", 4, HUGE_OFF));
    SYS("fsync", fsync(fd));
    close(fd);
    drop_caches();
    fd = open(P("keep/huge.bin"), O_RDONLY);
    SYS("reopen", fd);
    SYS("fstat", fstat(fd, &st));
    CK(st.st_size == HUGE_OFF + 4, "size %lld", (long long)st.st_size);
    CK(st.st_blocks < 2048, "not sparse: %lld blocks", (long long)st.st_blocks);
    ssize_t n = pread(fd, buf, 4, HUGE_OFF);
    SYS("pread 5GiB", n);
    CK(n == 4 && !memcmp(buf, "END!", 4), "tail mismatch");
    n = pread(fd, buf, 8, 4 * GiB - 4);
    SYS("pread across 4GiB", n);
    CK(n == 8, "short read across 4GiB");
    for (int i = 0; i < 8; i++)
        CK(buf[i] == 0, "hole not zero");
    n = pread(fd, buf, 8, HUGE_OFF + 4);
    CK(n == 0, "read past EOF %zd", n);
    close(fd);
    return 0;
}

static int c_sparse(void)
{
    struct stat st;
    unsigned char buf[4096];
    int fd = open(P("sparse"), O_CREAT | O_RDWR | O_TRUNC, 0644);
    SYS("create", fd);
    SYS("ftruncate", ftruncate(fd, 16 * MiB));
    SYS("write mid", write_all(fd, "M", 1, 8 * MiB));
    SYS("fsync", fsync(fd));
    drop_caches();
    SYS("fstat", fstat(fd, &st));
    CK(st.st_size == 16 * MiB, "size %lld", (long long)st.st_size);
    CK(st.st_blocks <= 64, "blocks %lld", (long long)st.st_blocks);
    ssize_t n = pread(fd, buf, sizeof buf, 8 * MiB - 2048);
    CK(n == sizeof buf, "read %zd", n);
    for (int i = 0; i < 4096; i++)
        CK(buf[i] == (i == 2048 ? 'M' : 0), "byte %d = %d", i, buf[i]);
    close(fd);
    return 0;
}

static int c_syncfs(void)
{
    int fd = open(P("small"), O_RDONLY);
    SYS("open", fd);
    SYS("syncfs", syncfs(fd));
    close(fd);
    sync();
    return 0;
}

static int c_tmpfile(void)
{
    struct stat st;
    char procpath[64], buf[64];
    int fd = open(P("keep"), O_TMPFILE | O_RDWR, 0600);
    SYS("O_TMPFILE", fd);
    SYS("write", write(fd, "tmpfile-content\n", 16));
    SYS("fstat", fstat(fd, &st));
    CK(st.st_nlink == 0, "tmpfile nlink %lu", (unsigned long)st.st_nlink);
    CK((st.st_mode & 07777) == 0600, "mode %o", st.st_mode & 07777);
    snprintf(procpath, sizeof procpath, "/proc/self/fd/%d", fd);
    SYS("linkat", linkat(AT_FDCWD, procpath, AT_FDCWD, P("keep/tmpfile_linked"),
                         AT_SYMLINK_FOLLOW));
    close(fd);
    drop_caches();
    SYS("stat linked", stat(P("keep/tmpfile_linked"), &st));
    CK(st.st_nlink == 1, "linked nlink %lu", (unsigned long)st.st_nlink);
    SYS("read linked", get_file(P("keep/tmpfile_linked"), buf, sizeof buf));
    CK(!strcmp(buf, "tmpfile-content\n"), "content '%s'", buf);
    return 0;
}

static int c_xattr(void)
{
    char buf[256];
    const char *f = P("keep/xattr_file");
    SYS("put", put_file(f, "x\n", 0644));
    SYS("setxattr", setxattr(f, "user.ferryfs", "hello-xattr", 11, XATTR_CREATE));
    ssize_t n = getxattr(f, "user.ferryfs", NULL, 0);
    SYS("getxattr size", n);
    CK(n == 11, "size probe %zd", n);
    n = getxattr(f, "user.ferryfs", buf, sizeof buf);
    SYS("getxattr", n);
    CK(n == 11 && !memcmp(buf, "hello-xattr", 11), "value mismatch");
    EXPECT_ERR("getxattr small buf", getxattr(f, "user.ferryfs", buf, 3), ERANGE);
    EXPECT_ERR("XATTR_CREATE existing", setxattr(f, "user.ferryfs", "v", 1, XATTR_CREATE),
               EEXIST);
    EXPECT_ERR("XATTR_REPLACE missing", setxattr(f, "user.missing", "v", 1, XATTR_REPLACE),
               ENODATA);
    SYS("set tmp", setxattr(f, "user.tmp", "t", 1, 0));
    n = listxattr(f, buf, sizeof buf);
    SYS("listxattr", n);
    int have_a = 0, have_b = 0;
    for (char *p = buf; p < buf + n; p += strlen(p) + 1) {
        have_a |= !strcmp(p, "user.ferryfs");
        have_b |= !strcmp(p, "user.tmp");
    }
    CK(have_a && have_b, "listxattr missing names");
    SYS("removexattr", removexattr(f, "user.tmp"));
    EXPECT_ERR("get removed", getxattr(f, "user.tmp", buf, sizeof buf), ENODATA);
    EXPECT_ERR("remove missing", removexattr(f, "user.tmp"), ENODATA);
    SYS("dir setxattr", setxattr(P("keep"), "user.dirattr", "d", 1, 0));
    drop_caches();
    n = getxattr(f, "user.ferryfs", buf, sizeof buf);
    SYS("getxattr after drop", n);
    CK(n == 11, "after drop size %zd", n);
    n = lgetxattr(P("keep/symlink"), "user.ferryfs", buf, sizeof buf);
    CK(n < 0, "symlink unexpectedly has the xattr");
    return 0;
}

static int c_nonroot_user(void)
{
    struct stat st;
    SYS("mkdir open", mkdir(P("keep/nonroot"), 0777));
    SYS("chmod open", chmod(P("keep/nonroot"), 0777));
    SYS("mkdir private", mkdir(P("keep/private"), 0700));
    SYS("put private", put_file(P("keep/private/secret"), "s", 0600));
    SYS("put rootfile", put_file(P("keep/rootfile"), "r", 0644));
    SYS("setgroups", setgroups(0, NULL));
    SYS("setgid", setgid(1000));
    SYS("setuid", setuid(1000));
    int fd = open(P("keep/nonroot/owned1000"), O_CREAT | O_EXCL | O_WRONLY, 0640);
    SYS("create as 1000", fd);
    SYS("write", write(fd, "guest\n", 6));
    SYS("fstat", fstat(fd, &st));
    close(fd);
    CK(st.st_uid == 1000 && st.st_gid == 1000, "owner %u:%u", st.st_uid, st.st_gid);
    SYS("mkdir as 1000", mkdir(P("keep/nonroot/subdir1000"), 0755));
    SYS("stat subdir", stat(P("keep/nonroot/subdir1000"), &st));
    CK(st.st_uid == 1000 && st.st_gid == 1000, "dir owner %u:%u", st.st_uid, st.st_gid);
    EXPECT_ERR("create in 0700 root dir", open(P("keep/private/x"), O_CREAT | O_WRONLY, 0644),
               EACCES);
    EXPECT_ERR("stat in 0700 root dir", stat(P("keep/private/secret"), &st), EACCES);
    EXPECT_ERR("opendir 0700 root dir", open(P("keep/private"), O_RDONLY | O_DIRECTORY), EACCES);
    EXPECT_ERR("write root 0644", open(P("keep/rootfile"), O_WRONLY), EACCES);
    EXPECT_ERR("access W_OK", access(P("keep/rootfile"), W_OK), EACCES);
    EXPECT_ERR("chmod root file", chmod(P("keep/rootfile"), 0777), EPERM);
    EXPECT_ERR("chown own file", chown(P("keep/nonroot/owned1000"), 0, 0), EPERM);
    EXPECT_ERR("unlink in keep", unlink(P("keep/rootfile")), EACCES);
    SYS("chmod own", chmod(P("keep/nonroot/owned1000"), 0644));
    struct timespec ts[2] = {{1000000000, 1}, {1000000000, 2}};
    SYS("utimens own", utimensat(AT_FDCWD, P("keep/nonroot/owned1000"), ts, 0));
    EXPECT_ERR("utimens foreign", utimensat(AT_FDCWD, P("keep/rootfile"), ts, 0), EPERM);
    return 0;
}

static int c_sgid_dir(void)
{
    struct stat st;
    SYS("mkdir", mkdir(P("keep/sgid"), 0777));
    SYS("chown", chown(P("keep/sgid"), 0, 2000));
    SYS("chmod", chmod(P("keep/sgid"), 02777));
    SYS("stat dir", stat(P("keep/sgid"), &st));
    CK((st.st_mode & 07777) == 02777 && st.st_gid == 2000, "dir mode %o gid %u",
       st.st_mode & 07777, st.st_gid);
    SYS("create", put_file(P("keep/sgid/file"), "g", 0644));
    SYS("stat file", stat(P("keep/sgid/file"), &st));
    CK(st.st_gid == 2000, "file gid %u want 2000", st.st_gid);
    SYS("mkdir sub", mkdir(P("keep/sgid/sub"), 0755));
    SYS("stat sub", stat(P("keep/sgid/sub"), &st));
    CK(st.st_gid == 2000, "subdir gid %u want 2000", st.st_gid);
    CK(st.st_mode & S_ISGID, "subdir lacks S_ISGID (mode %o)", st.st_mode & 07777);
    pid_t pid = fork();
    if (pid == 0) {
        if (setgroups(0, NULL) || setgid(1000) || setuid(1000))
            _exit(2);
        if (put_file(P("keep/sgid/by1000"), "u", 0644))
            _exit(3);
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    CK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "user 1000 create failed (%d)", status);
    drop_caches();
    SYS("stat by1000", stat(P("keep/sgid/by1000"), &st));
    CK(st.st_uid == 1000 && st.st_gid == 2000, "by1000 owner %u:%u want 1000:2000", st.st_uid,
       st.st_gid);
    return 0;
}

static int c_mmap_shared(void)
{
    size_t len;
    unsigned char *want = expect_artifact("mmap", &len);
    int fd = open(P("keep/mmap.bin"), O_CREAT | O_RDWR | O_TRUNC, 0644);
    SYS("create", fd);
    SYS("ftruncate", ftruncate(fd, (off_t)len));
    unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CK(m != MAP_FAILED, "mmap: %s", en(errno));
    memcpy(m, want, len);
    SYS("msync", msync(m, len, MS_SYNC));
    SYS("munmap", munmap(m, len));
    close(fd);
    drop_caches();
    unsigned char *got = malloc(len + 1);
    fd = open(P("keep/mmap.bin"), O_RDONLY);
    SYS("reopen", fd);
    ssize_t n = read_all(fd, got, len + 1, 0);
    CK(n == (ssize_t)len, "size %zd", n);
    long d = first_diff(got, want, len);
    CK(d < 0, "read() differs at %ld", d);
    /* A private read mapping of an existing file must see the same bytes as read(). */
    unsigned char *r = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    CK(r != MAP_FAILED, "mmap ro: %s", en(errno));
    d = first_diff(r, want, len);
    munmap(r, len);
    close(fd);
    CK(d < 0, "mapping differs at %ld", d);
    return 0;
}

static int c_locks(void)
{
    /* Served by the daemon (GETLK/SETLK) if it negotiates POSIX_LOCKS, else by the guest kernel. */
    int fd = open(P("locks"), O_CREAT | O_RDWR, 0644);
    SYS("create", fd);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 100};
    SYS("F_SETLK", fcntl(fd, F_SETLK, &fl));
    pid_t pid = fork();
    if (pid == 0) {
        int cfd = open(P("locks"), O_RDWR);
        struct flock q = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 10, .l_len = 1};
        if (cfd < 0 || fcntl(cfd, F_GETLK, &q) < 0)
            _exit(2);
        if (q.l_type != F_WRLCK || q.l_pid != getppid())
            _exit(3);
        if (fcntl(cfd, F_SETLK, &q) == 0 || (errno != EAGAIN && errno != EACCES))
            _exit(4);
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    CK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "conflicting lock not seen (%d)",
       WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    fl.l_type = F_UNLCK;
    SYS("unlock", fcntl(fd, F_SETLK, &fl));
    SYS("flock", flock(fd, LOCK_EX | LOCK_NB));
    SYS("flock unlock", flock(fd, LOCK_UN));
    close(fd);
    return 0;
}

static int c_readdir_unlink_during(void)
{
    /* rm -rf pattern: every entry not yet removed must still be returned exactly once. */
    enum { N = 300 };
    static unsigned char seen[N];
    SYS("mkdir", mkdir(P("rmrf"), 0755));
    for (int i = 0; i < N; i++) {
        int fd = open(P("rmrf/e%03d", i), O_CREAT | O_WRONLY, 0644);
        SYS("create", fd);
        close(fd);
    }
    drop_caches();
    int dfd = open(P("rmrf"), O_RDONLY | O_DIRECTORY);
    SYS("open dir", dfd);
    char buf[512];
    struct dirent_walk w = DIRENT_WALK(dfd, buf);
    const char *name;
    int total = 0, more;
    while ((more = dirent_next(&w, &name)) > 0) {
        if (name[0] == '.')
            continue;
        int idx = atoi(name + 1);
        CK(idx >= 0 && idx < N, "bad name %.20s", name);
        CK(!seen[idx]++, "%s returned twice", name);
        total++;
        SYS("unlinkat", unlinkat(dfd, name, 0));
    }
    SYS("getdents64", more);
    close(dfd);
    CK(total == N, "saw %d of %d", total, N);
    SYS("rmdir", rmdir(P("rmrf")));
    return 0;
}

static int c_parallel_io(void)
{
    /* Several writers at once keep more than one request in flight on the queue. */
    enum { NPROC = 4 };
    const size_t len = 4 * MiB + 333;
    pid_t pids[NPROC];
    for (int p = 0; p < NPROC; p++) {
        pids[p] = fork();
        if (pids[p] == 0) {
            unsigned char *w = malloc(len), *r = malloc(len);
            pattern(200 + (uint64_t)p, 0, w, len);
            int fd = open(P("par%d", p), O_CREAT | O_RDWR | O_TRUNC, 0644);
            if (fd < 0)
                _exit(10);
            for (size_t off = 0; off < len; off += 65536 + 17) {
                size_t l = len - off < 65536 + 17 ? len - off : 65536 + 17;
                if (write_all(fd, w + off, l, (off_t)off) < 0)
                    _exit(11);
            }
            if (fsync(fd) < 0)
                _exit(12);
            if (read_all(fd, r, len, 0) != (ssize_t)len || memcmp(r, w, len))
                _exit(13);
            close(fd);
            _exit(0);
        }
    }
    int bad = 0, why = 0;
    for (int p = 0; p < NPROC; p++) {
        int status;
        waitpid(pids[p], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status)) {
            bad++;
            why = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
    }
    CK(!bad, "%d writers failed (last status %d)", bad, why);
    drop_caches();
    unsigned char *w = malloc(len), *r = malloc(len);
    for (int p = 0; p < NPROC; p++) {
        pattern(200 + (uint64_t)p, 0, w, len);
        int fd = open(P("par%d", p), O_RDONLY);
        SYS("reopen", fd);
        ssize_t n = read_all(fd, r, len, 0);
        close(fd);
        CK(n == (ssize_t)len, "par%d size %zd", p, n);
        long d = first_diff(r, w, len);
        CK(d < 0, "par%d differs at %ld", p, d);
    }
    return 0;
}

static int c_suid_cleared_on_write(void)
{
    struct stat st;
    SYS("mkdir", mkdir(P("suid"), 0777));
    SYS("chmod dir", chmod(P("suid"), 0777));
    pid_t pid = fork();
    if (pid == 0) {
        if (setgroups(0, NULL) || setgid(1000) || setuid(1000))
            _exit(2);
        int fd = open(P("suid/f"), O_CREAT | O_RDWR, 0755);
        if (fd < 0)
            _exit(3);
        if (fchmod(fd, 06755) < 0)
            _exit(4);
        if (write(fd, "x", 1) != 1)
            _exit(5);
        close(fd);
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    CK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "user 1000 steps failed (%d)",
       WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    drop_caches();
    SYS("stat", stat(P("suid/f"), &st));
    CK(!(st.st_mode & S_ISUID), "S_ISUID kept after write (mode %o)", st.st_mode & 07777);
    CK(!(st.st_mode & S_ISGID), "S_ISGID kept after write (mode %o)", st.st_mode & 07777);
    return 0;
}

/* ---------- privilege bits: what a local kernel clears, and for whom ---------- */

/* Runs fn(path) in a child as uid:gid with no supplementary group, or with `extra` as the only
 * one; returns 0 when fn returned 0 (fn reports its failure through fail()). */
static int as_user(uid_t uid, gid_t gid, gid_t extra, int (*fn)(const char *), const char *path)
{
    pid_t pid = fork();
    if (pid < 0)
        return fail("fork: %s", en(errno));
    if (pid == 0) {
        gid_t groups[1] = {extra};
        if (setgroups(extra == (gid_t)-1 ? 0 : 1, groups) || setgid(gid) || setuid(uid))
            _exit(fail("become %u:%u: %s", uid, gid, en(errno)));
        _exit(fn(path) ? 1 : 0);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : fail("as %u: signal %d", uid, WTERMSIG(status));
}
#define NO_GROUP ((gid_t)-1)
/* A step that already explained its failure through fail(). */
#define OK(cond)                                                                                   \
    do {                                                                                           \
        if (!(cond))                                                                               \
            return 1;                                                                              \
    } while (0)

static int fn_write1(const char *path)
{
    int fd = open(path, O_WRONLY);
    if (fd < 0 || pwrite(fd, "w", 1, 0) != 1)
        return fail("write %s: %s", path, en(errno));
    return close(fd);
}
static int fn_truncate(const char *path)
{
    return truncate(path, 1) ? fail("truncate %s: %s", path, en(errno)) : 0;
}
static int fn_open_trunc(const char *path)
{
    int fd = open(path, O_WRONLY | O_TRUNC);
    return fd < 0 ? fail("open O_TRUNC %s: %s", path, en(errno)) : close(fd);
}
static int fn_chgrp_2000(const char *path)
{
    return chown(path, (uid_t)-1, 2000) ? fail("chgrp %s: %s", path, en(errno)) : 0;
}
static int fn_create_sgid(const char *path)
{
    int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 02755);
    return fd < 0 ? fail("create %s: %s", path, en(errno)) : close(fd);
}
static int fn_mkdir(const char *path)
{
    return mkdir(path, 0755) ? fail("mkdir %s: %s", path, en(errno)) : 0;
}
static int fn_chmod_sgid(const char *path)
{
    return chmod(path, 02755) ? fail("chmod %s: %s", path, en(errno)) : 0;
}

/* Mode bits as the daemon reports them now (the guest's caches dropped first). */
static int mode_of(const char *path)
{
    struct stat st;
    drop_caches();
    return stat(path, &st) ? -1 : (int)(st.st_mode & 07777);
}

/* A file owned by uid:gid with the given mode; chmod comes last because chown clears bits. */
static int make_owned(const char *path, mode_t mode, uid_t uid, gid_t gid)
{
    if (put_file(path, "data", 0600) || chown(path, uid, gid) || chmod(path, mode))
        return fail("make %s: %s", path, en(errno));
    return 0;
}

#define EXPECT_MODE(path, want)                                                                    \
    do {                                                                                           \
        int m_ = mode_of(path);                                                                    \
        CK(m_ == (want), "%s: mode %o, want %o", strrchr(path, '/') + 1, m_, want);                \
    } while (0)

static int c_suid_root_write_kept(void)
{
    /* Root holds CAP_FSETID: its write and truncate leave the bits (should_remove_suid). */
    SYS("mkdir", mkdir(P("privroot"), 0777));
    OK(!make_owned(P("privroot/w"), 06755, 1000, 1000));
    OK(!make_owned(P("privroot/t"), 06755, 1000, 1000));
    OK(!fn_write1(P("privroot/w")));
    EXPECT_MODE(P("privroot/w"), 06755);
    OK(!fn_truncate(P("privroot/t")));
    EXPECT_MODE(P("privroot/t"), 06755);
    return 0;
}

static int c_suid_cleared_on_truncate(void)
{
    SYS("mkdir", mkdir(P("privtrunc"), 0777));
    OK(!make_owned(P("privtrunc/t"), 06755, 1000, 1000));
    OK(!make_owned(P("privtrunc/o"), 06775, 1000, 1000));
    OK(!as_user(1000, 1000, NO_GROUP, fn_truncate, P("privtrunc/t")));
    EXPECT_MODE(P("privtrunc/t"), 0755);
    OK(!as_user(1000, 1000, NO_GROUP, fn_open_trunc, P("privtrunc/o")));
    EXPECT_MODE(P("privtrunc/o"), 0775);
    return 0;
}

static int c_suid_cleared_on_chown(void)
{
    /* chown clears S_ISUID, and S_ISGID with group-exec, even for root; S_ISGID without
     * group-exec (mandatory-locking mark) stays, and directories keep both. */
    SYS("mkdir", mkdir(P("privchown"), 0777));
    OK(!make_owned(P("privchown/f"), 06755, 0, 0));
    OK(!make_owned(P("privchown/nogx"), 02745, 0, 0));
    OK(!make_owned(P("privchown/byowner"), 06755, 1000, 1000));
    SYS("mkdir d", mkdir(P("privchown/d"), 0755));
    SYS("chmod d", chmod(P("privchown/d"), 06755));
    SYS("chown f", chown(P("privchown/f"), 1000, 1000));
    EXPECT_MODE(P("privchown/f"), 0755);
    SYS("chown nogx", chown(P("privchown/nogx"), 1000, 1000));
    EXPECT_MODE(P("privchown/nogx"), 02745);
    SYS("chown d", chown(P("privchown/d"), 1000, 1000));
    EXPECT_MODE(P("privchown/d"), 06755);
    /* The owner moving the file into a group of theirs. */
    OK(!as_user(1000, 1000, 2000, fn_chgrp_2000, P("privchown/byowner")));
    EXPECT_MODE(P("privchown/byowner"), 0755);
    return 0;
}

/* The host put security.capability (or its mapped name) on MNT/host/cap_*: every write,
 * truncate and chown must remove it, whoever does it; the untouched cap_keep keeps it. */
static int c_cap_cleared_host_set(void)
{
    static const char *files[] = {"cap_user", "cap_root", "cap_trunc", "cap_chown", "cap_keep"};
    char path[5][PATH_MAX], v[64];
    for (int i = 0; i < 5; i++) {
        snprintf(path[i], PATH_MAX, "%s/host/%s", MNT, files[i]);
        ssize_t n = getxattr(path[i], "security.capability", v, sizeof v);
        CK(n > 0, "%s: the host's capability is not visible: %s", files[i], en(errno));
    }
    OK(!as_user(1000, 1000, NO_GROUP, fn_write1, path[0]));
    OK(!fn_write1(path[1]));
    OK(!as_user(1000, 1000, NO_GROUP, fn_truncate, path[2]));
    SYS("chown", chown(path[3], 0, 0));
    drop_caches();
    for (int i = 0; i < 4; i++)
        EXPECT_ERR(files[i], getxattr(path[i], "security.capability", v, sizeof v), ENODATA);
    CK(getxattr(path[4], "security.capability", v, sizeof v) > 0, "cap_keep lost it: %s", en(errno));
    return 0;
}

static int c_sgid_dir_outsider(void)
{
    /* User 1000 is not in grp2 (2000), nor in root's group 0 (CVE-2022-0358's setgid-root file):
     * a new file takes the directory's group but not a requested S_ISGID; a new subdirectory
     * inherits S_ISGID; a non-member's chmod g+s is dropped. (A member only through a supplementary
     * group loses a requested S_ISGID: FUSE requests carry no supplementary groups.) */
    struct stat st;
    static const gid_t groups[] = {2000, 0};
    for (int i = 0; i < 2; i++) {
        const char *d = i ? "sgid0" : "sgid2000";
        SYS("mkdir", mkdir(P("keep/%s", d), 0777));
        SYS("chown", chown(P("keep/%s", d), 0, groups[i]));
        SYS("chmod", chmod(P("keep/%s", d), 02777));
        OK(!as_user(1000, 1000, NO_GROUP, fn_create_sgid, P("keep/%s/out", d)));
        EXPECT_MODE(P("keep/%s/out", d), 0755);
        SYS("stat out", stat(P("keep/%s/out", d), &st));
        CK(st.st_uid == 1000 && st.st_gid == groups[i], "%s/out owner %u:%u", d, st.st_uid,
           st.st_gid);
        OK(!as_user(1000, 1000, NO_GROUP, fn_mkdir, P("keep/%s/outdir", d)));
        EXPECT_MODE(P("keep/%s/outdir", d), 02755);
        SYS("stat outdir", stat(P("keep/%s/outdir", d), &st));
        CK(st.st_gid == groups[i], "%s/outdir gid %u", d, st.st_gid);
    }
    OK(!as_user(1000, 1000, NO_GROUP, fn_chmod_sgid, P("keep/sgid2000/out")));
    EXPECT_MODE(P("keep/sgid2000/out"), 0755);
    return 0;
}

static int c_symlink_absolute(void)
{
    /* An absolute target is just bytes to the daemon: it must never be resolved on the host. */
    char buf[PATH_MAX];
    SYS("symlink", symlink("/etc/ferryfs-guest-target", P("keep/abs_symlink")));
    drop_caches();
    ssize_t n = readlink(P("keep/abs_symlink"), buf, sizeof buf);
    SYS("readlink", n);
    CK(n == 25 && !memcmp(buf, "/etc/ferryfs-guest-target", 25), "target changed");
    EXPECT_ERR("dangling follow", open(P("keep/abs_symlink"), O_RDONLY), ENOENT);
    return 0;
}

struct check {
    const char *name;
    int (*fn)(void);
};

static const struct check checks[] = {
    {"statfs", c_statfs},
    {"host_file_read", c_host_file_read},
    {"mkdir_rmdir", c_mkdir_rmdir},
    {"create_write_read", c_create_write_read},
    {"open_flags", c_open_flags},
    {"flush_close", c_flush_close},
    {"forget_relookup", c_forget_relookup},
    {"getattr", c_getattr},
    {"setattr_chmod", c_setattr_chmod},
    {"setattr_chown", c_setattr_chown},
    {"setattr_truncate", c_setattr_truncate},
    {"setattr_utimens_ns", c_setattr_utimens_ns},
    {"symlink_readlink", c_symlink_readlink},
    {"mknod_fifo", c_mknod_fifo},
    {"mknod_chr", c_mknod_chr},
    {"link_nlink", c_link_nlink},
    {"unlink", c_unlink},
    {"rename", c_rename},
    {"rename2_noreplace", c_rename2_noreplace},
    {"rename2_exchange", c_rename2_exchange},
    {"readdir_1000", c_readdir_1000},
    {"readdir_small_buf", c_readdir_small_buf},
    {"fsyncdir", c_fsyncdir},
    {"fsync", c_fsync},
    {"access", c_access},
    {"fallocate", c_fallocate},
    {"fallocate_punch_hole", c_fallocate_punch_hole},
    {"lseek_data_hole", c_lseek_data_hole},
    {"big_file_32m", c_big_file_32m},
    {"copy_file_range", c_copy_file_range},
    {"unaligned_io", c_unaligned_io},
    {"large_file_5g", c_large_file_5g},
    {"sparse", c_sparse},
    {"syncfs", c_syncfs},
    {"tmpfile", c_tmpfile},
    {"xattr", c_xattr},
    {"nonroot_user", c_nonroot_user},
    {"sgid_dir", c_sgid_dir},
    {"mmap_shared", c_mmap_shared},
    {"locks", c_locks},
    {"readdir_unlink_during", c_readdir_unlink_during},
    {"parallel_io", c_parallel_io},
    {"suid_cleared_on_write", c_suid_cleared_on_write},
    {"symlink_absolute", c_symlink_absolute},
    {"suid_root_write_kept", c_suid_root_write_kept},
    {"suid_cleared_on_truncate", c_suid_cleared_on_truncate},
    {"suid_cleared_on_chown", c_suid_cleared_on_chown},
    {"cap_cleared_host_set", c_cap_cleared_host_set},
    {"sgid_dir_outsider", c_sgid_dir_outsider},
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Each check runs in its own process so a crash or hang is one FAIL, not the end of the run. */
static int run_check(const struct check *c, int timeout_s)
{
    reason[0] = 0;
    double t0 = now();
    pid_t pid = fork();
    if (pid < 0) {
        printf("CHECK %s FAIL fork: %s\n", c->name, en(errno));
        return 1;
    }
    if (pid == 0) {
        alarm((unsigned)timeout_s);
        _exit(c->fn() ? 1 : 0);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    double dt = now() - t0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        printf("CHECK %s PASS\n", c->name);
        fprintf(stderr, "# %s %.2fs\n", c->name, dt);
        return 0;
    }
    if (WIFSIGNALED(status))
        printf("CHECK %s FAIL %s\n", c->name,
               WTERMSIG(status) == SIGALRM ? "timeout" : strsignal(WTERMSIG(status)));
    else
        printf("CHECK %s FAIL %s\n", c->name, reason[0] ? reason : "unknown");
    fprintf(stderr, "# %s %.2fs\n", c->name, dt);
    return 1;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: fsops MOUNTPOINT [CHECK...]   run checks in MOUNTPOINT/fsops\n"
            "       fsops --expect big|hostpat|mmap|copy|punched|unaligned   print expected bytes\n"
            "       fsops --list                  list check names\n");
    exit(2);
}

/*
 * --hostlocks MNT: the guest half of tests/semantics/locks-test.sh. The host
 * holds a POSIX lock on MNT/hostposix and an flock lock on MNT/hostflock and
 * lets go only once MNT/io-done exists, which a child writes while this
 * process waits in F_SETLKW: the wait cannot stall the request queue. Then
 * the guest holds locks on MNT/guestposix and MNT/guestflock for the host to
 * probe, and drops them by closing.
 */
static int hl_fail;

static void hl_check(const char *name, int ok, const char *why)
{
    printf("CHECK %s %s %s\n", name, ok ? "PASS" : "FAIL", ok ? "" : why);
    hl_fail |= !ok;
}

static void hl_path(char *buf, size_t n, const char *mnt, const char *name)
{
    snprintf(buf, n, "%s/%s", mnt, name);
}

static int hl_wait_for(const char *path, int seconds)
{
    for (int i = 0; i < seconds * 10; i++) {
        if (access(path, F_OK) == 0)
            return 1;
        usleep(100000);
    }
    return 0;
}

static int host_locks(const char *mnt)
{
    char hp[PATH_MAX], hf[PATH_MAX], gp[PATH_MAX], gf[PATH_MAX], io[PATH_MAX], done[PATH_MAX];
    char holds[PATH_MAX], checked[PATH_MAX];
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    hl_path(hp, sizeof hp, mnt, "hostposix");
    hl_path(hf, sizeof hf, mnt, "hostflock");
    hl_path(gp, sizeof gp, mnt, "guestposix");
    hl_path(gf, sizeof gf, mnt, "guestflock");
    hl_path(io, sizeof io, mnt, "io-file");
    hl_path(done, sizeof done, mnt, "io-done");
    hl_path(holds, sizeof holds, mnt, "guest-holds");
    hl_path(checked, sizeof checked, mnt, "host-checked");

    int pfd = open(hp, O_RDWR), ffd = open(hf, O_RDWR);
    hl_check("host-files", pfd >= 0 && ffd >= 0, "cannot open the host's files");
    if (pfd < 0 || ffd < 0)
        return 1;
    struct flock q = fl;
    errno = 0;
    hl_check("setlk-sees-host", fcntl(pfd, F_SETLK, &fl) < 0 && (errno == EAGAIN || errno == EACCES),
             en(errno));
    hl_check("getlk-sees-host", fcntl(pfd, F_GETLK, &q) == 0 && q.l_type == F_WRLCK, "no F_WRLCK");
    errno = 0;
    hl_check("flock-sees-host", flock(ffd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK, en(errno));

    pid_t child = fork();
    if (child == 0) {
        /* Same mount, same request queue, while the parent waits. */
        static char buf[65536];
        memset(buf, 'x', sizeof buf);
        sleep(1);
        int fd = open(io, O_CREAT | O_RDWR | O_TRUNC, 0644);
        if (fd < 0 || write(fd, buf, sizeof buf) != sizeof buf || fsync(fd) < 0 ||
            pread(fd, buf, sizeof buf, 0) != sizeof buf)
            _exit(1);
        close(fd);
        fd = open(done, O_CREAT | O_WRONLY, 0644);
        _exit(fd < 0);
    }
    int r = fcntl(pfd, F_SETLKW, &fl);
    hl_check("setlkw-waits-for-host", r == 0, en(errno));
    hl_check("queue-not-stalled", access(done, F_OK) == 0,
             "the host let go before the child's I/O finished");
    int status;
    waitpid(child, &status, 0);
    hl_check("child-io", WIFEXITED(status) && WEXITSTATUS(status) == 0, "child I/O failed");
    hl_check("flock-waits-for-host", flock(ffd, LOCK_EX) == 0, en(errno));
    close(pfd);
    close(ffd);

    /* The reverse: the host probes the guest's locks, then waits for them. */
    pfd = open(gp, O_CREAT | O_RDWR, 0644);
    ffd = open(gf, O_CREAT | O_RDWR, 0644);
    fl.l_type = F_WRLCK;
    hl_check("guest-locks", pfd >= 0 && ffd >= 0 && fcntl(pfd, F_SETLK, &fl) == 0 &&
                                flock(ffd, LOCK_EX | LOCK_NB) == 0, en(errno));
    close(open(holds, O_CREAT | O_WRONLY, 0644));
    hl_check("host-probed", hl_wait_for(checked, 120), "host never probed");
    /* Released by close, as POSIX and flock say. */
    close(pfd);
    close(ffd);
    printf("HOSTLOCKS-SUMMARY %s\n", hl_fail ? "fail" : "pass");
    return hl_fail;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc < 2)
        usage();
    if (!strcmp(argv[1], "--expect")) {
        size_t len;
        if (argc != 3)
            usage();
        unsigned char *b = expect_artifact(argv[2], &len);
        if (!b)
            usage();
        return fwrite(b, 1, len, stdout) == len ? 0 : 1;
    }
    if (!strcmp(argv[1], "--hostlocks") && argc == 3)
        return host_locks(argv[2]);
    if (!strcmp(argv[1], "--list")) {
        for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++)
            printf("%s\n", checks[i].name);
        return 0;
    }
    MNT = argv[1];
    static char wbuf[PATH_MAX];
    snprintf(wbuf, sizeof wbuf, "%s/fsops", MNT);
    W = wbuf;
    umask(0);
    reason = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (reason == MAP_FAILED)
        return 2;
    if (mkdir(W, 0755) < 0 || mkdir(P("keep"), 0755) < 0) {
        printf("CHECK setup FAIL mkdir %s: %s\n", W, en(errno));
        printf("FSOPS-SUMMARY pass=0 fail=1\n");
        return 1;
    }
    int pass = 0, failed = 0;
    double t0 = now();
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
        int want = argc == 2;
        for (int a = 2; a < argc; a++)
            want |= !strcmp(argv[a], checks[i].name);
        if (!want)
            continue;
        if (run_check(&checks[i], 60))
            failed++;
        else
            pass++;
    }
    sync();
    printf("FSOPS-SUMMARY pass=%d fail=%d time=%.1fs\n", pass, failed, now() - t0);
    return failed ? 1 : 0;
}
