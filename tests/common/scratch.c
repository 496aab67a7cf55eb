/* Unit tests: the scratch directory a test program works in, from its making to its removal. */
#include "scratch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

int scratch_start(char *tmpl)
{
	int err;

	if (mkdtemp(tmpl))
		return 0;
	err = errno;
	perror("mkdtemp");
	return -err;
}

void scratch_path(char *buf, size_t size, const char *dir, const char *rel)
{
	snprintf(buf, size, "%s/%s", dir, rel);
}

ssize_t scratch_getxattr(const char *dir, const char *rel, const char *name,
			 void *val, size_t size)
{
	char path[4096];

	scratch_path(path, sizeof(path), dir, rel);
	memset(val, 0, size);
	return lgetxattr(path, name, val, size);
}

int scratch_finish(const char *dir, int status)
{
	char cmd[4200];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	return status;
}
