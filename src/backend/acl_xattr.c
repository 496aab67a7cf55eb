/* POSIX ACL xattr values: the format check and the id translation in both directions. */
#include "backend/acl_xattr.h"

#include <endian.h>
#include <errno.h>
#include <limits.h>
#include <string.h>

bool acl_xattr_name(const char *name)
{
	return !strcmp(name, "system.posix_acl_access") ||
	       !strcmp(name, "system.posix_acl_default");
}

static uint16_t get_le16(const unsigned char *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return le16toh(v);
}

static uint32_t get_le32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static void put_le32(unsigned char *p, uint32_t host_order)
{
	uint32_t v = htole32(host_order);

	memcpy(p, &v, sizeof(v));
}

/* Whether an entry with this tag names a uid (ACL_USER) or gid (ACL_GROUP). */
static bool tag_has_id(uint16_t tag)
{
	return tag == ACL_XATTR_TAG_USER || tag == ACL_XATTR_TAG_GROUP;
}

static bool tag_known(uint16_t tag)
{
	switch (tag) {
	case ACL_XATTR_TAG_USER_OBJ:
	case ACL_XATTR_TAG_USER:
	case ACL_XATTR_TAG_GROUP_OBJ:
	case ACL_XATTR_TAG_GROUP:
	case ACL_XATTR_TAG_MASK:
	case ACL_XATTR_TAG_OTHER:
		return true;
	default:
		return false;
	}
}

/*
 * Every byte of a value: the header's version, whole entries, known tags,
 * rwx permissions only, and ACL_XATTR_UNDEFINED_ID in the entries that
 * carry no id (what the kernel writes there). The number of entries, or
 * -EINVAL. A value of no bytes has no header and no entries.
 */
static int check_value(const unsigned char *v, size_t size)
{
	size_t count;

	if (size == 0)
		return 0;
	if (size < ACL_XATTR_HEADER_SIZE ||
	    (size - ACL_XATTR_HEADER_SIZE) % ACL_XATTR_ENTRY_SIZE)
		return -EINVAL;
	if (get_le32(v) != ACL_XATTR_VERSION)
		return -EINVAL;
	count = (size - ACL_XATTR_HEADER_SIZE) / ACL_XATTR_ENTRY_SIZE;
	/* FUSE bounds a value far below this; a caller passing more gets
	 * a refusal, not a wrapped count. */
	if (count > INT_MAX)
		return -EINVAL;
	for (size_t i = 0; i < count; i++) {
		const unsigned char *e = v + ACL_XATTR_HEADER_SIZE + i * ACL_XATTR_ENTRY_SIZE;
		uint16_t tag = get_le16(e), perm = get_le16(e + 2);

		if (!tag_known(tag) || (perm & ~ACL_XATTR_PERM_BITS))
			return -EINVAL;
		if (!tag_has_id(tag) && get_le32(e + 4) != ACL_XATTR_UNDEFINED_ID)
			return -EINVAL;
	}
	return (int)count;
}

static unsigned char *entry_at(unsigned char *v, size_t i)
{
	return v + ACL_XATTR_HEADER_SIZE + i * ACL_XATTR_ENTRY_SIZE;
}

/* Rewrites the id of each of the count (checked) entries of v that names
 * one, through map_id with the uid map for a user entry, the gid map for a
 * group entry. 0, or the first error map_id gives. */
static int rewrite_ids(unsigned char *v, int count, const struct idmap *uids,
		       const struct idmap *gids,
		       int (*map_id)(const struct idmap *m, uint32_t from, uint32_t *to))
{
	for (int i = 0; i < count; i++) {
		unsigned char *e = entry_at(v, (size_t)i);
		uint16_t tag = get_le16(e);
		uint32_t id;
		int ret;

		if (!tag_has_id(tag))
			continue;
		ret = map_id(tag == ACL_XATTR_TAG_USER ? uids : gids, get_le32(e + 4), &id);
		if (ret < 0)
			return ret;
		put_le32(e + 4, id);
	}
	return 0;
}

static int id_to_host(const struct idmap *m, uint32_t guest_id, uint32_t *host_id)
{
	/* (uid_t)-1 is no id; the host kernel would refuse it too. An id the
	 * map refuses is refused as the host kernel refuses an id its user
	 * namespace cannot name: EINVAL. */
	if (guest_id == ACL_XATTR_UNDEFINED_ID || idmap_to_host(m, guest_id, host_id) < 0 ||
	    *host_id == ACL_XATTR_UNDEFINED_ID)
		return -EINVAL;
	return 0;
}

static int id_to_guest(const struct idmap *m, uint32_t host_id, uint32_t *guest_id)
{
	*guest_id = host_id == ACL_XATTR_UNDEFINED_ID ? ACL_XATTR_UNDEFINED_ID :
		    idmap_to_guest(m, host_id);
	if (*guest_id == ACL_XATTR_UNDEFINED_ID)
		*guest_id = IDMAP_OVERFLOW_ID;
	return 0;
}

int acl_xattr_to_host(const struct idmap *uids, const struct idmap *gids,
		      const void *value, size_t size, void *out)
{
	unsigned char *v = out;
	int count;

	/* The check and the translation read the copy only: what is checked
	 * is what is written. */
	memcpy(out, value, size);
	count = check_value(v, size);
	if (count < 0)
		return count;
	return rewrite_ids(v, count, uids, gids, id_to_host);
}

int acl_xattr_to_guest(const struct idmap *uids, const struct idmap *gids,
		       void *value, size_t size)
{
	unsigned char *v = value;
	int count = check_value(v, size);

	if (count < 0)
		return -EIO;
	return rewrite_ids(v, count, uids, gids, id_to_guest);
}
