/* The probes' CPU clocks: user+system time of the process or of the calling thread, in microseconds. */
#ifndef FERRY_BENCH_CPU_TIME_H
#define FERRY_BENCH_CPU_TIME_H

#include <sys/resource.h>
#include <time.h>

/* who: RUSAGE_SELF (every thread, io-wq workers included) or RUSAGE_THREAD. */
static inline double cpu_time_us(int who)
{
	struct rusage ru;

	getrusage(who, &ru);
	return ru.ru_utime.tv_sec * 1e6 + ru.ru_utime.tv_usec +
	       ru.ru_stime.tv_sec * 1e6 + ru.ru_stime.tv_usec;
}

/* The calling thread's CPU time from its clock, in nanosecond steps: for
 * one system call at a time, where getrusage's microseconds are too coarse. */
static inline double thread_clock_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

#endif
