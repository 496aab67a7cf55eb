/* A canary directory next to the shared one: anything the daemon does outside the share shows up in its snapshot. */
#ifndef FERRY_TEST_CANARY_H
#define FERRY_TEST_CANARY_H

#include <stddef.h>

struct canary {
	char base[4096 - 128];   /* holds share/ and canary/, nothing else */
	char share[4096];
	char canary[4096];
};

/* Creates PARENT/PREFIX-XXXXXX (PARENT NULL: $TMPDIR or /tmp) with share/
 * and canary/{secret,sub}. 0 or -errno. */
int canary_setup(struct canary *c, const char *parent, const char *prefix);
/* Describes base's entries (the share by name only) and every entry of
 * canary/ down to inode, mode, links, owner, size and times. 0, or -errno,
 * or -ENOSPC if out is too small. */
int canary_snapshot(const struct canary *c, char *out, size_t size);
/* Removes base and everything under it. */
void canary_remove(const struct canary *c);

#endif
