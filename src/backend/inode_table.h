/* Inodes the guest knows, indexed by nodeid and by host identity. */
#ifndef FERRY_INODE_TABLE_H
#define FERRY_INODE_TABLE_H

#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "backend/fd_budget.h"

/* What makes a host inode unique: st_ino alone repeats across mounts. */
struct inode_key {
	uint64_t dev;
	uint64_t ino;
	uint32_t mnt_id;        /* a mount id is an int (name_to_handle_at's) */
	/* Which directory of the share the inode was reached in: 0 the
	 * shared dir, k the k-th --add-dir. One host file reached in two is
	 * two inodes, each with its area's policy and guest numbers. */
	uint32_t area;
};

/*
 * Two counts keep an inode alive, on purpose kept apart:
 *  - nlookup is the guest's count (entry replies minus FORGETs). The guest
 *    controls it, so it is trusted for nothing but deciding when the guest
 *    no longer names the inode.
 *  - refs counts requests using the inode right now. A FORGET that drops
 *    nlookup to 0 while a request holds a ref only marks it; the last put
 *    frees it. So a wrong FORGET cannot free memory in use.
 * Both are guarded by the lock of the inode's shard.
 */
/*
 * Where an inode's fd comes from. Without a file handle the O_PATH fd is
 * held for the inode's whole life. With one (--inode-file-handles) an idle
 * inode may close its fd once fds run short, and open_by_handle_at() opens
 * it again when a request takes the first reference, so a guest holding a
 * huge tree pins no fds. The handle is taken when the fd is about to go
 * (inode_table_take_handles), or at lookup when the caller already has one.
 * Either way a request holding a reference sees a valid fd; the fd only
 * changes under the shard lock while no request holds one.
 */
struct inode_file_handle {
	int mount_fd;           /* borrowed: any fd on the inode's mount */
	struct file_handle fh;  /* f_handle bytes follow in the allocation */
};

/* Room for any file handle, on the stack. */
struct inode_handle_buf {
	struct inode_file_handle h;
	unsigned char bytes[MAX_HANDLE_SZ];
};

/* The 8-byte fields first and the small ones packed at the end: 80 bytes,
 * a 96-byte malloc chunk where the old 96 took 112, and with a 12-byte
 * handle (tmpfs's, ext4's) behind it 112 where it took 128: a guest may
 * make the daemon hold hundreds of thousands of these. */
struct inode {
	uint64_t nodeid;
	struct inode_key key;
	struct inode_file_handle *file_handle;    /* NULL: none taken yet */
	uint64_t nlookup;
	uint64_t refs;
	struct inode *next_by_id;
	struct inode *next_by_key;
	int fd;                 /* O_PATH|O_NOFOLLOW: never readable nor writable;
				 * -1 while a handle inode is unused */
	uint16_t type;          /* S_IFMT bits (0170000 fits); never changes */
	uint8_t shard;          /* < INODE_SHARDS */
	/* A migration placeholder (--migration-on-error=guest-error): the
	 * file could not be found again; requests on it fail with EIO. */
	bool invalid : 1;
	/* Inside a --read-only subtree: every change is refused with EROFS.
	 * Set before the inode is published and never changed, so requests
	 * read it without a lock. */
	bool read_only : 1;
	/* A handle inode whose file is gone and whose number a new file took:
	 * out of the by-key chain, so the new file gets an inode of its own;
	 * its nodeid still answers (ESTALE) until the guest forgets it. Set
	 * under the shard lock on an inode no request holds (it is idle), and
	 * a request takes its reference under that lock, so writing this byte
	 * never races with a lock-free read of read_only. */
	bool key_retired : 1;
	/* No handle could be taken from its fd (a mount without usable
	 * handles): it keeps the fd for life, and nobody asks again. Set
	 * under the shard lock by the only request holding the inode. */
	bool handle_refused : 1;
};

struct inode_table;

/* Takes ownership of root_fd; the root gets nodeid FUSE_ROOT_ID. */
int inode_table_new(struct inode_table **out, struct fd_budget *fds,
		    int root_fd, const struct inode_key *root_key);
void inode_table_free(struct inode_table *t);

/* Fills out with the file handle of fd, an fd of the inode with key and
 * type (S_IFMT bits): 0, or -errno when there is none to keep. Called
 * without any table lock held. */
typedef int inode_handle_fn(void *arg, int fd, const struct inode_key *key, mode_t type,
			    struct inode_handle_buf *out);
/* Lets inodes without a handle take one with fn: an idle inode about to
 * give back its fd, and a new file whose key an fd-less inode holds (to
 * tell whether its number was reused). Without it (never) an inode
 * without a handle keeps its fd. Called once, before any lookup. */
void inode_table_take_handles(struct inode_table *t, inode_handle_fn *fn, void *arg);

/* The root is never freed, so using it needs no reference. */
struct inode *inode_table_root(struct inode_table *t);

/* Takes a request reference on a guest-supplied nodeid; -EBADF if unknown.
 * A handle inode gets its fd reopened (-ESTALE if the file is gone, -ENFILE
 * over the budget). */
int inode_get(struct inode_table *t, uint64_t nodeid, struct inode **out);
/* Adds a request reference to an inode already held. */
void inode_get_again(struct inode_table *t, struct inode *inode);
void inode_put(struct inode_table *t, struct inode *inode);

/*
 * Finds the inode with this key or adds one owning fd (an fd taken from the
 * budget), keeping a copy of handle if given. Either way fd is consumed.
 * The result has one more nlookup (the guest is about to be told its
 * nodeid) and one request reference. read_only is a new inode's flag; an
 * inode found keeps its own. Without handle, fd's is taken only when an
 * fd-less inode holds the key, to compare the two.
 */
int inode_lookup_add(struct inode_table *t, int fd, const struct inode_key *key,
		     mode_t type, const struct inode_file_handle *handle,
		     bool read_only, struct inode **out);
/* The inode with this key if the table has one, with one more nlookup and
 * one request reference; -ENOENT if none (or an idle handle inode). */
int inode_find_key(struct inode_table *t, const struct inode_key *key,
		   struct inode **out);
/* One more guest lookup on an inode the caller holds ("." and ".."). */
void inode_add_lookup(struct inode_table *t, struct inode *inode);
/* Undoes inode_add_lookup / inode_lookup_add when the entry was not sent. */
void inode_drop_lookup(struct inode_table *t, struct inode *inode);

/* FORGET: drops up to n guest lookups; unknown nodeids are ignored. */
void inode_forget(struct inode_table *t, uint64_t nodeid, uint64_t n);
/* The guest went away (DESTROY): it names no inode any more. */
void inode_forget_all(struct inode_table *t);

/* Calls fn for every inode with its shard locked: fn must be quick and must
 * not call back into the table. Inodes added meanwhile may be missed. */
void inode_table_foreach(struct inode_table *t,
			 void (*fn)(struct inode *inode, void *arg), void *arg);

/* ---- migration (backend/pt_migration.c) ----------------------------- */

#define INODE_SHARD_BITS 6u
#define INODE_SHARDS (1u << INODE_SHARD_BITS)
/* The next nodeid sequence number of each shard. */
void inode_table_counters(struct inode_table *t, uint64_t next_seq[INODE_SHARDS]);
/* Whether the guest knows no inode but the root (a fresh destination). */
bool inode_table_empty(struct inode_table *t);
/* An inode outside any table, owning fd (-1: none) with its budget unit,
 * for inode_table_install (inode_lookup_add fills its new inodes with it
 * too); counts 0. NULL on ENOMEM (fd untouched). */
struct inode *inode_alloc_detached(uint64_t nodeid, const struct inode_key *key,
				   int fd, mode_t type, const struct inode_file_handle *handle);
/* Frees a detached inode, closing its fd. */
void inode_free_detached(struct inode_table *t, struct inode *inode);
/* Links a detached inode (a nodeid the table does not hold) into the shard
 * its nodeid names, and keeps that shard's counter past it. Cannot fail.
 * Its key is indexed in that shard. The shard follows (st_dev, st_ino), not
 * the mount id, so on the same host (any mount namespace) that is the
 * shard the key names; on another host, where the numbers differ, a later
 * LOOKUP of the file gets a new nodeid, which FUSE allows. */
void inode_table_install(struct inode_table *t, struct inode *inode);
/* Keeps shard's next sequence number at least next. */
void inode_table_raise_seq(struct inode_table *t, unsigned shard, uint64_t next);

#endif
