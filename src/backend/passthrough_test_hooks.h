/* Test-only entry points into the passthrough backend: the daemon never calls them. */
#ifndef FERRY_PASSTHROUGH_TEST_HOOKS_H
#define FERRY_PASSTHROUGH_TEST_HOOKS_H

#include <stdbool.h>

struct passthrough;

/* Tests: holds the offload pool's queued jobs back (offload_hold). */
void passthrough_hold_offload(struct passthrough *pt, bool hold);
/* Tests: reads that may be deferred take their data as not cached
 * (read_runner_pretend_uncached). */
void passthrough_pretend_uncached(struct passthrough *pt, bool on);

#endif
