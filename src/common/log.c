/* Leveled logging to stderr or syslog, shared by every layer. */
#include "common/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

enum log_level ferry_log_level = LOG_LVL_INFO;
static bool log_to_syslog;

static const char *const level_names[] = {
	[LOG_LVL_ERROR] = "error", [LOG_LVL_WARN] = "warn",
	[LOG_LVL_INFO] = "info", [LOG_LVL_DEBUG] = "debug",
};

/* LOG_NDELAY: connect to /dev/log now, before a sandbox hides it. */
void ferry_log_init(enum log_level level, bool use_syslog)
{
	ferry_log_level = level;
	log_to_syslog = use_syslog;
	if (use_syslog)
		openlog("ferryfsd", LOG_PID | LOG_NDELAY, LOG_DAEMON);
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

void ferry_log(enum log_level level, const char *fmt, ...)
{
	static const int syslog_prio[] = {
		[LOG_LVL_ERROR] = LOG_ERR, [LOG_LVL_WARN] = LOG_WARNING,
		[LOG_LVL_INFO] = LOG_INFO, [LOG_LVL_DEBUG] = LOG_DEBUG,
	};
	char msg[1024];
	va_list ap;

	if (level > ferry_log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (log_to_syslog) {
		syslog(syslog_prio[level], "%s", msg);
		return;
	}
	/* One fprintf per line so lines from queue threads do not interleave. */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	fprintf(stderr, "[%lld.%06ld] ferryfsd %s: %s\n", (long long)ts.tv_sec,
		ts.tv_nsec / 1000, level_names[level], msg);
}
