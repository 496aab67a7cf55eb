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
 * symlink (so the result lies inside the share), and gives its identity
 * and, if fd_out is not NULL, its O_PATH fd for the caller to close. A
 * symlink as the last component is refused unless link_ok (hiding a link
 * is hiding that entry; protecting one would leave its target writable).
 * 0 or -errno; *why says which step failed, for the start's message. */
int path_policy_resolve(int root_fd, const char *path, bool link_ok, struct policy_root *out,
			int *fd_out, const char **why);

/*
 * The files below protected roots that have more than one name when the
 * daemon starts: a name of one outside the subtree (a hard link made on
 * the host) reaches the same inode, which is protected by identity. Kept
 * sorted for a binary search; asked only for a file with nlink > 1.
 */
struct policy_links {
	struct policy_root *keys;
	size_t count, cap;
};

/* Adds dir_fd's file if it is one with nlink > 1, or every such file below
 * the directory dir_fd (symlinks are not followed). 0 or -errno (-ELOOP:
 * nested too deep to walk). */
int policy_links_collect(struct policy_links *set, int dir_fd);
/* Sorts the set once everything is collected. */
void policy_links_seal(struct policy_links *set);
bool policy_links_have(const struct policy_links *set, uint64_t dev, uint64_t ino);
void policy_links_free(struct policy_links *set);

/* One policy's protected objects: its roots and their multiply-linked files. */
struct policy_set {
	struct policy_root roots[PATH_POLICY_MAX];
	unsigned n_roots;
	struct policy_links links;
};

static inline bool policy_set_has_root(const struct policy_set *set, uint64_t dev, uint64_t ino)
{
	for (unsigned i = 0; i < set->n_roots; i++)
		if (set->roots[i].ino == ino && set->roots[i].dev == dev)
			return true;
	return false;
}

/* A root, or (a file with several names) one of the subtrees' files. */
static inline bool policy_set_has(const struct policy_set *set, uint64_t dev, uint64_t ino,
				  bool several_names)
{
	return policy_set_has_root(set, dev, ino) ||
	       (several_names && policy_links_have(&set->links, dev, ino));
}

/* Whether ino (of any device) may be in the set: a directory entry's d_ino
 * before its device is known. */
bool policy_set_may_have_ino(const struct policy_set *set, uint64_t ino);

#endif
