/* ring-cost: what does the least a virtio backend does per 4 KiB READ cost when its driver runs on the other CPU, with no daemon's code? */
#include <errno.h>
#include <linux/fuse.h>
#include <linux/virtio_ring.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu_pin.h"
#include "probe_files.h"

/*
 * Two threads on two CPUs share a split virtqueue laid out as ferryfs-load
 * lays out its own (one request slot per 8 descriptors, a 4 KiB control
 * page per slot holding the request at its start and the reply header at
 * its middle, a 4 KiB data buffer per slot). The driver keeps DEPTH READs
 * in flight, exactly as ferryfs-load's randread does; the server does only
 * what no backend can skip: it reads the avail index and entry, the chain's
 * descriptors and the request's headers (lines the driver has just written
 * on its CPU), preads 4 KiB from the file into the slot's data buffer,
 * writes the reply header and the used entry, and publishes the used index
 * once per batch. No eventfds: both sides spin, so the figure holds no
 * kick or call (bench/wake-cost and bench/daemon-profile price those). It
 * validates nothing and decodes nothing beyond the opcode.
 *
 * Printed: one thread's own pread loop into one buffer (the bound that
 * ferryfs-load's host column measures); then, run twice, the server's busy
 * time per request (its time less the time it found the ring empty and
 * less its clock reads): with the pread, whose excess over the host loop
 * is what the ring adds to a READ (the lines it shares with the other CPU,
 * and a block landing in one of DEPTH slots instead of one hot buffer);
 * and without it, the ring alone, the least any request costs a backend.
 */

#define RING_NUM 128
#define SEGS_PER_SLOT 8
#define MAX_DEPTH (RING_NUM / SEGS_PER_SLOT)
#define PAGE 4096
#define CTRL_REPLY 2048 /* the reply header's place in a slot's control page */
#define BLOCK 4096
#define FILE_BLOCKS 16384 /* 64 MiB, as bench/compare's file */
/* The shared memory: the descriptor table, the avail and used rings, then
 * a control page and a data page per slot. */
#define SHARED_BYTES ((3 + 2 * MAX_DEPTH) * PAGE)

/* A READ as the driver lays it out at the start of its control page: two
 * readable descriptors, the header and the arguments. */
struct req {
	struct fuse_in_header in;
	struct fuse_read_in read;
};

struct ring {
	struct vring_desc *desc; /* addr holds a pointer: one address space */
	struct vring_avail *avail;
	struct vring_used *used;
	uint8_t *ctrl[MAX_DEPTH];
	uint8_t *data[MAX_DEPTH];
	unsigned depth;
	int fd;
	bool io;               /* the server preads each READ's block */
	volatile bool stop;
	uint64_t served, batches, empty_ns, busy_ns, bad_chains; /* the server's */
	uint64_t bad_replies;                                     /* the driver's */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t rand_offset(uint64_t *seed)
{
	*seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
	return ((*seed >> 33) % FILE_BLOCKS) * BLOCK;
}

/* The driver: queues a READ in slot s (four descriptors, as ferryfs-load). */
static void queue_read(struct ring *r, unsigned s, uint16_t *avail_idx, uint64_t unique,
		       uint64_t *seed)
{
	struct vring_desc *d = &r->desc[s * SEGS_PER_SLOT];
	struct req *q = (struct req *)r->ctrl[s];
	uint16_t first = (uint16_t)(s * SEGS_PER_SLOT);

	memset(q, 0, sizeof(*q));
	q->in.len = sizeof(*q);
	q->in.opcode = FUSE_READ;
	q->in.unique = unique;
	q->in.nodeid = 2;
	q->read.offset = rand_offset(seed);
	q->read.size = BLOCK;
	d[0] = (struct vring_desc){ (uintptr_t)&q->in, sizeof(q->in), VRING_DESC_F_NEXT, first + 1 };
	d[1] = (struct vring_desc){ (uintptr_t)&q->read, sizeof(q->read), VRING_DESC_F_NEXT, first + 2 };
	d[2] = (struct vring_desc){ (uintptr_t)(r->ctrl[s] + CTRL_REPLY), sizeof(struct fuse_out_header),
				    VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, first + 3 };
	d[3] = (struct vring_desc){ (uintptr_t)r->data[s], BLOCK, VRING_DESC_F_WRITE, 0 };
	r->avail->ring[*avail_idx % RING_NUM] = (uint16_t)(s * SEGS_PER_SLOT);
	(*avail_idx)++;
	__atomic_store_n(&r->avail->idx, *avail_idx, __ATOMIC_RELEASE);
}

static void *driver(void *arg)
{
	struct ring *r = arg;
	uint16_t avail_idx = 0, last_used = 0;
	uint64_t unique = 1, seed = 1;

	for (unsigned s = 0; s < r->depth; s++)
		queue_read(r, s, &avail_idx, unique++, &seed);
	while (!r->stop) {
		uint16_t used_idx = __atomic_load_n(&r->used->idx, __ATOMIC_ACQUIRE);

		while (last_used != used_idx) {
			struct vring_used_elem e = r->used->ring[last_used % RING_NUM];
			unsigned s = e.id / SEGS_PER_SLOT;

			/* The reply header is what a driver checks, as ferryfs-load does. */
			if (s >= r->depth) {
				r->bad_replies++;
			} else {
				const struct fuse_out_header *out =
					(const struct fuse_out_header *)(r->ctrl[s] + CTRL_REPLY);

				if (out->error != 0 || out->unique != ((struct req *)r->ctrl[s])->in.unique)
					r->bad_replies++;
			}
			last_used++;
			queue_read(r, s, &avail_idx, unique++, &seed);
		}
	}
	return NULL;
}

/* The server's work for one chain: 0, or -1 if the chain is not the READ the driver queues. */
static int serve(struct ring *r, uint16_t head, uint32_t *len)
{
	struct req q;
	struct fuse_out_header *out;
	struct vring_desc d[4];
	ssize_t n;

	if (head >= RING_NUM)
		return -1;
	for (unsigned i = 0, at = head; i < 4; i++) {
		d[i] = r->desc[at];
		at = d[i].next % RING_NUM;
	}
	if (d[0].len != sizeof(q.in) || d[1].len != sizeof(q.read) ||
	    !(d[2].flags & VRING_DESC_F_WRITE) || d[3].len != BLOCK)
		return -1;
	memcpy(&q.in, (void *)(uintptr_t)d[0].addr, sizeof(q.in));
	memcpy(&q.read, (void *)(uintptr_t)d[1].addr, sizeof(q.read));
	if (q.in.opcode != FUSE_READ)
		return -1;
	n = r->io ? pread(r->fd, (void *)(uintptr_t)d[3].addr, q.read.size, (off_t)q.read.offset)
		  : (ssize_t)q.read.size;
	out = (struct fuse_out_header *)(uintptr_t)d[2].addr;
	out->len = (uint32_t)(sizeof(*out) + (n > 0 ? n : 0));
	out->error = n < 0 ? -errno : 0;
	out->unique = q.in.unique;
	*len = out->len;
	return 0;
}

static void *server(void *arg)
{
	struct ring *r = arg;
	uint16_t last_avail = 0, used_idx = 0;

	while (!r->stop) {
		uint64_t t0 = now_ns();
		uint16_t avail_idx = __atomic_load_n(&r->avail->idx, __ATOMIC_ACQUIRE);

		if (avail_idx == last_avail) {
			r->empty_ns += now_ns() - t0;
			continue;
		}
		while (last_avail != avail_idx) {
			uint16_t head = r->avail->ring[last_avail % RING_NUM];
			uint32_t len = 0;

			if (serve(r, head, &len) < 0)
				r->bad_chains++;
			r->used->ring[used_idx % RING_NUM] = (struct vring_used_elem){ head, len };
			used_idx++;
			last_avail++;
			r->served++;
		}
		__atomic_store_n(&r->used->idx, used_idx, __ATOMIC_RELEASE);
		r->busy_ns += now_ns() - t0;
		r->batches++;
	}
	return NULL;
}

/* What the server's two clock reads per look at the ring cost, in ns. */
static double clock_pair_ns(void)
{
	uint64_t t0 = now_ns();

	for (int i = 0; i < 1000000; i++) {
		now_ns();
		now_ns();
	}
	return (double)(now_ns() - t0) / 1e6;
}

/* One thread's pread loop into one buffer: the host bound, ns per read. */
static double host_loop(int fd, double seconds)
{
	static uint8_t buf[BLOCK] __attribute__((aligned(4096)));
	uint64_t seed = 7, n = 0, t0 = now_ns(), end = t0 + (uint64_t)(seconds * 1e9);

	while (now_ns() < end)
		for (int i = 0; i < 64; i++, n++)
			if (pread(fd, buf, BLOCK, (off_t)rand_offset(&seed)) != BLOCK)
				return -1;
	return (double)(now_ns() - t0) / (double)n;
}

/* One run of the two threads; 0, or -1 if nothing was served or a reply was wrong. */
static int run_ring(struct ring *r, bool io, double seconds)
{
	pthread_t drv, srv;

	memset(r->desc, 0, 3 * PAGE); /* the table and both rings */
	r->io = io;
	r->stop = false;
	r->served = r->batches = r->empty_ns = r->busy_ns = r->bad_chains = r->bad_replies = 0;
	if (pthread_create(&srv, NULL, server, r) != 0)
		return -1;
	if (pthread_create(&drv, NULL, driver, r) != 0) {
		r->stop = true;
		pthread_join(srv, NULL);
		return -1;
	}
	pin_thread(srv, 0);
	pin_thread(drv, 1);
	usleep((useconds_t)(seconds * 1e6));
	r->stop = true;
	pthread_join(drv, NULL);
	pthread_join(srv, NULL);
	return r->served == 0 || r->bad_chains || r->bad_replies ? -1 : 0;
}

/* The file the READs read, laid out in full: 0 or -errno. */
static int fill_file(int fd)
{
	static uint8_t block[BLOCK];

	for (unsigned i = 0; i < FILE_BLOCKS; i++) {
		probe_fill(block, (uint64_t)i * BLOCK, BLOCK);
		if (pwrite(fd, block, BLOCK, (off_t)i * BLOCK) != BLOCK)
			return errno ? -errno : -EIO;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "/dev/shm";
	unsigned depth = argc > 2 ? (unsigned)atoi(argv[2]) : 16;
	double seconds = argc > 3 ? atof(argv[3]) : 3;
	struct ring r = { .depth = depth };
	const char *what;
	uint8_t *shared;
	double host_ns, clock_ns;
	int ret;

	if (argc > 4 || depth < 1 || depth > MAX_DEPTH || seconds <= 0) {
		fprintf(stderr, "usage: ring-cost [DIR [DEPTH(1-%d) [SECONDS]]]\n", MAX_DEPTH);
		return 2;
	}
	/* Rings and slots in a shared memfd, memory of the kind a guest's is. */
	ret = probe_files_open(dir, "ring-cost", SHARED_BYTES, &r.fd, &shared, &what);
	if (ret == 0 && (ret = fill_file(r.fd)) < 0)
		what = dir;
	if (ret < 0) {
		fprintf(stderr, "ring-cost: %s: %s (it writes a 64 MiB file in DIR)\n", what, strerror(-ret));
		return 2;
	}
	r.desc = (struct vring_desc *)shared;
	r.avail = (struct vring_avail *)(shared + PAGE);
	r.used = (struct vring_used *)(shared + 2 * PAGE);
	for (unsigned s = 0; s < depth; s++) {
		r.ctrl[s] = shared + (3 + 2 * s) * PAGE;
		r.data[s] = shared + (4 + 2 * s) * PAGE;
	}
	/* The server on CPU 0, where the host loop runs too. */
	pin_thread(pthread_self(), 0);
	host_loop(r.fd, 0.5);
	host_ns = host_loop(r.fd, seconds);
	clock_ns = clock_pair_ns();
	printf("host pread loop:          %7.3f us per 4 KiB read (%s)\n", host_ns / 1e3, dir);
	for (int io = 1; io >= 0; io--) {
		double busy_ns;

		if (run_ring(&r, io, seconds) < 0 || host_ns < 0) {
			fprintf(stderr, "ring-cost: failed (%llu served, %llu chains and %llu replies wrong)\n",
				(unsigned long long)r.served, (unsigned long long)r.bad_chains,
				(unsigned long long)r.bad_replies);
			return 1;
		}
		/* Less the clock reads that timed each batch, which no backend needs. */
		busy_ns = ((double)r.busy_ns - clock_ns * (double)r.batches) / (double)r.served;
		printf("ring server, %-12s %7.3f us per READ busy, %.0f READs/s, %.2f per batch,"
		       " %.1f%% of its time on an empty ring\n",
		       io ? "with pread:" : "no pread:", busy_ns / 1e3, (double)r.served / seconds,
		       (double)r.served / (double)r.batches,
		       100.0 * (double)r.empty_ns / (double)(r.empty_ns + r.busy_ns));
		if (io)
			printf("the ring with the pread:  %7.3f us per READ over the host loop (%.2fx its time;"
			       " at best %.2fx its reads/s)\n",
			       (busy_ns - host_ns) / 1e3, busy_ns / host_ns, host_ns / busy_ns);
		else
			printf("the ring alone:           %7.3f us per request (no system call, no data buffer)\n",
			       busy_ns / 1e3);
	}
	close(r.fd);
	return 0;
}
