/* Encoders for READDIR and READDIRPLUS entries in the client's wire layout. */
#include "protocol/fuse_ops.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

static size_t dirbuf_room(const struct fuse_dirbuf *db)
{
	/* A backend that corrupted len must not turn the subtraction into a
	 * huge amount of room. */
	if (db->len > db->size)
		return 0;
	return db->size - db->len;
}

static bool dirent_name_valid(const char *name, size_t namelen)
{
	return namelen > 0 && namelen <= NAME_MAX && memchr(name, '\0', namelen) == NULL;
}

/* Copies the record head and name, then zeroes the alignment padding so no
 * stale host memory leaks into the guest. */
static void dirbuf_put(struct fuse_dirbuf *db, const void *head, size_t head_len,
		       const char *name, size_t namelen, size_t rec_len)
{
	char *p = db->buf + db->len;

	memcpy(p, head, head_len);
	memcpy(p + head_len, name, namelen);
	memset(p + head_len + namelen, 0, rec_len - head_len - namelen);
	db->len += rec_len;
}

int fuse_dirbuf_add(struct fuse_dirbuf *db, const char *name, size_t namelen,
		    uint64_t ino, uint32_t type, uint64_t next_off)
{
	struct fuse_dirent head = { .ino = ino, .off = next_off,
				    .namelen = (uint32_t)namelen, .type = type };
	size_t rec_len = FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET + namelen);

	if (!dirent_name_valid(name, namelen))
		return -EINVAL;
	if (rec_len > dirbuf_room(db))
		return -ENOSPC;
	dirbuf_put(db, &head, FUSE_NAME_OFFSET, name, namelen, rec_len);
	return 0;
}

bool fuse_dirbuf_fits_plus(const struct fuse_dirbuf *db, size_t namelen)
{
	if (namelen > NAME_MAX)
		return false;
	return FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET_DIRENTPLUS + namelen) <= dirbuf_room(db);
}

int fuse_dirbuf_add_plus(struct fuse_dirbuf *db, const char *name,
			 size_t namelen, const struct fuse_entry_out *entry,
			 uint32_t type, uint64_t next_off)
{
	struct fuse_direntplus head;
	size_t rec_len = FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET_DIRENTPLUS + namelen);

	if (!dirent_name_valid(name, namelen))
		return -EINVAL;
	if (rec_len > dirbuf_room(db))
		return -ENOSPC;
	memset(&head, 0, sizeof(head));
	head.entry_out = *entry;
	head.dirent.ino = entry->attr.ino;
	head.dirent.off = next_off;
	head.dirent.namelen = (uint32_t)namelen;
	head.dirent.type = type;
	dirbuf_put(db, &head, FUSE_NAME_OFFSET_DIRENTPLUS, name, namelen, rec_len);
	return 0;
}
