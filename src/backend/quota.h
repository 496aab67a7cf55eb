/* The share's quota (--quota-bytes, --quota-inodes): the daemon's own count of the tree's allocated blocks and inodes, and the checks that keep a change within the limits. */
#ifndef FERRY_QUOTA_H
#define FERRY_QUOTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* 0 in a field: no limit on that quantity. */
struct quota_limits {
	uint64_t bytes;
	uint64_t inodes;
};

struct quota_usage {
	uint64_t limit_bytes, limit_inodes;
	uint64_t used_bytes, used_inodes;
	uint64_t scans;                 /* walks of the tree, the first included */
	uint64_t refused;               /* changes refused with EDQUOT */
};

struct quota;

/* What a new name holds room for: a directory may grow by a block for it,
 * so it is refused once no byte is left. A new directory, or a symlink
 * whose target does not fit in its inode, takes a block of its own. */
#define QUOTA_NAME_BYTES 1
#define QUOTA_BLOCK_BYTES 4096
#define QUOTA_INLINE_SYMLINK_MAX 59

/* Measures the tree below root_fd (borrowed: it must outlive the quota).
 * *out is NULL when neither limit is set. 0 or -errno. */
int quota_new(struct quota **out, const struct quota_limits *lim, int root_fd);
void quota_free(struct quota *q);

static inline bool quota_on(const struct quota *q)
{
	return q != NULL;
}

/* Walks the tree again and takes its figures as the usage (what the host
 * changed under the share is counted from then on). 0 or -errno. */
int quota_rescan(struct quota *q);
void quota_get_usage(struct quota *q, struct quota_usage *out);

/* Room held for a change in flight, so that two changes at once cannot
 * together pass a limit that each alone would not. */
struct quota_ticket {
	uint64_t bytes;
	uint64_t inodes;
};

/* Holds bytes and inodes for a change, or -EDQUOT if that would pass a
 * limit (the tree is measured again first if its figures are old: files
 * the host removed give their room back). Always pair with
 * quota_release, whether the change was made or not. */
int quota_reserve(struct quota *q, uint64_t bytes, uint64_t inodes, struct quota_ticket *t);
void quota_release(struct quota *q, struct quota_ticket *t);

/* A write of len bytes at off (or a fallocate, a copy into the file) to
 * the open file fd: holds the blocks it may newly allocate, or -EDQUOT.
 * The file's blocks before are remembered, so quota_settle counts what
 * the change really allocated. */
int quota_reserve_range(struct quota *q, int fd, uint64_t off, uint64_t len,
			struct quota_ticket *t);

/* After a change to the file fd (any fd of it, O_PATH included): its
 * allocated blocks now, the difference from what was counted for it
 * added to the usage. */
void quota_settle(struct quota *q, int fd);

/* A new inode (create, mknod, mkdir, symlink) whose fd is fd: counted with
 * its blocks. */
void quota_inode_made(struct quota *q, int fd);

/* Before a name is removed (unlink, rmdir, a rename over it): what its
 * removal will free, if it is the file's last name. */
struct quota_removal {
	bool last_name;
	uint64_t dev, ino;
	int64_t blocks;
};
void quota_removing(struct quota *q, int dir_fd, const char *name, struct quota_removal *r);
/* Before a rename of oldname onto newname: newname's file is removed,
 * unless it is oldname's file too (then the rename changes nothing). */
void quota_replacing(struct quota *q, int old_dir_fd, const char *oldname, int new_dir_fd,
		     const char *newname, struct quota_removal *r);
/* After the removal succeeded. */
void quota_removed(struct quota *q, const struct quota_removal *r);

/* STATFS: the totals and what is left, each limited quantity in place of
 * the host file system's, never more free than the host has. Fields in
 * units of frsize, as struct statvfs. */
struct quota_statfs {
	uint64_t blocks, bfree, bavail, files, ffree;
	uint64_t frsize;
};
void quota_apply_statfs(struct quota *q, struct quota_statfs *s);

/* Parses SIZE for --quota-bytes: a number with an optional K, M, G or T
 * (binary multiples; a trailing "iB" or "B" is accepted). 0 or -EINVAL
 * (-ERANGE past 2^63). */
int quota_parse_size(const char *s, uint64_t *out);

#endif
