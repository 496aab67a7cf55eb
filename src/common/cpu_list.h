/* CPU lists as taskset and cpuset write them ("0-3,6"): parsing, formatting, and placing a thread on them. */
#ifndef FERRY_CPU_LIST_H
#define FERRY_CPU_LIST_H

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Entries a list may hold once its ranges are spelled out: each CPU a
 * cpu_set_t can name, once. */
#define CPU_LIST_MAX CPU_SETSIZE

/* The CPUs in the order written, a range from low to high; count 0: no
 * list given. A CPU may be named twice (a later queue shares it). */
struct cpu_list {
	unsigned count;
	uint16_t cpu[CPU_LIST_MAX];
};

/* Parses text into list: comma-separated CPU numbers and LOW-HIGH ranges,
 * nothing else. Returns 0, or -EINVAL with the reason in why (at most
 * why_len bytes, always terminated). */
int cpu_list_parse(const char *text, struct cpu_list *list, char *why, size_t why_len);
/* The set of every CPU the list names. */
void cpu_list_to_set(const struct cpu_list *list, cpu_set_t *set);
/* Writes set as a compact list ("0-3,6") into buf; "" for an empty set.
 * Returns buf; cut short (but terminated) if buf is too small. */
char *cpu_set_format(const cpu_set_t *set, char *buf, size_t len);
/* Whether every CPU of list is in allowed; if not, *missing is the first
 * that is not. */
bool cpu_list_within(const struct cpu_list *list, const cpu_set_t *allowed, unsigned *missing);

/* The CPUs the daemon's helper threads (read-split helper, offload pool)
 * run on, set once at start-up before any of them exists; no call: they
 * inherit their creator's CPUs as usual. */
void cpu_placement_set_helpers(const cpu_set_t *set);
/* Puts the helper CPUs, if set, into attr for a thread about to start:
 * 0, or -errno from pthread_attr_setaffinity_np. */
int cpu_placement_helper_attr(pthread_attr_t *attr);

#endif
