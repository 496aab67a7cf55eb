/* ferryfsd's capabilities: the set it keeps while serving, changed by --modcaps. */
#ifndef FERRY_CAPS_H
#define FERRY_CAPS_H

#include <stdbool.h>

/*
 * Keeps only the capabilities the file operations need (and
 * CAP_DAC_READ_SEARCH when file handles are used), changed by the
 * --modcaps list. A no-op when the daemon is not root.
 */
int caps_limit(const char *modcaps, bool file_handles);

/*
 * Walks a --modcaps list ("+sys_admin:-chown", also ',' separated, names
 * with or without "cap_", any case). Calls each(cap, add, opaque) per item;
 * returns -EINVAL on the first bad item without calling each for it. The
 * option parser walks it too, so that a bad list is refused at start.
 */
int ferry_modcaps_walk(const char *list, int (*each)(int cap, bool add, void *opaque),
		       void *opaque);

#endif
