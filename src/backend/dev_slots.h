/* A few host file systems remembered by device number, for what the request path learns about each (slow syncs, data not cached). */
#ifndef FERRY_DEV_SLOTS_H
#define FERRY_DEV_SLOTS_H

#include <stdatomic.h>
#include <stdint.h>

/* Shares rarely span more file systems than this; past it, the slot
 * claimed longest ago is reused. */
#define DEV_SLOTS 8

/* Zeroed: empty. A lookup is DEV_SLOTS relaxed loads and takes no lock,
 * so a queue thread can ask on every request. */
struct dev_slots {
	_Atomic uint64_t dev1[DEV_SLOTS];   /* dev + 1; 0 is an empty slot */
	atomic_uint next;
};

/* dev's slot, or -1 when it is not remembered. */
int dev_slots_find(struct dev_slots *s, uint64_t dev);
/* dev's slot, claiming the next one in turn when it has none. Two threads
 * may race for slots; the worst outcome is a file system forgotten early,
 * or a moment in which a reused slot's data still says what it said of
 * the file system before. */
unsigned dev_slots_claim(struct dev_slots *s, uint64_t dev);

#endif
