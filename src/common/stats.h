/* Run-time counters that one thread writes and a stats reader sums racily, without locks. */
#ifndef FERRY_STATS_H
#define FERRY_STATS_H

#include <stdint.h>

/*
 * Every counter has a single writer (the thread that owns it) and is read by
 * the stats thread while it changes: naturally aligned 64-bit words with
 * relaxed atomic loads and stores, so a reader sees some recent value and
 * never a torn one, and the writer pays no locked instruction.
 */
static inline void ferry_count(uint64_t *counter, uint64_t n)
{
	__atomic_store_n(counter, __atomic_load_n(counter, __ATOMIC_RELAXED) + n,
			 __ATOMIC_RELAXED);
}

static inline uint64_t ferry_count_read(const uint64_t *counter)
{
	return __atomic_load_n(counter, __ATOMIC_RELAXED);
}

/* Log2 buckets: bucket 0 holds the value 0, bucket b >= 1 holds
 * [2^(b-1), 2^b); the last bucket also takes everything larger. In
 * microseconds the last one starts at 2^22 us, about 4 s. */
#define FERRY_HIST_BUCKETS 24

struct ferry_hist {
	uint64_t bucket[FERRY_HIST_BUCKETS];
};

static inline unsigned ferry_hist_bucket(uint64_t value)
{
	unsigned b = value ? 64u - (unsigned)__builtin_clzll(value) : 0;

	return b < FERRY_HIST_BUCKETS ? b : FERRY_HIST_BUCKETS - 1;
}

static inline void ferry_hist_add(struct ferry_hist *h, uint64_t value)
{
	ferry_count(&h->bucket[ferry_hist_bucket(value)], 1);
}

/* Lowest value bucket b holds. */
static inline uint64_t ferry_hist_bucket_floor(unsigned b)
{
	return b ? 1ull << (b - 1) : 0;
}

/* dst += src, reading src racily (src may be live). */
void ferry_hist_accumulate(struct ferry_hist *dst, const struct ferry_hist *src);
uint64_t ferry_hist_total(const struct ferry_hist *h);
/* The floor of the bucket holding the q-quantile (0 < q <= 1): an
 * order-of-magnitude figure, which is all log2 buckets can give. */
uint64_t ferry_hist_quantile_floor(const struct ferry_hist *h, double q);

#endif
