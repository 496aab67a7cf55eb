/* Unit tests: the end of a test program that worked in a scratch directory. */
#include "scratch.h"

#include <stdio.h>
#include <stdlib.h>

int scratch_finish(const char *dir, int failures)
{
	char cmd[4200];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	/* As check_result() in check.h says it, for the same summary. */
	if (failures) {
		printf("FAIL  %d check(s) failed\n", failures);
		return 1;
	}
	printf("all passed\n");
	return 0;
}
