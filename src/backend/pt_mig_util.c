/* What saving and loading the passthrough tables share: reasons, a set of host inode keys, a file's path for messages, mount fds. */
#include <fcntl.h>
#include <stdlib.h>

#include "backend/pt_internal.h"
#include "common/hash.h"

/* ---- a set of host inodes: open addressing, sized once ---------------- */

static uint64_t key_hash(const struct inode_key *k)
{
	return ferry_mix64(k->ino ^ ferry_mix64(k->dev ^ ferry_mix64(k->mnt_id)));
}

int pt_key_set_init(struct pt_key_set *s, size_t max)
{
	size_t cap = 16;

	while (cap < max * 2)
		cap *= 2;
	s->slots = calloc(cap, sizeof(*s->slots));
	s->cap = cap;
	return s->slots ? 0 : -ENOMEM;
}

void pt_key_set_free(struct pt_key_set *s)
{
	free(s->slots);
	s->slots = NULL;
}

/* The slot of key: where it is, or the empty one where it would go. */
static struct pt_key_slot *slot_of(const struct pt_key_set *s, const struct inode_key *key)
{
	size_t i = key_hash(key) & (s->cap - 1);

	while (s->slots[i].used &&
	       (s->slots[i].key.ino != key->ino || s->slots[i].key.dev != key->dev ||
		s->slots[i].key.mnt_id != key->mnt_id))
		i = (i + 1) & (s->cap - 1);
	return &s->slots[i];
}

int pt_key_set_add(struct pt_key_set *s, const struct inode_key *key, size_t value)
{
	struct pt_key_slot *slot = slot_of(s, key);

	if (slot->used)
		return -EEXIST;
	slot->used = true;
	slot->key = *key;
	slot->value = value;
	return 0;
}

bool pt_key_set_find(const struct pt_key_set *s, const struct inode_key *key, size_t *value)
{
	struct pt_key_slot *slot = slot_of(s, key);

	if (slot->used)
		*value = slot->value;
	return slot->used;
}

/* ---- where a file is, as the kernel names it -------------------------- */

static int fd_link(struct passthrough *pt, int fd, char *buf, size_t size)
{
	char name[PROC_FD_NAME_MAX];
	ssize_t n;

	pt_proc_fd_name(name, fd);
	n = readlinkat(pt->proc_self_fd, name, buf, size - 1);
	if (n < 0)
		return -errno;
	if ((size_t)n == size - 1)
		return -ENAMETOOLONG;
	buf[n] = '\0';
	return 0;
}

int pt_mig_share_path(struct passthrough *pt, int fd, char *buf, size_t size)
{
	char root[PATH_MAX];
	size_t len, skip;
	int ret = fd_link(pt, inode_table_root(pt->inodes)->fd, root, sizeof(root));

	if (ret == 0)
		ret = fd_link(pt, fd, buf, size);
	if (ret)
		return ret;
	len = strlen(root);
	if (len == 1)               /* the share is the process root */
		len = 0;
	if (strncmp(buf, root, len) || (buf[len] != '/' && buf[len] != '\0'))
		return -EXDEV;
	skip = len + (buf[len] == '/');
	memmove(buf, buf + skip, strlen(buf + skip) + 1);
	return 0;
}

/* Opens rel ("a/b/c", "" for the root) below the root one component at a
 * time, never following a symlink; the caller closes the result. */
static int open_beneath(struct passthrough *pt, char *rel)
{
	int cur = dup(inode_table_root(pt->inodes)->fd);
	char *save = NULL;

	if (cur < 0)
		return -errno;
	for (char *c = strtok_r(rel, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		int next = openat(cur, c, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		int err = errno;

		close(cur);
		if (next < 0)   /* out of fds is no answer; the rest says "not inside" */
			return err == EMFILE || err == ENFILE || err == ENOMEM ? -err : -EXDEV;
		cur = next;
	}
	return cur;
}

/*
 * The kernel's name for an fd is no proof by itself: a file outside the
 * process root (a chroot sandbox) is named by its full path, which starts
 * with "/" like every path inside a share that is the process root, and a
 * file outside a bind mount is named "/". So the name is walked again below
 * the share's root, and must reach the same inode; an unlinked file's
 * directory must still be found that way.
 */
int pt_mig_in_share(struct passthrough *pt, int fd)
{
	static const char deleted[] = " (deleted)";
	char path[PATH_MAX];
	struct statx a, b;
	size_t len;
	bool unlinked;
	int dfd, ret = pt_stat_fd(fd, &a);

	if (ret == 0)
		ret = pt_mig_share_path(pt, fd, path, sizeof(path));
	if (ret)
		return ret == -EXDEV || ret == -ENAMETOOLONG ? -EXDEV : ret;
	len = strlen(path);
	unlinked = a.stx_nlink == 0 && len >= sizeof(deleted) - 1 &&
		!strcmp(path + len - (sizeof(deleted) - 1), deleted);
	if (unlinked) {
		char *slash;

		path[len - (sizeof(deleted) - 1)] = '\0';
		if (!path[0])
			return -EXDEV;
		slash = strrchr(path, '/');
		if (slash)
			*slash = '\0';
		else
			path[0] = '\0';
	}
	dfd = open_beneath(pt, path);
	if (dfd < 0)
		return dfd;
	ret = pt_stat_fd(dfd, &b);
	close(dfd);
	if (ret)
		return -EXDEV;
	if (unlinked)
		return S_ISDIR(b.stx_mode) ? 0 : -EXDEV;
	return pt_mig_same_inode(&a, &b) ? 0 : -EXDEV;
}

void pt_mig_describe(struct passthrough *pt, uint64_t nodeid, char *buf, size_t size)
{
	struct inode *inode;

	if (inode_get(pt->inodes, nodeid, &inode)) {
		snprintf(buf, size, "node %llu", (unsigned long long)nodeid);
		return;
	}
	if (pt_mig_share_path(pt, inode->fd, buf, size))
		snprintf(buf, size, "node %llu", (unsigned long long)nodeid);
	inode_put(pt->inodes, inode);
}

int pt_mig_mount_fd(struct passthrough *pt, int root_mount_fd, uint64_t mnt_id)
{
	unsigned n = atomic_load_explicit(&pt->nmounts, memory_order_acquire);

	for (unsigned i = 0; i < n; i++)
		if ((uint64_t)pt->mounts[i].mnt_id == mnt_id)
			return pt->mounts[i].fd;
	/* Mount ids differ between mount namespaces (a sandboxed source or
	 * destination): an unknown one is taken for the share's own mount.
	 * A handle of another file system then fails or resolves to a file
	 * that the caller checks is inside the share. */
	return root_mount_fd;
}

int pt_mig_open_handle(struct passthrough *pt, int root_mount_fd,
		       const struct mig_file_handle *fh)
{
	struct inode_handle_buf hb;
	int fd;

	hb.h.fh.handle_type = fh->handle_type;
	hb.h.fh.handle_bytes = fh->size;
	memcpy(hb.h.fh.f_handle, fh->bytes, fh->size);
	fd = open_by_handle_at(pt_mig_mount_fd(pt, root_mount_fd, fh->mount_id),
			       &hb.h.fh, O_PATH | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

bool pt_mig_same_inode(const struct statx *a, const struct statx *b)
{
	return a->stx_ino == b->stx_ino && a->stx_dev_major == b->stx_dev_major &&
		a->stx_dev_minor == b->stx_dev_minor;
}
