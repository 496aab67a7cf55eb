/* Per-path policy of a share (--read-only=PATH): the paths as given, checked for syntax, and the protected roots resolved by identity. */
#ifndef FERRY_PATH_POLICY_H
#define FERRY_PATH_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A fixed bound keeps the options a plain struct (no allocation to free)
 * and the per-lookup comparison a short loop. */
#define PATH_POLICY_MAX 32

/* Paths relative to the shared directory, in the order given; the strings
 * are borrowed (argv's). */
struct path_list {
	unsigned count;
	const char *paths[PATH_POLICY_MAX];
};

/* A protected root by identity: a host rename keeps it, another name of it
 * (a hard link) is it. */
struct policy_root {
	uint64_t dev;           /* major << 32 | minor, as struct inode_key's */
	uint64_t ino;
};

/* Appends path after checking its syntax: not empty, not absolute, no "."
 * or ".." component, room left. 0, or -EINVAL with msg written. */
int path_list_add(struct path_list *l, const char *path, char *msg, size_t msg_size);

/* Opens path one component at a time below root_fd, never following a
 * symlink (so the result lies inside the share), and gives its identity.
 * 0 or -errno; *why says which step failed, for the start's message. */
int path_policy_resolve(int root_fd, const char *path, struct policy_root *out,
			const char **why);

static inline bool policy_roots_have(const struct policy_root *roots, unsigned n,
				     uint64_t dev, uint64_t ino)
{
	for (unsigned i = 0; i < n; i++)
		if (roots[i].ino == ino && roots[i].dev == dev)
			return true;
	return false;
}

#endif
