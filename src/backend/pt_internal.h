/* Inside the passthrough backend: struct passthrough and what its files share (ops, helpers). */
#ifndef FERRY_PT_INTERNAL_H
#define FERRY_PT_INTERNAL_H

/*
 * One concern a file: credentials, file handles with their mount fds and
 * small utilities apart, as in the Rust virtiofsd's src/passthrough/, and
 * the ops grouped by what they act on:
 *   passthrough.c     the ops table, INIT/DESTROY, setup and teardown
 *   pt_util.c         /proc/self/fd reopening, statx into FUSE attributes
 *   pt_caller.c       whose ids an op runs as (the model is in creds.h)
 *   pt_file_handles.c file handles for inodes, and the mount fds they need
 *   pt_entries.c      lookup, forget and the ops that make or remove names
 *   pt_attr.c         getattr, setattr, access, statfs
 *   pt_files.c        open, create and the ops on an open file (read, write, locks)
 *   pt_dirs.c         open directories and READDIR(PLUS)
 *   pt_xattrs.c       the xattr ops, and the label of a new inode
 *   pt_syncfs.c       SYNCFS, also of the host mounts below the share
 *   pt_areas.c        --add-dir: the added dirs' roots, NAME at the root, ".." kept inside
 *   pt_test_hooks.c   switches for tests, in the test build only (passthrough_test_hooks.h)
 *   pt_mig_save.c     live migration: the tables saved (pt_migration.h)
 *   pt_mig_load.c     live migration: a state resolved and installed
 *   pt_mig_util.c     what those two share
 * Only what more than one file uses is here; the rest stays static. Every
 * op is declared below its file's heading, for the ops table.
 */

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/added_dirs.h"
#include "backend/creds.h"
#include "backend/fd_budget.h"
#include "backend/open_files.h"
#include "backend/inode_table.h"
#include "backend/io_offload.h"
#include "backend/locks.h"
#include "backend/offload.h"
#include "backend/passthrough.h"
#include "migration/stream.h"

/* The ops of struct fs_ops: each member's pt_<member>, declared from the
 * member's own type, so an op added to fs_ops needs no line here. */
#define PT_DECLARE_OP(op) extern __typeof__(*((struct fs_ops *)0)->op) pt_##op;
FS_OPS(PT_DECLARE_OP)
#undef PT_DECLARE_OP

#define PROC_FD_NAME_MAX 16
#define PROC_FD_PATH_MAX 40
/* Mounts below the share that file handles can reach; beyond that the
 * inodes keep their fds (prefer) or fail (mandatory). */
#define MOUNT_FDS_MAX 64

struct passthrough {
	struct passthrough_opts opts;
	char *shared_dir;
	int proc_self_fd;
	struct fd_budget fds;
	struct inode_table *inodes;
	struct open_file_table *open_files;
	struct lock_table *locks;
	struct io_offload *io;      /* READ and FSYNC, inline or on offload */
	struct offload *offload;    /* slow syncs, cold reads, lock waits */
	pthread_mutex_t mounts_lock;
	struct { int mnt_id; int fd; } mounts[MOUNT_FDS_MAX];
	atomic_uint nmounts;
	/* Mounts found without usable file handles (a FUSE mount such as
	 * GlusterFS's, a file system without export support): -errno each,
	 * decided once on the first directory met there. */
	struct { int mnt_id; int err; } no_handles[MOUNT_FDS_MAX];
	atomic_uint nno_handles;
	uint64_t timeout_sec;
	uint32_t timeout_nsec;
	unsigned long root_fs_type; /* the share's statfs f_type; 0 unknown */
	bool switch_creds;      /* only root can take on the guest's ids */
	/* Settled by INIT. */
	bool writeback;
	bool dont_mask;         /* the guest left umask to us (POSIX ACLs) */
	bool submounts;         /* the guest makes host mounts its submounts */
	bool posix_acl;
	/* The guest's kernel strips a new file's set-group-ID bit itself when
	 * its caller is outside the directory's group (Linux 6.0+; FUSE 7.37
	 * came with 6.1), so the host must not strip it again without the
	 * caller's groups. Older guests leave that to the host. */
	bool guest_strips_sgid;
	/* The guest says when an access ACL drops sgid (FUSE_SETXATTR_EXT's
	 * FUSE_SETXATTR_ACL_KILL_SGID); older guests leave that to the host. */
	bool guest_kills_acl_sgid;
	/* The guest says when a write, truncate or O_TRUNC open must clear
	 * suid/sgid (FUSE_HANDLE_KILLPRIV_V2). */
	bool guest_kills_suidgid;
	/* FUSE_ALLOW_IDMAP agreed: requests that create nothing carry
	 * FUSE_INVALID_UIDGID for both ids; they run as the daemon. */
	bool callers_unnamed;
	/* The --read-only and --hide roots by identity, with the files of
	 * their subtrees that had other names (hard links) at start. */
	struct policy_set read_only_set;
	struct policy_set hidden_set;
	/* --add-dir: area k (1..n_areas) is the directory areas[k - 1], whose
	 * root inode is held for the daemon's life (so its fd stays open). */
	struct pt_area {
		struct inode *root;
		uint64_t host_ino;      /* its root's, for READDIR */
		bool read_only;
	} areas[ADDED_DIRS_MAX];
	unsigned n_areas;
	/* The guest's inode numbers, which carry the area; NULL without
	 * added dirs, when the host's numbers pass unchanged. */
	struct ino_remap *ino_remap;
	/* --quota-bytes/--quota-inodes; NULL without a limit. Each op that
	 * changes the usage asks it first (quota_reserve*) and tells it
	 * what changed after. */
	struct quota *quota;
};

/* ---- small helpers: inline, every op uses some of them ---------------- */

static inline int pt_errno_or(int ret)
{
	return ret < 0 ? -errno : 0;
}

/* The protocol already checked names; a second cheap look costs nothing
 * and keeps a protocol bug from becoming a path traversal. */
static inline int pt_check_name(const char *name)
{
	if (!name[0] || strchr(name, '/') || !strcmp(name, ".") ||
	    !strcmp(name, ".."))
		return -EINVAL;
	return 0;
}

/* Only regular files and directories are ever opened for I/O: opening a
 * FIFO blocks the thread, a device node reaches host hardware
 * (CVE-2020-35517). Everything else stays an O_PATH fd. */
static inline bool pt_openable_type(mode_t type)
{
	return type == S_IFREG || type == S_IFDIR;
}

/* The handle fh names on nodeid, with a ref for the caller to put, if it
 * is of the kind the op works on: a directory's (dir) or a file's. Inline:
 * READ and WRITE start here. */
static inline int pt_get_handle(struct passthrough *pt, uint64_t nodeid,
				uint64_t fh, bool dir, struct open_file **out)
{
	int ret = open_file_get(pt->open_files, fh, nodeid, out);

	if (ret == 0 && ((*out)->dir != NULL) != dir) {
		open_file_put(pt->open_files, *out);
		ret = dir ? -ENOTDIR : -EISDIR;
	}
	return ret;
}

static inline void pt_proc_fd_name(char buf[PROC_FD_NAME_MAX], int fd)
{
	snprintf(buf, PROC_FD_NAME_MAX, "%d", fd);
}

/* Path for the xattr calls, which have no *at() form: relative to the
 * working directory, which passthrough_new() made /proc/self/fd because a
 * sandbox leaves no absolute path to /proc. */
static inline void pt_proc_fd_path(char buf[PROC_FD_PATH_MAX], int fd)
{
	snprintf(buf, PROC_FD_PATH_MAX, "%d", fd);
}

/* An fd the guest's request made, counted against the budget: closing it
 * gives its unit back. */
static inline void pt_close_fd(struct passthrough *pt, int fd)
{
	close(fd);
	fd_budget_give_back(&pt->fds);
}

/* ---- per-path policy (pt_entries.c) ------------------------------------ */

/* EROFS for a change to an inode in a --read-only subtree. One bit of the
 * inode, decided when it was looked up: no cost on the data path. */
static inline int pt_refuse_change(const struct inode *inode)
{
	return inode->read_only ? -EROFS : 0;
}

/* Whether the file stx describes is hidden (--hide): a root, or a file of
 * a hidden subtree reached by another name. */
bool pt_hidden(const struct passthrough *pt, const struct statx *stx);

/* How an op uses a name in a directory. */
enum pt_name_use {
	PT_NAME_REMOVED,        /* unlinked, removed, or renamed away */
	PT_NAME_MADE,           /* created, linked, or renamed onto */
};
/* The policy's answer for name in dir: ENOENT for a hidden name that is
 * removed (it is absent), EACCES for one that would be made or replaced
 * (the guest cannot have that name); EROFS when dir lies in a read-only
 * subtree or name is a protected root; else 0. */
int pt_name_policy(struct passthrough *pt, const struct inode *dir, const char *name,
		   enum pt_name_use use);

/* ---- several directories under one share (pt_areas.c) ----------------- */

/* The guest's inode number of host_ino reached in area. */
static inline uint64_t pt_guest_ino(const struct passthrough *pt, uint32_t area,
				    uint64_t host_ino)
{
	return guest_ino(pt->ino_remap, pt->ino_remap != NULL, area, host_ino);
}

/* The area whose root NAME is, when dir is the share's root and name is an
 * added dir's NAME; else 0. */
uint32_t pt_area_named(const struct passthrough *pt, const struct inode *dir, const char *name);
/* Whether inode is an added dir's root (whose ".." is the share's root). */
static inline bool pt_is_area_root(const struct passthrough *pt, const struct inode *inode)
{
	return inode->key.area && pt->areas[inode->key.area - 1].root == inode;
}
/* -EXDEV when the two inodes lie in different directories of the share
 * (as between two file systems: the guest's mv then copies). */
static inline int pt_same_area(const struct inode *a, const struct inode *b)
{
	return a->key.area == b->key.area ? 0 : -EXDEV;
}
/* 0 when the directory fd is area's root or lies below it (walking ".."),
 * -EACCES when the walk reaches the host's root first: a directory the
 * host moved out of an added dir is not the guest's to reach. */
int pt_area_contains(struct passthrough *pt, uint32_t area, int fd);
/* Opens and holds the added dirs' roots (passthrough_new). */
int pt_areas_setup(struct passthrough *pt, int root_fd);
void pt_areas_free(struct passthrough *pt);

/* ---- pt_util.c -------------------------------------------------------- */

/* Turns an O_PATH fd into a usable one through its /proc/self/fd link. The
 * caller checked pt_openable_type() and took budget for the result. */
int pt_reopen(struct passthrough *pt, int fd, int flags);
/* pt_reopen() that takes the budget itself: the new fd and its unit are the
 * caller's (pt_close_fd gives both back); on failure nothing is held. */
int pt_reopen_counted(struct passthrough *pt, int fd, int flags);
int pt_stat_fd(int fd, struct statx *stx);
/* area: where the inode was reached (struct inode_key's). */
void pt_key_from_statx(const struct statx *stx, struct inode_key *key);
void pt_attr_from_statx(const struct passthrough *pt, uint32_t area, const struct statx *stx,
			struct fuse_attr *attr);
void pt_fill_entry(struct passthrough *pt, const struct inode *parent,
		   const struct inode *inode, const struct statx *stx,
		   struct fuse_entry_out *out);

/* ---- pt_caller.c: the credential model of creds.h, op by op ---------- */

int pt_check_caller(const struct passthrough *pt, const struct fuse_request_ctx *ctx);
int pt_as_caller(struct passthrough *pt, const struct fuse_request_ctx *ctx,
		 enum creds_role role);
void pt_as_daemon(struct passthrough *pt);
enum creds_role pt_host_judged_role(const struct fuse_request_ctx *ctx);
int pt_begin_create(struct passthrough *pt, const struct fuse_request_ctx *ctx,
		    uint32_t guest_umask);

/* ---- pt_file_handles.c ------------------------------------------------ */

/* The file handle an inode keeps for when it gives back its fd, or NULL in
 * *out to keep the fd (--inode-file-handles decides, per mount); stx is
 * fd's. */
int pt_handle_for_inode(struct passthrough *pt, int fd, const struct statx *stx,
			struct inode_handle_buf *hb, const struct inode_file_handle **out);
/* The same for a new inode at its lookup: with prefer none is taken yet
 * (the inode table takes it when the fd is about to go), but for a
 * directory on a mount not judged yet. */
int pt_handle_at_lookup(struct passthrough *pt, int fd, const struct statx *stx,
			struct inode_handle_buf *hb, const struct inode_file_handle **out);
/* Lets the inode table take an inode's handle when it needs one. */
void pt_start_lazy_handles(struct passthrough *pt);
/* At setup, on the share's root: whether file handles work there. */
int pt_check_file_handles(struct passthrough *pt, int root_fd);
/* 1 when fd's file system is FUSE, whose handles are the node ids one
 * FUSE server gave one mount (they go stale, and differ between two mounts
 * of one file system); 0 when not; -errno. */
int pt_fd_on_fuse(int fd);
void pt_close_mount_fds(struct passthrough *pt);

/* ---- pt_xattrs.c: the xattr ops, and a new inode's label ------------- */

int pt_apply_secctx(struct passthrough *pt, const struct fuse_request_ctx *ctx,
		    struct inode *inode);

/* ---- pt_entries.c: lookup, forget and the ops that change names ------ */

/* parent: the directory the file was made in, whose policy it takes. */
int pt_inode_from_fd(struct passthrough *pt, const struct inode *parent, int fd,
		     struct inode **inode, struct statx *stx);
int pt_lookup_entry(struct passthrough *pt, struct inode *dir,
		    const char *name, struct fuse_entry_out *out);

/* ---- pt_files.c: open, create and the ops on an open file ------------ */

uint32_t pt_fopen_flags(struct passthrough *pt, bool is_dir);
int pt_drop_mapped_capability(struct passthrough *pt, int fd);
int pt_open_for_guest(struct passthrough *pt, const struct fuse_request_ctx *ctx,
		      struct inode *inode, int flags, uint32_t open_flags);
int pt_open_reply(struct passthrough *pt, struct inode *inode, int fd, DIR *dir,
		  struct fuse_open_out *out);

/* ---- pt_attr.c: getattr, setattr, access, statfs --------------------- */


/* ---- pt_dirs.c: open directories and their listing ------------------- */


/* ---- pt_mig_util.c: what saving and loading the tables share -------- */

/* A loaded inode would need its policy flag found again, which a file
 * handle cannot tell; until the stream carries it, either side with a
 * policy refuses, so no guest ever loses its protection by migrating. */
#define POLICY_NOT_MIGRATED \
	"this daemon has a per-path policy (--read-only, --hide), which a live " \
	"migration does not carry: start both daemons without one to migrate"

/* An inode of an added dir would need its area found again (which of the
 * dirs, with what NAME and flag) and its guest number, which the stream
 * does not carry: either side with --add-dir refuses. */
#define AREAS_NOT_MIGRATED \
	"this daemon shares several directories (--add-dir), which a live " \
	"migration does not carry: start both daemons without --add-dir to migrate"

struct pt_key_slot {
	bool used;
	struct inode_key key;
	size_t value;
};
/* Host inodes (by key) to an index; fixed size: at most max keys. */
struct pt_key_set {
	struct pt_key_slot *slots;
	size_t cap;
};
int pt_key_set_init(struct pt_key_set *s, size_t max);
void pt_key_set_free(struct pt_key_set *s);
/* -EEXIST if key is in already. */
int pt_key_set_add(struct pt_key_set *s, const struct inode_key *key, size_t value);
bool pt_key_set_find(const struct pt_key_set *s, const struct inode_key *key, size_t *value);
/* fd's path relative to the share as the kernel names it ("" for the
 * root; an unlinked file's ends in " (deleted)"), for messages; -EXDEV when
 * the name is outside. No proof that the file is inside: pt_mig_in_share. */
int pt_mig_share_path(struct passthrough *pt, int fd, char *buf, size_t size);
/* 0 if fd's file is inside the share (its name, walked again below the
 * root, reaches it; for an unlinked file, its directory), -EXDEV if that
 * cannot be shown, another -errno when it could not be tried (no fds). */
int pt_mig_in_share(struct passthrough *pt, int fd);
/* The node's path for a message, or "node N" when it has none. */
void pt_mig_describe(struct passthrough *pt, uint64_t nodeid, char *buf, size_t size);
/* A mount fd for open_by_handle_at() of a handle on mount mnt_id. */
int pt_mig_mount_fd(struct passthrough *pt, int root_mount_fd, uint64_t mnt_id);
/* open_by_handle_at(O_PATH) of a stream's file handle: the fd or -errno. */
int pt_mig_open_handle(struct passthrough *pt, int root_mount_fd,
		       const struct mig_file_handle *fh);
/* Whether two statx results are of one host inode. */
bool pt_mig_same_inode(const struct statx *a, const struct statx *b);

/* ---- pt_syncfs.c ----------------------------------------------------- */


#endif
