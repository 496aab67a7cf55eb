/* Tests the --queue-cpus list parser (hostile input included), its formatter, and the check against the CPUs a process may use. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "common/cpu_list.h"
#include "../common/check.h"

/* The list text parses to exactly the CPUs in want, in that order. */
static void check_parses(const char *text, const unsigned *want, unsigned nwant)
{
	static struct cpu_list list;
	char why[128] = "";
	int ret = cpu_list_parse(text, &list, why, sizeof(why));
	bool same = ret == 0 && list.count == nwant;

	for (unsigned i = 0; same && i < nwant; i++)
		same = list.cpu[i] == want[i];
	CHECK_MSG(same, "'%s' parses to %u CPU(s) in order%s%s", text, nwant,
		  ret ? ": refused: " : "", ret ? why : "");
}

/* The text is refused with -EINVAL, a reason containing reason_part, and
 * an empty list (nothing half-parsed is used by mistake). */
static void check_refused(const char *text, const char *reason_part)
{
	static struct cpu_list list;
	char why[128] = "";
	int ret = cpu_list_parse(text, &list, why, sizeof(why));

	CHECK_MSG(ret == -EINVAL && strstr(why, reason_part) && list.count == 0,
		  "'%s' refused: %s", text ? text : "(null)", ret ? why : "accepted");
}

static void check_format(const unsigned *cpus, unsigned n, const char *want)
{
	cpu_set_t set;
	char buf[64];

	CPU_ZERO(&set);
	for (unsigned i = 0; i < n; i++)
		CPU_SET(cpus[i], &set);
	cpu_set_format(&set, buf, sizeof(buf));
	CHECK_MSG(strcmp(buf, want) == 0, "format gives '%s' (want '%s')", buf, want);
}

int main(void)
{
	static struct cpu_list list;
	unsigned missing = 0;
	cpu_set_t set;
	char why[128], small[6];

	check_parses("0", (const unsigned[]){ 0 }, 1);
	check_parses("0-3,6", (const unsigned[]){ 0, 1, 2, 3, 6 }, 5);
	/* The order written is the order queues take. */
	check_parses("6,1,0", (const unsigned[]){ 6, 1, 0 }, 3);
	check_parses("1,1", (const unsigned[]){ 1, 1 }, 2);
	check_parses("2-2", (const unsigned[]){ 2 }, 1);
	check_parses("007", (const unsigned[]){ 7 }, 1);
	check_parses("1023", (const unsigned[]){ 1023 }, 1);
	cpu_list_parse("0-1023", &list, why, sizeof(why));
	CHECK_MSG(list.count == CPU_LIST_MAX, "0-1023 is the whole of a CPU set (%u)", list.count);

	check_refused("", "empty");
	check_refused(NULL, "empty");
	check_refused("3-1", "backwards");
	check_refused("0,", "ends in ','");
	check_refused("0-", "no last CPU");
	check_refused(",0", "expected a CPU number");
	check_refused("0,,1", "expected a CPU number");
	check_refused("1024", "above 1023");
	check_refused("99999999999999999999999999", "above 1023");
	check_refused("0-99999999999", "above 1023");
	check_refused("-1", "expected a CPU number");
	check_refused(" 0", "expected a CPU number");
	check_refused("0 ", "unexpected ' '");
	check_refused("0x1", "unexpected 'x'");
	check_refused("+1", "expected a CPU number");
	check_refused("0-3:2", "unexpected ':'");
	check_refused("1-2-3", "unexpected '-'");
	check_refused("a", "expected a CPU number");
	/* Past the size of a set, counting repeats: bounded, not overrun. */
	cpu_list_parse("0-1023,0", &list, why, sizeof(why));
	CHECK_MSG(list.count == 0 && strstr(why, "more than"), "more than a set's worth: %s",
		  why);
	/* A reason longer than its buffer is cut, still terminated. */
	CHECK(cpu_list_parse("3-1", &list, small, sizeof(small)) == -EINVAL &&
	      strlen(small) == sizeof(small) - 1);

	check_format((const unsigned[]){ 0, 1, 2, 3, 6 }, 5, "0-3,6");
	check_format((const unsigned[]){ 1 }, 1, "1");
	check_format((const unsigned[]){ 0, 2, 4, 5 }, 4, "0,2,4-5");
	check_format(NULL, 0, "");
	CPU_ZERO(&set);
	for (unsigned cpu = 0; cpu < CPU_SETSIZE; cpu += 2)
		CPU_SET(cpu, &set);
	cpu_set_format(&set, small, sizeof(small));
	CHECK_MSG(strlen(small) < sizeof(small), "a long set cut to its buffer: '%s'", small);

	cpu_list_parse("0,3", &list, why, sizeof(why));
	CPU_ZERO(&set);
	CPU_SET(0, &set);
	CPU_SET(1, &set);
	CHECK_MSG(!cpu_list_within(&list, &set, &missing) && missing == 3,
		  "CPU 3 outside 0-1 is found (%u)", missing);
	cpu_list_parse("1,0,1", &list, why, sizeof(why));
	CHECK_MSG(cpu_list_within(&list, &set, &missing), "1,0,1 lies within 0-1");
	cpu_list_to_set(&list, &set);
	CHECK_MSG(CPU_COUNT(&set) == 2 && CPU_ISSET(0, &set) && CPU_ISSET(1, &set),
		  "1,0,1 as a set is {0,1}");
	return check_result();
}
