/* Sharded handle table: fh -> open fd or DIR stream, validated on every use. */
#include "backend/open_files.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

/* READ/WRITE on the request threads and RELEASE may touch different
 * handles at once; 64 locks keep them apart. fh = counter, never reused,
 * so a guest replaying an old fh gets EBADF instead of someone's file. */
#define SHARD_COUNT 64u
#define BUCKETS_PER_SHARD 64u

struct hshard {
	pthread_mutex_t lock;
	struct open_file *buckets[BUCKETS_PER_SHARD];
};

struct open_file_table {
	struct hshard shards[SHARD_COUNT];
	atomic_uint_fast64_t next_fh;
	struct inode_table *inodes;
	struct fd_budget *fds;
};

static struct hshard *shard_of(struct open_file_table *t, uint64_t fh)
{
	return &t->shards[fh % SHARD_COUNT];
}

static struct open_file **bucket_of(struct hshard *s, uint64_t fh)
{
	return &s->buckets[(fh / SHARD_COUNT) % BUCKETS_PER_SHARD];
}

static void open_file_destroy(struct open_file_table *t, struct open_file *h)
{
	if (h->dir)
		closedir(h->dir);
	else
		close(h->fd);
	fd_budget_give_back(t->fds);
	inode_put(t->inodes, h->inode);
	pthread_mutex_destroy(&h->dir_lock);
	free(h);
}

int open_file_table_new(struct open_file_table **out, struct inode_table *inodes,
		     struct fd_budget *fds)
{
	struct open_file_table *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (unsigned i = 0; i < SHARD_COUNT; i++)
		pthread_mutex_init(&t->shards[i].lock, NULL);
	atomic_init(&t->next_fh, 1);    /* fh 0 is what a careless guest sends */
	t->inodes = inodes;
	t->fds = fds;
	*out = t;
	return 0;
}

void open_file_table_free(struct open_file_table *t)
{
	if (!t)
		return;
	open_file_remove_all(t);
	for (unsigned i = 0; i < SHARD_COUNT; i++)
		pthread_mutex_destroy(&t->shards[i].lock);
	free(t);
}

/* Links h under its fh. */
static void open_file_link(struct open_file_table *t, struct open_file *h)
{
	struct hshard *s = shard_of(t, h->fh);
	struct open_file **b = bucket_of(s, h->fh);

	pthread_mutex_lock(&s->lock);
	h->next = *b;
	*b = h;
	pthread_mutex_unlock(&s->lock);
}

static void open_file_init(struct open_file *h, uint64_t fh, int fd, DIR *dir)
{
	h->fh = fh;
	h->fd = dir ? dirfd(dir) : fd;
	h->dir = dir;
	pthread_mutex_init(&h->dir_lock, NULL);
	h->dir_offset = 0;
	h->dir_offset_known = true;     /* a fresh stream stands at 0 */
	h->dir_pending = NULL;
	h->refs = 1;
}

int open_file_add(struct open_file_table *t, struct inode *inode, int fd, DIR *dir,
	       uint64_t *fh)
{
	struct open_file *h = calloc(1, sizeof(*h));

	if (!h) {
		if (dir)
			closedir(dir);
		else
			close(fd);
		fd_budget_give_back(t->fds);
		inode_put(t->inodes, inode);
		return -ENOMEM;
	}
	open_file_init(h, atomic_fetch_add(&t->next_fh, 1), fd, dir);
	h->inode = inode;
	open_file_link(t, h);
	*fh = h->fh;
	return 0;
}

int open_file_get(struct open_file_table *t, uint64_t fh, uint64_t nodeid,
	       struct open_file **out)
{
	struct hshard *s = shard_of(t, fh);
	struct open_file *h;

	pthread_mutex_lock(&s->lock);
	for (h = *bucket_of(s, fh); h; h = h->next)
		if (h->fh == fh)
			break;
	/* A guest pairing a valid fh with another nodeid is confused or
	 * hostile; either way it gets no access through that pairing. */
	if (h && h->inode->nodeid == nodeid)
		h->refs++;
	else
		h = NULL;
	pthread_mutex_unlock(&s->lock);
	if (!h)
		return -EBADF;
	*out = h;
	return 0;
}

void open_file_put(struct open_file_table *t, struct open_file *h)
{
	struct hshard *s = shard_of(t, h->fh);
	bool last;

	pthread_mutex_lock(&s->lock);
	last = --h->refs == 0;
	pthread_mutex_unlock(&s->lock);
	if (last)
		open_file_destroy(t, h);
}

int open_file_remove(struct open_file_table *t, uint64_t fh, uint64_t nodeid)
{
	struct hshard *s = shard_of(t, fh);
	struct open_file **pp, *h;
	bool last = false;

	pthread_mutex_lock(&s->lock);
	for (pp = bucket_of(s, fh); (h = *pp); pp = &h->next)
		if (h->fh == fh)
			break;
	if (h && h->inode->nodeid == nodeid) {
		*pp = h->next;
		h->released = true;
		last = --h->refs == 0;
	} else {
		h = NULL;
	}
	pthread_mutex_unlock(&s->lock);
	if (!h)
		return -EBADF;
	if (last)
		open_file_destroy(t, h);
	return 0;
}

void open_file_remove_all(struct open_file_table *t)
{
	for (unsigned i = 0; i < SHARD_COUNT; i++) {
		struct hshard *s = &t->shards[i];
		struct open_file *doomed = NULL;

		pthread_mutex_lock(&s->lock);
		for (unsigned b = 0; b < BUCKETS_PER_SHARD; b++) {
			struct open_file *h = s->buckets[b];

			while (h) {
				struct open_file *next = h->next;

				h->released = true;
				if (--h->refs == 0) {
					h->next = doomed;
					doomed = h;
				}
				h = next;
			}
			s->buckets[b] = NULL;
		}
		pthread_mutex_unlock(&s->lock);
		while (doomed) {
			struct open_file *next = doomed->next;

			open_file_destroy(t, doomed);
			doomed = next;
		}
	}
}

/* ---- migration -------------------------------------------------------- */

uint64_t open_file_table_next_fh(struct open_file_table *t)
{
	return atomic_load(&t->next_fh);
}

void open_file_table_raise_next_fh(struct open_file_table *t, uint64_t next)
{
	uint_fast64_t cur = atomic_load(&t->next_fh);

	while (cur < next && !atomic_compare_exchange_weak(&t->next_fh, &cur, next))
		;
}

void open_file_table_foreach(struct open_file_table *t,
			  void (*fn)(struct open_file *h, void *arg), void *arg)
{
	for (unsigned i = 0; i < SHARD_COUNT; i++) {
		struct hshard *s = &t->shards[i];

		pthread_mutex_lock(&s->lock);
		for (unsigned b = 0; b < BUCKETS_PER_SHARD; b++)
			for (struct open_file *h = s->buckets[b]; h; h = h->next)
				if (!h->released)
					fn(h, arg);
		pthread_mutex_unlock(&s->lock);
	}
}

struct open_file *open_file_alloc_detached(uint64_t fh, int fd, DIR *dir)
{
	struct open_file *h = calloc(1, sizeof(*h));

	if (h)
		open_file_init(h, fh, fd, dir);
	return h;
}

void open_file_free_detached(struct open_file_table *t, struct open_file *h)
{
	if (!h)
		return;
	h->inode = NULL;    /* no ref taken yet: inode_put(NULL) is a no-op */
	open_file_destroy(t, h);
}

void open_file_install(struct open_file_table *t, struct open_file *h, struct inode *inode)
{
	h->inode = inode;
	open_file_link(t, h);
}
