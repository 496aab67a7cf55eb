/* The passthrough backend's switches for tests (passthrough_test_hooks.h), compiled only into the test build of the backend. */
#include "backend/passthrough_test_hooks.h"

#include "backend/pt_internal.h"

void passthrough_test_switch(struct passthrough *pt, enum passthrough_test_switch which,
			     bool on)
{
	struct io_offload_switches *io = io_offload_switches(pt->io);
	test_switch *io_switch[] = {
		[PT_DEFER_EVERY_SYNC] = &io->defer_every_sync,
		[PT_DEFER_EVERY_READ] = &io->defer_every_read,
		[PT_PRETEND_UNCACHED] = &io->pretend_uncached,
		[PT_PRETEND_SLOW_READS] = &io->pretend_slow_reads,
	};

	if (which == PT_HOLD_OFFLOAD)
		offload_hold(pt->offload, on);
	else
		test_switch_set(*io_switch[which], on);
}
