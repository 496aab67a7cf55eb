/* The probes' CPU pinning: a thread onto one CPU, if the machine has it. */
#ifndef FERRY_BENCH_CPU_PIN_H
#define FERRY_BENCH_CPU_PIN_H

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

/* Puts thread t on CPU cpu; on a machine without that CPU, leaves it
 * where it is (the probes then measure one CPU, which they say nothing
 * against). */
static inline void pin_thread(pthread_t t, int cpu)
{
	cpu_set_t set;

	if (cpu >= sysconf(_SC_NPROCESSORS_ONLN))
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_setaffinity_np(t, sizeof(set), &set);
}

#endif
