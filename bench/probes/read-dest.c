/* read-dest: does a 1 MiB pread cost more by where its data lands? One private buffer (the host loop), rotating queue slots, a shared memfd, and slots another CPU checks, as a driver does. */
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
#define SLOTS 4u              /* bench/compare's 1 MiB reads keep 4 in flight */
#define READS 3000u
#define STRIDE 4096u          /* ferryfs-load's sparse poison and check: a word a page */

static void poison(uint8_t *b, uint64_t off)
{
	for (uint32_t i = 0; i < MIB; i += STRIDE) {
		uint64_t w = ~probe_pattern(off + i);

		memcpy(b + i, &w, sizeof(w));
	}
}

static int verify(const uint8_t *b, uint64_t off)
{
	for (uint32_t i = 0; i < MIB; i += STRIDE) {
		uint64_t w;

		memcpy(&w, b + i, sizeof(w));
		if (w != probe_pattern(off + i))
			return -EBADMSG;
	}
	return 0;
}

struct run {
	int fd;
	uint8_t *slots;           /* SLOTS MiB, or one MiB when slots == 1 */
	unsigned nslots;
	bool other_cpu;           /* a driver thread poisons and checks each slot */
	_Atomic unsigned state[SLOTS];  /* 0: the driver's, 1: the copier's */
	uint64_t slot_off[SLOTS];
	double copy_us;           /* the copier's CPU inside pread, summed */
	int err;
};

static int copy_one(struct run *r, unsigned i)
{
	uint8_t *b = r->slots + (size_t)(i % r->nslots) * MIB;
	uint64_t off = (uint64_t)(i % FILE_MIB) * MIB;
	double t0 = thread_clock_us();
	ssize_t n = pread(r->fd, b, MIB, (off_t)off);

	r->copy_us += thread_clock_us() - t0;
	return n == (ssize_t)MIB ? 0 : -EIO;
}

/* The driver: hands each slot over poisoned, checks it when it comes back. */
static void *driver(void *arg)
{
	struct run *r = arg;

	pin_thread(pthread_self(), 1);
	for (unsigned i = 0; i < READS + SLOTS; i++) {
		unsigned s = i % SLOTS;

		while (atomic_load_explicit(&r->state[s], memory_order_acquire) != 0)
			sched_yield();
		if (i >= SLOTS && verify(r->slots + (size_t)s * MIB, r->slot_off[s]) && !r->err)
			r->err = EBADMSG;
		if (i >= READS)
			continue;
		r->slot_off[s] = (uint64_t)(i % FILE_MIB) * MIB;
		poison(r->slots + (size_t)s * MIB, r->slot_off[s]);
		atomic_store_explicit(&r->state[s], 1, memory_order_release);
	}
	return NULL;
}

/* CPU us per pread into the destination r describes. */
static double run(struct run *r)
{
	pthread_t t;

	r->copy_us = 0;
	r->err = 0;
	pin_thread(pthread_self(), 0);
	if (!r->other_cpu) {
		for (unsigned i = 0; i < READS; i++) {
			uint8_t *b = r->slots + (size_t)(i % r->nslots) * MIB;
			uint64_t off = (uint64_t)(i % FILE_MIB) * MIB;

			poison(b, off);
			if (copy_one(r, i) || verify(b, off))
				return -1;
		}
		return r->copy_us / READS;
	}
	for (unsigned s = 0; s < SLOTS; s++)
		atomic_store(&r->state[s], 0);
	if (pthread_create(&t, NULL, driver, r) != 0)
		return -1;
	for (unsigned i = 0; i < READS && !r->err; i++) {
		unsigned s = i % SLOTS;

		while (atomic_load_explicit(&r->state[s], memory_order_acquire) != 1)
			sched_yield();
		if (copy_one(r, i))
			r->err = EIO;
		atomic_store_explicit(&r->state[s], 0, memory_order_release);
	}
	pthread_join(t, NULL);
	return r->err ? -1 : r->copy_us / READS;
}

/* Fills the file, then times its preads into each destination, the cases
 * alternating round by round. 0, or -EIO with what failed said. */
static int measure_read_dest(const struct probe_files *pf)
{
	for (unsigned m = 0; m < FILE_MIB; m++) {
		probe_fill(pf->scratch, (uint64_t)m * MIB, MIB);
		if (pwrite(pf->fd, pf->scratch, MIB, (off_t)m * MIB) != (ssize_t)MIB) {
			fprintf(stderr, "read-dest: write: %s\n", strerror(errno));
			return -EIO;
		}
	}

	struct {
		const char *what;
		struct run r;
	} cases[] = {
		{ "one private buffer, this CPU checks (ferryfs-load --host)",
		  { .fd = pf->fd, .slots = pf->priv, .nslots = 1 } },
		{ "4 private slots, this CPU checks",
		  { .fd = pf->fd, .slots = pf->priv, .nslots = SLOTS } },
		{ "4 slots of a shared memfd, this CPU checks",
		  { .fd = pf->fd, .slots = pf->shared, .nslots = SLOTS } },
		{ "4 slots of a shared memfd, the other CPU checks (a daemon's READ)",
		  { .fd = pf->fd, .slots = pf->shared, .nslots = SLOTS, .other_cpu = true } },
	};
	enum { NCASES = sizeof(cases) / sizeof(cases[0]) };
	double us[NCASES][3];

	/* Rounds alternate the cases, so a change in the machine's load hits all. */
	for (unsigned round = 0; round < 3; round++)
		for (unsigned c = 0; c < NCASES; c++) {
			us[c][round] = run(&cases[c].r);
			if (us[c][round] < 0) {
				fprintf(stderr, "read-dest: %s: failed\n", cases[c].what);
				return -EIO;
			}
		}
	printf("CPU per 1 MiB pread (us), 3 rounds of %u; the ratio is to the first row's median\n", READS);
	double base = median3(us[0]);
	for (unsigned c = 0; c < NCASES; c++)
		printf("  %-68s %6.1f %6.1f %6.1f  median %6.1f  %.2fx\n", cases[c].what, us[c][0],
		       us[c][1], us[c][2], median3(us[c]), median3(us[c]) / base);
	return 0;
}

int main(int argc, char **argv)
{
	return probe_main(argc, argv, "read-dest", "writes a 64 MiB file there, reads it, removes it",
			  (size_t)SLOTS * MIB, measure_read_dest);
}
