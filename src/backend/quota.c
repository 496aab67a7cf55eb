/* The share's quota: a walk that measures the tree, the per-file figures that count each change, and the checks that refuse a change past a limit with EDQUOT. */
#include "backend/quota.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/array.h"
#include "common/log.h"

#define NSEC_PER_SEC 1000000000LL
/* Figures older than this are measured again when a change would be
 * refused: room the host freed comes back without waiting. Bounded so a
 * guest retrying a refused write does not walk the tree on every try. */
#define RESCAN_BEFORE_REFUSAL_NS (1 * NSEC_PER_SEC)
/* Otherwise the tree is walked again at most this often, and never more
 * often than a fixed multiple of what one walk takes, so a large share
 * spends a small, bounded part of its time being measured. */
#define RESCAN_MIN_INTERVAL_NS (2 * NSEC_PER_SEC)
#define RESCAN_COST_MULTIPLE 20
/* The walk does not enter directories deeper than this (each level holds
 * an fd and a stream buffer); it counts them and says so. */
#define WALK_MAX_DEPTH 256

#define FILE_SHARDS 16
#define FILE_BUCKETS 256

/* What was last counted for one file: its allocated 512-byte blocks. */
struct counted_file {
	uint64_t dev, ino;
	int64_t blocks;
	struct counted_file *next;
};

struct file_shard {
	pthread_mutex_t lock;
	struct counted_file *bucket[FILE_BUCKETS];
};

struct quota {
	struct quota_limits lim;
	int root_fd;
	/* used_* and held_* change together under count_lock: a check and
	 * its hold are one step. */
	pthread_mutex_t count_lock;
	int64_t used_bytes, used_inodes;
	uint64_t held_bytes, held_inodes;
	uint64_t refused;
	/* One walk at a time; a request that finds one running goes on. */
	pthread_mutex_t scan_lock;
	int64_t last_scan_ns, scan_interval_ns;   /* under count_lock */
	uint64_t scans;
	uint64_t too_deep;      /* the last walk's directories not entered */
	struct file_shard files[FILE_SHARDS];
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

/* ---- per-file figures --------------------------------------------------- */

static struct file_shard *shard_of(struct quota *q, uint64_t ino, unsigned *bucket)
{
	uint64_t h = ino * 0x9e3779b97f4a7c15ULL;

	*bucket = (unsigned)(h >> 56) % FILE_BUCKETS;
	return &q->files[(h >> 32) % FILE_SHARDS];
}

/* The entry for dev/ino, made with blocks if absent and make is set;
 * NULL if absent (or out of memory). Caller holds the shard's lock. */
static struct counted_file *file_find(struct file_shard *s, unsigned b, uint64_t dev,
				      uint64_t ino, bool make, int64_t blocks)
{
	struct counted_file *f;

	for (f = s->bucket[b]; f; f = f->next)
		if (f->ino == ino && f->dev == dev)
			return f;
	if (!make)
		return NULL;
	f = malloc(sizeof(*f));
	if (!f)
		return NULL;
	*f = (struct counted_file){ .dev = dev, .ino = ino, .blocks = blocks, .next = s->bucket[b] };
	s->bucket[b] = f;
	return f;
}

static void files_clear(struct quota *q)
{
	for (unsigned i = 0; i < FILE_SHARDS; i++) {
		struct file_shard *s = &q->files[i];

		pthread_mutex_lock(&s->lock);
		for (unsigned b = 0; b < FILE_BUCKETS; b++) {
			while (s->bucket[b]) {
				struct counted_file *f = s->bucket[b];

				s->bucket[b] = f->next;
				free(f);
			}
		}
		pthread_mutex_unlock(&s->lock);
	}
}

static void add_usage(struct quota *q, int64_t bytes, int64_t inodes)
{
	if (!bytes && !inodes)
		return;
	pthread_mutex_lock(&q->count_lock);
	q->used_bytes += bytes;
	q->used_inodes += inodes;
	pthread_mutex_unlock(&q->count_lock);
}

/* ---- the walk ------------------------------------------------------------ */

struct file_id {
	uint64_t dev, ino;
	int64_t blocks;
};

struct walk {
	int64_t bytes, inodes;
	/* Files with several names, counted once after the walk. */
	struct file_id *linked;
	size_t nlinked, cap;
	uint64_t too_deep;      /* directories not entered */
};

static int cmp_file_id(const void *a, const void *b)
{
	const struct file_id *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return 0;
}

static int walk_count(struct walk *w, const struct stat *st)
{
	if (!S_ISDIR(st->st_mode) && st->st_nlink > 1) {
		int ret = array_reserve((void **)&w->linked, &w->cap, w->nlinked + 1,
					sizeof(*w->linked), 64);

		if (ret < 0)
			return ret;
		w->linked[w->nlinked++] = (struct file_id){ st->st_dev, st->st_ino, st->st_blocks };
		return 0;
	}
	w->bytes += (int64_t)st->st_blocks * 512;
	w->inodes++;
	return 0;
}

/* Counts every entry below the directory dir_fd (taken over), never
 * following a symlink. Entries that vanish while it reads, and
 * directories the daemon may not read, are skipped. */
static int walk_dir(struct walk *w, int dir_fd, unsigned depth)
{
	struct dirent *de;
	DIR *d;
	int ret = 0;

	if (depth > WALK_MAX_DEPTH) {
		close(dir_fd);
		w->too_deep++;
		return 0;
	}
	d = fdopendir(dir_fd);
	if (!d) {
		ret = -errno;
		close(dir_fd);
		return ret;
	}
	while (ret == 0 && (de = readdir(d))) {
		struct stat st;
		int sub;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		ret = walk_count(w, &st);
		if (ret < 0 || !S_ISDIR(st.st_mode))
			continue;
		sub = openat(dirfd(d), de->d_name,
			     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub >= 0)
			ret = walk_dir(w, sub, depth + 1);
	}
	closedir(d);
	return ret;
}

static int measure_tree(int root_fd, int64_t *bytes, int64_t *inodes, uint64_t *too_deep)
{
	struct walk w = { 0 };
	struct stat st;
	int fd, ret;

	fd = openat(root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	ret = walk_count(&w, &st);
	if (ret == 0)
		ret = walk_dir(&w, fd, 0);
	else
		close(fd);
	if (ret == 0 && w.nlinked) {
		qsort(w.linked, w.nlinked, sizeof(*w.linked), cmp_file_id);
		for (size_t i = 0; i < w.nlinked; i++) {
			if (i && !cmp_file_id(&w.linked[i - 1], &w.linked[i]))
				continue;
			w.bytes += w.linked[i].blocks * 512;
			w.inodes++;
		}
	}
	free(w.linked);
	*bytes = w.bytes;
	*inodes = w.inodes;
	*too_deep = w.too_deep;
	return ret;
}

int quota_rescan(struct quota *q)
{
	int64_t start = now_ns(), bytes = 0, inodes = 0, interval;
	uint64_t too_deep = 0;
	int ret;

	pthread_mutex_lock(&q->scan_lock);
	ret = measure_tree(q->root_fd, &bytes, &inodes, &too_deep);
	/* Files counted from here on start again from their measured size,
	 * which now holds what the host did. */
	if (ret == 0)
		files_clear(q);
	if (ret == 0 && too_deep != q->too_deep)
		log_warn("quota: %llu directories lie more than %d levels deep: what is below "
			 "them is counted only as the guest changes it", (unsigned long long)too_deep,
			 WALK_MAX_DEPTH);
	interval = (now_ns() - start) * RESCAN_COST_MULTIPLE;
	pthread_mutex_lock(&q->count_lock);
	if (ret == 0) {
		q->used_bytes = bytes;
		q->used_inodes = inodes;
		q->too_deep = too_deep;
		q->scans++;
	}
	/* A failed walk is not retried at once either: the figures of the
	 * last good one, kept up by each change, stand until the next. */
	q->last_scan_ns = now_ns();
	q->scan_interval_ns = interval > RESCAN_MIN_INTERVAL_NS ? interval : RESCAN_MIN_INTERVAL_NS;
	pthread_mutex_unlock(&q->count_lock);
	pthread_mutex_unlock(&q->scan_lock);
	return ret;
}

/* Walks the tree again if its figures are older than max_age_ns (0: the
 * adaptive interval), unless another request is walking it now. */
static void rescan_if_old(struct quota *q, int64_t max_age_ns)
{
	int64_t age;
	int ret;

	pthread_mutex_lock(&q->count_lock);
	age = now_ns() - q->last_scan_ns;
	if (!max_age_ns)
		max_age_ns = q->scan_interval_ns;
	pthread_mutex_unlock(&q->count_lock);
	if (age < max_age_ns || pthread_mutex_trylock(&q->scan_lock))
		return;
	pthread_mutex_unlock(&q->scan_lock);
	ret = quota_rescan(q);
	if (ret < 0)
		log_warn("quota: cannot measure the share again: %s", strerror(-ret));
}

/* ---- setup ---------------------------------------------------------------- */

int quota_new(struct quota **out, const struct quota_limits *lim, int root_fd)
{
	struct quota *q;
	int ret;

	*out = NULL;
	if (!lim->bytes && !lim->inodes)
		return 0;
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->lim = *lim;
	q->root_fd = root_fd;
	pthread_mutex_init(&q->count_lock, NULL);
	pthread_mutex_init(&q->scan_lock, NULL);
	for (unsigned i = 0; i < FILE_SHARDS; i++)
		pthread_mutex_init(&q->files[i].lock, NULL);
	ret = quota_rescan(q);
	if (ret < 0) {
		quota_free(q);
		return ret;
	}
	*out = q;
	return 0;
}

void quota_free(struct quota *q)
{
	if (!q)
		return;
	files_clear(q);
	for (unsigned i = 0; i < FILE_SHARDS; i++)
		pthread_mutex_destroy(&q->files[i].lock);
	pthread_mutex_destroy(&q->scan_lock);
	pthread_mutex_destroy(&q->count_lock);
	free(q);
}

void quota_get_usage(struct quota *q, struct quota_usage *out)
{
	pthread_mutex_lock(&q->count_lock);
	*out = (struct quota_usage){
		.limit_bytes = q->lim.bytes, .limit_inodes = q->lim.inodes,
		.used_bytes = q->used_bytes > 0 ? (uint64_t)q->used_bytes : 0,
		.used_inodes = q->used_inodes > 0 ? (uint64_t)q->used_inodes : 0,
		.scans = q->scans, .refused = q->refused,
	};
	pthread_mutex_unlock(&q->count_lock);
}

/* ---- checks --------------------------------------------------------------- */

/* Whether used + held + want stays within limit (0: none). */
static bool fits(uint64_t limit, int64_t used, uint64_t held, uint64_t want)
{
	uint64_t u = used > 0 ? (uint64_t)used : 0;

	return !limit || !want || (u + held <= limit && want <= limit - u - held);
}

static bool try_hold(struct quota *q, uint64_t bytes, uint64_t inodes, bool count_refusal)
{
	bool ok;

	pthread_mutex_lock(&q->count_lock);
	ok = fits(q->lim.bytes, q->used_bytes, q->held_bytes, bytes) &&
	     fits(q->lim.inodes, q->used_inodes, q->held_inodes, inodes);
	if (ok) {
		q->held_bytes += bytes;
		q->held_inodes += inodes;
	} else if (count_refusal) {
		q->refused++;
	}
	pthread_mutex_unlock(&q->count_lock);
	return ok;
}

/* Remembers what fd's file has allocated as what is counted for it, unless
 * a change already counted it: quota_settle measures from that. */
static int track_file(struct quota *q, int fd, struct stat *st)
{
	struct file_shard *s;
	unsigned b;

	if (fstat(fd, st) < 0)
		return -errno;
	s = shard_of(q, st->st_ino, &b);
	pthread_mutex_lock(&s->lock);
	file_find(s, b, st->st_dev, st->st_ino, true, st->st_blocks);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* Holds the room, or measures the tree again and tries once more before
 * refusing. A walk forgets what was counted per file, so the file a
 * change is about (track_fd; -1: none) is remembered again after it. */
static int hold(struct quota *q, uint64_t bytes, uint64_t inodes, int track_fd,
		struct quota_ticket *t)
{
	struct stat st;

	*t = (struct quota_ticket){ 0 };
	if (!try_hold(q, bytes, inodes, false)) {
		rescan_if_old(q, RESCAN_BEFORE_REFUSAL_NS);
		if (track_fd >= 0)
			track_file(q, track_fd, &st);
		if (!try_hold(q, bytes, inodes, true))
			return -EDQUOT;
	}
	t->bytes = bytes;
	t->inodes = inodes;
	return 0;
}

int quota_reserve(struct quota *q, uint64_t bytes, uint64_t inodes, struct quota_ticket *t)
{
	rescan_if_old(q, 0);
	return hold(q, bytes, inodes, -1, t);
}

void quota_release(struct quota *q, struct quota_ticket *t)
{
	if (!t->bytes && !t->inodes)
		return;
	pthread_mutex_lock(&q->count_lock);
	q->held_bytes -= t->bytes;
	q->held_inodes -= t->inodes;
	pthread_mutex_unlock(&q->count_lock);
	*t = (struct quota_ticket){ 0 };
}

static uint64_t round_up(uint64_t x, uint64_t unit)
{
	return (x + unit - 1) / unit * unit;
}

/* The bytes a write of [off, end) may newly allocate in a file of this
 * size with this much allocated. Without holes, only the blocks past the
 * last allocated one are new; with holes, any block of the range may be. */
static uint64_t range_need(const struct stat *st, uint64_t off, uint64_t end)
{
	uint64_t unit = st->st_blksize > 0 ? (uint64_t)st->st_blksize : 4096;
	uint64_t size_end = round_up((uint64_t)st->st_size, unit);
	uint64_t first = off / unit * unit, last = round_up(end, unit);
	bool holes = (uint64_t)st->st_blocks * 512 < size_end;

	if (holes)
		return last - first;
	if (last <= size_end)
		return 0;
	return last - (first > size_end ? first : size_end);
}

int quota_reserve_range(struct quota *q, int fd, uint64_t off, uint64_t len,
			struct quota_ticket *t)
{
	struct stat st;
	int ret;

	*t = (struct quota_ticket){ 0 };
	/* A walk first, if one is due, so that it cannot forget the file
	 * between its tracking here and the settle after the change. */
	rescan_if_old(q, 0);
	ret = track_file(q, fd, &st);
	if (ret < 0)
		return ret;
	if (len > UINT64_MAX - off)
		len = UINT64_MAX - off;
	return hold(q, range_need(&st, off, off + len), 0, fd, t);
}

/* What is counted for fd's file becomes its blocks now; *delta is the
 * difference (for a file counted for the first time: 0, or with made, its
 * blocks). The stat and the exchange are under one lock: two changes to
 * one file settling at once each count their own part. false: no stat. */
static bool recount_file(struct quota *q, int fd, bool made, int64_t *delta)
{
	struct counted_file *f;
	struct file_shard *s;
	struct stat st;
	unsigned b;
	bool ok;

	*delta = 0;
	if (fstat(fd, &st) < 0)
		return false;
	s = shard_of(q, st.st_ino, &b);
	pthread_mutex_lock(&s->lock);
	ok = fstat(fd, &st) == 0;
	if (ok) {
		f = file_find(s, b, st.st_dev, st.st_ino, false, 0);
		/* Not counted yet: forgotten by a walk since the change
		 * began, which measured it, or new. */
		if (!f)
			f = file_find(s, b, st.st_dev, st.st_ino, true, st.st_blocks);
		else if (!made)
			*delta = st.st_blocks - f->blocks;
		if (made)
			*delta = st.st_blocks;
		if (f)
			f->blocks = st.st_blocks;
	}
	pthread_mutex_unlock(&s->lock);
	return ok;
}

void quota_settle(struct quota *q, int fd)
{
	int64_t delta;

	recount_file(q, fd, false, &delta);
	add_usage(q, delta * 512, 0);
}

void quota_inode_made(struct quota *q, int fd)
{
	int64_t blocks;

	if (recount_file(q, fd, true, &blocks))
		add_usage(q, blocks * 512, 1);
}

void quota_removing(struct quota *q, int dir_fd, const char *name, struct quota_removal *r)
{
	struct stat st;

	(void)q;
	*r = (struct quota_removal){ 0 };
	if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return;
	r->last_name = S_ISDIR(st.st_mode) || st.st_nlink <= 1;
	r->dev = st.st_dev;
	r->ino = st.st_ino;
	r->blocks = st.st_blocks;
}

void quota_replacing(struct quota *q, int old_dir_fd, const char *oldname, int new_dir_fd,
		     const char *newname, struct quota_removal *r)
{
	struct stat st;

	quota_removing(q, new_dir_fd, newname, r);
	if (r->last_name && fstatat(old_dir_fd, oldname, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    st.st_ino == r->ino && st.st_dev == r->dev)
		r->last_name = false;
}

void quota_removed(struct quota *q, const struct quota_removal *r)
{
	struct counted_file *f;
	struct file_shard *s;
	int64_t blocks = r->blocks;
	unsigned b;

	if (!r->last_name)
		return;
	/* What was counted for it goes. Its entry stays: a guest that still
	 * holds it open and writes is counted for what it adds. */
	s = shard_of(q, r->ino, &b);
	pthread_mutex_lock(&s->lock);
	f = file_find(s, b, r->dev, r->ino, false, 0);
	if (f)
		blocks = f->blocks;
	pthread_mutex_unlock(&s->lock);
	add_usage(q, -blocks * 512, -1);
}

void quota_apply_statfs(struct quota *q, struct quota_statfs *s)
{
	uint64_t unit = s->frsize ? s->frsize : 4096;
	struct quota_usage u;

	rescan_if_old(q, 0);
	quota_get_usage(q, &u);
	if (u.limit_bytes) {
		uint64_t left = u.used_bytes < u.limit_bytes ? (u.limit_bytes - u.used_bytes) / unit : 0;

		s->blocks = u.limit_bytes / unit;
		if (s->bfree > left)
			s->bfree = left;
		if (s->bavail > left)
			s->bavail = left;
	}
	if (u.limit_inodes) {
		uint64_t left = u.used_inodes < u.limit_inodes ? u.limit_inodes - u.used_inodes : 0;

		s->files = u.limit_inodes;
		if (s->ffree > left)
			s->ffree = left;
	}
}

int quota_parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "KMGT";
	unsigned long long n;
	const char *u;
	char *end;
	unsigned shift = 0;

	if (!s[0] || s[0] < '0' || s[0] > '9')
		return -EINVAL;
	errno = 0;
	n = strtoull(s, &end, 10);
	if (errno)
		return -ERANGE;
	if (*end) {
		u = strchr(units, end[0] & ~0x20);
		if (!u || !end[0])
			return -EINVAL;
		shift = 10 * (unsigned)(u - units + 1);
		end++;
		if (!strcmp(end, "iB") || !strcmp(end, "B"))
			end += strlen(end);
		if (*end)
			return -EINVAL;
	}
	if (n > (UINT64_MAX >> 1) >> shift)
		return -ERANGE;
	*out = (uint64_t)n << shift;
	return 0;
}
