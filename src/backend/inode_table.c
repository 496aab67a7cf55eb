/* Sharded inode table: nodeid and (dev, ino, mnt_id) indexes, split lookup/request counts. */
#include "backend/inode_table.h"

#include <errno.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/hash.h"

/*
 * FORGETs arrive on the hiprio queue thread while lookups run on the
 * request threads: 64 independently locked shards keep them from
 * serialising on one lock. An inode lives in the shard its key hashes to,
 * and its nodeid carries that shard in the low bits, so both indexes of
 * one inode sit under the same lock and a nodeid finds its shard directly.
 */
#define SHARD_BITS 6
#define SHARD_COUNT (1u << SHARD_BITS)
#define INITIAL_BUCKETS 64

/* See struct inode: a field added in the wrong place costs every inode. */
_Static_assert(sizeof(struct inode) <= 80, "struct inode grew: see there");
_Static_assert(SHARD_COUNT <= 256 && (S_IFMT & 0xffff) == S_IFMT, "struct inode's small fields");

struct shard {
	pthread_mutex_t lock;
	struct inode **by_id;
	struct inode **by_key;
	size_t nbuckets;        /* power of two, same for both indexes */
	size_t count;
	uint64_t next_seq;      /* nodeids are never reused: a stale id misses */
};

struct inode_table {
	struct shard shards[SHARD_COUNT];
	struct inode root;
	struct fd_budget *fds;
	inode_handle_fn *take_handle;   /* NULL: an inode without a handle keeps its fd */
	void *take_handle_arg;
};

/* Without the mount id: it differs between mount namespaces (a sandboxed
 * daemon has its own), and a migrated inode must land in the shard its
 * nodeid names (inode_table_install). Two mounts of one file system share
 * chains; key_equal still tells them apart. */
static uint64_t key_hash(const struct inode_key *k)
{
	return ferry_mix64(k->ino ^ ferry_mix64(k->dev));
}

static bool key_equal(const struct inode_key *a, const struct inode_key *b)
{
	return a->ino == b->ino && a->dev == b->dev && a->mnt_id == b->mnt_id &&
	       a->area == b->area;
}

static size_t id_bucket(const struct shard *s, uint64_t nodeid)
{
	return ferry_mix64(nodeid >> SHARD_BITS) & (s->nbuckets - 1);
}

static size_t key_bucket(const struct shard *s, const struct inode_key *k)
{
	return (key_hash(k) >> SHARD_BITS) & (s->nbuckets - 1);
}

static void shard_link(struct shard *s, struct inode *inode)
{
	size_t b = id_bucket(s, inode->nodeid);

	inode->next_by_id = s->by_id[b];
	s->by_id[b] = inode;
	if (inode->key_retired)
		return;
	b = key_bucket(s, &inode->key);
	inode->next_by_key = s->by_key[b];
	s->by_key[b] = inode;
}

static void shard_unlink_key(struct shard *s, struct inode *inode)
{
	struct inode **pp = &s->by_key[key_bucket(s, &inode->key)];

	while (*pp != inode)
		pp = &(*pp)->next_by_key;
	*pp = inode->next_by_key;
}

/* Growing is best effort: on ENOMEM the chains just get longer. */
static void shard_grow(struct shard *s)
{
	size_t old_n = s->nbuckets;
	struct inode **old_id = s->by_id;
	struct inode **new_id = calloc(old_n * 2, sizeof(*new_id));
	struct inode **new_key = calloc(old_n * 2, sizeof(*new_key));

	if (!new_id || !new_key) {
		free(new_id);
		free(new_key);
		return;
	}
	free(s->by_key);
	s->by_id = new_id;
	s->by_key = new_key;
	s->nbuckets = old_n * 2;
	for (size_t i = 0; i < old_n; i++) {
		struct inode *inode = old_id[i];

		while (inode) {
			struct inode *next = inode->next_by_id;

			shard_link(s, inode);
			inode = next;
		}
	}
	free(old_id);
}

static void shard_unlink(struct shard *s, struct inode *inode)
{
	struct inode **pp = &s->by_id[id_bucket(s, inode->nodeid)];

	while (*pp != inode)
		pp = &(*pp)->next_by_id;
	*pp = inode->next_by_id;
	if (!inode->key_retired)
		shard_unlink_key(s, inode);
	s->count--;
}

static struct inode *shard_find_id(const struct shard *s, uint64_t nodeid)
{
	struct inode *inode = s->by_id[id_bucket(s, nodeid)];

	while (inode && inode->nodeid != nodeid)
		inode = inode->next_by_id;
	return inode;
}

static struct inode *shard_find_key(const struct shard *s,
				    const struct inode_key *key)
{
	struct inode *inode = s->by_key[key_bucket(s, key)];

	while (inode && !key_equal(&inode->key, key))
		inode = inode->next_by_key;
	return inode;
}

static bool unused(const struct inode *inode)
{
	return inode->nlookup == 0 && inode->refs == 0;
}

static void close_inode_fd(struct inode_table *t, int fd)
{
	if (fd < 0)
		return;
	close(fd);
	fd_budget_give_back(t->fds);
}

/* Called with the shard lock dropped: closing can be slow (NFS, FUSE). A
 * handle given at the making shares the inode's allocation; one taken
 * later (inode_put) has its own. */
static void inode_destroy(struct inode_table *t, struct inode *inode)
{
	close_inode_fd(t, inode->fd);
	if (inode->file_handle != (void *)(inode + 1))
		free(inode->file_handle);
	free(inode);
}

/* A request took the first reference on a handle inode: give it its fd.
 * Two requests may race here; the loser closes its own copy. */
static int inode_reopen(struct inode_table *t, struct shard *s, struct inode *inode)
{
	int fd, ret = fd_budget_take(t->fds);

	if (ret < 0)
		return ret;
	fd = open_by_handle_at(inode->file_handle->mount_fd, &inode->file_handle->fh,
			       O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		fd_budget_give_back(t->fds);
		return ret;
	}
	pthread_mutex_lock(&s->lock);
	if (inode->fd < 0) {
		inode->fd = fd;
		fd = -1;
	}
	pthread_mutex_unlock(&s->lock);
	close_inode_fd(t, fd);
	return 0;
}

int inode_table_new(struct inode_table **out, struct fd_budget *fds,
		    int root_fd, const struct inode_key *root_key)
{
	struct inode_table *t = calloc(1, sizeof(*t));
	unsigned i;
	int ret = -ENOMEM;

	if (!t)
		goto err;
	t->fds = fds;
	for (i = 0; i < SHARD_COUNT; i++) {
		struct shard *s = &t->shards[i];

		s->by_id = calloc(INITIAL_BUCKETS, sizeof(*s->by_id));
		s->by_key = calloc(INITIAL_BUCKETS, sizeof(*s->by_key));
		if (!s->by_id || !s->by_key) {
			free(s->by_id);
			free(s->by_key);
			goto err_shards;
		}
		s->nbuckets = INITIAL_BUCKETS;
		s->next_seq = 1;    /* seq 0 would make nodeids 0..63, 1 is root */
		pthread_mutex_init(&s->lock, NULL);
	}

	/* The root lives in its key's shard so ".." and hard links to the
	 * shared dir find it, but nodeid 1 is resolved without the table. */
	t->root.nodeid = FUSE_ROOT_ID;
	t->root.key = *root_key;
	t->root.fd = root_fd;
	t->root.type = S_IFDIR;
	t->root.shard = (uint8_t)(key_hash(root_key) & (SHARD_COUNT - 1));
	t->root.nlookup = 1;
	t->root.refs = 1;
	/* Linked like any inode so growing the shard rehashes it too; it is
	 * skipped wherever inodes are freed. */
	shard_link(&t->shards[t->root.shard], &t->root);
	t->shards[t->root.shard].count++;
	*out = t;
	return 0;

err_shards:
	while (i-- > 0) {
		pthread_mutex_destroy(&t->shards[i].lock);
		free(t->shards[i].by_id);
		free(t->shards[i].by_key);
	}
	free(t);
err:
	return ret;
}

void inode_table_free(struct inode_table *t)
{
	if (!t)
		return;
	for (unsigned i = 0; i < SHARD_COUNT; i++) {
		struct shard *s = &t->shards[i];

		for (size_t b = 0; b < s->nbuckets; b++) {
			struct inode *inode = s->by_id[b];

			while (inode) {
				struct inode *next = inode->next_by_id;

				if (inode != &t->root)
					inode_destroy(t, inode);
				inode = next;
			}
		}
		pthread_mutex_destroy(&s->lock);
		free(s->by_id);
		free(s->by_key);
	}
	close(t->root.fd);
	free(t);
}

void inode_table_take_handles(struct inode_table *t, inode_handle_fn *fn, void *arg)
{
	t->take_handle = fn;
	t->take_handle_arg = arg;
}

struct inode *inode_table_root(struct inode_table *t)
{
	return &t->root;
}

int inode_get(struct inode_table *t, uint64_t nodeid, struct inode **out)
{
	struct shard *s;
	struct inode *inode;
	bool need_fd;

	if (nodeid == FUSE_ROOT_ID) {
		*out = &t->root;
		return 0;
	}
	s = &t->shards[nodeid & (SHARD_COUNT - 1)];
	pthread_mutex_lock(&s->lock);
	inode = shard_find_id(s, nodeid);
	if (inode && inode->invalid) {
		pthread_mutex_unlock(&s->lock);
		return -EIO;
	}
	if (inode)
		inode->refs++;
	need_fd = inode && inode->fd < 0;
	pthread_mutex_unlock(&s->lock);
	if (!inode)
		return -EBADF;
	if (need_fd) {
		int ret = inode_reopen(t, s, inode);

		if (ret < 0) {
			inode_put(t, inode);
			return ret;
		}
	}
	*out = inode;
	return 0;
}

/* Adds one to count, one of inode's counts, under its shard's lock; the
 * root's counts are not kept (it is never freed). */
static void inode_count_up(struct inode_table *t, struct inode *inode,
			   uint64_t *count)
{
	struct shard *s = &t->shards[inode->shard];

	if (inode == &t->root)
		return;
	pthread_mutex_lock(&s->lock);
	(*count)++;
	pthread_mutex_unlock(&s->lock);
}

void inode_get_again(struct inode_table *t, struct inode *inode)
{
	inode_count_up(t, inode, &inode->refs);
}

/* inode's handle in an allocation of its own, or NULL (none, ENOMEM).
 * Called without the shard lock: the caller's reference keeps inode and
 * its fd. */
static struct inode_file_handle *take_handle_apart(struct inode_table *t,
						    const struct inode *inode)
{
	struct inode_handle_buf hb;
	struct inode_file_handle *handle;
	size_t size;

	if (t->take_handle(t->take_handle_arg, inode->fd, &inode->key, inode->type, &hb) < 0)
		return NULL;
	size = sizeof(hb.h) + hb.h.fh.handle_bytes;
	handle = malloc(size);
	if (handle)
		memcpy(handle, &hb.h, size);
	return handle;
}

void inode_put(struct inode_table *t, struct inode *inode)
{
	struct inode_file_handle *handle = NULL;
	struct shard *s;
	bool last;
	int idle_fd = -1;

	if (!inode || inode == &t->root)
		return;
	s = &t->shards[inode->shard];
	pthread_mutex_lock(&s->lock);
	/* The last request on an inode the guest still knows, fds running
	 * short: it takes its handle so that it can give back its fd (below).
	 * Unlocked, as name_to_handle_at() may be slow (NFS): our reference
	 * keeps the inode and its fd whoever comes meanwhile. */
	if (inode->refs == 1 && inode->nlookup > 0 && inode->fd >= 0 && !inode->file_handle &&
	    !inode->handle_refused && t->take_handle && fd_budget_half_used(t->fds)) {
		pthread_mutex_unlock(&s->lock);
		handle = take_handle_apart(t, inode);
		pthread_mutex_lock(&s->lock);
		if (handle && !inode->file_handle) {
			inode->file_handle = handle;
			handle = NULL;
		} else if (!handle && inode->refs == 1) {
			/* Alone on it: no request reads its flags now. */
			inode->handle_refused = true;
		}
	}
	inode->refs--;
	last = unused(inode);
	if (last) {
		shard_unlink(s, inode);
	} else if (inode->file_handle && inode->refs == 0 && fd_budget_half_used(t->fds)) {
		/* The guest still knows it, but half the fds are used: its
		 * handle will reopen it. Before that it keeps its fd, so the
		 * next request on it pays no open_by_handle_at, a far dearer
		 * call than using the fd it already has. */
		idle_fd = inode->fd;
		inode->fd = -1;
	}
	pthread_mutex_unlock(&s->lock);
	free(handle);
	if (last)
		inode_destroy(t, inode);
	close_inode_fd(t, idle_fd);
}

/* With the shard lock held: the guest is about to be told about inode. */
static void take_lookup(struct inode_table *t, struct inode *inode)
{
	if (inode != &t->root) {
		inode->nlookup++;
		inode->refs++;
	}
}

int inode_find_key(struct inode_table *t, const struct inode_key *key,
		   struct inode **out)
{
	struct shard *s = &t->shards[key_hash(key) & (SHARD_COUNT - 1)];
	struct inode *inode;

	pthread_mutex_lock(&s->lock);
	inode = shard_find_key(s, key);
	/* Only an inode holding its fd pins the key: an idle handle inode's
	 * file may be gone and its number reused. The caller opens the name. */
	if (inode && inode->file_handle && inode->fd < 0)
		inode = NULL;
	if (inode)
		take_lookup(t, inode);
	pthread_mutex_unlock(&s->lock);
	if (!inode)
		return -ENOENT;
	*out = inode;
	return 0;
}

/*
 * With the shard lock held: whether the idle handle inode found under a key
 * is another file than the one just opened, whose handle is handle. An idle
 * handle inode holds no fd, so nothing pins its file: once the file is
 * deleted, the file system may give its inode number to a new file, and
 * the key (device, number) then finds the old inode. Their handles differ
 * (the generation in them does); taking the old inode for the new file
 * would hand the guest the old nodeid, whose handle reopens nothing.
 */
static bool number_reused(const struct inode *inode, const struct inode_file_handle *handle)
{
	const struct file_handle *a, *b;

	if (!inode->file_handle || inode->fd >= 0)
		return false;
	/* No handle to tell them apart: a new inode is safe, the old one
	 * cannot be trusted to be this file. */
	if (!handle)
		return true;
	a = &inode->file_handle->fh;
	b = &handle->fh;
	return a->handle_type != b->handle_type || a->handle_bytes != b->handle_bytes ||
	       memcmp(a->f_handle, b->f_handle, a->handle_bytes) != 0;
}

int inode_lookup_add(struct inode_table *t, int fd, const struct inode_key *key,
		     mode_t type, const struct inode_file_handle *handle,
		     bool read_only, struct inode **out)
{
	unsigned shard = key_hash(key) & (SHARD_COUNT - 1);
	struct shard *s = &t->shards[shard];
	struct inode *inode, *fresh;
	struct inode_handle_buf hb;

	/* Allocated and filled before locking so the lock is never held
	 * across malloc; numbered under the lock, in this shard. */
	fresh = inode_alloc_detached(shard, key, fd, type, handle);
	if (fresh)
		fresh->read_only = read_only;
	pthread_mutex_lock(&s->lock);
	inode = shard_find_key(s, key);
	if (inode && inode->fd < 0 && !handle && t->take_handle) {
		/* Only now is the new file's handle needed: taken unlocked,
		 * and the key looked up again, as anything may change. */
		pthread_mutex_unlock(&s->lock);
		if (t->take_handle(t->take_handle_arg, fd, key, type, &hb) == 0)
			handle = &hb.h;
		pthread_mutex_lock(&s->lock);
		inode = shard_find_key(s, key);
	}
	if (inode && number_reused(inode, handle)) {
		shard_unlink_key(s, inode);
		inode->key_retired = true;
		inode = NULL;
	}
	if (inode) {
		take_lookup(t, inode);
		/* An idle handle inode takes the fd just opened. */
		if (inode != &t->root && inode->fd < 0) {
			inode->fd = fd;
			fd = -1;
		}
		pthread_mutex_unlock(&s->lock);
		free(fresh);
		close_inode_fd(t, fd);
		*out = inode;
		return 0;
	}
	if (!fresh) {
		pthread_mutex_unlock(&s->lock);
		close(fd);
		fd_budget_give_back(t->fds);
		return -ENOMEM;
	}
	fresh->nodeid = (s->next_seq++ << SHARD_BITS) | shard;
	fresh->nlookup = 1;
	fresh->refs = 1;
	if (s->count >= s->nbuckets)
		shard_grow(s);
	shard_link(s, fresh);
	s->count++;
	pthread_mutex_unlock(&s->lock);
	*out = fresh;
	return 0;
}

void inode_add_lookup(struct inode_table *t, struct inode *inode)
{
	inode_count_up(t, inode, &inode->nlookup);
}

void inode_drop_lookup(struct inode_table *t, struct inode *inode)
{
	struct shard *s = &t->shards[inode->shard];

	if (inode == &t->root)
		return;
	/* The caller still holds a request ref, so this never frees. */
	pthread_mutex_lock(&s->lock);
	if (inode->nlookup > 0)
		inode->nlookup--;
	pthread_mutex_unlock(&s->lock);
}

void inode_forget(struct inode_table *t, uint64_t nodeid, uint64_t n)
{
	struct shard *s;
	struct inode *inode;
	bool last = false;

	if (nodeid == FUSE_ROOT_ID)
		return;
	s = &t->shards[nodeid & (SHARD_COUNT - 1)];
	pthread_mutex_lock(&s->lock);
	inode = shard_find_id(s, nodeid);
	if (inode) {
		/* Saturate: a guest forgetting more than it looked up only
		 * loses its own references, never anyone else's. */
		inode->nlookup -= n < inode->nlookup ? n : inode->nlookup;
		last = unused(inode);
		if (last)
			shard_unlink(s, inode);
	}
	pthread_mutex_unlock(&s->lock);
	if (last)
		inode_destroy(t, inode);
}

void inode_forget_all(struct inode_table *t)
{
	for (unsigned i = 0; i < SHARD_COUNT; i++) {
		struct shard *s = &t->shards[i];
		struct inode *doomed = NULL;

		pthread_mutex_lock(&s->lock);
		for (size_t b = 0; b < s->nbuckets; b++) {
			struct inode *inode = s->by_id[b];

			while (inode) {
				struct inode *next = inode->next_by_id;

				if (inode == &t->root) {
					inode = next;
					continue;
				}
				inode->nlookup = 0;
				if (inode->refs == 0) {
					shard_unlink(s, inode);
					/* next_by_id is free to chain the doomed */
					inode->next_by_id = doomed;
					doomed = inode;
				}
				inode = next;
			}
		}
		pthread_mutex_unlock(&s->lock);
		while (doomed) {
			struct inode *next = doomed->next_by_id;

			inode_destroy(t, doomed);
			doomed = next;
		}
	}
}

void inode_table_foreach(struct inode_table *t,
			 void (*fn)(struct inode *inode, void *arg), void *arg)
{
	for (unsigned i = 0; i < SHARD_COUNT; i++) {
		struct shard *s = &t->shards[i];

		pthread_mutex_lock(&s->lock);
		for (size_t b = 0; b < s->nbuckets; b++)
			for (struct inode *inode = s->by_id[b]; inode;
			     inode = inode->next_by_id)
				fn(inode, arg);
		pthread_mutex_unlock(&s->lock);
	}
}

/* ---- migration -------------------------------------------------------- */

void inode_table_counters(struct inode_table *t, uint64_t next_seq[INODE_SHARDS])
{
	for (unsigned i = 0; i < SHARD_COUNT; i++) {
		pthread_mutex_lock(&t->shards[i].lock);
		next_seq[i] = t->shards[i].next_seq;
		pthread_mutex_unlock(&t->shards[i].lock);
	}
}

bool inode_table_empty(struct inode_table *t)
{
	size_t n = 0;

	for (unsigned i = 0; i < SHARD_COUNT; i++) {
		pthread_mutex_lock(&t->shards[i].lock);
		n += t->shards[i].count;
		pthread_mutex_unlock(&t->shards[i].lock);
	}
	return n == 1;      /* the root */
}

struct inode *inode_alloc_detached(uint64_t nodeid, const struct inode_key *key,
				   int fd, mode_t type, const struct inode_file_handle *handle)
{
	size_t handle_size = handle ? sizeof(*handle) + handle->fh.handle_bytes : 0;
	struct inode *inode = calloc(1, sizeof(*inode) + handle_size);

	if (!inode)
		return NULL;
	inode->nodeid = nodeid;
	inode->key = *key;
	inode->fd = fd;
	if (handle) {
		inode->file_handle = (struct inode_file_handle *)(inode + 1);
		memcpy(inode->file_handle, handle, handle_size);
	}
	inode->type = (uint16_t)(type & S_IFMT);
	inode->shard = (uint8_t)(nodeid & (SHARD_COUNT - 1));
	return inode;
}

void inode_free_detached(struct inode_table *t, struct inode *inode)
{
	if (inode)
		inode_destroy(t, inode);
}

static void raise_seq_locked(struct shard *s, uint64_t next)
{
	if (s->next_seq < next)
		s->next_seq = next;
}

void inode_table_install(struct inode_table *t, struct inode *inode)
{
	struct shard *s = &t->shards[inode->shard];

	pthread_mutex_lock(&s->lock);
	if (s->count >= s->nbuckets)
		shard_grow(s);
	shard_link(s, inode);
	s->count++;
	raise_seq_locked(s, (inode->nodeid >> SHARD_BITS) + 1);
	pthread_mutex_unlock(&s->lock);
}

void inode_table_raise_seq(struct inode_table *t, unsigned shard, uint64_t next)
{
	struct shard *s = &t->shards[shard & (SHARD_COUNT - 1)];

	pthread_mutex_lock(&s->lock);
	raise_seq_locked(s, next);
	pthread_mutex_unlock(&s->lock);
}
