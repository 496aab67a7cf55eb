/* Unit tests: the end of a test program that worked in a scratch directory. */
#ifndef FERRY_TEST_SCRATCH_H
#define FERRY_TEST_SCRATCH_H

/* Removes dir and everything in it, reports failures; returns the exit
 * status (0 pass, 1 fail). */
int scratch_finish(const char *dir, int failures);

#endif
