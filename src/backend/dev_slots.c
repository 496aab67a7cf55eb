/* A few host file systems remembered by device number, for what the request path learns about each (slow syncs, data not cached). */
#include "backend/dev_slots.h"

int dev_slots_find(struct dev_slots *s, uint64_t dev)
{
	for (unsigned i = 0; i < DEV_SLOTS; i++)
		if (atomic_load_explicit(&s->dev1[i], memory_order_relaxed) == dev + 1)
			return (int)i;
	return -1;
}

unsigned dev_slots_claim(struct dev_slots *s, uint64_t dev)
{
	int found = dev_slots_find(s, dev);
	unsigned slot;

	if (found >= 0)
		return (unsigned)found;
	slot = atomic_fetch_add_explicit(&s->next, 1, memory_order_relaxed) % DEV_SLOTS;
	atomic_store_explicit(&s->dev1[slot], dev + 1, memory_order_relaxed);
	return slot;
}
