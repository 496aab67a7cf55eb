/* Arrays that grow by doubling: room for what the caller is about to add, or -ENOMEM with nothing lost. */
#ifndef FERRY_ARRAY_H
#define FERRY_ARRAY_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/*
 * Makes *items (room for *cap elements of elem bytes) hold at least need
 * elements, doubling from first when it has none; *items and *cap change
 * only on success. 0, or -ENOMEM (also when the size would overflow).
 */
static inline int array_reserve(void **items, size_t *cap, size_t need, size_t elem,
				size_t first)
{
	size_t ncap = *cap ? *cap : first;
	void *p;

	if (need <= *cap)
		return 0;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2)
			return -ENOMEM;
		ncap *= 2;
	}
	if (ncap > SIZE_MAX / elem)
		return -ENOMEM;
	p = realloc(*items, ncap * elem);
	if (!p)
		return -ENOMEM;
	*items = p;
	*cap = ncap;
	return 0;
}

#endif
