/* The passthrough backend's test-only entry points (passthrough_test_hooks.h). */
#include "backend/passthrough_test_hooks.h"

#include "backend/pt_internal.h"

void passthrough_hold_offload(struct passthrough *pt, bool hold)
{
	offload_hold(pt->offload, hold);
}

void passthrough_pretend_uncached(struct passthrough *pt, bool on)
{
	read_runner_pretend_uncached(pt->reads, on);
}
