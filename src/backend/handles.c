/* Sharded handle table: fh -> open fd or DIR stream, validated on every use. */
#include "backend/handles.h"

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
	struct handle *buckets[BUCKETS_PER_SHARD];
};

struct handle_table {
	struct hshard shards[SHARD_COUNT];
	atomic_uint_fast64_t next_fh;
	struct inode_table *inodes;
	struct fd_budget *fds;
};

static struct hshard *shard_of(struct handle_table *t, uint64_t fh)
{
	return &t->shards[fh % SHARD_COUNT];
}

static struct handle **bucket_of(struct hshard *s, uint64_t fh)
{
	return &s->buckets[(fh / SHARD_COUNT) % BUCKETS_PER_SHARD];
}

static void handle_destroy(struct handle_table *t, struct handle *h)
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

int handle_table_new(struct handle_table **out, struct inode_table *inodes,
		     struct fd_budget *fds)
{
	struct handle_table *t = calloc(1, sizeof(*t));

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

void handle_table_free(struct handle_table *t)
{
	if (!t)
		return;
	handle_remove_all(t);
	for (unsigned i = 0; i < SHARD_COUNT; i++)
		pthread_mutex_destroy(&t->shards[i].lock);
	free(t);
}

/* Links h under its fh. */
static void handle_link(struct handle_table *t, struct handle *h)
{
	struct hshard *s = shard_of(t, h->fh);
	struct handle **b = bucket_of(s, h->fh);

	pthread_mutex_lock(&s->lock);
	h->next = *b;
	*b = h;
	pthread_mutex_unlock(&s->lock);
}

static void handle_init(struct handle *h, uint64_t fh, int fd, DIR *dir)
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

int handle_add(struct handle_table *t, struct inode *inode, int fd, DIR *dir,
	       uint64_t *fh)
{
	struct handle *h = calloc(1, sizeof(*h));

	if (!h) {
		if (dir)
			closedir(dir);
		else
			close(fd);
		fd_budget_give_back(t->fds);
		inode_put(t->inodes, inode);
		return -ENOMEM;
	}
	handle_init(h, atomic_fetch_add(&t->next_fh, 1), fd, dir);
	h->inode = inode;
	handle_link(t, h);
	*fh = h->fh;
	return 0;
}

int handle_get(struct handle_table *t, uint64_t fh, uint64_t nodeid,
	       struct handle **out)
{
	struct hshard *s = shard_of(t, fh);
	struct handle *h;

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

void handle_put(struct handle_table *t, struct handle *h)
{
	struct hshard *s = shard_of(t, h->fh);
	bool last;

	pthread_mutex_lock(&s->lock);
	last = --h->refs == 0;
	pthread_mutex_unlock(&s->lock);
	if (last)
		handle_destroy(t, h);
}

int handle_remove(struct handle_table *t, uint64_t fh, uint64_t nodeid)
{
	struct hshard *s = shard_of(t, fh);
	struct handle **pp, *h;
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
		handle_destroy(t, h);
	return 0;
}

void handle_remove_all(struct handle_table *t)
{
	for (unsigned i = 0; i < SHARD_COUNT; i++) {
		struct hshard *s = &t->shards[i];
		struct handle *doomed = NULL;

		pthread_mutex_lock(&s->lock);
		for (unsigned b = 0; b < BUCKETS_PER_SHARD; b++) {
			struct handle *h = s->buckets[b];

			while (h) {
				struct handle *next = h->next;

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
			struct handle *next = doomed->next;

			handle_destroy(t, doomed);
			doomed = next;
		}
	}
}

/* ---- migration -------------------------------------------------------- */

uint64_t handle_table_next_fh(struct handle_table *t)
{
	return atomic_load(&t->next_fh);
}

void handle_table_raise_next_fh(struct handle_table *t, uint64_t next)
{
	uint_fast64_t cur = atomic_load(&t->next_fh);

	while (cur < next && !atomic_compare_exchange_weak(&t->next_fh, &cur, next))
		;
}

void handle_table_foreach(struct handle_table *t,
			  void (*fn)(struct handle *h, void *arg), void *arg)
{
	for (unsigned i = 0; i < SHARD_COUNT; i++) {
		struct hshard *s = &t->shards[i];

		pthread_mutex_lock(&s->lock);
		for (unsigned b = 0; b < BUCKETS_PER_SHARD; b++)
			for (struct handle *h = s->buckets[b]; h; h = h->next)
				if (!h->released)
					fn(h, arg);
		pthread_mutex_unlock(&s->lock);
	}
}

struct handle *handle_alloc_detached(uint64_t fh, int fd, DIR *dir)
{
	struct handle *h = calloc(1, sizeof(*h));

	if (h)
		handle_init(h, fh, fd, dir);
	return h;
}

void handle_free_detached(struct handle_table *t, struct handle *h)
{
	if (!h)
		return;
	h->inode = NULL;    /* no ref taken yet: inode_put(NULL) is a no-op */
	handle_destroy(t, h);
}

void handle_install(struct handle_table *t, struct handle *h, struct inode *inode)
{
	h->inode = inode;
	handle_link(t, h);
}
