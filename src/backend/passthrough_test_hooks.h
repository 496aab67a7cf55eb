/* Switches into the passthrough backend that only test builds have (FERRY_TEST_HOOKS): the daemon is built without them. */
#ifndef FERRY_PASSTHROUGH_TEST_HOOKS_H
#define FERRY_PASSTHROUGH_TEST_HOOKS_H

#ifndef FERRY_TEST_HOOKS
#error "passthrough_test_hooks.h is for test builds: link backend_test_dep (src/backend/meson.build)"
#endif

#include <stdbool.h>

struct passthrough;

enum passthrough_test_switch {
	/* Every FSYNC is answered from an offload thread, as on a file
	 * system where syncs have been slow. */
	PT_DEFER_EVERY_SYNC,
	/* Every READ with requests queued behind it is tried without waiting
	 * (RWF_NOWAIT), as on a file system with data not cached. */
	PT_DEFER_EVERY_READ,
	/* Reads that may be deferred take their data as not cached
	 * (io_offload_switches). */
	PT_PRETEND_UNCACHED,
	/* Reads on a file system that refuses RWF_NOWAIT take as long as a
	 * network file system's (io_offload_switches). */
	PT_PRETEND_SLOW_READS,
	/* The offload pool's queued jobs are held back (offload_hold). */
	PT_HOLD_OFFLOAD,
};

void passthrough_test_switch(struct passthrough *pt, enum passthrough_test_switch which,
			     bool on);

#endif
