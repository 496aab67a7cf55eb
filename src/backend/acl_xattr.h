/* POSIX ACL xattr values (system.posix_acl_access/_default): checked, and their ids translated between guest and host. */
#ifndef FERRY_ACL_XATTR_H
#define FERRY_ACL_XATTR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/idmap.h"

/*
 * The kernel's posix_acl_xattr format, little-endian: a 4-byte header
 * holding the version, then 8-byte entries {tag u16, perm u16, id u32}.
 * ACL_USER and ACL_GROUP entries carry a uid or gid; the others carry
 * ACL_XATTR_UNDEFINED_ID.
 */
#define ACL_XATTR_VERSION 2u
#define ACL_XATTR_HEADER_SIZE 4u
#define ACL_XATTR_ENTRY_SIZE 8u
#define ACL_XATTR_UNDEFINED_ID 0xffffffffu

#define ACL_XATTR_TAG_USER_OBJ  0x01u
#define ACL_XATTR_TAG_USER      0x02u
#define ACL_XATTR_TAG_GROUP_OBJ 0x04u
#define ACL_XATTR_TAG_GROUP     0x08u
#define ACL_XATTR_TAG_MASK      0x10u
#define ACL_XATTR_TAG_OTHER     0x20u

/* The permission bits an entry may hold: read, write, execute. */
#define ACL_XATTR_PERM_BITS 7u

/* Whether name is one of the two names whose value the kernel reads as
 * an ACL (the host's for a host name, the guest's for a guest name). */
bool acl_xattr_name(const char *name);

/* Whether the ids in an ACL value need translating: some uid or gid rule
 * is in force. */
static inline bool acl_xattr_translates(const struct idmap *uids, const struct idmap *gids)
{
	return !idmap_empty(uids) || !idmap_empty(gids);
}

/*
 * Checks a value as the guest sent it and copies it to out (size bytes)
 * with every ACL_USER id through uids and every ACL_GROUP id through gids,
 * guest to host. -EINVAL, with out undefined, for a value that is not an
 * ACL (a wrong version, a size that is not the header plus whole entries,
 * an unknown tag, permission bits beyond rwx, an id where none belongs)
 * or that names an id the map refuses or (uid_t)-1. A value of no bytes,
 * or the header alone, carries no ids and is copied as it is: the host
 * kernel reads both as "remove the ACL".
 */
int acl_xattr_to_host(const struct idmap *uids, const struct idmap *gids,
		      const void *value, size_t size, void *out);

/*
 * Translates a value the host returned, in place, host to guest. A host id
 * with no guest id, and (uid_t)-1 (what the host kernel shows for an id
 * the daemon's own user namespace cannot name), become IDMAP_OVERFLOW_ID:
 * the guest's kernel refuses a whole ACL holding (uid_t)-1, so the entry
 * shows as the overflow id, as the owner of such a file does. With both
 * maps empty only (uid_t)-1 changes. -EIO, the value untouched, for a
 * stored value that is not an ACL; 0 otherwise.
 */
int acl_xattr_to_guest(const struct idmap *uids, const struct idmap *gids,
		       void *value, size_t size);

#endif
