/* Leveled logging to stderr (RFC 3339 times), to journald's stderr stream (<N> priorities) or to syslog, shared by every layer. */
#ifndef FERRY_LOG_H
#define FERRY_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

enum log_level { LOG_LVL_ERROR = 0, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

/* Where ferry_log() writes:
 *   STDERR   "[2026-12-03T05:50:01.123456Z] ferryfsd info: MSG"
 *   JOURNAL  "<6>info: MSG" (stderr is a journald stream: JOURNAL_STREAM)
 *   SYSLOG   syslog(3), facility daemon (--syslog) */
enum log_sink { LOG_SINK_STDERR, LOG_SINK_JOURNAL, LOG_SINK_SYSLOG };

extern enum log_level ferry_log_level;

/* Picks the sink: syslog if asked for, else the journal if stderr is the
 * stream JOURNAL_STREAM names, else plain stderr. */
void ferry_log_init(enum log_level level, bool use_syslog);
enum log_sink ferry_log_sink(void);
/* True if JOURNAL_STREAM names the file stderr is now. */
bool ferry_log_stderr_is_journal(void);
/* Writes ts as RFC 3339 UTC with microseconds; returns its length, 0 if it
 * does not fit. */
size_t ferry_log_format_time(const struct timespec *ts, char *buf, size_t size);
/* Returns 0 and sets *level, or -EINVAL for an unknown name. */
int ferry_log_level_parse(const char *name, enum log_level *level);
void ferry_log(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define log_err(...)   ferry_log(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...)  ferry_log(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...)  ferry_log(LOG_LVL_INFO, __VA_ARGS__)
/* Debug logging is on the request path: test the level before formatting. */
#define log_debug(...) do { if (ferry_log_level >= LOG_LVL_DEBUG) \
		ferry_log(LOG_LVL_DEBUG, __VA_ARGS__); } while (0)

#endif
