/* Directories of the passthrough backend: OPENDIR, READDIR(PLUS), RELEASEDIR and FSYNCDIR. */
#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "backend/pt_internal.h"

static bool is_dot_or_dotdot(const char *name)
{
	return name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2]));
}

int pt_opendir(void *fs, const struct fuse_request_ctx *ctx,
	       uint64_t nodeid, const struct fuse_open_in *in,
	       struct fuse_open_out *out)
{
	struct passthrough *pt = fs;
	struct inode *inode;
	DIR *dir;
	int fd, ret;

	ret = inode_get(pt->inodes, nodeid, &inode);
	if (ret < 0)
		goto out;
	if (inode->type != S_IFDIR) {
		ret = -ENOTDIR;
		goto put_inode;
	}
	fd = pt_open_for_guest(pt, ctx, inode, O_RDONLY | O_DIRECTORY | O_NONBLOCK, 0);
	if (fd < 0) {
		ret = fd;
		goto put_inode;
	}
	dir = fdopendir(fd);
	if (!dir) {
		ret = -errno;
		pt_close_fd(pt, fd);
		goto put_inode;
	}
	return pt_open_reply(pt, inode, -1, dir, out);

put_inode:
	inode_put(pt->inodes, inode);
out:
	return ret;
}

/* A --hide entry is left out of every listing. d_ino alone picks the
 * candidates (no system call for the others); a stat of the name then
 * tells its device. */
static bool entry_hidden(struct passthrough *pt, struct open_file *h, const struct dirent *de)
{
	struct statx stx;

	if (pt->hidden_set.n_roots == 0 || is_dot_or_dotdot(de->d_name) ||
	    !policy_set_may_have_ino(&pt->hidden_set, de->d_ino))
		return false;
	if (statx(dirfd(h->dir), de->d_name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
		  STATX_TYPE | STATX_INO | STATX_NLINK, &stx) < 0)
		return false;
	return pt_hidden(pt, &stx);
}

/* The guest's number of a listed entry: its area's; ".." of an added
 * dir's root is the share's root, not the host's parent. */
static uint64_t entry_ino(struct passthrough *pt, const struct open_file *h,
			  const struct dirent *de)
{
	if (pt->n_areas && pt_is_area_root(pt, h->inode) && !strcmp(de->d_name, ".."))
		return pt_guest_ino(pt, 0, inode_table_root(pt->inodes)->key.ino);
	return pt_guest_ino(pt, h->inode->key.area, de->d_ino);
}

/* The added dirs' NAMEs in the root's listing, before the host's entries,
 * each with the cookie of its place (1..n): the guest continues from the
 * last one it got, which the handle remembers, so the host's cookies are
 * never taken for these (a seek to another offset is the host's). */
static int add_area_entries(struct passthrough *pt, struct open_file *h, bool plus,
			    struct fuse_dirbuf *db)
{
	const struct added_dir_list *l = &pt->opts.added_dirs;
	int ret = 0;

	while (h->dir_areas_listed < pt->n_areas) {
		unsigned i = h->dir_areas_listed;
		const struct added_dir *d = &l->dirs[i];
		struct fuse_entry_out entry;
		char name[NAME_MAX + 1];

		memcpy(name, d->name, d->name_len);
		name[d->name_len] = '\0';
		if (plus) {
			if (!fuse_dirbuf_fits_plus(db, d->name_len))
				return -ENOSPC;
			ret = pt_lookup_entry(pt, h->inode, name, &entry);
			if (ret == 0) {
				ret = fuse_dirbuf_add_plus(db, name, d->name_len, &entry,
							   DT_DIR, i + 1);
				if (ret < 0)
					inode_forget(pt->inodes, entry.nodeid, 1);
			}
		} else {
			ret = fuse_dirbuf_add(db, name, d->name_len,
					      pt_guest_ino(pt, i + 1, pt->areas[i].host_ino),
					      DT_DIR, i + 1);
		}
		if (ret < 0)
			return ret;
		h->dir_areas_listed = i + 1;
		h->dir_offset = i + 1;
	}
	return 0;
}

/* One READDIRPLUS entry: a lookup reference only for entries that fit. */
static int add_plus_entry(struct passthrough *pt, struct open_file *h,
			  const struct dirent *de, size_t namelen,
			  struct fuse_dirbuf *db)
{
	struct fuse_entry_out entry;
	uint32_t type = de->d_type;
	int ret;

	if (!fuse_dirbuf_fits_plus(db, namelen))
		return -ENOSPC;
	/* READDIRPLUS lookups are the client prefetching: once the fd budget
	 * runs low they would starve the lookups and opens the guest asks for
	 * by name, so the entry goes out without attributes instead. */
	if (is_dot_or_dotdot(de->d_name) || fd_budget_low(&pt->fds))
		goto without_lookup;
	ret = pt_lookup_entry(pt, h->inode, de->d_name, &entry);
	if (ret == -ENFILE)
		goto without_lookup;
	if (ret < 0)
		return ret;
	type = (entry.attr.mode & S_IFMT) >> 12;
	ret = fuse_dirbuf_add_plus(db, de->d_name, namelen, &entry, type,
				   de->d_off);
	if (ret < 0)
		inode_forget(pt->inodes, entry.nodeid, 1);
	return ret;

without_lookup:
	/* nodeid 0: the guest lists the name, caches nothing, takes no lookup */
	memset(&entry, 0, sizeof(entry));
	entry.attr.ino = entry_ino(pt, h, de);
	entry.attr.mode = DTTOIF(de->d_type);
	return fuse_dirbuf_add_plus(db, de->d_name, namelen, &entry, type,
				    de->d_off);
}

int pt_readdir(void *fs, const struct fuse_request_ctx *ctx,
	       uint64_t nodeid, const struct fuse_read_in *in, bool plus,
	       struct fuse_dirbuf *db)
{
	struct passthrough *pt = fs;
	struct open_file *h;
	int ret;

	ret = pt_get_handle(pt, nodeid, in->fh, true, &h);
	if (ret < 0)
		return ret;
	pthread_mutex_lock(&h->dir_lock);
	/* d_off cookies are what the guest hands back as the offset; seek
	 * only when it does not continue where the stream stands. */
	if (!h->dir_offset_known || h->dir_offset != in->offset) {
		seekdir(h->dir, in->offset);
		h->dir_offset = in->offset;
		h->dir_offset_known = true;
		h->dir_pending = NULL;
		h->dir_areas_listed = in->offset ? pt->n_areas : 0;
	}
	if (pt->n_areas && h->inode->nodeid == FUSE_ROOT_ID) {
		ret = add_area_entries(pt, h, plus, db);
		if (ret < 0) {
			if (ret == -ENOSPC || db->len > 0)
				ret = 0;
			goto unlock;
		}
	}
	for (;;) {
		struct dirent *de = h->dir_pending;
		size_t namelen;

		h->dir_pending = NULL;
		if (!de) {
			errno = 0;
			de = readdir(h->dir);
		}
		if (!de) {
			if (errno && db->len == 0)
				ret = -errno;
			break;
		}
		if (entry_hidden(pt, h, de) || pt_area_named(pt, h->inode, de->d_name)) {
			/* An added dir's NAME made on the host after start is
			 * shadowed by the added dir, listed above. */
			h->dir_offset = de->d_off;
			continue;
		}
		namelen = strlen(de->d_name);
		if (plus)
			ret = add_plus_entry(pt, h, de, namelen, db);
		else
			ret = fuse_dirbuf_add(db, de->d_name, namelen,
					      entry_ino(pt, h, de),
					      de->d_type, de->d_off);
		if (ret == -ENOENT) {
			/* unlinked since readdir saw it: skip it */
			ret = 0;
		} else if (ret < 0) {
			/* The guest did not get this entry: the next call at
			 * dir_offset starts with it. */
			h->dir_pending = de;
			if (ret == -ENOSPC || db->len > 0)
				ret = 0;
			break;
		}
		h->dir_offset = de->d_off;
	}
unlock:
	pthread_mutex_unlock(&h->dir_lock);
	open_file_put(pt->open_files, h);
	return ret;
}

int pt_releasedir(void *fs, const struct fuse_request_ctx *ctx,
		  uint64_t nodeid, const struct fuse_release_in *in)
{
	struct passthrough *pt = fs;

	return open_file_remove(pt->open_files, in->fh, nodeid);
}

int pt_fsyncdir(void *fs, const struct fuse_request_ctx *ctx,
		uint64_t nodeid, const struct fuse_fsync_in *in)
{
	return pt_fsync(fs, ctx, nodeid, in);
}
