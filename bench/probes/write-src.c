/* write-src: does a 1 MiB or 64 KiB pwrite cost more by where its data comes from: a buffer this CPU just filled (the host loop), or queue slots another CPU filled (a daemon's WRITE)? */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu_pin.h"
#include "cpu_time.h"
#include "probe_files.h"

#define MIB (1u << 20)
#define FILE_MIB 64u
#define SLOTS_MAX 16u
#define ROUNDS 3u
_Static_assert(ROUNDS == 3, "median3 takes three rounds");

struct run {
	int fd;
	uint32_t size;            /* bytes per write */
	unsigned writes;
	uint8_t *slots;           /* nslots x size */
	unsigned nslots;
	bool other_cpu;           /* a driver thread fills each slot, as ferryfs-load does */
	_Atomic unsigned state[SLOTS_MAX];  /* 0: the driver's, 1: the writer's */
	uint64_t slot_off[SLOTS_MAX];
	double write_us, fill_us; /* CPU inside pwrite, and in the fills on this CPU */
	int err;
};

static uint64_t block_off(const struct run *r, unsigned i)
{
	return (uint64_t)i * r->size % ((uint64_t)FILE_MIB * MIB);
}

static int write_one(struct run *r, unsigned i)
{
	uint8_t *b = r->slots + (size_t)(i % r->nslots) * r->size;
	uint64_t off = r->other_cpu ? r->slot_off[i % r->nslots] : block_off(r, i);
	double t0 = thread_clock_us();
	ssize_t n = pwrite(r->fd, b, r->size, (off_t)off);

	r->write_us += thread_clock_us() - t0;
	return n == (ssize_t)r->size ? 0 : -EIO;
}

/* The driver: fills each free slot with the next block's pattern and hands it over. */
static void *driver(void *arg)
{
	struct run *r = arg;

	pin_thread(pthread_self(), 1);
	for (unsigned i = 0; i < r->writes; i++) {
		unsigned s = i % r->nslots;

		while (atomic_load_explicit(&r->state[s], memory_order_acquire) != 0)
			sched_yield();
		r->slot_off[s] = block_off(r, i);
		probe_fill(r->slots + (size_t)s * r->size, r->slot_off[s], r->size);
		atomic_store_explicit(&r->state[s], 1, memory_order_release);
	}
	return NULL;
}

/* Fills and writes r's blocks; the writer's CPU per write inside pwrite. */
static double run(struct run *r)
{
	pthread_t t;

	r->write_us = r->fill_us = 0;
	r->err = 0;
	pin_thread(pthread_self(), 0);
	if (!r->other_cpu) {
		for (unsigned i = 0; i < r->writes; i++) {
			double t0 = thread_clock_us();

			probe_fill(r->slots + (size_t)(i % r->nslots) * r->size, block_off(r, i), r->size);
			r->fill_us += thread_clock_us() - t0;
			if (write_one(r, i))
				return -1;
		}
		return r->write_us / r->writes;
	}
	for (unsigned s = 0; s < r->nslots; s++)
		atomic_store(&r->state[s], 0);
	if (pthread_create(&t, NULL, driver, r) != 0)
		return -1;
	/* After an error the slots are still taken and handed back, so the
	 * driver ends too. */
	for (unsigned i = 0; i < r->writes; i++) {
		unsigned s = i % r->nslots;

		while (atomic_load_explicit(&r->state[s], memory_order_acquire) != 1)
			sched_yield();
		if (!r->err && write_one(r, i))
			r->err = EIO;
		atomic_store_explicit(&r->state[s], 0, memory_order_release);
	}
	pthread_join(t, NULL);
	return r->err ? -1 : r->write_us / r->writes;
}

/* The file's blocks read back must be the pattern of the last pass. */
static int check_file(int fd, uint8_t *buf)
{
	for (unsigned m = 0; m < FILE_MIB; m++) {
		if (pread(fd, buf, MIB, (off_t)m * MIB) != (ssize_t)MIB)
			return -EIO;
		for (uint32_t i = 0; i < MIB; i += 8) {
			uint64_t w;

			memcpy(&w, buf + i, sizeof(w));
			if (w != probe_pattern((uint64_t)m * MIB + i))
				return -EBADMSG;
		}
	}
	return 0;
}

/* Times pwrites from each source, the cases alternating round by round, then
 * checks the file. 0, or -EIO with what failed said. */
static int measure_write_src(const struct probe_files *pf)
{
	if (ftruncate(pf->fd, (off_t)FILE_MIB * MIB)) {
		fprintf(stderr, "write-src: ftruncate: %s\n", strerror(errno));
		return -EIO;
	}

	/* bench/compare's write:bs=1M keeps 16 in flight, write:bs=64K,qd=4 four. */
	static const struct { uint32_t size; unsigned depth, writes; } sizes[] = {
		{ MIB, 16, 1500 },
		{ 64u << 10, 4, 20000 },
	};
	printf("CPU per pwrite (us) into a file in %s, %u rounds alternating the cases; the ratio is to the first row's median\n",
	       pf->dir, ROUNDS);
	for (unsigned z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
		uint32_t size = sizes[z].size;
		unsigned depth = sizes[z].depth, writes = sizes[z].writes;
		struct {
			const char *what;
			struct run r;
		} cases[] = {
			{ "one private buffer this CPU just filled (ferryfs-load --host)",
			  { .fd = pf->fd, .size = size, .writes = writes, .slots = pf->priv, .nslots = 1 } },
			{ "slots of a shared memfd this CPU just filled",
			  { .fd = pf->fd, .size = size, .writes = writes, .slots = pf->shared, .nslots = depth } },
			{ "slots of a shared memfd the other CPU filled (a daemon's WRITE)",
			  { .fd = pf->fd, .size = size, .writes = writes, .slots = pf->shared, .nslots = depth,
			    .other_cpu = true } },
		};
		enum { NCASES = sizeof(cases) / sizeof(cases[0]) };
		double us[NCASES][ROUNDS], fill_us[ROUNDS];

		for (unsigned round = 0; round < ROUNDS; round++)
			for (unsigned c = 0; c < NCASES; c++) {
				us[c][round] = run(&cases[c].r);
				if (us[c][round] < 0) {
					fprintf(stderr, "write-src: %s: failed\n", cases[c].what);
					return -EIO;
				}
				if (c == 0)
					fill_us[round] = cases[c].r.fill_us / writes;
			}
		printf("%u KiB writes, %u slots:\n", size >> 10, depth);
		double base = median3(us[0]);
		for (unsigned c = 0; c < NCASES; c++)
			printf("  %-66s %7.1f %7.1f %7.1f  median %7.1f  %.2fx\n", cases[c].what,
			       us[c][0], us[c][1], us[c][2], median3(us[c]), median3(us[c]) / base);
		printf("  %-66s %7.1f %7.1f %7.1f  median %7.1f\n", "(the host loop's fill of one block, this CPU)",
		       fill_us[0], fill_us[1], fill_us[2], median3(fill_us));
	}
	/* Every case wrote the same pattern at the same offsets. */
	if (check_file(pf->fd, pf->scratch)) {
		fprintf(stderr, "write-src: the file does not hold the pattern written\n");
		return -EIO;
	}
	return 0;
}

int main(int argc, char **argv)
{
	return probe_main(argc, argv, "write-src", "writes a 64 MiB file there, checks it, removes it",
			  (size_t)SLOTS_MAX * MIB, measure_write_src);
}
