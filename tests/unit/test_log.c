/* Tests the log line formats: RFC 3339 UTC times with microseconds on stderr, <N> priorities without times under journald, nothing on stderr with syslog. */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "../common/check.h"

/* What glibc makes of the same second, for comparison. */
static void reference_time(time_t secs, long usec, char *buf, size_t size)
{
	struct tm tm;
	size_t n;

	gmtime_r(&secs, &tm);
	n = strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, size - n, ".%06ldZ", usec);
}

static void check_times(void)
{
	static const time_t samples[] = {
		0, 59, 86399, 86400, 951782400 /* 2000-02-29 */, 951868800,
		1709164800 /* 2024-02-29 */, 1735689599, 1796268482,
		4102444800 /* 2100-01-01, not a leap year */, 4107542400,
		253402300799 /* 9999-12-31T23:59:59 */,
	};
	char got[64], want[64];
	int bad = 0;

	for (size_t i = 0; i < sizeof(samples) / sizeof(*samples); i++) {
		struct timespec ts = { .tv_sec = samples[i], .tv_nsec = 123456789 };

		ferry_log_format_time(&ts, got, sizeof(got));
		reference_time(samples[i], 123456, want, sizeof(want));
		if (strcmp(got, want)) {
			printf("  %lld: got %s, want %s\n", (long long)samples[i], got, want);
			bad++;
		}
	}
	/* Every day for 200 years, at a varying second of it. */
	for (long long day = 0; day < 73050 && bad < 5; day++) {
		time_t secs = day * 86400 + (day * 7919) % 86400;
		struct timespec ts = { .tv_sec = secs, .tv_nsec = 999999999 };

		ferry_log_format_time(&ts, got, sizeof(got));
		reference_time(secs, 999999, want, sizeof(want));
		if (strcmp(got, want)) {
			printf("  %lld: got %s, want %s\n", (long long)secs, got, want);
			bad++;
		}
	}
	CHECK_MSG(bad == 0, "RFC 3339 times agree with gmtime_r from 1970 to 2169 and at edges");
	{
		struct timespec ts = { .tv_sec = 1796268482, .tv_nsec = 237931000 };

		CHECK_MSG(ferry_log_format_time(&ts, got, sizeof(got)) == 27 &&
		          !strcmp(got, "2026-12-03T03:28:02.237931Z"),
		          "the issue's epoch 1796268482.237931 is %s", got);
		CHECK_MSG(ferry_log_format_time(&ts, got, 20) == 0, "a short buffer is refused");
	}
}

/* Runs one ferry_log_init + two log calls with stderr on a fresh file and
 * returns what was written (static buffer). journal: set JOURNAL_STREAM
 * to that file (1), to another file (2), or leave it unset (0). */
static const char *capture(bool use_syslog, int journal, enum log_sink *sink)
{
	static char out[4096];
	char path[] = "/tmp/ferryfs-test-log.XXXXXX";
	int fd = mkstemp(path), saved = dup(STDERR_FILENO);
	struct stat st;
	char env[64];
	ssize_t n;

	out[0] = '\0';
	if (fd < 0 || saved < 0)
		return out;
	unlink(path);
	fflush(stderr);
	dup2(fd, STDERR_FILENO);
	fstat(fd, &st);
	unsetenv("JOURNAL_STREAM");
	if (journal) {
		snprintf(env, sizeof(env), "%llu:%llu", (unsigned long long)st.st_dev,
			 (unsigned long long)st.st_ino + (journal == 2));
		setenv("JOURNAL_STREAM", env, 1);
	}
	ferry_log_init(LOG_LVL_INFO, use_syslog);
	*sink = ferry_log_sink();
	log_warn("hello %d", 42);
	log_debug("not at info level");
	log_err("second");
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	n = pread(fd, out, sizeof(out) - 1, 0);
	out[n > 0 ? n : 0] = '\0';
	close(fd);
	unsetenv("JOURNAL_STREAM");
	return out;
}

static bool matches(const char *text, const char *pattern)
{
	regex_t re;
	bool ok;

	if (regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB))
		return false;
	ok = regexec(&re, text, 0, NULL, 0) == 0;
	regfree(&re);
	return ok;
}

int main(void)
{
	enum log_sink sink;
	const char *out;
	struct timespec now;
	char before[64], after[64];

	check_times();

	clock_gettime(CLOCK_REALTIME, &now);
	ferry_log_format_time(&now, before, sizeof(before));
	out = capture(false, 0, &sink);
	clock_gettime(CLOCK_REALTIME, &now);
	ferry_log_format_time(&now, after, sizeof(after));
	CHECK_MSG(sink == LOG_SINK_STDERR && matches(out,
		"^\\[[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6}Z\\] "
		"ferryfsd warn: hello 42\n"
		"\\[[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6}Z\\] "
		"ferryfsd error: second\n$"),
	          "stderr: two timestamped lines, debug filtered:\n%s", out);
	/* Fixed-width UTC stamps sort as text. */
	CHECK_MSG(strncmp(out + 1, before, 27) >= 0 && strncmp(out + 1, after, 27) <= 0,
	          "stderr: the time is now's (%.27s <= %.27s <= %.27s)", before, out + 1, after);

	out = capture(false, 1, &sink);
	CHECK_MSG(sink == LOG_SINK_JOURNAL && !strcmp(out, "<4>warn: hello 42\n<3>error: second\n"),
	          "journald stream: <N> priorities, no time:\n%s", out);

	out = capture(false, 2, &sink);
	CHECK_MSG(sink == LOG_SINK_STDERR && out[0] == '[',
	          "JOURNAL_STREAM naming another file: plain stderr (inherited, redirected)");

	setenv("JOURNAL_STREAM", "garbage", 1);
	ferry_log_init(LOG_LVL_INFO, false);
	CHECK_MSG(ferry_log_sink() == LOG_SINK_STDERR, "a malformed JOURNAL_STREAM is ignored");
	unsetenv("JOURNAL_STREAM");

	out = capture(true, 1, &sink);
	CHECK_MSG(sink == LOG_SINK_SYSLOG && out[0] == '\0',
	          "--syslog: nothing on stderr, even under journald (%s)", out);

	return check_result();
}
