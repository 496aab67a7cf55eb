/* Switches into the passthrough backend that only test builds have (FERRY_TEST_HOOKS): the daemon is built without them. */
#ifndef FERRY_PASSTHROUGH_TEST_HOOKS_H
#define FERRY_PASSTHROUGH_TEST_HOOKS_H

#ifndef FERRY_TEST_HOOKS
#error "passthrough_test_hooks.h is for test builds: link backend_test_dep (src/backend/meson.build)"
#endif

#include <stdbool.h>

struct passthrough;

/* Every FSYNC is answered from an offload thread, as on a file system
 * where syncs have been slow (sync_runner_defer_all). */
void passthrough_defer_every_sync(struct passthrough *pt, bool on);
/* Every READ with requests queued behind it is tried without waiting
 * (RWF_NOWAIT), as on a file system with data not cached
 * (read_runner_defer_all). */
void passthrough_defer_every_read(struct passthrough *pt, bool on);
/* Holds the offload pool's queued jobs back (offload_hold). */
void passthrough_hold_offload(struct passthrough *pt, bool hold);
/* Reads that may be deferred take their data as not cached
 * (read_runner_pretend_uncached). */
void passthrough_pretend_uncached(struct passthrough *pt, bool on);

#endif
