/* The monotonic clock in nanoseconds, for every layer's timings. */
#ifndef FERRY_CLOCK_H
#define FERRY_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t ferry_monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
