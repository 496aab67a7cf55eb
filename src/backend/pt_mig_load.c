/* Migration destination: a decoded state resolved in the share and reopened, then installed into the tables all at once or not at all. */
#include <dirent.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdlib.h>
#include <string.h>

#include "backend/pt_internal.h"
#include "backend/pt_migration.h"
#include "common/log.h"

/*
 * Everything is opened and allocated outside the tables first: inodes and
 * handles "detached", each owning its fd. Only when every one is ready
 * does commit link them in, which cannot fail; abort closes them all. So a
 * stream that fails half way leaves the tables as they were and no fd.
 */
struct pt_mig_load {
	size_t n;
	struct inode **inodes;      /* by stream index; [0] (the root): NULL */
	size_t nh;
	struct open_file **open_files;
	size_t *handle_node;        /* stream index of each handle's inode */
	struct mig_counters counters;
};

struct loader {
	struct passthrough *pt;
	const struct pt_mig_opts *o;
	const struct mig_state *st;
	struct pt_mig_load *l;
	struct pt_key_set keys;
	struct inode_key root_key;
	int root_mount_fd;
	bool *held;                 /* by stream index: an open handle needs its fd */
	char *reason;
	size_t rsize;
};

static size_t index_of(const struct loader *ld, uint64_t nodeid)
{
	return (size_t)(mig_state_inode(ld->st, nodeid) - ld->st->inodes);
}

/* The fd of the stream's inode i, -1 for a placeholder. */
static int fd_of(const struct loader *ld, size_t i)
{
	if (i == 0)
		return inode_table_root(ld->pt->inodes)->fd;
	return ld->l->inodes[i]->invalid ? -1 : ld->l->inodes[i]->fd;
}

/*
 * find-paths: a path found again may name another file than the one saved
 * (the host replaced it, or renamed another over it). Where the stream
 * also has the file's handle, that tells. First by the handle of the file
 * the path names now: name_to_handle_at needs no privilege, and on the
 * same file system one inode has one handle (its generation included), so
 * a different handle is a different file, wherever the source ran. Where
 * the file system gives no handle, by opening the saved one (which the
 * source still holds) and comparing inodes: that needs
 * CAP_DAC_READ_SEARCH, and that it opens nothing (ESTALE) says the saved
 * file is gone only on the mount it came from (the same mount namespace):
 * elsewhere it may be another host's file system, and the path is trusted.
 *
 * Except on FUSE: a FUSE handle is the node id (and generation) one FUSE
 * server gave the inode on one mount, so the same file mounted twice (a
 * distributed file system on two hosts: GlusterFS gives each mount its own
 * node ids) has other bytes on the other mount. Unequal bytes prove
 * nothing there: the file is checked by opening the saved handle instead.
 */
static int check_same_file(struct loader *ld, const struct mig_inode *mi, int fd)
{
	struct inode_handle_buf now;
	struct statx a, b;
	int hfd, mnt_id, ret;
	bool same_mount = mi->file_handle->mount_id == ld->root_key.mnt_id;
	unsigned n = atomic_load_explicit(&ld->pt->nmounts, memory_order_acquire);

	now.h.fh.handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(fd, "", &now.h.fh, &mnt_id, AT_EMPTY_PATH) == 0 &&
	    now.h.fh.handle_type == mi->file_handle->handle_type) {
		if (now.h.fh.handle_bytes == mi->file_handle->size &&
		    !memcmp(now.h.fh.f_handle, mi->file_handle->bytes, mi->file_handle->size))
			return 0;
		if (pt_fd_on_fuse(fd) != 1)
			return -ESTALE;
	}
	for (unsigned i = 0; i < n && !same_mount; i++)
		same_mount = (uint64_t)ld->pt->mounts[i].mnt_id == mi->file_handle->mount_id;
	hfd = pt_mig_open_handle(ld->pt, ld->root_mount_fd, mi->file_handle);
	if (hfd < 0)
		return hfd == -ESTALE && same_mount ? -ESTALE : 0;
	ret = pt_stat_fd(hfd, &a) || pt_stat_fd(fd, &b) || !pt_mig_same_inode(&a, &b) ?
		-ESTALE : 0;
	close(hfd);
	return ret;
}

/* Opens inode i's O_PATH fd by its file handle or its name in its parent.
 * -EXDEV when a handle names a file outside the share. */
static int open_inode(struct loader *ld, const struct mig_inode *mi, int *out)
{
	/* How the source chose to name its inodes (its --migration-mode),
	 * not this daemon's own mode, which only decides how it saves. */
	bool by_handle = (mi->flags & MIG_INODE_FILE_HANDLE) &&
		(ld->st->options.migration_mode == MIG_MODE_FILE_HANDLES ||
		 !(mi->flags & MIG_INODE_PATH));
	int fd, ret;

	if (by_handle) {
		fd = pt_mig_open_handle(ld->pt, ld->root_mount_fd, mi->file_handle);
		if (fd < 0)
			return fd;
	} else if (mi->flags & MIG_INODE_PATH) {
		int pfd = fd_of(ld, index_of(ld, mi->parent));

		if (pfd < 0)
			return -ENOENT;     /* the parent is a placeholder */
		fd = openat(pfd, mi->name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0 && (mi->flags & MIG_INODE_FILE_HANDLE)) {
			ret = check_same_file(ld, mi, fd);
			if (ret) {
				close(fd);
				return -EMLINK;     /* see resolve_one */
			}
		}
	} else {
		return -ENOENT;             /* unlinked without a handle */
	}
	if (fd < 0)
		return -errno;
	/* A handle reaches any file of its file system: only one inside the
	 * share may be served. A name in a parent cannot leave it. */
	if (by_handle) {
		ret = pt_mig_in_share(ld->pt, fd);
		if (ret) {
			close(fd);
			return ret;
		}
	}
	*out = fd;
	return 0;
}

static struct inode *placeholder(uint64_t nodeid, mode_t type)
{
	/* A key no host inode has, so that no lookup ever finds it. */
	struct inode_key key = { .dev = UINT64_MAX, .ino = nodeid, .mnt_id = UINT32_MAX };
	struct inode *inode = inode_alloc_detached(nodeid, &key, -1, type, NULL);

	if (inode)
		inode->invalid = true;
	return inode;
}

/*
 * A daemon that keeps file handles for its inodes (--inode-file-handles)
 * keeps a loaded file by its handle too, with no fd, as a LOOKUP would: a
 * guest may know far more files than the fd limit allows (100,000 in
 * ferryfs-load --migrate-to). Directories keep their fds (their children
 * are opened through them while loading), and so do files with an open
 * handle (reopened through it). With --inode-file-handles=mandatory a file
 * without a handle is refused, as its LOOKUP would be.
 */
static int keep_by_handle(struct loader *ld, size_t i, const struct statx *stx, int *fd,
			  struct inode_handle_buf *hb, const struct inode_file_handle **handle)
{
	int ret;

	*handle = NULL;
	if (ld->pt->opts.file_handles == FILE_HANDLES_NEVER || S_ISDIR(ld->st->inodes[i].type) ||
	    ld->held[i])
		return 0;
	ret = pt_handle_for_inode(ld->pt, *fd, stx, hb, handle);
	if (ret < 0 || !*handle)
		return ret;
	close(*fd);
	fd_budget_give_back(&ld->pt->fds);
	*fd = -1;
	return 0;
}

static int resolve_one(struct loader *ld, size_t i)
{
	const struct mig_inode *mi = &ld->st->inodes[i];
	const struct inode_file_handle *handle;
	struct inode_handle_buf hb;
	struct statx stx;
	struct inode_key key;
	const char *why = NULL;
	int fd = -1, ret = fd_budget_take(&ld->pt->fds);

	if (ret)
		return mig_refuse(ld->reason, ld->rsize, ret,
				     "node %llu: over the fd budget",
				     (unsigned long long)mi->nodeid);
	ret = open_inode(ld, mi, &fd);
	if (ret == -EXDEV) {
		fd_budget_give_back(&ld->pt->fds);
		return mig_refuse(ld->reason, ld->rsize, -EINVAL,
				     "node %llu: its file handle names a file outside "
				     "the shared directory (or one whose place in it "
				     "cannot be proven)", (unsigned long long)mi->nodeid);
	}
	if (ret == -EMLINK) {
		ret = -ESTALE;
		why = "its path now names another file than the one saved";
	}
	if (ret == -EPERM && !(mi->flags & MIG_INODE_PATH)) {
		fd_budget_give_back(&ld->pt->fds);
		return mig_refuse(ld->reason, ld->rsize, ret,
				     "node %llu: the source named it by a file handle, which "
				     "this daemon cannot open without CAP_DAC_READ_SEARCH on the "
				     "host: start the destination as root with "
				     "--migration-mode=file-handles, or the source "
				     "in find-paths mode",
				     (unsigned long long)mi->nodeid);
	}
	if (ret == 0) {
		ret = pt_stat_fd(fd, &stx);
		pt_key_from_statx(&stx, &key);
		if (ret == 0 && (stx.stx_mode & S_IFMT) != mi->type) {
			ret = -ESTALE;
			why = "is now another kind of file";
		}
	}
	if (ret == 0) {
		size_t other;

		if (pt_key_set_find(&ld->keys, &key, &other)) {
			close(fd);
			fd_budget_give_back(&ld->pt->fds);
			return mig_refuse(ld->reason, ld->rsize, -EINVAL,
					     "node %llu: the same host inode as node %llu",
					     (unsigned long long)mi->nodeid,
					     (unsigned long long)ld->st->inodes[other].nodeid);
		}
		pt_key_set_add(&ld->keys, &key, i);
		ret = keep_by_handle(ld, i, &stx, &fd, &hb, &handle);
		if (ret) {
			if (fd >= 0)
				close(fd);
			fd_budget_give_back(&ld->pt->fds);
			return mig_refuse(ld->reason, ld->rsize, ret, "node %llu: no file handle: %s",
					  (unsigned long long)mi->nodeid, strerror(-ret));
		}
		ld->l->inodes[i] = inode_alloc_detached(mi->nodeid, &key, fd, mi->type, handle);
		if (!ld->l->inodes[i]) {
			if (fd >= 0) {
				close(fd);
				fd_budget_give_back(&ld->pt->fds);
			}
			return mig_refuse(ld->reason, ld->rsize, -ENOMEM, "out of memory");
		}
		ld->l->inodes[i]->nlookup = mi->nlookup;
		return 0;
	}
	if (fd >= 0)
		close(fd);
	fd_budget_give_back(&ld->pt->fds);
	/* Only a file that is not there (any more) is the file's own
	 * failure; running out of fds or memory fails the whole load. */
	if (!why && ret != -ENOENT && ret != -ESTALE && ret != -ENOTDIR && ret != -ELOOP)
		return mig_refuse(ld->reason, ld->rsize, ret, "node %llu (%s): cannot open it: %s",
				  (unsigned long long)mi->nodeid, mi->name ? mi->name : "no name",
				  strerror(-ret));
	if (!why)
		why = mi->flags & MIG_INODE_PATH ? "its path no longer names a file" :
			mi->flags & MIG_INODE_FILE_HANDLE ? "its file handle no longer opens" :
			"unlinked on the source, and carried without a file handle";
	if (!ld->o->guest_error)
		return mig_refuse(ld->reason, ld->rsize, ret,
				     "node %llu (%s): %s", (unsigned long long)mi->nodeid,
				     mi->name ? mi->name : "no name", why);
	log_warn("migration: node %llu (%s): %s; the guest gets EIO from it",
		 (unsigned long long)mi->nodeid, mi->name ? mi->name : "no name", why);
	ld->l->inodes[i] = placeholder(mi->nodeid, mi->type);
	if (!ld->l->inodes[i])
		return mig_refuse(ld->reason, ld->rsize, -ENOMEM, "out of memory");
	ld->l->inodes[i]->nlookup = mi->nlookup;
	return 0;
}

static int reopen_handle(struct loader *ld, size_t k)
{
	const struct mig_open_file *mh = &ld->st->open_files[k];
	size_t i = index_of(ld, mh->nodeid);
	int flags = (int)(mh->open_flags & ~(uint32_t)(O_CREAT | O_EXCL | O_TRUNC));
	int fd = fd_of(ld, i);
	DIR *dir = NULL;

	ld->l->handle_node[k] = i;
	if (fd < 0) {
		ld->l->open_files[k] = NULL;       /* on a placeholder: EBADF */
		return 0;
	}
	if (!pt_openable_type(ld->st->inodes[i].type))
		return mig_refuse(ld->reason, ld->rsize, -EINVAL,
				     "fh %llu: on a file that is neither regular nor a directory",
				     (unsigned long long)mh->fh);
	if (mh->kind == MIG_OPEN_DIR)
		flags = O_RDONLY | O_DIRECTORY | O_NONBLOCK;
	fd = pt_reopen_counted(ld->pt, fd, flags | O_NOCTTY);
	if (fd >= 0 && mh->kind == MIG_OPEN_DIR && !(dir = fdopendir(fd))) {
		pt_close_fd(ld->pt, fd);
		fd = -ENOMEM;
	}
	if (fd < 0) {
		if (!ld->o->guest_error)
			return mig_refuse(ld->reason, ld->rsize, fd,
					     "fh %llu on node %llu: cannot open it again: %s",
					     (unsigned long long)mh->fh,
					     (unsigned long long)mh->nodeid, strerror(-fd));
		ld->l->open_files[k] = NULL;
		return 0;
	}
	ld->l->open_files[k] = open_file_alloc_detached(mh->fh, fd, dir);
	if (!ld->l->open_files[k]) {
		if (dir)
			closedir(dir);
		else
			close(fd);
		fd_budget_give_back(&ld->pt->fds);
		return mig_refuse(ld->reason, ld->rsize, -ENOMEM, "out of memory");
	}
	return 0;
}

static void count_handle(struct open_file *h, void *arg)
{
	(void)h;
	(*(size_t *)arg)++;
}

static bool tables_empty(struct passthrough *pt)
{
	size_t count = 0;

	open_file_table_foreach(pt->open_files, count_handle, &count);
	return count == 0 && inode_table_empty(pt->inodes);
}

void passthrough_mig_abort(struct passthrough *pt, struct pt_mig_load *l)
{
	if (!l)
		return;
	for (size_t k = 0; l->open_files && k < l->nh; k++)
		open_file_free_detached(pt->open_files, l->open_files[k]);
	for (size_t i = 0; l->inodes && i < l->n; i++)
		inode_free_detached(pt->inodes, l->inodes[i]);
	free(l->open_files);
	free(l->handle_node);
	free(l->inodes);
	free(l);
}

int passthrough_mig_prepare(struct passthrough *pt, const struct pt_mig_opts *o,
			    const struct mig_state *st, struct pt_mig_load **out,
			    char *reason, size_t reason_size)
{
	struct loader ld = { .pt = pt, .o = o, .st = st, .root_mount_fd = -1,
			     .reason = reason, .rsize = reason_size };
	struct statx stx;
	struct inode_key root_key;
	int ret;

	*out = NULL;
	if (pt->read_only_set.n_roots || pt->hidden_set.n_roots)
		return mig_refuse(reason, reason_size, -ENOTSUP, POLICY_NOT_MIGRATED);
	if (pt->n_areas)
		return mig_refuse(reason, reason_size, -ENOTSUP, AREAS_NOT_MIGRATED);
	if (!tables_empty(pt))
		return mig_refuse(reason, reason_size, -EBUSY,
				     "this daemon's guest already knows files: a state "
				     "loads only into a fresh daemon");
	ld.l = calloc(1, sizeof(*ld.l));
	if (!ld.l)
		return mig_refuse(reason, reason_size, -ENOMEM, "out of memory");
	ld.l->n = st->n_inodes;
	ld.l->nh = st->n_open_files;
	ld.l->counters = st->counters;
	ld.l->inodes = calloc(st->n_inodes, sizeof(*ld.l->inodes));
	ld.l->open_files = calloc(st->n_open_files ? st->n_open_files : 1, sizeof(*ld.l->open_files));
	ld.l->handle_node = calloc(st->n_open_files ? st->n_open_files : 1,
				   sizeof(*ld.l->handle_node));
	ret = pt_key_set_init(&ld.keys, st->n_inodes);
	ld.held = calloc(st->n_inodes ? st->n_inodes : 1, sizeof(*ld.held));
	if (!ld.l->inodes || !ld.l->open_files || !ld.l->handle_node || !ld.held || ret) {
		ret = mig_refuse(reason, reason_size, -ENOMEM, "out of memory");
		goto out;
	}
	/* The root is this daemon's own shared directory; nothing may be
	 * another name for it. */
	ret = pt_stat_fd(inode_table_root(pt->inodes)->fd, &stx);
	if (ret)
		goto out;
	pt_key_from_statx(&stx, &root_key);
	ld.root_key = root_key;
	pt_key_set_add(&ld.keys, &root_key, 0);
	ld.root_mount_fd = pt_reopen(pt, inode_table_root(pt->inodes)->fd,
					     O_RDONLY | O_DIRECTORY);
	for (size_t k = 0; k < st->n_open_files; k++)
		ld.held[index_of(&ld, st->open_files[k].nodeid)] = true;
	/* The stream has parents before children, so each parent is open
	 * (or a placeholder) by the time its children come. */
	for (size_t i = 1; i < st->n_inodes && ret == 0; i++)
		ret = resolve_one(&ld, i);
	for (size_t k = 0; k < st->n_open_files && ret == 0; k++)
		ret = reopen_handle(&ld, k);
out:
	if (ld.root_mount_fd >= 0)
		close(ld.root_mount_fd);
	pt_key_set_free(&ld.keys);
	free(ld.held);
	if (ret) {
		passthrough_mig_abort(pt, ld.l);
		return ret;
	}
	*out = ld.l;
	return 0;
}

void passthrough_mig_commit(struct passthrough *pt, struct pt_mig_load *l)
{
	/* Each handle holds a request reference on its inode, as open_file_add's
	 * callers take one. */
	for (size_t k = 0; k < l->nh; k++)
		if (l->open_files[k] && l->handle_node[k] != 0)
			l->inodes[l->handle_node[k]]->refs++;
	for (size_t i = 1; i < l->n; i++) {
		struct inode *inode = l->inodes[i];

		/* Nobody would ever free an inode neither counted. */
		if (inode->nlookup == 0 && inode->refs == 0) {
			inode_free_detached(pt->inodes, inode);
			continue;
		}
		inode_table_install(pt->inodes, inode);
	}
	for (size_t k = 0; k < l->nh; k++)
		if (l->open_files[k])
			open_file_install(pt->open_files, l->open_files[k], l->handle_node[k] ?
				       l->inodes[l->handle_node[k]] :
				       inode_table_root(pt->inodes));
	/* Never hand out an id the guest may still hold. */
	if (l->counters.shard_bits == INODE_SHARD_BITS)
		for (unsigned s = 0; s < INODE_SHARDS; s++)
			inode_table_raise_seq(pt->inodes, s, l->counters.next_seq[s]);
	open_file_table_raise_next_fh(pt->open_files, l->counters.next_fh);
	/* The quota's usage is the tree's, which the source has stopped
	 * changing now: measured here, nothing of it needs the stream. */
	if (quota_on(pt->quota) && quota_rescan(pt->quota) < 0)
		log_warn("quota: cannot measure the share after the migration; "
			 "the figures of this daemon's start stay until the next walk");
	free(l->open_files);
	free(l->handle_node);
	free(l->inodes);
	free(l);
}
