/* Confines ferryfsd to the shared directory: new namespaces with pivot_root, or chroot. */
#ifndef FERRY_SANDBOX_H
#define FERRY_SANDBOX_H

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

#endif
