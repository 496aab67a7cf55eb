/* ferryfs-load --migrate-to: plays both frontends of a live migration, saving one backend's state and loading it into another, then using the old node ids and handles. */
/*
 * The order is QEMU 10's (docs/interop/vhost-user.rst, "Migrating back-end state"):
 * source: the migration announced (SET_LOG_BASE, SET_FEATURES with VHOST_F_LOG_ALL, the rings'
 * addresses again with the log flag) while requests go on, then the rings disabled and
 * stopped (GET_VRING_BASE), SET_DEVICE_STATE_FD save into a pipe
 * read to EOF, CHECK_DEVICE_STATE; destination: connected and negotiated, SET_DEVICE_STATE_FD
 * load from the pipe, CHECK_DEVICE_STATE, then a normal start with SET_VRING_BASE at the
 * source's indices and no FUSE INIT. Both backends map the same memfd here, so the rings and
 * the driver-side indices simply go on: what moves is only the backend's state.
 *
 * Before: INIT, a work directory, --inodes files created (their lookups kept), the first
 * MIG_HANDLES of them kept open and written with the file pattern. After, through the
 * destination: GETATTR of every node id (same inode number as before), READ through every kept
 * handle (the pattern), LOOKUP of a sample of names (the same node id: the table moved, it
 * was not rebuilt), and a new CREATE whose node id and handle collide with none the guest holds.
 * While the source logs, the pages its replies were written to (the reply header, the READ
 * data, the used ring) must be marked in the dirty log: pre-copy would miss them otherwise.
 */
#include "engine.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "fuse_requests.h"
#include "measure.h"
#include "migrate.h"
#include "workloads.h"

#define MIG_HANDLES    16u
#define MIG_DATA       4096u
#define MIG_LOOKUPS    1000u
#define MIG_MAX_STREAM (1ull << 30)

struct mig {
	struct run *r;
	uint64_t n;
	uint64_t *nodeid, *ino, *fh;   /* per file; fh 0 when released */
	uint64_t bad;                  /* wrong answers after the move */
};
static struct mig M;

static void file_name(char *buf, size_t len, uint64_t i)
{
	snprintf(buf, len, "m%07llu", (unsigned long long)i);
}

/* ---- Before: CREATE each file, RELEASE all but the first MIG_HANDLES ---- */

static int mk_next(struct run *r, struct ld_slot *s)
{
	uint64_t i;

	if (s->w.step == 1) {
		i = s->w.io.off;
		s->w.step = 2;
		return fr_release(&s->fc, load_unique(r), FUSE_RELEASE, M.nodeid[i], M.fh[i],
				  O_RDWR);
	}
	if (r->cursor >= M.n)
		return -ENODATA;
	i = r->cursor++;
	s->w.io.off = i;
	s->w.step = 0;
	file_name(s->w.name, sizeof(s->w.name), i);
	return fr_create(&s->fc, load_unique(r), r->workdir, s->w.name);
}

static int mk_done(struct run *r, struct ld_slot *s, char *why, size_t whylen)
{
	const struct fuse_entry_out *e = fc_out_args(&s->fc);
	uint64_t i = s->w.io.off;
	int ret;

	if (s->w.step == 2) {
		M.fh[i] = 0;
		s->w.step = 0;
		return 0;
	}
	ret = fr_check_entry(e, S_IFREG, "CREATE", why, whylen);
	if (ret)
		return ret;
	M.nodeid[i] = e->nodeid;
	M.ino[i] = e->attr.ino;
	M.fh[i] = ((const struct fuse_open_out *)(e + 1))->fh;
	/* Kept open across the move, or released now (the next request of this chain). */
	s->w.step = i < MIG_HANDLES ? 0 : 1;
	return 0;
}

/* ---- After: GETATTR of every node id through the destination ---- */

static int ga_next(struct run *r, struct ld_slot *s)
{
	if (r->cursor >= M.n)
		return -ENODATA;
	s->w.io.off = r->cursor++;
	return fr_getattr(&s->fc, load_unique(r), M.nodeid[s->w.io.off]);
}

static int ga_done(struct run *r, struct ld_slot *s, char *why, size_t whylen)
{
	const struct fuse_attr_out *a = fc_out_args(&s->fc);
	uint64_t i = s->w.io.off;

	if (a->attr.ino != M.ino[i]) {
		snprintf(why, whylen, "GETATTR of node %llu (file %llu): ino %llu, was %llu",
			 (unsigned long long)M.nodeid[i], (unsigned long long)i,
			 (unsigned long long)a->attr.ino, (unsigned long long)M.ino[i]);
		return -EBADMSG;
	}
	r->ops++;
	return 0;
}

static int write_pattern(struct run *r, uint64_t i)
{
	struct fc_slot *s = load_sync_slot(r);
	int ret = fr_write(s, load_unique(r), M.nodeid[i], M.fh[i], 0, MIG_DATA);

	return ret ? ret : load_sync_call(r, s);
}

static int read_pattern(struct run *r, uint64_t i)
{
	struct fc_slot *s = load_sync_slot(r);
	uint64_t bad;
	int ret = fr_read(s, load_unique(r), M.nodeid[i], M.fh[i], 0, MIG_DATA, true);

	if (!ret)
		ret = load_sync_call(r, s);
	if (ret)
		return ret;
	if (fc_pattern_verify(s->data, 0, MIG_DATA, true, &bad)) {
		fprintf(stderr, "ferryfs-load: READ through handle %llu of file %llu: wrong data at %llu\n",
			(unsigned long long)M.fh[i], (unsigned long long)i, (unsigned long long)bad);
		M.bad++;
	}
	return 0;
}

static int lookup_same(struct run *r, uint64_t i)
{
	struct fc_slot *s = load_sync_slot(r);
	char name[32];
	int ret;

	file_name(name, sizeof(name), i);
	ret = fr_lookup(s, load_unique(r), r->workdir, name);
	if (!ret)
		ret = load_sync_call(r, s);
	if (ret)
		return ret;
	if (((const struct fuse_entry_out *)fc_out_args(s))->nodeid != M.nodeid[i]) {
		fprintf(stderr, "ferryfs-load: LOOKUP %s after the move: node %llu, was %llu\n", name,
			(unsigned long long)((const struct fuse_entry_out *)fc_out_args(s))->nodeid,
			(unsigned long long)M.nodeid[i]);
		M.bad++;
	}
	/* That LOOKUP took one more reference; give it back. */
	return load_forget_add(r, M.nodeid[i], 1);
}

/* A new file on the destination: its node id and handle must be new to the guest. */
static int create_new(struct run *r)
{
	struct fc_slot *s = load_sync_slot(r);
	uint64_t nodeid, ino, fh, i;
	int ret;

	ret = load_sync_create(r, r->workdir, "after-move", &nodeid, &ino, &fh);
	if (ret)
		return ret;
	for (i = 0; i < M.n; i++) {
		if (M.nodeid[i] == nodeid || (M.fh[i] && M.fh[i] == fh)) {
			fprintf(stderr, "ferryfs-load: CREATE after the move: node %llu fh %llu already held (file %llu)\n",
				(unsigned long long)nodeid, (unsigned long long)fh,
				(unsigned long long)i);
			M.bad++;
			break;
		}
	}
	ret = fr_release(s, load_unique(r), FUSE_RELEASE, nodeid, fh, O_RDWR);
	return ret ? ret : load_sync_call(r, s);
}

/* ---- The move ---- */

/* Reads the whole save stream (the backend writes it from its own thread after the reply). */
static int read_all(int fd, uint8_t **buf, size_t *len)
{
	size_t cap = 1 << 20;
	ssize_t n;

	*len = 0;
	*buf = malloc(cap);
	if (!*buf)
		return -ENOMEM;
	for (;;) {
		if (*len == cap) {
			uint8_t *nb;

			if (cap >= MIG_MAX_STREAM)
				return -E2BIG;
			nb = realloc(*buf, cap * 2);
			if (!nb)
				return -ENOMEM;
			*buf = nb;
			cap *= 2;
		}
		n = read(fd, *buf + *len, cap - *len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
		*len += (size_t)n;
	}
}

static int write_all(int fd, const uint8_t *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* SET_DEVICE_STATE_FD in direction dir with one end of a new pipe; the
 * other end in *mine (read end for a save, write end for a load). */
static int state_pipe(struct fe_dev *d, uint32_t dir, int *mine)
{
	int p[2], ret;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	ret = fe_set_device_state_fd(d, dir, dir == 0 ? p[1] : p[0]);
	/* The backend has its own copy now: ours must go, or no EOF ever comes. */
	close(dir == 0 ? p[1] : p[0]);
	if (ret) {
		close(dir == 0 ? p[0] : p[1]);
		return ret;
	}
	*mine = dir == 0 ? p[0] : p[1];
	return 0;
}

static double ms_since(uint64_t t0)
{
	return (double)(load_now_ns() - t0) / 1e6;
}

static bool logged(const uint8_t *log, uint64_t log_size, uint64_t gpa)
{
	uint64_t page = gpa / 4096;

	return page / 8 < log_size && (__atomic_load_n(&log[page / 8], __ATOMIC_RELAXED) & (1u << (page % 8)));
}

/* Announces the migration, then GETATTR and READ through the source while it logs; counts
 * the pages those replies wrote that the log marks. No log offered: nothing announced. */
static int announce(struct run *r, struct mig_result *res, uint8_t **log, uint64_t *log_size)
{
	struct fc_slot *s = load_sync_slot(r);
	uint64_t pages = (r->dev.mem_size + 4095) / 4096;
	int fd, ret;

	if (!fe_can_log(&r->dev))
		return 0;
	*log_size = ((pages + 7) / 8 + 4095) & ~4095ull;
	fd = memfd_create("ferryfs-load-dirty-log", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)*log_size) < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	*log = mmap(NULL, *log_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (*log == MAP_FAILED) {
		ret = -errno;
		*log = NULL;
		close(fd);
		return ret;
	}
	ret = fe_log_start(&r->dev, fd, *log_size);
	close(fd);
	if (ret) {
		fprintf(stderr, "ferryfs-load: announcing the migration (dirty log): %s\n", strerror(-ret));
		return ret;
	}
	res->announced = true;
	if (!M.n)
		return 0;
	ret = fr_getattr(s, load_unique(r), M.nodeid[0]);
	if (!ret)
		ret = load_sync_call(r, s);
	if (ret)
		return ret;
	res->log_expected += 2;
	res->log_marked += logged(*log, *log_size, s->ctrl_gpa + FC_CTRL_WR);
	res->log_marked += logged(*log, *log_size, r->dev.queues[1].used_gpa);
	ret = fr_read(s, load_unique(r), M.nodeid[0], M.fh[0], 0, MIG_DATA, true);
	if (!ret)
		ret = load_sync_call(r, s);
	if (ret)
		return ret;
	res->log_expected++;
	res->log_marked += logged(*log, *log_size, s->data_gpa);
	if (res->log_marked != res->log_expected)
		fprintf(stderr, "ferryfs-load: dirty log: %llu of %llu pages written while logging are not marked\n",
			(unsigned long long)(res->log_expected - res->log_marked),
			(unsigned long long)res->log_expected);
	M.bad += res->log_expected - res->log_marked;
	return 0;
}

static int move(struct run *r, const char *dest, struct mig_result *res)
{
	struct timeval tv = { .tv_sec = 30 };
	struct fe_dev b;
	uint8_t *stream = NULL, *log = NULL;
	uint64_t t, log_size = 0;
	size_t len = 0;
	unsigned i;
	int fd, ret;

	ret = announce(r, res, &log, &log_size);
	if (ret)
		goto out;
	t = load_now_ns();
	for (i = 0; i < r->dev.nqueues; i++) {
		ret = fe_stop_queue(&r->dev, i, &r->dev.queues[i].base);
		if (ret) {
			fprintf(stderr, "ferryfs-load: stopping ring %u on the source: %s\n", i, strerror(-ret));
			goto out;
		}
		r->dev.queues[i].base_set = true;
	}
	res->suspend_ms = ms_since(t);

	t = load_now_ns();
	ret = state_pipe(&r->dev, 0, &fd);
	if (!ret) {
		ret = read_all(fd, &stream, &len);
		close(fd);
	}
	if (!ret)
		ret = fe_check_device_state(&r->dev);
	res->save_ms = ms_since(t);
	res->stream_bytes = len;
	if (ret) {
		fprintf(stderr, "ferryfs-load: saving the source's state: %s\n", strerror(-ret));
		goto out;
	}

	ret = fe_connect(&b, dest);
	if (ret) {
		fprintf(stderr, "ferryfs-load: connect %s: %s\n", dest, strerror(-ret));
		goto out;
	}
	/* A backend that never answers a migration message fails the run, not hangs it. */
	setsockopt(b.sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	b.want_packed = r->dev.want_packed;
	b.want_device_state = true;
	ret = fe_negotiate(&b, r->cfg->event_idx);
	if (!ret && !fe_has_device_state(&b)) {
		fprintf(stderr, "ferryfs-load: the destination offers no DEVICE_STATE protocol feature\n");
		ret = -ENOTSUP;
	}
	if (!ret && b.features != r->dev.features) {
		fprintf(stderr, "ferryfs-load: the destination acks features %#llx, the source %#llx\n",
			(unsigned long long)b.features, (unsigned long long)r->dev.features);
		ret = -EPROTO;
	}
	if (ret) {
		fe_close(&b);
		goto out;
	}
	t = load_now_ns();
	ret = state_pipe(&b, 1, &fd);
	if (!ret) {
		ret = write_all(fd, stream, len);
		close(fd);
	}
	if (!ret)
		ret = fe_check_device_state(&b);
	res->load_ms = ms_since(t);
	if (ret) {
		fprintf(stderr, "ferryfs-load: loading the state into the destination: %s\n", strerror(-ret));
		fe_close(&b);
		goto out;
	}

	/* The destination takes the source's place: same memory, rings, eventfds. */
	close(r->dev.sock);
	r->dev.sock = b.sock;
	r->dev.dev_features = b.dev_features;
	r->dev.dev_protocol_features = b.dev_protocol_features;
	r->dev.protocol_features = b.protocol_features;
	r->dev.queue_num_max = b.queue_num_max;
	t = load_now_ns();
	ret = fe_start(&r->dev);
	res->start_ms = ms_since(t);
out:
	if (log)
		munmap(log, log_size);
	free(stream);
	return ret;
}

int migrate_run(const struct load_cfg *cfg, struct mig_result *res)
{
	struct run r = { .cfg = cfg, .rng = cfg->seed | 1 };
	uint64_t i, t;
	int ret;

	memset(res, 0, sizeof(*res));
	memset(&M, 0, sizeof(M));
	r.dev.sock = -1;
	r.dev.memfd = -1;
	/* No data file: the move's own files are made below. */
	r.wl = load_workload_find("getattr");
	M.r = &r;
	M.n = cfg->inodes;
	M.nodeid = calloc(M.n, sizeof(*M.nodeid));
	M.ino = calloc(M.n, sizeof(*M.ino));
	M.fh = calloc(M.n, sizeof(*M.fh));
	if (!r.wl || !M.nodeid || !M.ino || !M.fh) {
		ret = -ENOMEM;
		goto out;
	}

	ret = fe_connect(&r.dev, cfg->socket);
	if (ret) {
		fprintf(stderr, "ferryfs-load: connect %s: %s\n", cfg->socket, strerror(-ret));
		goto out;
	}
	setsockopt(r.dev.sock, SOL_SOCKET, SO_RCVTIMEO, &(struct timeval){ .tv_sec = 30 },
		   sizeof(struct timeval));
	r.dev.want_packed = cfg->packed;
	r.dev.want_device_state = true;
	ret = fe_negotiate(&r.dev, cfg->event_idx);
	if (ret)
		goto out;
	if (!fe_has_device_state(&r.dev)) {
		fprintf(stderr, "ferryfs-load: %s offers no DEVICE_STATE protocol feature (no migration)\n",
			cfg->socket);
		res->no_device_state = true;
		ret = -ENOTSUP;
		goto out;
	}
	ret = load_alloc_queues(&r);
	if (!ret)
		ret = fe_start(&r.dev);
	if (!ret)
		ret = load_init(&r);
	if (ret)
		goto out;
	snprintf(r.workdir_name, sizeof(r.workdir_name), "ferryfs-load-mig.%d", (int)getpid());
	ret = load_sync_mkdir(&r, FUSE_ROOT_ID, r.workdir_name, &r.workdir);
	if (ret)
		goto out;
	t = load_now_ns();
	r.cursor = 0;
	ret = load_engine(&r, "migrate-setup", mk_next, mk_done, 0, 0);
	for (i = 0; !ret && i < M.n && i < MIG_HANDLES; i++)
		ret = write_pattern(&r, i);
	if (!ret)
		ret = load_drain(&r);
	res->setup_ms = ms_since(t);
	if (ret || r.errors)
		goto out;

	ret = move(&r, cfg->migrate_to, res);
	if (ret)
		goto out;

	t = load_now_ns();
	r.cursor = 0;
	r.ops = 0;
	ret = load_engine(&r, "migrate-getattr", ga_next, ga_done, 0, 0);
	res->getattrs = r.ops;
	for (i = 0; !ret && i < M.n && i < MIG_HANDLES; i++) {
		ret = read_pattern(&r, i);
		res->reads += !ret;
	}
	for (i = 0; !ret && i < M.n && res->lookups < MIG_LOOKUPS;
	     i += M.n / MIG_LOOKUPS ? M.n / MIG_LOOKUPS : 1) {
		ret = lookup_same(&r, i);
		res->lookups += !ret;
	}
	if (!ret)
		ret = create_new(&r);
	for (i = 0; !ret && i < M.n && i < MIG_HANDLES; i++) {
		struct fc_slot *s = load_sync_slot(&r);

		ret = fr_release(s, load_unique(&r), FUSE_RELEASE, M.nodeid[i], M.fh[i], O_RDWR);
		if (!ret)
			ret = load_sync_call(&r, s);
	}
	if (!ret)
		ret = load_drain(&r);
	res->verify_ms = ms_since(t);
out:
	res->errors = r.errors + M.bad;
	res->inodes = M.n;
	res->open_files = M.n < MIG_HANDLES ? M.n : MIG_HANDLES;
	res->workdir = r.workdir_name[0] ? strdup(r.workdir_name) : NULL;
	free(M.nodeid);
	free(M.ino);
	free(M.fh);
	load_free_run(&r);
	return ret;
}
