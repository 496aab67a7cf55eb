/* CPU lists ("0-3,6"): the parser of --queue-cpus, the formatter the log and stats use, and the helper threads' CPUs. */
#include "common/cpu_list.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

__attribute__((format(printf, 3, 4)))
static int refuse(char *why, size_t why_len, const char *fmt, ...)
{
	va_list ap;

	if (why && why_len) {
		va_start(ap, fmt);
		vsnprintf(why, why_len, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* One CPU number at *p, decimal digits only (no sign, space or base
 * prefix: "0x10" would be a surprise); *p moves past it. */
static int parse_cpu(const char **p, unsigned *cpu)
{
	unsigned long v = 0;
	const char *s = *p;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	while (isdigit((unsigned char)*s)) {
		v = v * 10 + (unsigned long)(*s - '0');
		if (v >= CPU_SETSIZE)
			return -ERANGE;
		s++;
	}
	*cpu = (unsigned)v;
	*p = s;
	return 0;
}

static int parse_entries(const char *text, struct cpu_list *list, char *why, size_t why_len)
{
	const char *p = text;

	if (!text || !*text)
		return refuse(why, why_len, "an empty list: give CPU numbers such as 0-3,6");
	for (;;) {
		unsigned low, high;
		int ret = parse_cpu(&p, &low);

		if (ret == -ERANGE)
			goto too_big;
		if (ret < 0 && !*p)
			return refuse(why, why_len, "the list ends in '%c': a CPU number must follow",
				      p > text ? p[-1] : ',');
		if (ret < 0)
			return refuse(why, why_len, "expected a CPU number at '%s'", p);
		high = low;
		if (*p == '-') {
			p++;
			ret = parse_cpu(&p, &high);
			if (ret == -ERANGE)
				goto too_big;
			if (ret < 0 && !*p)
				return refuse(why, why_len, "the range %u- has no last CPU", low);
			if (ret < 0)
				return refuse(why, why_len, "expected the range's last CPU at '%s'", p);
			if (high < low)
				return refuse(why, why_len, "the range %u-%u runs backwards: write %u-%u",
					      low, high, high, low);
		}
		for (unsigned cpu = low; cpu <= high; cpu++) {
			if (list->count == CPU_LIST_MAX)
				return refuse(why, why_len, "more than %u CPUs", CPU_LIST_MAX);
			list->cpu[list->count++] = (uint16_t)cpu;
		}
		if (*p == '\0')
			return 0;
		if (*p != ',')
			return refuse(why, why_len, "unexpected '%c' (only numbers, '-' and ',')", *p);
		p++;
	}
too_big:
	return refuse(why, why_len, "a CPU number above %u", CPU_SETSIZE - 1);
}

int cpu_list_parse(const char *text, struct cpu_list *list, char *why, size_t why_len)
{
	int ret;

	list->count = 0;
	ret = parse_entries(text, list, why, why_len);
	/* Nothing half-parsed is left for a caller to use by mistake. */
	if (ret < 0)
		list->count = 0;
	return ret;
}

void cpu_list_to_set(const struct cpu_list *list, cpu_set_t *set)
{
	CPU_ZERO(set);
	for (unsigned i = 0; i < list->count; i++)
		CPU_SET(list->cpu[i], set);
}

char *cpu_set_format(const cpu_set_t *set, char *buf, size_t len)
{
	size_t used = 0;

	if (!len)
		return buf;
	buf[0] = '\0';
	for (unsigned cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		unsigned last = cpu;
		int n;

		if (!CPU_ISSET(cpu, set))
			continue;
		while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, set))
			last++;
		if (last == cpu)
			n = snprintf(buf + used, len - used, "%s%u", used ? "," : "", cpu);
		else
			n = snprintf(buf + used, len - used, "%s%u-%u", used ? "," : "", cpu, last);
		if (n < 0 || (size_t)n >= len - used)
			break;
		used += (size_t)n;
		cpu = last;
	}
	return buf;
}

bool cpu_list_within(const struct cpu_list *list, const cpu_set_t *allowed, unsigned *missing)
{
	for (unsigned i = 0; i < list->count; i++) {
		if (!CPU_ISSET(list->cpu[i], allowed)) {
			*missing = list->cpu[i];
			return false;
		}
	}
	return true;
}

/* Written once before any helper thread starts, read by those who start
 * them: the thread creation that follows orders the two. */
static cpu_set_t helper_cpus;
static bool helper_cpus_set;

void cpu_placement_set_helpers(const cpu_set_t *set)
{
	helper_cpus = *set;
	helper_cpus_set = true;
}

int cpu_placement_helper_attr(pthread_attr_t *attr)
{
	if (!helper_cpus_set)
		return 0;
	return -pthread_attr_setaffinity_np(attr, sizeof(helper_cpus), &helper_cpus);
}
