/* Open file and directory handles, named to the guest by an opaque fh. */
#ifndef FERRY_HANDLES_H
#define FERRY_HANDLES_H

#include <dirent.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/fd_budget.h"
#include "backend/inode_table.h"

struct handle {
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
	uint64_t refs;          /* table's own + requests using it */
	bool released;
	struct handle *next;
};

struct handle_table;

int handle_table_new(struct handle_table **out, struct inode_table *inodes,
		     struct fd_budget *fds);
void handle_table_free(struct handle_table *t);

/*
 * Registers a handle owning fd (or dir) and a ref on inode, both taken by
 * the caller; on failure they are released. Sets *fh.
 */
int handle_add(struct handle_table *t, struct inode *inode, int fd, DIR *dir,
	       uint64_t *fh);
/* Validates a guest-supplied fh for nodeid; -EBADF when unknown or not its. */
int handle_get(struct handle_table *t, uint64_t fh, uint64_t nodeid,
	       struct handle **out);
void handle_put(struct handle_table *t, struct handle *h);
/* RELEASE: the guest no longer names fh; freed when the last user leaves. */
int handle_remove(struct handle_table *t, uint64_t fh, uint64_t nodeid);
/* DESTROY: drops every handle. */
void handle_remove_all(struct handle_table *t);

/* ---- migration (backend/pt_migration.c) ----------------------------- */

/* The fh the next handle gets. */
uint64_t handle_table_next_fh(struct handle_table *t);
/* Keeps the next fh at least next. */
void handle_table_raise_next_fh(struct handle_table *t, uint64_t next);
/* Calls fn for every live handle with its shard locked (quick, no calls
 * back into the table). */
void handle_table_foreach(struct handle_table *t,
			  void (*fn)(struct handle *h, void *arg), void *arg);
/* A handle outside the table, owning fd (or dir) with its budget unit, for
 * handle_install; NULL on ENOMEM (nothing released). */
struct handle *handle_alloc_detached(uint64_t fh, int fd, DIR *dir);
/* Frees a detached handle: closes its fd, gives the unit back. */
void handle_free_detached(struct handle_table *t, struct handle *h);
/* Links a detached handle on inode (whose request ref the caller counted
 * in inode->refs) under its fh, which the table must not hold. */
void handle_install(struct handle_table *t, struct handle *h, struct inode *inode);

#endif
