/* The bench tools' CPU clock: user+system time of the process or of the calling thread, in microseconds. */
#ifndef FERRY_BENCH_CPU_TIME_H
#define FERRY_BENCH_CPU_TIME_H

#include <sys/resource.h>

/* who: RUSAGE_SELF (every thread, io-wq workers included) or RUSAGE_THREAD. */
static inline double cpu_time_us(int who)
{
	struct rusage ru;

	getrusage(who, &ru);
	return ru.ru_utime.tv_sec * 1e6 + ru.ru_utime.tv_usec +
	       ru.ru_stime.tv_sec * 1e6 + ru.ru_stime.tv_usec;
}

#endif
