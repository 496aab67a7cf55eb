/* Unit tests and test clients: the CHECK macros, the failure and skip counts and the exit codes (0 pass, 1 fail, 77 skip). */
#ifndef FERRY_TEST_CHECK_H
#define FERRY_TEST_CHECK_H

#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

/*
 * Include this from a test program's main file only: each program has one
 * failure count. Every failure prints a line that starts with "FAIL", which
 * scripts/check.sh repeats in its summary.
 *
 *   CHECK(cond)                 silent when it holds; else "FAIL  file:line: cond"
 *   CHECK_EQ(a, b)              the same for a == b, with both values printed
 *   CHECK_MSG(cond, fmt, ...)   always one line: "ok    what" or "FAIL  what (file:line)"
 *   SKIP_CASE(fmt, ...)         "SKIP  what": a case that cannot run here; the
 *                               program goes on, and ends with exit 77
 *   if (root_or_skip_case(why)) the cases that need root; without root one
 *                               SKIP_CASE(why) instead
 *   return check_result();      "all passed", "N check(s) failed" or "skipped N
 *                               case(s)"; 0, 1 or 77
 *   return TEST_SKIP;           the test cannot run here at all (exit 77); print
 *                               a line starting "SKIP" first, saying why
 *
 * A skipped case makes the whole program a skip, never a pass: make check
 * counts a skip as a failure unless tests/expected-skips expects it on the
 * machine it runs on, and it repeats the program's SKIP lines then. A
 * failure still makes it a failure.
 *
 * Every line is flushed at once, so it lands in order with the output of
 * a daemon or of stderr when both go to one log.
 */
#define TEST_SKIP 77

static int failures, skipped_cases;

#define CHECK(cond) do { if (!(cond)) { \
	printf("FAIL  %s:%d: %s\n", __FILE__, __LINE__, #cond); fflush(stdout); \
	failures++; } } while (0)

#define CHECK_EQ(a, b) do { long long a_ = (long long)(a), b_ = (long long)(b); \
	if (a_ != b_) { printf("FAIL  %s:%d: %s = %lld, expected %s = %lld\n", \
		__FILE__, __LINE__, #a, a_, #b, b_); fflush(stdout); failures++; } } while (0)

#define CHECK_MSG(cond, ...) do { int ok_ = !!(cond); \
	printf(ok_ ? "ok    " : "FAIL  "); printf(__VA_ARGS__); \
	if (ok_) printf("\n"); else { printf(" (%s:%d)\n", __FILE__, __LINE__); failures++; } \
	fflush(stdout); } while (0)

#define SKIP_CASE(...) do { printf("SKIP  "); printf(__VA_ARGS__); printf("\n"); \
	fflush(stdout); skipped_cases++; } while (0)

static inline bool root_or_skip_case(const char *why)
{
	if (geteuid() == 0)
		return true;
	SKIP_CASE("%s", why);
	return false;
}

static inline int check_result(void)
{
	if (failures)
		printf("FAIL  %d check(s) failed\n", failures);
	else if (skipped_cases)
		/* Not "SKIP": make check matches each SKIP line, a reason. */
		printf("skipped %d case(s), the rest passed\n", skipped_cases);
	else
		printf("all passed\n");
	return failures ? 1 : skipped_cases ? TEST_SKIP : 0;
}

#endif
