/* The operations a FUSE file system backend implements, in decoded form. */
#ifndef FERRY_FUSE_OPS_H
#define FERRY_FUSE_OPS_H

#include <linux/fuse.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "common/ferry_req.h"

/*
 * Protocol 7.39 to 7.41 as far as ferryfs serves it, for uapi headers that
 * stop before (Debian 12's is 7.38): FUSE_STATX (7.39) and
 * FUSE_ALLOW_IDMAP (7.41). The layouts are the protocol's, fixed on the
 * wire; the assertions below hold them to it.
 */
#if FUSE_KERNEL_MINOR_VERSION < 39
#define FUSE_STATX 52

struct fuse_sx_time {
	int64_t tv_sec;
	uint32_t tv_nsec;
	int32_t __reserved;
};

/* struct statx's fields, in its order. */
struct fuse_statx {
	uint32_t mask;
	uint32_t blksize;
	uint64_t attributes;
	uint32_t nlink;
	uint32_t uid;
	uint32_t gid;
	uint16_t mode;
	uint16_t __spare0[1];
	uint64_t ino;
	uint64_t size;
	uint64_t blocks;
	uint64_t attributes_mask;
	struct fuse_sx_time atime;
	struct fuse_sx_time btime;
	struct fuse_sx_time ctime;
	struct fuse_sx_time mtime;
	uint32_t rdev_major;
	uint32_t rdev_minor;
	uint32_t dev_major;
	uint32_t dev_minor;
	uint64_t __spare2[14];
};

struct fuse_statx_in {
	uint32_t getattr_flags;   /* FUSE_GETATTR_FH: fh names an open file */
	uint32_t reserved;
	uint64_t fh;
	uint32_t sx_flags;        /* statx()'s AT_STATX_* sync flags */
	uint32_t sx_mask;         /* the STATX_* fields wanted */
};

struct fuse_statx_out {
	uint64_t attr_valid;
	uint32_t attr_valid_nsec;
	uint32_t flags;
	uint64_t spare[2];
	struct fuse_statx stat;
};
#endif
_Static_assert(sizeof(struct fuse_statx) == 256, "fuse_statx is 256 bytes on the wire");
_Static_assert(sizeof(struct fuse_statx_in) == 24, "fuse_statx_in is 24 bytes on the wire");
_Static_assert(sizeof(struct fuse_statx_out) == 288, "fuse_statx_out is 288 bytes on the wire");

#if FUSE_KERNEL_MINOR_VERSION < 41
/* The guest may make idmapped mounts of the share (it needs
 * default_permissions, which virtio-fs and ferryfsd's own mounts have). */
#define FUSE_ALLOW_IDMAP (1ULL << 40)
/* What uid and gid say in a request once FUSE_ALLOW_IDMAP was agreed and
 * the request creates nothing: the guest's kernel does not say who asks. */
#define FUSE_INVALID_UIDGID ((uint32_t)-1)
#endif

/*
 * Who sent the request. Strings handed to an op (names, link targets, xattr
 * names) are NUL-terminated copies that the protocol already checked:
 * names are non-empty, hold no '/', fit NAME_MAX, and are not "." or ".."
 * except where FUSE allows (LOOKUP).
 */
struct fuse_request_ctx {
	uint64_t unique;
	uint32_t uid;
	uint32_t gid;
	uint32_t pid;
	/* Set by the protocol for a request it can defer: only then may an op
	 * call fuse_deferred_begin() (a backend called directly, as unit tests
	 * do, gets -ENOLCK there and does the work at once). */
	bool can_defer;
	/* Requests waiting behind this one on its queue, as the transport saw
	 * them (0 when it does not say): work a slow op done inline would hold
	 * up. */
	unsigned queued_behind;
	/* The new inode's security label, for CREATE, MKNOD, MKDIR, SYMLINK
	 * and TMPFILE once FUSE_SECURITY_CTX was agreed: an xattr name such
	 * as "security.selinux" and its value. NULL name when none was sent. */
	const char *secctx_name;
	const void *secctx_value;
	size_t secctx_size;
	/* FUSE_CREATE_SUPP_GROUP: a supplementary group of the caller's (the
	 * parent directory's group) that the creating op should run with, so
	 * that the host keeps a new file's set-group-ID bit as the guest's
	 * kernel would. Guest id; has_supp_gid false when none was sent. */
	uint32_t supp_gid;
	bool has_supp_gid;
};

/* What INIT settled, for the backend to adapt to (e.g. whether the client
 * lets us kill suid bits ourselves). */
struct fuse_conn_params {
	uint32_t proto_minor;
	uint64_t flags;              /* FUSE_* init flags both sides agreed on */
	uint32_t max_write;
};

/* Directory listing buffer; entries are encoded by the protocol layer. */
struct fuse_dirbuf {
	char *buf;
	size_t size;
	size_t len;
};

/* Appends one READDIR entry; -ENOSPC when it does not fit (nothing written). */
int fuse_dirbuf_add(struct fuse_dirbuf *db, const char *name, size_t namelen,
		    uint64_t ino, uint32_t type, uint64_t next_off);
/* Whether a READDIRPLUS entry with this name length still fits: the backend
 * asks before it takes a lookup reference for the entry. */
bool fuse_dirbuf_fits_plus(const struct fuse_dirbuf *db, size_t namelen);
/* Appends one READDIRPLUS entry; -ENOSPC when it does not fit. An entry
 * with nodeid 0 tells the client to skip caching it (no lookup taken). */
int fuse_dirbuf_add_plus(struct fuse_dirbuf *db, const char *name,
			 size_t namelen, const struct fuse_entry_out *entry,
			 uint32_t type, uint64_t next_off);

/*
 * Deferred requests (protocol/fuse_deferred.c). An op that would wait (a
 * SETLKW, a slow FSYNC, a cold READ with requests behind it) calls
 * fuse_deferred_begin(), returns FERRY_DEFERRED at once so its queue goes
 * on, and later calls fuse_deferred_finish() exactly once, from any
 * thread. INTERRUPT of the request, a stopping queue or DESTROY call
 * cancel(arg) to make it finish soon (with -EINTR); cancel runs under the
 * protocol's lock, so it must neither block nor call fuse_deferred_finish()
 * itself. arg stays in use until fuse_deferred_finish() returns.
 */
struct fuse_deferred;
typedef void (*fuse_deferred_cancel_fn)(void *arg);
/* -ENOLCK when the transport cannot defer this request or too many
 * requests already wait. */
int fuse_deferred_begin(const struct fuse_request_ctx *ctx, fuse_deferred_cancel_fn cancel,
			void *arg, struct fuse_deferred **out);
/* rc: 0 or -errno; the reply is the bare out-header. */
void fuse_deferred_finish(struct fuse_deferred *d, int rc);
/* A deferred READ: rc 0 with len bytes of data, or -errno. data is
 * malloc'd (or NULL) and taken over in either case. */
void fuse_deferred_finish_data(struct fuse_deferred *d, int rc, void *data, size_t len);

/*
 * Every op returns 0 (or a byte count where noted) on success and -errno on
 * failure; the protocol turns that into the reply. A NULL op answers ENOSYS.
 * "fs" is the backend's own state, given to fuse_server_new().
 */
struct fs_ops {
	/* May withdraw FUSE_ALLOW_IDMAP from conn->flags (and nothing else):
	 * a backend that must know who sends every request. */
	int (*init)(void *fs, struct fuse_conn_params *conn);
	void (*destroy)(void *fs);

	int (*lookup)(void *fs, const struct fuse_request_ctx *ctx, uint64_t parent,
		      const char *name, struct fuse_entry_out *out);
	/* No reply: a count the guest got wrong must not free a live inode. */
	void (*forget)(void *fs, uint64_t nodeid, uint64_t nlookup);
	int (*getattr)(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		       const struct fuse_getattr_in *in, struct fuse_attr_out *out);
	/* FUSE_STATX: GETATTR's attributes and what the host adds (birth
	 * time), only the fields in->sx_mask asks for; out comes zeroed. */
	int (*statx)(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		     const struct fuse_statx_in *in, struct fuse_statx_out *out);
	int (*setattr)(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		       const struct fuse_setattr_in *in, struct fuse_attr_out *out);
	/* Returns the target length written into buf (not NUL-terminated). */
	ssize_t (*readlink)(void *fs, const struct fuse_request_ctx *ctx,
			    uint64_t nodeid, char *buf, size_t size);
	int (*symlink)(void *fs, const struct fuse_request_ctx *ctx, uint64_t parent,
		       const char *name, const char *target,
		       struct fuse_entry_out *out);
	int (*mknod)(void *fs, const struct fuse_request_ctx *ctx, uint64_t parent,
		     const char *name, const struct fuse_mknod_in *in,
		     struct fuse_entry_out *out);
	int (*mkdir)(void *fs, const struct fuse_request_ctx *ctx, uint64_t parent,
		     const char *name, const struct fuse_mkdir_in *in,
		     struct fuse_entry_out *out);
	int (*unlink)(void *fs, const struct fuse_request_ctx *ctx, uint64_t parent,
		      const char *name);
	int (*rmdir)(void *fs, const struct fuse_request_ctx *ctx, uint64_t parent,
		     const char *name);
	/* flags: 0 or RENAME_NOREPLACE / RENAME_EXCHANGE / RENAME_WHITEOUT */
	int (*rename)(void *fs, const struct fuse_request_ctx *ctx, uint64_t parent,
		      const char *name, uint64_t newparent, const char *newname,
		      uint32_t flags);
	int (*link)(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		    uint64_t newparent, const char *newname,
		    struct fuse_entry_out *out);
	int (*open)(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		    const struct fuse_open_in *in, struct fuse_open_out *out);
	/* Reads straight into dst (guest memory); returns bytes read. */
	ssize_t (*read)(void *fs, const struct fuse_request_ctx *ctx,
			uint64_t nodeid, const struct fuse_read_in *in,
			const struct iovec *dst, unsigned dst_cnt);
	/* Writes straight from src (guest memory); returns bytes written. */
	ssize_t (*write)(void *fs, const struct fuse_request_ctx *ctx,
			 uint64_t nodeid, const struct fuse_write_in *in,
			 const struct iovec *src, unsigned src_cnt);
	int (*statfs)(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		      struct fuse_kstatfs *out);
	int (*release)(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		       const struct fuse_release_in *in);
	int (*fsync)(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		     const struct fuse_fsync_in *in);
	int (*flush)(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		     const struct fuse_flush_in *in);
	int (*opendir)(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		       const struct fuse_open_in *in, struct fuse_open_out *out);
	/* Fills db from in->offset on; an empty db means end of directory. */
	int (*readdir)(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		       const struct fuse_read_in *in, bool plus,
		       struct fuse_dirbuf *db);
	int (*releasedir)(void *fs, const struct fuse_request_ctx *ctx,
			  uint64_t nodeid, const struct fuse_release_in *in);
	int (*fsyncdir)(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
			const struct fuse_fsync_in *in);
	int (*setxattr)(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
			const char *name, const void *value, size_t size,
			uint32_t flags, uint32_t setxattr_flags);
	/* size 0 asks for the needed size; returns the value length. */
	ssize_t (*getxattr)(void *fs, const struct fuse_request_ctx *ctx,
			    uint64_t nodeid, const char *name, void *value,
			    size_t size);
	ssize_t (*listxattr)(void *fs, const struct fuse_request_ctx *ctx,
			     uint64_t nodeid, char *list, size_t size);
	int (*removexattr)(void *fs, const struct fuse_request_ctx *ctx,
			   uint64_t nodeid, const char *name);
	int (*access)(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		      uint32_t mask);
	int (*create)(void *fs, const struct fuse_request_ctx *ctx, uint64_t parent,
		      const char *name, const struct fuse_create_in *in,
		      struct fuse_entry_out *entry, struct fuse_open_out *open);
	int (*fallocate)(void *fs, const struct fuse_request_ctx *ctx,
			 uint64_t nodeid, const struct fuse_fallocate_in *in);
	int (*lseek)(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		     const struct fuse_lseek_in *in, struct fuse_lseek_out *out);
	/* Returns bytes copied. */
	ssize_t (*copy_file_range)(void *fs, const struct fuse_request_ctx *ctx,
				   uint64_t nodeid,
				   const struct fuse_copy_file_range_in *in);
	int (*syncfs)(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid);
	int (*tmpfile)(void *fs, const struct fuse_request_ctx *ctx, uint64_t parent,
		       const struct fuse_create_in *in,
		       struct fuse_entry_out *entry, struct fuse_open_out *open);
	int (*getlk)(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		     const struct fuse_lk_in *in, struct fuse_lk_out *out);
	/* sleep: SETLKW, which may return FERRY_DEFERRED. flock-style
	 * requests carry FUSE_LK_FLOCK in in->lk_flags. */
	int (*setlk)(void *fs, const struct fuse_request_ctx *ctx, uint64_t nodeid,
		     const struct fuse_lk_in *in, bool sleep);
};

/*
 * Every member of struct fs_ops, for a backend that implements them all
 * to fill its table from (the passthrough's is { FS_OPS(...) }, each
 * member its pt_<member>). A member missing here fails the assertion.
 */
#define FS_OPS(X) \
	X(init) X(destroy) X(lookup) X(forget) X(getattr) X(statx) X(setattr) X(readlink) \
	X(symlink) X(mknod) X(mkdir) X(unlink) X(rmdir) X(rename) X(link) X(open) \
	X(read) X(write) X(statfs) X(release) X(fsync) X(flush) X(opendir) \
	X(readdir) X(releasedir) X(fsyncdir) X(setxattr) X(getxattr) X(listxattr) \
	X(removexattr) X(access) X(create) X(fallocate) X(lseek) X(copy_file_range) \
	X(syncfs) X(tmpfile) X(getlk) X(setlk)

#define FS_OPS_ONE_(op) + 1
_Static_assert(sizeof(struct fs_ops) == (0 FS_OPS(FS_OPS_ONE_)) * sizeof(void (*)(void)),
	       "FS_OPS must name every member of struct fs_ops");
#undef FS_OPS_ONE_

#endif
