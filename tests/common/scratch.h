/* Unit tests: the end of a test program that worked in a scratch directory. */
#ifndef FERRY_TEST_SCRATCH_H
#define FERRY_TEST_SCRATCH_H

/* Removes dir and everything in it; returns status, the program's exit
 * status as check_result() (check.h) gave it: the verdict is made there,
 * where the skipped cases are counted too. */
int scratch_finish(const char *dir, int status);

#endif
