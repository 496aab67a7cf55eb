/* The guest's POSIX and flock locks, held on the host (OFD and flock locks) so host processes see them. */
#include "backend/locks.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/wake_signal.h"

#define OWNER_SHARDS 64u
/* FUSE's "to the end of the file". */
#define LK_OFFSET_MAX INT64_MAX
/* A waiter re-checks for cancellation this often even if the wake-up
 * signal came just before it entered the blocking call and was lost. */
#define WAITER_RECHECK_SEC 1

struct lock_owner {
	uint64_t nodeid;
	uint64_t owner;
	int fd;                 /* the OFD holding this owner's locks */
	unsigned refs;          /* the table's link + waiters; shard lock */
	struct lock_owner *next;
};

struct owner_shard {
	pthread_mutex_t lock;
	struct lock_owner *owners;
};

struct lock_table {
	struct open_file_table *open_files;
	struct fd_budget *fds;
	int proc_self_fd;
	struct owner_shard shards[OWNER_SHARDS];
	struct offload *offload;    /* runs the waiters; ends before us */
};

/* One deferred SETLKW, on an offload thread of its own: blocking locks
 * are rare, and a wait may last for ever. */
struct lock_waiter {
	struct offload_job job;     /* first: run() gets it */
	struct lock_table *t;
	struct fuse_deferred *deferred;
	struct open_file *h;
	struct lock_owner *owner;   /* NULL: a flock request on h->fd */
	struct flock fl;
	int flock_op;
	atomic_bool cancelled;
	atomic_bool running;        /* thread is set */
	pthread_t thread;
};

static struct owner_shard *shard_of(struct lock_table *t, uint64_t nodeid)
{
	return &t->shards[nodeid % OWNER_SHARDS];
}

int lock_table_new(struct lock_table **out, struct open_file_table *open_files,
		   struct fd_budget *fds, int proc_self_fd, struct offload *offload)
{
	struct lock_table *t;
	int ret = wake_signal_install();

	if (ret < 0)
		return ret;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->open_files = open_files;
	t->fds = fds;
	t->proc_self_fd = proc_self_fd;
	t->offload = offload;
	for (unsigned i = 0; i < OWNER_SHARDS; i++)
		pthread_mutex_init(&t->shards[i].lock, NULL);
	*out = t;
	return 0;
}

void lock_table_free(struct lock_table *t)
{
	if (!t)
		return;
	locks_drop_all(t);
	for (unsigned i = 0; i < OWNER_SHARDS; i++)
		pthread_mutex_destroy(&t->shards[i].lock);
	free(t);
}

/* ---- lock owners ------------------------------------------------------ */

/*
 * The owner's own open file description of h's file. Read-write when the
 * daemon may, so a read lock taken through one guest fd and a write lock
 * through another land on the same description; else the handle's mode,
 * which is all the guest's requests through it can need.
 */
static int owner_open(struct lock_table *t, struct open_file *h)
{
	char name[16];
	int flags, fd;

	snprintf(name, sizeof(name), "%d", h->fd);
	fd = openat(t->proc_self_fd, name, O_RDWR | O_CLOEXEC | O_NOCTTY);
	if (fd >= 0)
		return fd;
	flags = fcntl(h->fd, F_GETFL);
	if (flags < 0)
		return -errno;
	fd = openat(t->proc_self_fd, name, (flags & O_ACCMODE) | O_CLOEXEC | O_NOCTTY);
	return fd < 0 ? -errno : fd;
}

/* Finds the owner's entry (taking a reference), creating it if create. */
static int owner_get(struct lock_table *t, struct open_file *h, uint64_t nodeid,
		     uint64_t owner, bool create, struct lock_owner **out)
{
	struct owner_shard *s = shard_of(t, nodeid);
	struct lock_owner *o;
	int ret = 0;

	pthread_mutex_lock(&s->lock);
	for (o = s->owners; o; o = o->next)
		if (o->nodeid == nodeid && o->owner == owner)
			break;
	if (o) {
		o->refs++;
		goto out;
	}
	if (!create) {
		ret = -ENOENT;
		goto out;
	}
	ret = fd_budget_take(t->fds);
	if (ret < 0)
		goto out;
	o = calloc(1, sizeof(*o));
	if (!o) {
		ret = -ENOMEM;
		goto give_back;
	}
	o->fd = owner_open(t, h);
	if (o->fd < 0) {
		ret = o->fd;
		goto free_owner;
	}
	o->nodeid = nodeid;
	o->owner = owner;
	o->refs = 2;            /* the table's and the caller's */
	o->next = s->owners;
	s->owners = o;
	goto out;

free_owner:
	free(o);
	o = NULL;
give_back:
	fd_budget_give_back(t->fds);
out:
	pthread_mutex_unlock(&s->lock);
	*out = o;
	return ret;
}

static void owner_put(struct lock_table *t, struct lock_owner *o)
{
	struct owner_shard *s = shard_of(t, o->nodeid);
	bool last;

	pthread_mutex_lock(&s->lock);
	last = --o->refs == 0;
	pthread_mutex_unlock(&s->lock);
	if (!last)
		return;
	/* Closing the description drops whatever it still holds. */
	close(o->fd);
	fd_budget_give_back(t->fds);
	free(o);
}

/* Unlinked owners keep their fd until a waiter still using it is done;
 * their locks go now, as the close in the guest means. */
static void owner_unlink_and_put(struct lock_table *t, struct lock_owner *o)
{
	struct flock all = { .l_type = F_UNLCK, .l_whence = SEEK_SET };

	if (fcntl(o->fd, F_OFD_SETLK, &all) < 0)
		log_warn("locks: dropping locks of nodeid %llu: %s",
			 (unsigned long long)o->nodeid, strerror(errno));
	owner_put(t, o);
}

void locks_drop_owner(struct lock_table *t, uint64_t nodeid, uint64_t owner)
{
	struct owner_shard *s = shard_of(t, nodeid);
	struct lock_owner **pp, *o;

	pthread_mutex_lock(&s->lock);
	for (pp = &s->owners; (o = *pp); pp = &o->next) {
		if (o->nodeid == nodeid && o->owner == owner) {
			*pp = o->next;
			break;
		}
	}
	pthread_mutex_unlock(&s->lock);
	if (o)
		owner_unlink_and_put(t, o);
}

void locks_drop_all(struct lock_table *t)
{
	for (unsigned i = 0; i < OWNER_SHARDS; i++) {
		struct owner_shard *s = &t->shards[i];
		struct lock_owner *o;

		pthread_mutex_lock(&s->lock);
		o = s->owners;
		s->owners = NULL;
		pthread_mutex_unlock(&s->lock);
		while (o) {
			struct lock_owner *next = o->next;

			owner_unlink_and_put(t, o);
			o = next;
		}
	}
}

int locks_probe_fd(int proc_self_fd, int fd, bool posix)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	char name[16];
	int probe, ret;

	snprintf(name, sizeof(name), "%d", fd);
	probe = openat(proc_self_fd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (probe < 0)
		return -errno;
	if (posix) {
		ret = fcntl(probe, F_OFD_GETLK, &fl) < 0 ? -errno : fl.l_type != F_UNLCK;
	} else if (flock(probe, LOCK_EX | LOCK_NB) == 0) {
		/* Nobody held one; ours lasted only until here. */
		flock(probe, LOCK_UN);
		ret = 0;
	} else {
		ret = errno == EWOULDBLOCK ? 1 : -errno;
	}
	close(probe);
	return ret;
}

int locks_find_held(struct lock_table *t, uint64_t *nodeid)
{
	int found = 0;

	for (unsigned i = 0; i < OWNER_SHARDS && !found; i++) {
		struct owner_shard *s = &t->shards[i];

		pthread_mutex_lock(&s->lock);
		for (struct lock_owner *o = s->owners; o && !found; o = o->next) {
			if (locks_probe_fd(t->proc_self_fd, o->fd, true) != 0) {
				*nodeid = o->nodeid;
				found = 1;
			}
		}
		pthread_mutex_unlock(&s->lock);
	}
	return found;
}

/* ---- conversions ------------------------------------------------------ */

static int flock_from_lk(const struct fuse_file_lock *lk, struct flock *fl)
{
	if (lk->type != F_RDLCK && lk->type != F_WRLCK && lk->type != F_UNLCK)
		return -EINVAL;
	if (lk->start > LK_OFFSET_MAX || lk->end < lk->start)
		return -EINVAL;
	memset(fl, 0, sizeof(*fl));
	fl->l_type = (short)lk->type;
	fl->l_whence = SEEK_SET;
	fl->l_start = (off_t)lk->start;
	fl->l_len = lk->end >= LK_OFFSET_MAX ? 0 : (off_t)(lk->end - lk->start + 1);
	return 0;
}

static void lk_from_flock(const struct flock *fl, struct fuse_file_lock *lk)
{
	memset(lk, 0, sizeof(*lk));
	lk->type = (uint32_t)fl->l_type;
	if (fl->l_type == F_UNLCK)
		return;
	lk->start = (uint64_t)fl->l_start;
	lk->end = fl->l_len == 0 ? LK_OFFSET_MAX : (uint64_t)(fl->l_start + fl->l_len - 1);
	/* A host pid means nothing in the guest, and an OFD lock has none:
	 * the guest sees 0 ("not one of yours"). */
	lk->pid = 0;
}

/* ---- GETLK / SETLK ---------------------------------------------------- */

int locks_getlk(struct lock_table *t, struct open_file *h, uint64_t nodeid,
		const struct fuse_lk_in *in, struct fuse_lk_out *out)
{
	struct lock_owner *o = NULL;
	struct flock fl;
	int ret;

	ret = flock_from_lk(&in->lk, &fl);
	if (ret < 0)
		return ret;
	if (fl.l_type == F_UNLCK)
		return -EINVAL;
	/* Through the owner's description its own locks do not conflict;
	 * an owner without one holds nothing, and h->fd holds no OFD lock. */
	owner_get(t, h, nodeid, in->owner, false, &o);
	ret = fcntl(o ? o->fd : h->fd, F_OFD_GETLK, &fl) < 0 ? -errno : 0;
	if (o)
		owner_put(t, o);
	if (ret == 0)
		lk_from_flock(&fl, &out->lk);
	return ret;
}

static int flock_op_of(uint32_t type)
{
	return type == F_RDLCK ? LOCK_SH : type == F_WRLCK ? LOCK_EX : LOCK_UN;
}

/* Takes the lock without blocking: 0, -EAGAIN when someone holds it. */
static int try_lock(struct lock_waiter *w)
{
	int r;

	if (w->owner)
		r = fcntl(w->owner->fd, F_OFD_SETLK, &w->fl);
	else
		r = flock(w->h->fd, w->flock_op | LOCK_NB);
	if (r == 0)
		return 0;
	return errno == EACCES || errno == EWOULDBLOCK ? -EAGAIN : -errno;
}

static int wait_lock(struct lock_waiter *w)
{
	int r;

	if (w->owner)
		r = fcntl(w->owner->fd, F_OFD_SETLKW, &w->fl);
	else
		r = flock(w->h->fd, w->flock_op);
	return r < 0 ? -errno : 0;
}

static void waiter_release(struct lock_waiter *w)
{
	if (w->owner)
		owner_put(w->t, w->owner);
	open_file_put(w->t->open_files, w->h);
}

/* Answers the request and lets go of everything the waiter held. */
static void waiter_done(struct lock_waiter *w, int ret)
{
	fuse_deferred_finish(w->deferred, ret);
	waiter_release(w);
	free(w);
}

/* Runs under the protocol's lock; see fuse_deferred_cancel_fn. */
static void waiter_cancel(void *arg)
{
	struct lock_waiter *w = arg;

	atomic_store(&w->cancelled, true);
	if (atomic_load(&w->running))
		pthread_kill(w->thread, wake_signal());
}

/* Until cancelled, the timer re-sends the wake signal now and then: a
 * signal that arrived between the cancelled check and the blocking call
 * is not lost for good. */
static int recheck_timer_start(timer_t *timer)
{
	struct sigevent sev = {
		.sigev_notify = SIGEV_THREAD_ID,
		.sigev_signo = wake_signal(),
	};
	struct itimerspec its = {
		.it_value = { .tv_sec = WAITER_RECHECK_SEC },
		.it_interval = { .tv_sec = WAITER_RECHECK_SEC },
	};

	sev._sigev_un._tid = gettid();
	if (timer_create(CLOCK_MONOTONIC, &sev, timer) < 0)
		return -errno;
	if (timer_settime(*timer, 0, &its, NULL) < 0) {
		int ret = -errno;

		timer_delete(*timer);
		return ret;
	}
	return 0;
}

static void waiter_run(struct offload_job *job)
{
	struct lock_waiter *w = (struct lock_waiter *)job;
	sigset_t wake;
	timer_t timer;
	int ret;

	/* Queue threads block every signal, and we inherit that. */
	sigemptyset(&wake);
	sigaddset(&wake, wake_signal());
	pthread_sigmask(SIG_UNBLOCK, &wake, NULL);
	w->thread = pthread_self();
	atomic_store(&w->running, true);
	ret = recheck_timer_start(&timer);
	if (ret < 0) {
		log_err("locks: no re-check timer for a waiting lock: %s", strerror(-ret));
		goto finish;
	}
	for (;;) {
		if (atomic_load(&w->cancelled)) {
			ret = -EINTR;
			break;
		}
		ret = wait_lock(w);
		if (ret != -EINTR)
			break;
	}
	timer_delete(timer);
finish:
	waiter_done(w, ret);
}

/* Hands the wait to an offload thread of its own. On success the request is
 * deferred and w belongs to the thread. */
static int waiter_start(struct lock_waiter *w, const struct fuse_request_ctx *ctx)
{
	int ret;

	ret = fuse_deferred_begin(ctx, waiter_cancel, w, &w->deferred);
	if (ret < 0)
		return ret;
	w->job.run = waiter_run;
	ret = offload_submit_blocking(w->t->offload, &w->job);
	if (ret == 0)
		return FERRY_DEFERRED;
	/* The request is already deferred: answer it that way. */
	log_err("locks: cannot start a lock waiter: %s", strerror(-ret));
	waiter_done(w, -ENOLCK);
	return FERRY_DEFERRED;
}

int locks_setlk(struct lock_table *t, const struct fuse_request_ctx *ctx,
		struct open_file *h, uint64_t nodeid, const struct fuse_lk_in *in,
		bool sleep)
{
	struct lock_waiter req = { .t = t, .h = h };
	struct lock_waiter *w;
	int ret;

	ret = flock_from_lk(&in->lk, &req.fl);
	if (ret < 0)
		return ret;
	if (in->lk_flags & FUSE_LK_FLOCK) {
		req.flock_op = flock_op_of(in->lk.type);
	} else {
		bool unlock = req.fl.l_type == F_UNLCK;

		/* Unlocking for an owner that never locked is a no-op. */
		ret = owner_get(t, h, nodeid, in->owner, !unlock, &req.owner);
		if (ret == -ENOENT && unlock)
			return 0;
		if (ret < 0)
			return ret;
	}
	ret = try_lock(&req);
	if (ret != -EAGAIN || !sleep)
		goto put_owner;
	/* A blocking lock never blocks the queue: the wait goes to a thread
	 * of its own, the only allocation on the lock path. */
	w = malloc(sizeof(*w));
	if (!w) {
		ret = -ENOLCK;
		goto put_owner;
	}
	*w = req;
	ret = waiter_start(w, ctx);
	if (ret == FERRY_DEFERRED)
		return ret;
	free(w);
put_owner:
	if (req.owner)
		owner_put(t, req.owner);
	return ret;
}
