/* Unit tests: the end of a test program that worked in a scratch directory. */
#include "scratch.h"

#include <stdio.h>
#include <stdlib.h>

int scratch_finish(const char *dir, int status)
{
	char cmd[4200];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	return status;
}
