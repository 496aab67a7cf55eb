/* The device-state stream a migration carries: its wire format, encoder and validating decoder. */
#ifndef FERRY_MIGRATION_STREAM_H
#define FERRY_MIGRATION_STREAM_H

/*
 * Plain structs in, plain structs out: this codec knows nothing of the
 * backend's tables, so the stream can be checked (tests, fuzzer) without a
 * daemon, and a destination validates the whole stream before it touches
 * a single host file.
 *
 * Wire format, version 1 (docs/migration.md, "State stream"). Every
 * integer is little-endian and fixed-width; there is no padding.
 *
 *   header, 24 bytes:
 *     u8[8] magic "FERRYMIG"
 *     u32   version        1
 *     u32   flags          0 (any bit set is refused)
 *     u64   total_length   bytes of the whole stream, header and end record
 *                          included; a stream of any other length is refused
 *   records, each:
 *     u16   type
 *     u16   record flags   bit 0 MIG_REC_OPTIONAL; other bits refused
 *     u32   body length    the body must fit before the end record
 *     u8[]  body
 *
 * Records come in this order, each kind after the ones before it:
 *   SESSION  (exactly one)   OPTIONS (exactly one)   COUNTERS (exactly one)
 *   INODE*   (the root first, then every parent before its children)
 *   HANDLE*  LOCK*           END (exactly one, the last bytes of the stream)
 * An unknown type is refused unless the record is flagged optional; an
 * optional unknown record is skipped (a later version may add hints a
 * version-1 destination can do without). Known records are never
 * optional and their bodies have exactly the length given below.
 *
 *   SESSION  (type 1, 40 bytes): u32 initialized (0 or 1; 0: no INIT yet,
 *     every other field 0), u32 major (7), u32 minor, u32 max_write,
 *     u64 flags (flags | flags2 << 32 as agreed), u32 max_readahead,
 *     u32 time_gran, u16 max_pages, u16 max_background,
 *     u16 congestion_threshold, u16 map_alignment
 *   OPTIONS  (type 2, 16 bytes): u32 flags (MIG_OPT_*), u8 cache mode,
 *     u8 file-handle mode, u8 migration mode, u8 0, u64 config digest
 *   COUNTERS (type 3, 16 + 8 * 2^shard_bits bytes): u64 next_fh,
 *     u32 shard_bits (0..8), u32 0, u64 next_seq[2^shard_bits]
 *   INODE    (type 4): u64 nodeid, u64 nlookup, u64 generation,
 *     u32 type (S_IFMT bits), u32 flags (MIG_INODE_*), then
 *     if MIG_INODE_PATH:   u64 parent, u16 name_len, u8 name[name_len]
 *     if MIG_INODE_FILE_HANDLE: i32 handle_type, u64 mount_id, u16 size,
 *                          u8 bytes[size]
 *   HANDLE   (type 5, 24 bytes): u64 fh, u64 nodeid, u32 open flags,
 *     u32 kind (MIG_OPEN_REGULAR or MIG_OPEN_DIR)
 *   LOCK     (type 6, 48 bytes): u64 nodeid, u64 owner (POSIX) or fh
 *     (flock), u64 start, u64 end, u32 pid, u8 kind (MIG_LOCK_*),
 *     u8 type (MIG_LOCK_READ/WRITE), u16 0, u64 0
 *   END      (type 0xffff, 4 bytes): u32 CRC32C (Castagnoli, reflected,
 *     init and final xor 0xffffffff, as iSCSI and ext4) of every byte of
 *     the stream before this field.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MIG_MAGIC "FERRYMIG"
#define MIG_VERSION 1u
#define MIG_HEADER_SIZE 24u
#define MIG_RECORD_HEADER_SIZE 8u
#define MIG_END_SIZE (MIG_RECORD_HEADER_SIZE + 4u)

enum mig_record_type {
	MIG_REC_SESSION = 1,
	MIG_REC_OPTIONS = 2,
	MIG_REC_COUNTERS = 3,
	MIG_REC_INODE = 4,
	MIG_REC_OPEN_FILE = 5,
	MIG_REC_LOCK = 6,
	MIG_REC_END = 0xffff,
};
#define MIG_REC_OPTIONAL 0x1u

#define MIG_ROOT_NODEID 1u
#define MIG_NAME_MAX 255u
#define MIG_FILE_HANDLE_MAX 128u       /* MAX_HANDLE_SZ */
#define MIG_SHARD_BITS_MAX 8u
#define MIG_FUSE_MAJOR 7u

/* The negotiated FUSE session: what INIT settled, so that the destination
 * answers exactly as the source did although no INIT comes again. */
struct mig_session {
	bool initialized;
	uint32_t major;
	uint32_t minor;
	uint32_t max_write;
	uint64_t flags;              /* FUSE_* agreed, flags2 in the high half */
	uint32_t max_readahead;
	uint32_t time_gran;
	uint16_t max_pages;
	uint16_t max_background;
	uint16_t congestion_threshold;
	uint16_t map_alignment;
};

/* Options that change what the guest was told or how files are named:
 * source and destination must agree on every one (mig_options_compare). */
#define MIG_OPT_WRITEBACK          (1u << 0)
#define MIG_OPT_POSIX_ACL          (1u << 1)
#define MIG_OPT_XATTR              (1u << 2)
#define MIG_OPT_ANNOUNCE_SUBMOUNTS (1u << 3)
#define MIG_OPT_KILLPRIV_V2        (1u << 4)
#define MIG_OPT_READDIRPLUS        (1u << 5)
#define MIG_OPT_SECURITY_LABEL     (1u << 6)
#define MIG_OPT_FLOCK              (1u << 7)
#define MIG_OPT_POSIX_LOCK         (1u << 8)
#define MIG_OPT_CACHE_SYMLINKS     (1u << 9)
#define MIG_OPT_ALLOW_MMAP         (1u << 10)
#define MIG_OPT_READONLY           (1u << 11)
#define MIG_OPT_ALLOW_DIRECT_IO    (1u << 12)
#define MIG_OPT_PRESERVE_NOATIME   (1u << 13)
#define MIG_OPT_ALL                ((1u << 14) - 1)

enum mig_cache_mode { MIG_CACHE_AUTO, MIG_CACHE_ALWAYS, MIG_CACHE_NEVER,
		      MIG_CACHE_METADATA, MIG_CACHE_COUNT };
enum mig_file_handles { MIG_FH_NEVER, MIG_FH_PREFER, MIG_FH_MANDATORY,
			MIG_FH_COUNT };
enum mig_mode { MIG_MODE_FIND_PATHS, MIG_MODE_FILE_HANDLES, MIG_MODE_COUNT };

struct mig_options {
	uint32_t flags;              /* MIG_OPT_* */
	uint8_t cache_mode;          /* enum mig_cache_mode */
	uint8_t file_handles;        /* enum mig_file_handles */
	uint8_t migration_mode;      /* enum mig_mode */
	/* A digest of configuration too big to carry (uid/gid maps, xattr
	 * map), computed the same way on both sides; 0: none. */
	uint64_t config_digest;
};

/* The id counters, so that the destination never hands out an id the
 * guest still holds: ferryfs's nodeids are (seq << shard_bits) | shard. */
#define MIG_SHARDS_MAX (1u << MIG_SHARD_BITS_MAX)
struct mig_counters {
	uint64_t next_fh;
	uint32_t shard_bits;
	uint64_t next_seq[MIG_SHARDS_MAX];
};

struct mig_file_handle {
	int32_t handle_type;
	uint64_t mount_id;
	uint16_t size;
	unsigned char bytes[MIG_FILE_HANDLE_MAX];
};

/* Where an inode is. ROOT: the destination's own shared directory (nodeid 1,
 * first, a directory). PATH: name in parent. HANDLE: a file handle (with or
 * without a path). UNLINKED: the file is gone from the tree but still open
 * on the source: no path; reopened by its handle if it has one, else an
 * invalid placeholder the guest gets errors from. */
#define MIG_INODE_ROOT     (1u << 0)
#define MIG_INODE_PATH     (1u << 1)
#define MIG_INODE_FILE_HANDLE   (1u << 2)
#define MIG_INODE_UNLINKED (1u << 3)
#define MIG_INODE_ALL      ((1u << 4) - 1)

struct mig_inode {
	uint64_t nodeid;
	uint64_t nlookup;
	uint64_t generation;
	uint32_t type;               /* S_IFMT bits */
	uint32_t flags;              /* MIG_INODE_* */
	uint64_t parent;             /* MIG_INODE_PATH */
	const char *name;            /* MIG_INODE_PATH: NUL-terminated */
	size_t name_len;
	const struct mig_file_handle *file_handle;   /* MIG_INODE_FILE_HANDLE */
};

enum mig_open_file_kind { MIG_OPEN_REGULAR = 1, MIG_OPEN_DIR = 2 };

struct mig_open_file {
	uint64_t fh;
	uint64_t nodeid;
	uint32_t open_flags;         /* never O_CREAT, O_EXCL nor O_TRUNC */
	uint32_t kind;               /* enum mig_open_file_kind */
};

enum mig_lock_kind { MIG_LOCK_POSIX = 1, MIG_LOCK_FLOCK = 2 };
enum mig_lock_type { MIG_LOCK_READ = 1, MIG_LOCK_WRITE = 2 };

/* A lock the guest holds on the host. Carried so that a destination can
 * take it again, or a source can refuse the migration naming the file
 * (mig_state_path); a lock is never dropped silently. */
struct mig_lock {
	uint64_t nodeid;
	uint64_t owner;              /* POSIX: lock owner; flock: the fh */
	uint64_t start;
	uint64_t end;                /* inclusive; UINT64_MAX: to the end */
	uint32_t pid;
	uint8_t kind;                /* enum mig_lock_kind */
	uint8_t type;                /* enum mig_lock_type */
};

/* Caps on what a stream may make the decoder allocate: a hostile stream
 * could otherwise claim millions of inodes. The decoded state is a small
 * multiple of the stream's size (each record becomes a struct and its
 * index slots), so the default 256 MiB (room for 4 million inodes with
 * paths) bounds it near 1 GiB; a daemon sets the caps from its own inode
 * and fd limits. */
struct mig_limits {
	size_t max_stream_bytes;
	size_t max_inodes;
	size_t max_open_files;
	size_t max_locks;
};
#define MIG_DEFAULT_MAX_STREAM_BYTES ((size_t)256 << 20)
#define MIG_DEFAULT_MAX_INODES ((size_t)1 << 22)
#define MIG_DEFAULT_MAX_OPEN_FILES ((size_t)1 << 20)
#define MIG_DEFAULT_MAX_LOCKS ((size_t)1 << 20)
void mig_limits_default(struct mig_limits *lim);

struct mig_index;
struct mig_arena;

/* A decoded, fully validated stream; freed only with mig_state_free. */
struct mig_state {
	struct mig_session session;
	struct mig_options options;
	struct mig_counters counters;
	struct mig_inode *inodes;    /* inodes[0] is the root */
	size_t n_inodes;
	struct mig_open_file *open_files;
	size_t n_open_files;
	struct mig_lock *locks;
	size_t n_locks;
	/* private */
	size_t cap_inodes, cap_open_files, cap_locks;
	struct mig_arena *arena;     /* names and file handles */
	struct mig_index *by_nodeid;
	struct mig_index *by_fh;
	struct mig_index *by_path;   /* (parent, name) */
	struct mig_index *by_fhandle;/* (type, mount id, bytes) */
};
void mig_state_free(struct mig_state *st);
/* NULL when the stream has no such node. */
const struct mig_inode *mig_state_inode(const struct mig_state *st, uint64_t nodeid);
const struct mig_open_file *mig_state_handle(const struct mig_state *st, uint64_t fh);
/* The node's path from the root ("a/b/c", "" for the root; "<unlinked>" or
 * "<handle>" for a component with no name), for messages such as "the
 * guest holds a lock on a/b/c". -ENAMETOOLONG if it does not fit. */
int mig_state_path(const struct mig_state *st, uint64_t nodeid, char *buf, size_t size);

/* A growing output buffer. */
struct mig_buf {
	unsigned char *data;
	size_t len;
	size_t cap;
};
void mig_buf_free(struct mig_buf *b);

/*
 * Where the encoder takes the state from. Each next_* fills *out and
 * returns 1, returns 0 when there is no more, or -errno to abort. Strings
 * and handles it points to must stay valid until the next call. NULL
 * callbacks give no records of that kind. Inodes must come root first and
 * parents before children; the encoder checks each record on its own
 * (names, sizes, flags) but not the whole: decode the result for that.
 */
struct mig_source {
	const struct mig_session *session;
	const struct mig_options *options;
	const struct mig_counters *counters;
	int (*next_inode)(void *arg, struct mig_inode *out);
	int (*next_open_file)(void *arg, struct mig_open_file *out);
	int (*next_lock)(void *arg, struct mig_lock *out);
	void *arg;
};
/* Appends a whole stream to out (which may hold bytes already; on failure
 * out->len is back where it was). */
int mig_encode(const struct mig_source *src, struct mig_buf *out);
/* A whole state held in arrays, encoded in their order. */
struct mig_arrays {
	const struct mig_session *session;
	const struct mig_options *options;
	const struct mig_counters *counters;
	const struct mig_inode *inodes;
	size_t n_inodes;
	const struct mig_open_file *open_files;
	size_t n_open_files;
	const struct mig_lock *locks;
	size_t n_locks;
};
/* mig_encode with the items taken from a's arrays (tests, the fuzzer's
 * seeds). */
int mig_encode_arrays(const struct mig_arrays *a, struct mig_buf *out);
/* Encodes a decoded state again (tests, the fuzzer's round trip). */
int mig_encode_state(const struct mig_state *st, struct mig_buf *out);

/*
 * Decodes and validates a whole stream. Returns 0 with *out set, or -errno
 * with *out NULL, nothing allocated, and why in reason:
 *   -EPROTO      bad magic, an unknown version or header flag
 *   -EBADMSG     truncated, a length past the end, trailing bytes, a bad
 *                checksum, records out of order, missing or repeated
 *   -EINVAL      a field with a value that is not allowed (names, ids,
 *                parents, types, flags, unknown records not optional)
 *   -E2BIG       the stream or a count over the limits
 *   -ENOMEM
 * lim NULL: the defaults.
 */
int mig_decode(const void *buf, size_t len, const struct mig_limits *lim,
	       struct mig_state **out, char *reason, size_t reason_size);

/* Writes len bytes to fd in chunks, through short writes and EINTR. */
int mig_write_fd(int fd, const void *buf, size_t len);
/* Reads one stream from fd up to EOF (as QEMU's pipe gives it) into out,
 * growing as data arrives rather than by what the header claims; refuses
 * more than lim->max_stream_bytes. */
int mig_read_fd(int fd, const struct mig_limits *lim, struct mig_buf *out);

/* Source and destination must agree: -EINVAL naming the first difference. */
int mig_options_compare(const struct mig_options *src, const struct mig_options *dst,
			char *reason, size_t reason_size);

/* Writes why into reason (when reason_size is not 0) and returns err: the
 * daemon's loaders say why as the decoder does. */
int mig_refuse(char *reason, size_t reason_size, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

uint32_t mig_crc32c(uint32_t crc, const void *buf, size_t len);
/* Tests and the fuzzer: rewrites the end record's checksum of a stream of
 * len bytes (and its header's length), so that a damaged body reaches the
 * structural checks. -EBADMSG if len cannot hold a stream. */
int mig_fix_checksum(unsigned char *buf, size_t len);

#endif
