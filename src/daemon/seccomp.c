/* The seccomp allow-list: the system calls ferryfsd makes while serving, nothing else. */
#include <errno.h>
#include <seccomp.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "daemon/seccomp.h"

/*
 * Found by reading the code, then checked against `strace -f -c` of the
 * e2e suite and its runs under --seccomp=log (docs/security.md). Grouped by who calls them; glibc's
 * wrappers pick the syscall (faccessat -> faccessat2, fstatvfs -> fstatfs).
 * Setup calls (mount, pivot_root, bind, listen, socket...) are missing on
 * purpose: the filter is loaded after setup.
 */
static const char *const allowed_syscalls[] = {
	/* transport: vhost-user socket, guest memory, queue workers */
	"accept4", "poll", "read", "write",
	/* workers wait on their queues' kick fds (vhost_user_worker.c) */
	"epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait",
	/* a stop signal ends accept() by shutting the listening socket */
	"shutdown",
	"recvmsg", "sendmsg", "mmap", "munmap", "mprotect", "madvise",
	"eventfd2", "close", "fstat", "newfstatat",
	/* threads and glibc internals (malloc, pthread, stdio, exit) */
	"brk", "clone", "clone3", "futex", "set_robust_list", "rseq",
	"rt_sigprocmask", "rt_sigaction", "rt_sigreturn",
	"sched_yield", "gettid", "getpid", "tgkill", "exit", "exit_group",
	"restart_syscall", "clock_gettime", "getrusage",
	"getrandom", "prlimit64", "mremap",
	/* glibc: a thread's first malloc sizes its arena by the CPU set;
	 * --queue-cpus: a queue thread pins itself when it starts */
	"sched_getaffinity", "sched_setaffinity",
	/* syslog: connected before the filter (LOG_NDELAY), sends after */
	"sendto",
	/* backend: credentials and per-thread umask (creds.c) */
	"setresuid", "setresgid", "setgroups", "capget", "capset", "unshare",
	"umask",
	/* backend: names and metadata */
	"openat", "statx", "fstatfs", "faccessat",
	"faccessat2", "readlinkat", "renameat2", "renameat", "linkat",
	"symlinkat", "mknodat", "mkdirat", "unlinkat", "fchmodat", "fchmod",
	"fchownat", "utimensat", "getdents64", "lseek", "fcntl", "dup",
	/* backend: POSIX locks are fcntl(F_OFD_*), flock locks flock(2) */
	"flock",
	/* backend: a SETLKW waiter re-checks on a POSIX timer's signal */
	"timer_create", "timer_settime", "timer_delete",
	/* backend: file handles (--inode-file-handles) */
	"name_to_handle_at", "open_by_handle_at",
	/* backend: data */
	"preadv2", "pwritev2", "pread64", "pwrite64",
	"ftruncate", "fallocate", "copy_file_range", "fsync", "fdatasync",
	"syncfs",
	/* backend: SYNCFS of a share with more host mounts than it tracks */
	"sync",
	/* backend: extended attributes, through /proc/self/fd paths */
	"getxattr", "setxattr", "listxattr", "removexattr",
};

/* Host FUSE mode (--mount) only: replies go to /dev/fuse as one writev,
 * and a stop unmounts the mount point (the daemon keeps CAP_SYS_ADMIN
 * there, since it has no sandbox). */
static const char *const host_fuse_syscalls[] = {
	"writev", "umount2",
};

/* Sanitizer runtimes (ASan+UBSan builds, make check) call these on their
 * own: an alternate signal stack per thread. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FERRY_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define FERRY_SANITIZED 1
#endif
#endif

static const char *const sanitizer_syscalls[] = {
#ifdef FERRY_SANITIZED
	"sigaltstack",
#endif
	NULL,
};

static int allow_all(scmp_filter_ctx ctx, const char *const *names, size_t count)
{
	for (size_t i = 0; i < count && names[i]; i++) {
		int nr = seccomp_syscall_resolve_name(names[i]);
		int ret;

		/* A name this architecture lacks (e.g. a newer call) is simply
		 * not needed here. */
		if (nr == __NR_SCMP_ERROR)
			continue;
		ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
		if (ret < 0)
			return ret;
	}
	return 0;
}

enum seccomp_mode seccomp_default(void)
{
#ifdef FERRY_SANITIZED
	/* A sanitizer's report reads /proc, symbolizes, forks a symbolizer:
	 * calls the list cannot foresee. */
	return SECCOMP_LOG;
#else
	return SECCOMP_KILL;
#endif
}

static uint32_t libseccomp_action(enum seccomp_mode action)
{
	switch (action) {
	case SECCOMP_LOG:
		return SCMP_ACT_LOG;
	case SECCOMP_TRAP:
		return SCMP_ACT_TRAP;
	case SECCOMP_KILL:
	case SECCOMP_NONE:
	default:
		/* The whole process: a queue worker dying alone would leave
		 * the guest waiting forever. */
		return SCMP_ACT_KILL_PROCESS;
	}
}

int seccomp_filter_build(enum seccomp_mode action, bool host_fuse, scmp_filter_ctx *out)
{
	scmp_filter_ctx ctx;
	int ret;

	if (action == SECCOMP_NONE)
		return -EINVAL;
	ctx = seccomp_init(libseccomp_action(action));
	if (!ctx)
		return -ENOMEM;
	ret = allow_all(ctx, allowed_syscalls,
			sizeof(allowed_syscalls) / sizeof(*allowed_syscalls));
	if (ret < 0)
		goto err;
	if (host_fuse) {
		ret = allow_all(ctx, host_fuse_syscalls,
				sizeof(host_fuse_syscalls) / sizeof(*host_fuse_syscalls));
		if (ret < 0)
			goto err;
	}
	ret = allow_all(ctx, sanitizer_syscalls,
			sizeof(sanitizer_syscalls) / sizeof(*sanitizer_syscalls));
	if (ret < 0)
		goto err;
	/* Live migration: the device state hook talks to the transport's
	 * relay over an unnamed AF_UNIX pair (vhost_user_migration.c), which
	 * reaches nothing outside the process. No other family. */
	ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socketpair), 1,
			       SCMP_A0(SCMP_CMP_EQ, AF_UNIX, 0));
	if (ret < 0)
		goto err;
	/* Threads name themselves as they start (pthread_setname_np on
	 * itself is prctl(PR_SET_NAME)); no other prctl. */
	ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1,
			       SCMP_A0(SCMP_CMP_EQ, PR_SET_NAME, 0));
	if (ret < 0)
		goto err;
	/* glibc's syslog() reconnects after an error; failing that quietly
	 * beats dying for a log line. Nothing else makes sockets. */
	ret = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socket), 0);
	if (ret < 0)
		goto err;
	ret = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(connect), 0);
	if (ret < 0)
		goto err;
	/* Every thread gets the filter, whenever it was started. */
	ret = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
	if (ret < 0)
		goto err;
	*out = ctx;
	return 0;

err:
	seccomp_release(ctx);
	return ret;
}

/* --seccomp=trap: name the call before dying, so the list can be fixed. */
static void on_sigsys(int sig, siginfo_t *info, void *uctx)
{
	static const char prefix[] = "ferryfsd: system call not allowed by seccomp: ";
	char num[16];
	int len = 0;
	unsigned nr = (unsigned)info->si_syscall;

	(void)uctx;
	do {
		num[sizeof(num) - 1 - len++] = (char)('0' + nr % 10);
		nr /= 10;
	} while (nr && len < (int)sizeof(num) - 1);
	/* Nothing but write() and _exit(): this is a signal handler. */
	if (write(STDERR_FILENO, prefix, sizeof(prefix) - 1) < 0 ||
	    write(STDERR_FILENO, num + sizeof(num) - len, len) < 0 ||
	    write(STDERR_FILENO, "\n", 1) < 0)
		_exit(128 + sig);
	_exit(128 + sig);
}

int seccomp_install(enum seccomp_mode action, bool host_fuse)
{
	scmp_filter_ctx ctx;
	int ret;

	if (action == SECCOMP_NONE)
		return 0;
	if (action == SECCOMP_TRAP) {
		struct sigaction sa = { .sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO };

		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGSYS, &sa, NULL) < 0)
			return -errno;
	}
	ret = seccomp_filter_build(action, host_fuse, &ctx);
	if (ret < 0)
		return ret;
	ret = seccomp_load(ctx);
	seccomp_release(ctx);
	return ret;
}
