/* Translates ferryfsd's parsed options into the backend's and the FUSE session's configurations. */
#include "daemon/options_config.h"

#include <string.h>

#include "daemon/seccomp.h"

void options_to_passthrough(const struct ferry_options *o, struct passthrough_opts *pt)
{
	memset(pt, 0, sizeof(*pt));
	pt->shared_dir = o->shared_dir;
	pt->file_handles = o->inode_file_handles;
	pt->cache = o->cache;
	pt->timeout = o->timeout;
	pt->xattr = o->xattr;
	pt->allow_direct_io = o->allow_direct_io;
	pt->writeback = o->writeback;
	pt->readonly = o->readonly;
	pt->announce_submounts = o->announce_submounts;
	pt->preserve_noatime = o->preserve_noatime;
	pt->uid_map = o->uid_map;
	pt->gid_map = o->gid_map;
	pt->xattrmap = o->xattrmap;
}

void options_to_session(const struct ferry_options *o, struct fuse_server_opts *se)
{
	memset(se, 0, sizeof(*se));
	se->max_write = FERRY_MAX_WRITE;
	se->writeback = o->writeback;
	se->xattr = o->xattr;
	se->posix_acl = o->posix_acl;
	se->security_label = o->security_label;
	se->readdirplus = o->readdirplus;
	se->posix_lock = o->posix_lock;
	se->flock = o->flock;
	se->killpriv_v2 = o->killpriv_v2;
	se->announce_submounts = o->announce_submounts;
	se->allow_mmap = o->allow_mmap;
	se->readonly = o->readonly;
}

enum seccomp_mode options_seccomp_mode(const struct ferry_options *o)
{
	/* Sanitizer runtimes make calls of their own, so their default differs. */
	return o->seccomp_set ? o->seccomp : seccomp_default();
}
