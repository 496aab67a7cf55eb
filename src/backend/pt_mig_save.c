/* Migration source: the live inode, handle and lock tables walked (never changed) into the state stream. */
#include <dirent.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdlib.h>

#include "backend/pt_internal.h"
#include "backend/pt_migration.h"
#include "common/array.h"
#include "common/log.h"

/*
 * The tables are copied first (under their shard locks, quickly), then
 * everything slow (directory walks, file handles, stats) works on the copy
 * through request references, as any request would: the tables end as
 * they were. The guest is stopped meanwhile (the transport calls this with
 * every queue stopped); the host may still change the share.
 */

struct sv_inode {
	uint64_t nodeid;
	uint64_t nlookup;
	struct inode_key key;
	mode_t type;
	bool invalid;           /* a placeholder from an earlier migration */
	bool located;
	uint32_t flags;         /* MIG_INODE_* */
	uint64_t parent;
	char *name;
	struct mig_file_handle fh;
};

struct save {
	struct passthrough *pt;
	const struct pt_mig_opts *o;
	struct sv_inode *in;
	size_t n, cap;
	size_t root;
	struct mig_open_file *hs;
	int *hfds;              /* each handle's fd, for the flock probe */
	size_t nh, caph, caphf;
	size_t *order;          /* indices into in, root first, parents first */
	size_t norder;
	int err;
	int root_mount_fd;
	char *reason;
	size_t rsize;
};

static void copy_inode(struct inode *inode, void *arg)
{
	struct save *sv = arg;
	struct sv_inode *si;

	if (sv->err)
		return;
	if (array_reserve((void **)&sv->in, &sv->cap, sv->n + 1, sizeof(*sv->in), 64)) {
		sv->err = -ENOMEM;
		return;
	}
	si = &sv->in[sv->n++];
	memset(si, 0, sizeof(*si));
	si->nodeid = inode->nodeid;
	si->nlookup = inode->nlookup;
	si->key = inode->key;
	si->type = inode->type;
	si->invalid = inode->invalid;
	if (inode->file_handle) {
		si->fh.handle_type = inode->file_handle->fh.handle_type;
		si->fh.mount_id = inode->key.mnt_id;
		si->fh.size = (uint16_t)inode->file_handle->fh.handle_bytes;
		memcpy(si->fh.bytes, inode->file_handle->fh.f_handle, si->fh.size);
		si->flags = MIG_INODE_FILE_HANDLE;
	}
}

static void copy_handle(struct open_file *h, void *arg)
{
	struct save *sv = arg;
	struct mig_open_file *mh;
	int fl;

	if (sv->err)
		return;
	if (array_reserve((void **)&sv->hs, &sv->caph, sv->nh + 1, sizeof(*sv->hs), 64) ||
	    array_reserve((void **)&sv->hfds, &sv->caphf, sv->nh + 1, sizeof(*sv->hfds), 64)) {
		sv->err = -ENOMEM;
		return;
	}
	fl = fcntl(h->fd, F_GETFL);
	if (fl < 0) {
		sv->err = -errno;
		return;
	}
	mh = &sv->hs[sv->nh];
	sv->hfds[sv->nh++] = h->fd;
	mh->fh = h->fh;
	mh->nodeid = h->inode->nodeid;
	/* What the host file was opened with, as the destination must open
	 * it again; never what would change the file there. */
	mh->open_flags = (uint32_t)fl & ~(O_CREAT | O_EXCL | O_TRUNC | O_NOCTTY);
	mh->kind = h->dir ? MIG_OPEN_DIR : MIG_OPEN_REGULAR;
}

/* Host locks do not move (docs/migration.md, "Host locks"): refuse. */
static int check_locks(struct save *sv, const struct mig_session *session)
{
	char path[PATH_MAX];
	uint64_t nodeid = 0;
	bool held = false;

	if ((session->flags & FUSE_POSIX_LOCKS) && locks_find_held(sv->pt->locks, &nodeid))
		held = true;
	for (size_t i = 0; !held && (session->flags & FUSE_FLOCK_LOCKS) && i < sv->nh; i++) {
		if (sv->hs[i].kind == MIG_OPEN_REGULAR &&
		    locks_probe_fd(sv->pt->proc_self_fd, sv->hfds[i], false) != 0) {
			nodeid = sv->hs[i].nodeid;
			held = true;
		}
	}
	if (!held)
		return 0;
	pt_mig_describe(sv->pt, nodeid, path, sizeof(path));
	return mig_refuse(sv->reason, sv->rsize, -EBUSY,
			     "a lock is held on %s (node %llu): host locks cannot move "
			     "to the destination without a moment in which nobody holds "
			     "them; the guest must release it first", path,
			     (unsigned long long)nodeid);
}

/* ---- find-paths: the share walked from the root, parents first -------- */

/* inos: the table's inode numbers, to skip the stat of entries that are
 * none of them (NULL: stat every entry). Directories are always looked
 * at: a mount point's entry has the number of the directory below it. */
static int walk_dir(struct save *sv, const struct pt_key_set *keys,
		    const struct pt_key_set *inos, size_t di)
{
	struct inode *dir_inode;
	struct dirent *de;
	DIR *dir;
	int dfd, ret = inode_get(sv->pt->inodes, sv->in[di].nodeid, &dir_inode);

	if (ret)
		return 0;       /* a placeholder or gone: its children stay unfound */
	dfd = openat(dir_inode->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	inode_put(sv->pt->inodes, dir_inode);
	if (dfd < 0)
		return 0;
	dir = fdopendir(dfd);
	if (!dir) {
		close(dfd);
		return -ENOMEM;
	}
	while ((de = readdir(dir))) {
		struct statx stx;
		struct inode_key key;
		size_t ci;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (inos && de->d_type != DT_DIR && de->d_type != DT_UNKNOWN &&
		    !pt_key_set_find(inos, &(struct inode_key){ .ino = de->d_ino }, &ci))
			continue;
		if (statx(dfd, de->d_name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
			  STATX_TYPE | STATX_INO | STATX_MNT_ID, &stx))
			continue;       /* gone meanwhile */
		pt_key_from_statx(&stx, &key);
		if (!pt_key_set_find(keys, &key, &ci) || sv->in[ci].located)
			continue;
		sv->in[ci].name = strdup(de->d_name);
		if (!sv->in[ci].name) {
			ret = -ENOMEM;
			break;
		}
		sv->in[ci].located = true;
		sv->in[ci].parent = sv->in[di].nodeid;
		sv->in[ci].flags |= MIG_INODE_PATH;
		sv->order[sv->norder++] = ci;
	}
	closedir(dir);
	return ret;
}

static bool all_located(const struct save *sv)
{
	for (size_t i = 0; i < sv->n; i++)
		if (!sv->in[i].located && !sv->in[i].invalid)
			return false;
	return true;
}

static int find_paths(struct save *sv)
{
	struct pt_key_set keys, inos;
	int ret = pt_key_set_init(&keys, sv->n);

	if (ret == 0 && (ret = pt_key_set_init(&inos, sv->n)) != 0)
		pt_key_set_free(&keys);
	if (ret)
		return ret;
	for (size_t i = 0; i < sv->n; i++) {
		if (sv->in[i].invalid || i == sv->root)
			continue;
		pt_key_set_add(&keys, &sv->in[i].key, i);
		pt_key_set_add(&inos, &(struct inode_key){ .ino = sv->in[i].key.ino }, i);
	}
	/* order doubles as the queue: each directory found is walked in turn.
	 * First by the entries' numbers (readdir has them); where that left
	 * some unfound (a file system whose readdir numbers differ from
	 * stat's), once more statting every entry. */
	for (int pass = 0; pass < 2 && ret == 0 && !all_located(sv); pass++)
		for (size_t q = 0; q < sv->norder && ret == 0; q++)
			if (sv->in[sv->order[q]].type == S_IFDIR)
				ret = walk_dir(sv, &keys, pass ? NULL : &inos, sv->order[q]);
	pt_key_set_free(&inos);
	pt_key_set_free(&keys);
	return ret;
}

/* --migration-confirm-paths: the walk read each name at one moment; look
 * at it once more just before the stream is written. */
static bool path_confirmed(struct save *sv, const struct sv_inode *si)
{
	struct inode *parent;
	struct inode_key key;
	struct statx stx;
	bool same = false;

	if (inode_get(sv->pt->inodes, si->parent, &parent))
		return false;
	if (!statx(parent->fd, si->name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
		   STATX_TYPE | STATX_INO | STATX_MNT_ID, &stx)) {
		pt_key_from_statx(&stx, &key);
		same = !memcmp(&key, &si->key, sizeof(key));
	}
	inode_put(sv->pt->inodes, parent);
	return same;
}

/* ---- file-handles: each inode by its handle ---------------------------- */

/* Whether fh opens the inode whose key is key (--migration-verify-handles). */
static bool handle_verified(struct save *sv, const struct mig_file_handle *fh,
			    const struct inode_key *key)
{
	struct inode_key got;
	struct statx stx;
	int fd = pt_mig_open_handle(sv->pt, sv->root_mount_fd, fh);
	bool same;

	if (fd < 0)
		return false;
	same = pt_stat_fd(fd, &stx) == 0;
	pt_key_from_statx(&stx, &got);
	close(fd);
	return same && !memcmp(&got, key, sizeof(got));
}

/* The inode's file handle into si (and whether it is unlinked). */
static int take_handle(struct save *sv, struct sv_inode *si)
{
	struct inode *inode;
	struct inode_handle_buf hb;
	struct statx stx;
	int mnt_id, ret = inode_get(sv->pt->inodes, si->nodeid, &inode);

	if (ret)
		return ret;
	if (!(si->flags & MIG_INODE_FILE_HANDLE)) {
		hb.h.fh.handle_bytes = MAX_HANDLE_SZ;
		ret = pt_errno_or(name_to_handle_at(inode->fd, "", &hb.h.fh, &mnt_id,
						    AT_EMPTY_PATH));
		if (ret == 0) {
			si->fh.handle_type = hb.h.fh.handle_type;
			si->fh.mount_id = (uint64_t)mnt_id;
			si->fh.size = (uint16_t)hb.h.fh.handle_bytes;
			memcpy(si->fh.bytes, hb.h.fh.f_handle, si->fh.size);
			si->flags |= MIG_INODE_FILE_HANDLE;
		}
	}
	/* Open but no longer in the tree: the handle still reaches it. */
	if (ret == 0 && pt_stat_fd(inode->fd, &stx) == 0 && stx.stx_nlink == 0)
		si->flags |= MIG_INODE_UNLINKED;
	inode_put(sv->pt->inodes, inode);
	if (ret == 0 && sv->o->verify_handles && !handle_verified(sv, &si->fh, &si->key))
		ret = -ESTALE;
	return ret;
}

/* An inode that cannot be carried: a placeholder the guest gets EIO from
 * (guest-error), or the end of the migration (abort). */
static int unfound(struct save *sv, struct sv_inode *si, const char *why)
{
	char path[PATH_MAX];

	pt_mig_describe(sv->pt, si->nodeid, path, sizeof(path));
	if (!sv->o->guest_error)
		return mig_refuse(sv->reason, sv->rsize, -ENOENT,
				     "%s (node %llu): %s (--migration-on-error=guest-error "
				     "would make only this file fail on the guest)", path,
				     (unsigned long long)si->nodeid, why);
	log_warn("migration: %s (node %llu): %s; the guest gets EIO from it",
		 path, (unsigned long long)si->nodeid, why);
	free(si->name);
	si->name = NULL;
	si->flags = MIG_INODE_UNLINKED;
	return 0;
}

static int locate(struct save *sv)
{
	int ret = 0;

	sv->order[sv->norder++] = sv->root;
	sv->in[sv->root].located = true;
	if (sv->o->mode == MIG_MODE_FIND_PATHS) {
		ret = find_paths(sv);
		for (size_t q = 1; q < sv->norder && ret == 0; q++) {
			struct sv_inode *si = &sv->in[sv->order[q]];

			if (sv->o->confirm_paths && !path_confirmed(sv, si)) {
				ret = unfound(sv, si, "its path changed while it was saved");
				continue;
			}
			/* With its file handle too, where it has one, so that a
			 * destination on the same file system can tell a file
			 * replaced under the same name from the one saved. */
			if (take_handle(sv, si) != 0)
				si->flags &= ~(MIG_INODE_FILE_HANDLE | MIG_INODE_UNLINKED);
			si->flags &= ~MIG_INODE_UNLINKED;
		}
		/* Inodes the walk did not reach: unlinked, or moved outside. */
		for (size_t i = 0; i < sv->n && ret == 0; i++) {
			if (sv->in[i].located)
				continue;
			sv->in[i].flags &= ~MIG_INODE_FILE_HANDLE;
			ret = sv->in[i].invalid ? unfound(sv, &sv->in[i], "a placeholder already") :
				unfound(sv, &sv->in[i], "not found in the shared directory "
					"(unlinked, or moved out of it; --migration-mode="
					"file-handles carries such files)");
			sv->order[sv->norder++] = i;
		}
		return ret;
	}
	for (size_t i = 0; i < sv->n && ret == 0; i++) {
		if (i == sv->root)
			continue;
		if (sv->in[i].invalid)
			ret = unfound(sv, &sv->in[i], "a placeholder already");
		else if ((ret = take_handle(sv, &sv->in[i])) != 0)
			ret = unfound(sv, &sv->in[i], ret == -ESTALE ?
				      "its file handle names another file" :
				      "no file handle for it");
		sv->order[sv->norder++] = i;
	}
	return ret;
}

static int encode(struct save *sv, const struct mig_session *session,
		  const struct mig_options *options, struct mig_buf *out)
{
	struct mig_counters counters = { .shard_bits = INODE_SHARD_BITS };
	struct mig_inode *mi = calloc(sv->norder, sizeof(*mi));
	struct mig_arrays a = {
		.session = session, .options = options, .counters = &counters,
		.inodes = mi, .n_inodes = sv->norder,
		.open_files = sv->hs, .n_open_files = sv->nh,
	};
	int ret;

	if (!mi)
		return -ENOMEM;
	counters.next_fh = open_file_table_next_fh(sv->pt->open_files);
	inode_table_counters(sv->pt->inodes, counters.next_seq);
	for (size_t q = 0; q < sv->norder; q++) {
		const struct sv_inode *si = &sv->in[sv->order[q]];

		mi[q].nodeid = si->nodeid;
		mi[q].nlookup = si->nlookup;
		mi[q].type = si->type;
		mi[q].flags = q == 0 ? MIG_INODE_ROOT : si->flags;
		mi[q].parent = si->parent;
		mi[q].name = si->name;
		mi[q].name_len = si->name ? strlen(si->name) : 0;
		mi[q].file_handle = (si->flags & MIG_INODE_FILE_HANDLE) ? &si->fh : NULL;
	}
	ret = mig_encode_arrays(&a, out);
	free(mi);
	if (ret)
		mig_refuse(sv->reason, sv->rsize, ret, "encoding the state: %s",
			      strerror(-ret));
	return ret;
}

int passthrough_mig_save(struct passthrough *pt, const struct pt_mig_opts *o,
			 const struct mig_session *session,
			 const struct mig_options *options,
			 struct mig_buf *out, char *reason, size_t reason_size)
{
	struct save sv = { .pt = pt, .o = o, .root = SIZE_MAX, .root_mount_fd = -1,
			   .reason = reason, .rsize = reason_size };
	int ret;

	if (pt->read_only_set.n_roots || pt->hidden_set.n_roots)
		return mig_refuse(reason, reason_size, -ENOTSUP, POLICY_NOT_MIGRATED);
	if (pt->n_areas)
		return mig_refuse(reason, reason_size, -ENOTSUP, AREAS_NOT_MIGRATED);
	inode_table_foreach(pt->inodes, copy_inode, &sv);
	open_file_table_foreach(pt->open_files, copy_handle, &sv);
	ret = sv.err;
	if (ret) {
		mig_refuse(reason, reason_size, ret, "copying the tables: %s",
			      strerror(-ret));
		goto out;
	}
	for (size_t i = 0; i < sv.n; i++)
		if (sv.in[i].nodeid == FUSE_ROOT_ID)
			sv.root = i;
	ret = check_locks(&sv, session);
	if (ret)
		goto out;
	sv.order = calloc(sv.n, sizeof(*sv.order));
	if (o->mode == MIG_MODE_FILE_HANDLES)
		sv.root_mount_fd = pt_reopen(pt, inode_table_root(pt->inodes)->fd,
					     O_RDONLY | O_DIRECTORY);
	if (!sv.order || sv.root == SIZE_MAX) {
		ret = mig_refuse(reason, reason_size, -ENOMEM, "out of memory");
		goto out;
	}
	ret = locate(&sv);
	if (ret == 0)
		ret = encode(&sv, session, options, out);
out:
	if (sv.root_mount_fd >= 0)
		close(sv.root_mount_fd);
	for (size_t i = 0; i < sv.n; i++)
		free(sv.in[i].name);
	free(sv.in);
	free(sv.hs);
	free(sv.hfds);
	free(sv.order);
	return ret;
}

void passthrough_mig_limits(struct passthrough *pt, struct mig_limits *lim)
{
	mig_limits_default(lim);
	/* Each inode and each handle of the stream takes an fd here, but for
	 * inodes kept by file handle (pt_mig_load.c, keep_by_handle). */
	if (pt->fds.limit > 0 && (size_t)pt->fds.limit < lim->max_inodes &&
	    pt->opts.file_handles == FILE_HANDLES_NEVER)
		lim->max_inodes = (size_t)pt->fds.limit;
	if (pt->fds.limit > 0 && (size_t)pt->fds.limit < lim->max_open_files)
		lim->max_open_files = (size_t)pt->fds.limit;
}
