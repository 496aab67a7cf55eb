/* Measurement that needs no FUSE: clocks, CPU time, latency samples and their percentiles. */
#ifndef FERRY_LOAD_MEASURE_H
#define FERRY_LOAD_MEASURE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct load_result;

/* Latency samples in ns, saturated at UINT32_MAX: 4 bytes a request keeps
 * a long run's samples in memory. */
struct load_lat {
	uint32_t *v;
	size_t n, cap;
};

/* Doubles the room for samples: 0 or -ENOMEM. */
int load_lat_grow(struct load_lat *l);

/* Inline: it runs once per measured request. */
static inline int load_lat_add(struct load_lat *l, uint64_t ns)
{
	if (l->n == l->cap && load_lat_grow(l))
		return -ENOMEM;
	l->v[l->n++] = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
	return 0;
}

/* Sorts the samples and fills the latency fields of res. */
void load_latency_summary(struct load_lat *l, struct load_result *res);
uint64_t load_now_ns(void);
/* CPU time of this process so far (user + system). */
double load_self_cpu_us(void);

/* CPU time (user + system) of pid and its descendants, in us; -1 when
 * unreadable or pid <= 0. */
int64_t load_proc_cpu_us(pid_t pid);
/* Sleeps seconds with nothing in flight and returns the CPU us pid used
 * meanwhile, or -1 when unknown. */
double load_idle_cpu_us(pid_t pid, double seconds);

#endif
