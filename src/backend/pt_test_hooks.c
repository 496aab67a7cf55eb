/* The passthrough backend's switches for tests (passthrough_test_hooks.h), compiled only into the test build of the backend. */
#include "backend/passthrough_test_hooks.h"

#include "backend/pt_internal.h"

void passthrough_defer_every_sync(struct passthrough *pt, bool on)
{
	sync_runner_defer_all(pt->syncs, on);
}

void passthrough_defer_every_read(struct passthrough *pt, bool on)
{
	read_runner_defer_all(pt->reads, on);
}

void passthrough_hold_offload(struct passthrough *pt, bool hold)
{
	offload_hold(pt->offload, hold);
}

void passthrough_pretend_uncached(struct passthrough *pt, bool on)
{
	read_runner_pretend_uncached(pt->reads, on);
}
