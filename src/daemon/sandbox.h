/* Confines ferryfsd to the shared directory: new namespaces with pivot_root, or chroot. */
#ifndef FERRY_SANDBOX_H
#define FERRY_SANDBOX_H

#include <stdbool.h>

#include "backend/idmap.h"
#include "daemon/options.h"

/*
 * Makes shared_dir the process's "/" (namespace, chroot) or leaves the view
 * alone (none). *proc_self_fd gets /proc/self/fd opened while /proc was
 * still visible (-1 with none: the backend opens it) and *root the path of
 * the share from now on. With SANDBOX_NAMESPACE the process forks into the
 * new pid namespace: only the child returns; the parent forwards SIGTERM
 * and SIGINT to it and exits with its status.
 *
 * Without root, namespace first makes a user namespace in which the daemon is
 * root: one id (the user's uid and gid to 0, the backend then never switches
 * ids, see creds_use_single_id) or, when uid_map/gid_map hold --uid-map/--gid-map
 * ranges, those ranges written by newuidmap/newgidmap (0 inside may be the
 * user or a subordinate id: sandbox_ranges_check); the maps are then
 * rewritten as identities, since the namespace already translates. chroot
 * needs root. As root the maps are left alone.
 */
int sandbox_enter(enum sandbox_mode mode, const char *shared_dir,
		  struct idmap *uid_map, struct idmap *gid_map,
		  int *proc_self_fd, const char **root);

#endif
