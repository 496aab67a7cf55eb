/* Leveled logging to stderr or syslog, shared by every layer. */
#ifndef FERRY_LOG_H
#define FERRY_LOG_H

#include <stdbool.h>

enum log_level { LOG_LVL_ERROR = 0, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

extern enum log_level ferry_log_level;

void ferry_log_init(enum log_level level, bool use_syslog);
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
