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

#endif
