/* The metadata workloads (getattr, lookup, create-unlink, readdirplus) and readdirplus's directory. */
#include "workloads.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuse_requests.h"

enum { CU_CREATE, CU_RELEASE, CU_UNLINK };
enum { RD_OPENDIR, RD_READ, RD_RELEASEDIR };
enum { DF_ENTRY, DF_END };          /* the directory's setup and teardown, file by file */

/* ---- getattr: the data file's attributes ---- */

int meta_getattr_next(struct run *r, struct ld_slot *s)
{
	return fr_getattr(&s->fc, load_unique(r), r->file_nodeid);
}

int meta_getattr_done(struct run *r, struct ld_slot *s, char *why, size_t whylen)
{
	const struct fuse_attr_out *a = fc_out_args(&s->fc);

	if (a->attr.ino != r->file_ino || a->attr.size != r->nblocks * r->cfg->block_size ||
	    (a->attr.mode & S_IFMT) != S_IFREG) {
		snprintf(why, whylen, "GETATTR: ino %llu size %llu mode %o",
			 (unsigned long long)a->attr.ino,
			 (unsigned long long)a->attr.size, a->attr.mode);
		return -EBADMSG;
	}
	return 0;
}

/* ---- lookup: hits on the data file and misses, alternating ---- */

int meta_lookup_next(struct run *r, struct ld_slot *s)
{
	int ret;

	/* Alternate hits and misses across the whole run. */
	s->w.seq = r->cursor++;
	if (s->w.seq & 1) {
		snprintf(s->w.name, sizeof(s->w.name), "missing-%llu",
			 (unsigned long long)s->w.seq);
		ret = fr_lookup(&s->fc, load_unique(r), r->workdir, s->w.name);
		s->fc.allow_err = -ENOENT;
		return ret;
	}
	return fr_lookup(&s->fc, load_unique(r), r->workdir, "data");
}

int meta_lookup_done(struct run *r, struct ld_slot *s, char *why, size_t whylen)
{
	const struct fuse_out_header *out = fc_out_hdr(&s->fc);
	const struct fuse_entry_out *e = fc_out_args(&s->fc);

	if (s->w.seq & 1) {
		/* ENOENT, or a negative entry (nodeid 0) to cache. */
		if (!out->error && e->nodeid) {
			snprintf(why, whylen, "LOOKUP of missing name '%s' found nodeid %llu",
				 s->w.name, (unsigned long long)e->nodeid);
			return -EBADMSG;
		}
		return 0;
	}
	if (e->nodeid != r->file_nodeid || e->attr.ino != r->file_ino) {
		snprintf(why, whylen, "LOOKUP 'data': nodeid %llu ino %llu, expected %llu %llu",
			 (unsigned long long)e->nodeid, (unsigned long long)e->attr.ino,
			 (unsigned long long)r->file_nodeid, (unsigned long long)r->file_ino);
		return -EBADMSG;
	}
	r->file_lookups++;
	return 0;
}

/* ---- create-unlink: CREATE, RELEASE, UNLINK of a new name each time ---- */

int meta_create_unlink_next(struct run *r, struct ld_slot *s)
{
	switch (s->w.step) {
	case CU_CREATE:
		snprintf(s->w.name, sizeof(s->w.name), "cu-%u-%u-%llu",
			 s->fc.index, (unsigned)(s->w.seq >> 48),
			 (unsigned long long)r->cursor++);
		return fr_create(&s->fc, load_unique(r), r->workdir, s->w.name);
	case CU_RELEASE:
		return fr_release(&s->fc, load_unique(r), FUSE_RELEASE, s->w.ent.nodeid,
				  s->w.ent.fh, O_RDWR);
	default:
		return fr_name(&s->fc, load_unique(r), FUSE_UNLINK, r->workdir, s->w.name,
			       NULL, 0, 0);
	}
}

int meta_create_unlink_done(struct run *r, struct ld_slot *s, char *why, size_t whylen)
{
	const struct fuse_entry_out *e = fc_out_args(&s->fc);
	int ret;

	switch (s->w.step) {
	case CU_CREATE:
		ret = fr_check_entry(e, S_IFREG, "CREATE", why, whylen);
		if (ret)
			return ret;
		s->w.ent.nodeid = e->nodeid;
		s->w.ent.fh = ((const struct fuse_open_out *)(e + 1))->fh;
		s->w.step = CU_RELEASE;
		return 0;
	case CU_RELEASE:
		s->w.step = CU_UNLINK;
		return 0;
	default:
		s->w.step = CU_CREATE;
		r->cycles += r->measuring;
		return load_forget_add(r, s->w.ent.nodeid, 1);
	}
}

/* ---- readdirplus: OPENDIR, READDIRPLUS to the end, RELEASEDIR ---- */

int meta_readdirplus_next(struct run *r, struct ld_slot *s)
{
	switch (s->w.step) {
	case RD_OPENDIR:
		return fr_open(&s->fc, load_unique(r), FUSE_OPENDIR, r->dir_nodeid, O_RDONLY);
	case RD_READ:
		return fr_readdirplus(&s->fc, load_unique(r), r->dir_nodeid, s->w.dir.fh,
				      s->w.dir.off);
	default:
		return fr_release(&s->fc, load_unique(r), FUSE_RELEASEDIR, r->dir_nodeid,
				  s->w.dir.fh, O_RDONLY);
	}
}

/* Checks one READDIRPLUS reply: every name one of ours, none twice. */
static int parse_dirplus(struct run *r, struct ld_slot *s, char *why, size_t whylen)
{
	const struct fuse_out_header *out = fc_out_hdr(&s->fc);
	size_t left = out->len - sizeof(*out);
	const uint8_t *p = s->fc.data;
	uint8_t *seen = s->w.dir.seen;
	int ret;

	while (left) {
		const struct fuse_direntplus *d = (const void *)p;
		size_t reclen;
		unsigned long idx;
		char name[256], *end;

		if (left < FUSE_NAME_OFFSET_DIRENTPLUS) {
			snprintf(why, whylen, "READDIRPLUS: %zu trailing bytes", left);
			return -EBADMSG;
		}
		reclen = FUSE_DIRENTPLUS_SIZE(d);
		if (!d->dirent.namelen || d->dirent.namelen > 255 || reclen > left) {
			snprintf(why, whylen, "READDIRPLUS: entry of namelen %u in %zu bytes",
				 d->dirent.namelen, left);
			return -EBADMSG;
		}
		memcpy(name, d->dirent.name, d->dirent.namelen);
		name[d->dirent.namelen] = 0;
		s->w.dir.off = d->dirent.off;
		p += reclen;
		left -= reclen;
		r->entries += r->measuring;
		if (!strcmp(name, ".") || !strcmp(name, ".."))
			continue;
		idx = strtoul(name + 1, &end, 10);
		if (name[0] != 'f' || *end || idx >= r->cfg->dir_entries) {
			snprintf(why, whylen, "READDIRPLUS: unexpected name '%s'", name);
			return -EBADMSG;
		}
		if (seen[idx / 8] & (1u << (idx % 8))) {
			snprintf(why, whylen, "READDIRPLUS: '%s' listed twice", name);
			return -EBADMSG;
		}
		seen[idx / 8] |= (uint8_t)(1u << (idx % 8));
		s->w.dir.count++;
		/* A zero nodeid means "no attributes, no lookup": nothing to
		 * forget. Otherwise the entry holds a lookup count, like the
		 * dentries the Linux driver creates and later forgets. */
		if (!d->entry_out.nodeid)
			continue;
		if ((d->entry_out.attr.mode & S_IFMT) != S_IFREG) {
			snprintf(why, whylen, "READDIRPLUS: '%s' has mode %o", name,
				 d->entry_out.attr.mode);
			return -EBADMSG;
		}
		ret = load_forget_add(r, d->entry_out.nodeid, 1);
		if (ret)
			return ret;
	}
	return 0;
}

int meta_readdirplus_done(struct run *r, struct ld_slot *s, char *why, size_t whylen)
{
	const struct fuse_out_header *out = fc_out_hdr(&s->fc);

	switch (s->w.step) {
	case RD_OPENDIR:
		s->w.dir.fh = ((const struct fuse_open_out *)fc_out_args(&s->fc))->fh;
		s->w.dir.off = 0;
		s->w.dir.count = 0;
		memset(s->w.dir.seen, 0, (r->cfg->dir_entries + 7) / 8);
		s->w.step = RD_READ;
		return 0;
	case RD_READ:
		if (out->len > sizeof(*out))
			return parse_dirplus(r, s, why, whylen);
		s->w.step = RD_RELEASEDIR;
		if (s->w.dir.count != r->cfg->dir_entries) {
			snprintf(why, whylen, "READDIRPLUS: listing ended after %u of %u entries",
				 s->w.dir.count, r->cfg->dir_entries);
			return -EBADMSG;
		}
		return 0;
	default:
		s->w.step = RD_OPENDIR;
		r->cycles += r->measuring;
		return 0;
	}
}

/* ---- readdirplus's directory: --dir-entries files, made and removed pipelined ---- */

/* Both phases run two requests per file: one answered with its entry
 * (CREATE, LOOKUP), then one that ends the use of it (RELEASE, UNLINK),
 * after which its lookup is forgotten. */
static int dir_file_done(struct run *r, struct ld_slot *s, const char *what, char *why,
			 size_t whylen)
{
	const struct fuse_entry_out *e = fc_out_args(&s->fc);
	int ret;

	if (s->w.step == DF_END) {
		s->w.step = DF_ENTRY;
		return load_forget_add(r, s->w.ent.nodeid, 1);
	}
	ret = fr_check_entry(e, S_IFREG, what, why, whylen);
	if (ret)
		return ret;
	s->w.ent.nodeid = e->nodeid;
	s->w.step = DF_END;
	return 0;
}

static int mkfiles_next(struct run *r, struct ld_slot *s)
{
	if (s->w.step == DF_END)
		return fr_release(&s->fc, load_unique(r), FUSE_RELEASE, s->w.ent.nodeid,
				  s->w.ent.fh, O_RDWR);
	if (r->cursor >= r->cfg->dir_entries)
		return -ENODATA;
	snprintf(s->w.name, sizeof(s->w.name), "f%06llu", (unsigned long long)r->cursor++);
	return fr_create(&s->fc, load_unique(r), r->dir_nodeid, s->w.name);
}

static int mkfiles_done(struct run *r, struct ld_slot *s, char *why, size_t whylen)
{
	const struct fuse_entry_out *e = fc_out_args(&s->fc);

	/* The handle to release: taken before the check, which then decides
	 * whether the slot goes on to use it. */
	if (s->w.step == DF_ENTRY)
		s->w.ent.fh = ((const struct fuse_open_out *)(e + 1))->fh;
	return dir_file_done(r, s, "CREATE", why, whylen);
}

/* LOOKUP before UNLINK, as the kernel always has a dentry for what it
 * unlinks: virtiofsd answers EIO to an UNLINK of a name it holds no inode
 * for, and the listing's FORGETs have dropped them all. */
static int rmfiles_next(struct run *r, struct ld_slot *s)
{
	if (s->w.step == DF_END)
		return fr_name(&s->fc, load_unique(r), FUSE_UNLINK, r->dir_nodeid, s->w.name,
			       NULL, 0, 0);
	if (r->cursor >= r->cfg->dir_entries)
		return -ENODATA;
	snprintf(s->w.name, sizeof(s->w.name), "f%06llu", (unsigned long long)r->cursor++);
	return fr_lookup(&s->fc, load_unique(r), r->dir_nodeid, s->w.name);
}

static int rmfiles_done(struct run *r, struct ld_slot *s, char *why, size_t whylen)
{
	return dir_file_done(r, s, "LOOKUP", why, whylen);
}

/* Makes "dir" in the work directory with --dir-entries files in it, and
 * gives each request slot the bitmap its listings are checked against. */
int meta_setup_dir(struct run *r)
{
	unsigned i, j;
	int ret;

	for (i = 1; i < r->nq; i++) {
		for (j = 0; j < r->q[i].vq->nslots; j++) {
			r->q[i].slots[j].w.dir.seen = calloc(1, (r->cfg->dir_entries + 7) / 8);
			if (!r->q[i].slots[j].w.dir.seen)
				return -ENOMEM;
		}
	}
	ret = load_sync_mkdir(r, r->workdir, "dir", &r->dir_nodeid);
	if (ret)
		return ret;
	r->cursor = 0;
	return load_engine(r, "mkfiles", mkfiles_next, mkfiles_done, 0, 0);
}

int meta_teardown_dir(struct run *r)
{
	int ret;

	if (!r->dir_nodeid)
		return 0;
	r->cursor = 0;
	ret = load_engine(r, "rmfiles", rmfiles_next, rmfiles_done, 0, 0);
	if (!ret)
		ret = load_sync_remove(r, FUSE_RMDIR, r->workdir, "dir", r->dir_nodeid, 1);
	return ret;
}
