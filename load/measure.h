/* Measurement that needs no FUSE: CPU time from /proc and the daemon's CPU while idle. */
#ifndef FERRY_LOAD_MEASURE_H
#define FERRY_LOAD_MEASURE_H

#include <stdint.h>
#include <sys/types.h>

/* CPU time (user + system) of pid and its descendants, in us; -1 when
 * unreadable or pid <= 0. */
int64_t load_proc_cpu_us(pid_t pid);
/* Sleeps seconds with nothing in flight and returns the CPU us pid used
 * meanwhile, or -1 when unknown. */
double load_idle_cpu_us(pid_t pid, double seconds);

#endif
