/* A realistic migration state for the stream's tests: nested directories, files, file handles, open handles, locks. */
#include "migration_model.h"

#include "migration/stream_internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* ferryfs's nodeids: (seq << 6) | shard. */
static uint64_t model_nodeid(struct model *m, unsigned i)
{
	unsigned shard = i % 64;

	return (m->counters.next_seq[shard]++ << 6) | shard;
}

void model_build(struct model *m)
{
	memset(m, 0, sizeof(*m));
	m->session = (struct mig_session){
		.initialized = true, .major = 7, .minor = 38, .max_write = 1 << 20,
		.flags = 0x3c0000fbffULL, .max_readahead = 131072, .time_gran = 1,
		.max_pages = 256, .max_background = 12, .congestion_threshold = 9,
	};
	m->options = (struct mig_options){
		.flags = MIG_OPT_XATTR | MIG_OPT_POSIX_LOCK | MIG_OPT_FLOCK |
			 MIG_OPT_READDIRPLUS | MIG_OPT_ANNOUNCE_SUBMOUNTS,
		.cache_mode = MIG_CACHE_AUTO, .file_handles = MIG_FH_PREFER,
		.migration_mode = MIG_MODE_FILE_HANDLES, .config_digest = 0x1234,
	};
	m->counters.shard_bits = 6;
	for (unsigned s = 0; s < 64; s++)
		m->counters.next_seq[s] = 1;
	m->counters.next_fh = 1;
	m->inodes[0] = (struct mig_inode){ .nodeid = 1, .nlookup = 0, .type = S_IFDIR,
					   .flags = MIG_INODE_ROOT };
	for (unsigned i = 1; i < N_INODES; i++) {
		struct mig_inode *in = &m->inodes[i];
		bool dir = i <= N_DIRS;
		/* Directories nest: dir i sits in dir i/2 (the root for 1). */
		unsigned parent = dir ? i / 2 : 1 + (i * 7) % N_DIRS;

		in->nodeid = model_nodeid(m, i);
		in->nlookup = 1 + i % 5;
		in->generation = i * 3;
		in->type = dir ? S_IFDIR : (i % 10 == 3 ? S_IFLNK : S_IFREG);
		snprintf(m->names[i], sizeof(m->names[i]), "%s-%u", dir ? "dir" : "file", i);
		if (!dir && i % 17 == 0) {
			in->flags = MIG_INODE_UNLINKED;    /* deleted, still open */
		} else {
			in->flags = MIG_INODE_PATH;
			in->parent = m->inodes[parent].nodeid;
			in->name = m->names[i];
			in->name_len = strlen(m->names[i]);
		}
		if (i % 3 == 0 || (i % 17 == 0 && i % 2 == 0)) {
			struct mig_file_handle *h = &m->fhandles[i];

			h->handle_type = 0x81;
			h->mount_id = 29 + i % 2;
			h->size = (uint16_t)(8 + i % 121);
			for (unsigned b = 0; b < h->size; b++)
				h->bytes[b] = (unsigned char)(i * 31 + b);
			h->bytes[0] = (unsigned char)i;
			h->bytes[1] = (unsigned char)(i >> 8);
			in->flags |= MIG_INODE_FILE_HANDLE;
			in->file_handle = h;
		}
	}
	for (unsigned i = 0; i < 64; i++) {
		unsigned n = i < 8 ? 1 + i : N_DIRS + 1 + i * 6;
		struct mig_open_file *h = &m->open_files[m->n_open_files++];

		h->fh = m->counters.next_fh++;
		h->nodeid = m->inodes[n].nodeid;
		if (m->inodes[n].type == S_IFDIR) {
			h->kind = MIG_OPEN_DIR;
			h->open_flags = O_RDONLY | O_DIRECTORY;
		} else if (m->inodes[n].type == S_IFREG) {
			h->kind = MIG_OPEN_REGULAR;
			h->open_flags = i % 2 ? O_RDWR | O_APPEND : O_RDONLY;
		} else {
			m->n_open_files--;   /* a symlink is never opened */
		}
	}
	m->counters.next_fh += 5;   /* some already released */
	m->locks[m->n_locks++] = (struct mig_lock){ .nodeid = m->open_files[10].nodeid,
		.owner = 0xabcdef, .start = 0, .end = 99, .pid = 42,
		.kind = MIG_LOCK_POSIX, .type = MIG_LOCK_WRITE };
	m->locks[m->n_locks++] = (struct mig_lock){ .nodeid = m->open_files[11].nodeid,
		.owner = m->open_files[11].fh, .start = 0, .end = UINT64_MAX, .pid = 43,
		.kind = MIG_LOCK_FLOCK, .type = MIG_LOCK_READ };
}

int model_encode(struct model *m, struct mig_buf *b)
{
	struct mig_arrays a = {
		.session = &m->session, .options = &m->options, .counters = &m->counters,
		.inodes = m->inodes, .n_inodes = N_INODES,
		.open_files = m->open_files, .n_open_files = m->n_open_files,
		.locks = m->locks, .n_locks = m->n_locks,
	};

	return mig_encode_arrays(&a, b);
}

bool inode_equal(const struct mig_inode *a, const struct mig_inode *b)
{
	if (a->nodeid != b->nodeid || a->nlookup != b->nlookup ||
	    a->generation != b->generation || a->type != b->type || a->flags != b->flags)
		return false;
	if ((a->flags & MIG_INODE_PATH) &&
	    (a->parent != b->parent || a->name_len != b->name_len ||
	     strcmp(a->name, b->name)))
		return false;
	if ((a->flags & MIG_INODE_FILE_HANDLE) && !mig_fhandle_equal(a->file_handle, b->file_handle))
		return false;
	return true;
}

bool session_equal(const struct mig_session *a, const struct mig_session *b)
{
	return a->initialized == b->initialized && a->major == b->major &&
	       a->minor == b->minor && a->max_write == b->max_write &&
	       a->flags == b->flags && a->max_readahead == b->max_readahead &&
	       a->time_gran == b->time_gran && a->max_pages == b->max_pages &&
	       a->max_background == b->max_background &&
	       a->congestion_threshold == b->congestion_threshold &&
	       a->map_alignment == b->map_alignment;
}

bool lock_equal(const struct mig_lock *a, const struct mig_lock *b)
{
	return a->nodeid == b->nodeid && a->owner == b->owner && a->start == b->start &&
	       a->end == b->end && a->pid == b->pid && a->kind == b->kind &&
	       a->type == b->type;
}
