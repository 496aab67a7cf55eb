/* Confines ferryfsd to the shared directory: namespaces or chroot, capabilities, seccomp. */
#ifndef FERRY_SANDBOX_H
#define FERRY_SANDBOX_H

#include <seccomp.h>
#include <stdbool.h>

#include "daemon/options.h"

/*
 * Makes shared_dir the process's "/" (namespace, chroot) or leaves the view
 * alone (none). *proc_self_fd gets /proc/self/fd opened while /proc was
 * still visible (-1 with none: the backend opens it) and *root the path of
 * the share from now on. With SANDBOX_NAMESPACE the process forks into the
 * new pid namespace: only the child returns; the parent forwards SIGTERM
 * and SIGINT to it and exits with its status. Needs root but for none.
 */
int sandbox_enter(enum sandbox_mode mode, const char *shared_dir,
		  int *proc_self_fd, const char **root);

/*
 * Keeps only the capabilities the file operations need (and
 * CAP_DAC_READ_SEARCH when file handles are used), changed by the
 * --modcaps list. A no-op when the daemon is not root.
 */
int caps_limit(const char *modcaps, bool file_handles);

/*
 * Builds the allow-list filter for action (not SECCOMP_NONE): every system
 * call the transport, protocol and backend make; any other gets action.
 * host_fuse adds what host FUSE mode (--mount) needs besides. Tests load
 * the same filter to check it.
 */
int seccomp_filter_build(enum seccomp_mode action, bool host_fuse, scmp_filter_ctx *out);
/* kill, but log in sanitizer builds (their runtimes make calls of their own). */
enum seccomp_mode seccomp_default(void);
/* Builds and loads it on every thread of the process. */
int seccomp_install(enum seccomp_mode action, bool host_fuse);

#endif
