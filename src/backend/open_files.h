/* Open file and directory handles, named to the guest by an opaque fh. */
#ifndef FERRY_OPEN_FILES_H
#define FERRY_OPEN_FILES_H

#include <dirent.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/fd_budget.h"
#include "backend/inode_table.h"

struct open_file {
	uint64_t fh;
	struct inode *inode;    /* request ref held for the handle's life */
	int fd;                 /* readable/writable fd (for dirs: dirfd(dir)) */
	DIR *dir;               /* OPENDIR handles only */
	/* READDIR on one handle is serialised: the stream position is state. */
	pthread_mutex_t dir_lock;
	uint64_t dir_offset;    /* cookie where the stream stands */
	bool dir_offset_known;
	/* An entry already read from the stream that the guest has not got yet
	 * (its reply buffer was full): the next READDIR at dir_offset starts
	 * with it instead of seeking back, which would throw away the stream's
	 * buffered entries and read them from the kernel again. Points into
	 * the DIR's buffer; valid until the stream is read or moved. */
	struct dirent *dir_pending;
	/* The share's root with --add-dir: how many of the added dirs' NAMEs
	 * this pass has listed (they come first, before the host's entries). */
	unsigned dir_areas_listed;
	uint64_t refs;          /* table's own + requests using it */
	bool released;
	struct open_file *next;
};

struct open_file_table;

int open_file_table_new(struct open_file_table **out, struct inode_table *inodes,
		     struct fd_budget *fds);
void open_file_table_free(struct open_file_table *t);

/*
 * Registers a handle owning fd (or dir) and a ref on inode, both taken by
 * the caller; on failure they are released. Sets *fh.
 */
int open_file_add(struct open_file_table *t, struct inode *inode, int fd, DIR *dir,
	       uint64_t *fh);
/* Validates a guest-supplied fh for nodeid; -EBADF when unknown or not its. */
int open_file_get(struct open_file_table *t, uint64_t fh, uint64_t nodeid,
	       struct open_file **out);
void open_file_put(struct open_file_table *t, struct open_file *h);
/* RELEASE: the guest no longer names fh; freed when the last user leaves. */
int open_file_remove(struct open_file_table *t, uint64_t fh, uint64_t nodeid);
/* DESTROY: drops every handle. */
void open_file_remove_all(struct open_file_table *t);

/* ---- migration (backend/pt_migration.c) ----------------------------- */

/* The fh the next handle gets. */
uint64_t open_file_table_next_fh(struct open_file_table *t);
/* Keeps the next fh at least next. */
void open_file_table_raise_next_fh(struct open_file_table *t, uint64_t next);
/* Calls fn for every live handle with its shard locked (quick, no calls
 * back into the table). */
void open_file_table_foreach(struct open_file_table *t,
			  void (*fn)(struct open_file *h, void *arg), void *arg);
/* A handle outside the table, owning fd (or dir) with its budget unit, for
 * open_file_install; NULL on ENOMEM (nothing released). */
struct open_file *open_file_alloc_detached(uint64_t fh, int fd, DIR *dir);
/* Frees a detached handle: closes its fd, gives the unit back. */
void open_file_free_detached(struct open_file_table *t, struct open_file *h);
/* Links a detached handle on inode (whose request ref the caller counted
 * in inode->refs) under its fh, which the table must not hold. */
void open_file_install(struct open_file_table *t, struct open_file *h, struct inode *inode);

#endif
