/* Unit tests: the scratch directory a test program works in, from its making to its removal. */
#ifndef FERRY_TEST_SCRATCH_H
#define FERRY_TEST_SCRATCH_H

#include <stddef.h>
#include <sys/types.h>

/* Makes the directory from the mkdtemp template tmpl (rewritten in place);
 * 0, or -errno after saying why on stderr. */
int scratch_start(char *tmpl);

/* buf (size bytes) = dir/rel. */
void scratch_path(char *buf, size_t size, const char *dir, const char *rel);

/* lgetxattr of dir/rel with val zeroed first: its length, or -1 and errno. */
ssize_t scratch_getxattr(const char *dir, const char *rel, const char *name,
			 void *val, size_t size);

/* Removes dir and everything in it; returns status, the program's exit
 * status as check_result() (check.h) gave it: the verdict is made there,
 * where the skipped cases are counted too. */
int scratch_finish(const char *dir, int status);

#endif
