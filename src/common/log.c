/* Leveled logging to stderr (RFC 3339 times), to journald's stderr stream (<N> priorities) or to syslog, shared by every layer. */
#include "common/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

enum log_level ferry_log_level = LOG_LVL_INFO;
static enum log_sink log_sink = LOG_SINK_STDERR;

static const char *const level_names[] = {
	[LOG_LVL_ERROR] = "error", [LOG_LVL_WARN] = "warn",
	[LOG_LVL_INFO] = "info", [LOG_LVL_DEBUG] = "debug",
};

static const int syslog_prio[] = {
	[LOG_LVL_ERROR] = LOG_ERR, [LOG_LVL_WARN] = LOG_WARNING,
	[LOG_LVL_INFO] = LOG_INFO, [LOG_LVL_DEBUG] = LOG_DEBUG,
};

/*
 * systemd sets JOURNAL_STREAM=DEV:INODE for a service whose stderr is a
 * journald stream (systemd.exec(5)). Compared with stderr itself, as that
 * page asks: a child of such a service whose stderr was redirected inherits
 * the variable but does not write to the journal.
 */
bool ferry_log_stderr_is_journal(void)
{
	const char *env = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	int used = 0;

	if (!env || sscanf(env, "%llu:%llu%n", &dev, &ino, &used) != 2 ||
	    env[used] != '\0')
		return false;
	if (fstat(STDERR_FILENO, &st) < 0)
		return false;
	return (unsigned long long)st.st_dev == dev &&
	       (unsigned long long)st.st_ino == ino;
}

/* LOG_NDELAY: connect to /dev/log now, before a sandbox hides it. */
void ferry_log_init(enum log_level level, bool use_syslog)
{
	ferry_log_level = level;
	if (use_syslog) {
		log_sink = LOG_SINK_SYSLOG;
		openlog("ferryfsd", LOG_PID | LOG_NDELAY, LOG_DAEMON);
	} else {
		log_sink = ferry_log_stderr_is_journal() ? LOG_SINK_JOURNAL
							  : LOG_SINK_STDERR;
	}
}

enum log_sink ferry_log_sink(void)
{
	return log_sink;
}

int ferry_log_level_parse(const char *name, enum log_level *level)
{
	/* Both dialects' spellings: the Rust virtiofsd says trace/off,
	 * the C one says err. */
	static const struct { const char *name; enum log_level level; } names[] = {
		{ "error", LOG_LVL_ERROR }, { "err", LOG_LVL_ERROR },
		{ "off", LOG_LVL_ERROR }, { "warn", LOG_LVL_WARN },
		{ "warning", LOG_LVL_WARN }, { "info", LOG_LVL_INFO },
		{ "debug", LOG_LVL_DEBUG }, { "trace", LOG_LVL_DEBUG },
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcmp(name, names[i].name) == 0) {
			*level = names[i].level;
			return 0;
		}
	}
	return -EINVAL;
}

/*
 * "2026-12-03T05:50:01.123456Z": RFC 3339 in UTC, as the Rust virtiofsd
 * prints its times (it stops at seconds; microseconds order the lines of
 * queue threads). UTC and computed here, not with gmtime_r(): glibc's first
 * time conversion reads /etc/localtime, which after pivot_root would be a
 * file in the shared directory that the guest wrote.
 */
size_t ferry_log_format_time(const struct timespec *ts, char *buf, size_t size)
{
	long long secs = ts->tv_sec;
	long long days = secs / 86400, rem = secs % 86400;
	long long era, doe, yoe, doy, mp, y, m, d;
	int n;

	if (rem < 0) {
		rem += 86400;
		days--;
	}
	/* Days since 1970-01-01 to a proleptic Gregorian date: H. Hinnant's
	 * civil_from_days, with eras of 400 years starting on March 1st. */
	days += 719468;
	era = (days >= 0 ? days : days - 146096) / 146097;
	doe = days - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	d = doy - (153 * mp + 2) / 5 + 1;
	m = mp < 10 ? mp + 3 : mp - 9;
	y = yoe + era * 400 + (m <= 2);
	n = snprintf(buf, size, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld.%06ldZ",
		     y, m, d, rem / 3600, rem / 60 % 60, rem % 60,
		     ts->tv_nsec / 1000);
	if (n < 0 || (size_t)n >= size)
		return 0;
	return (size_t)n;
}

void ferry_log(enum log_level level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (level > ferry_log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	switch (log_sink) {
	case LOG_SINK_SYSLOG:
		syslog(syslog_prio[level], "%s", msg);
		return;
	case LOG_SINK_JOURNAL:
		/* sd-daemon(3)'s prefix; journald stamps the time itself. */
		fprintf(stderr, "<%d>%s: %s\n", syslog_prio[level],
			level_names[level], msg);
		return;
	case LOG_SINK_STDERR:
		break;
	}
	/* One fprintf per line so lines from queue threads do not interleave. */
	struct timespec ts;
	char when[64];

	clock_gettime(CLOCK_REALTIME, &ts);
	if (!ferry_log_format_time(&ts, when, sizeof(when)))
		snprintf(when, sizeof(when), "%lld", (long long)ts.tv_sec);
	fprintf(stderr, "[%s] ferryfsd %s: %s\n", when, level_names[level], msg);
}
