/* ferryfs-load --host: each workload's step as the system calls a passthrough daemon makes for it on the host. */
#include "host.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fuse_client.h"

/* Every call here names its file relative to the work directory, as a
 * daemon names a guest's file relative to its parent's fd. */
#define STATX_FLAGS (AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT)
#define STATX_MASK (STATX_BASIC_STATS | STATX_MNT_ID)

static int wrong(const char *what, int err)
{
	fprintf(stderr, "ferryfs-load: host %s: %s\n", what, err ? strerror(err) : "wrong answer");
	return -EBADMSG;
}

/* One pread or pwrite of a whole block: counted, or the wrong answer said. */
static int block_done(struct host_run *h, struct host_count *c, ssize_t n, const char *call)
{
	if (n != (ssize_t)h->cfg->block_size)
		return wrong(n < 0 ? call : "pread or pwrite: short", n < 0 ? errno : 0);
	c->ops = 1;
	c->bytes = (uint64_t)n;
	return 0;
}

/* ---- read, randread: pread(2), the data checked as ferryfs-load checks READs ---- */

static int read_block(struct host_run *h, struct host_count *c, uint64_t blk)
{
	uint32_t bs = h->cfg->block_size;
	uint64_t off = blk * bs, bad;
	int ret;

	fc_pattern_poison(h->buf, off, bs,
			  h->measuring ? FC_CHECK_STRIDE_SPARSE : FC_POISON_STRIDE_FULL);
	ret = block_done(h, c, pread(h->fd, h->buf, bs, (off_t)off), "pread");
	if (!ret && fc_pattern_verify(h->buf, off, bs, !h->measuring, &bad))
		return wrong("pread: not the pattern", 0);
	return ret;
}

int host_read(struct host_run *h, struct host_count *c)
{
	return read_block(h, c, host_next_seq(h) % h->nblocks);
}

int host_randread(struct host_run *h, struct host_count *c)
{
	return read_block(h, c, load_xorshift(&h->rng) % h->nblocks);
}

/* ---- write, randwrite: pwrite(2) of the pattern, filled per block as ferryfs-load's WRITEs ---- */

static int write_block(struct host_run *h, struct host_count *c, uint64_t blk)
{
	uint32_t bs = h->cfg->block_size;
	uint64_t off = blk * bs;

	fc_pattern_fill(h->buf, off, bs);
	h->fills += h->measuring;
	return block_done(h, c, pwrite(h->fd, h->buf, bs, (off_t)off), "pwrite");
}

int host_write(struct host_run *h, struct host_count *c)
{
	return write_block(h, c, host_next_seq(h) % h->nblocks);
}

int host_randwrite(struct host_run *h, struct host_count *c)
{
	return write_block(h, c, load_xorshift(&h->rng) % h->nblocks);
}

/* ---- write-fsync: pwrite then fsync, in turn in each lane (no GETATTRs beside them) ---- */

int host_write_fsync(struct host_run *h, struct host_count *c)
{
	if (!h->fsync_next) {
		h->fsync_next = true;
		return host_write(h, c);
	}
	h->fsync_next = false;
	if (fsync(h->fd))
		return wrong("fsync", errno);
	c->ops = 1;
	c->cycles = 1;
	return 0;
}

/* ---- getattr: statx of the file's O_PATH fd ---- */

int host_getattr(struct host_run *h, struct host_count *c)
{
	struct statx stx;

	if (statx(h->path_fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MASK, &stx))
		return wrong("statx", errno);
	if (stx.stx_ino != h->file_ino || stx.stx_size != h->nblocks * h->cfg->block_size ||
	    !S_ISREG(stx.stx_mode))
		return wrong("statx: not the data file's attributes", 0);
	c->ops = 1;
	return 0;
}

/* ---- lookup: statx of a name in the work directory, a hit and a miss in turn ---- */

int host_lookup(struct host_run *h, struct host_count *c)
{
	uint64_t seq = host_next_seq(h);
	struct statx stx;
	char name[64];
	int ret;

	if (seq & 1)
		snprintf(name, sizeof(name), "missing-%llu", (unsigned long long)seq);
	else
		snprintf(name, sizeof(name), "data");
	ret = statx(h->wdir, name, STATX_FLAGS, STATX_MASK, &stx) ? errno : 0;
	if (seq & 1 ? ret != ENOENT : ret || stx.stx_ino != h->file_ino)
		return wrong(seq & 1 ? "statx of a missing name" : "statx of 'data'", ret);
	c->ops = 1;
	return 0;
}

/* ---- create-unlink: openat(O_CREAT|O_EXCL), close, unlinkat of a new name ---- */

int host_create_unlink(struct host_run *h, struct host_count *c)
{
	char name[64];
	int fd;

	snprintf(name, sizeof(name), "cu-%u-%llu", h->lane, (unsigned long long)h->names++);
	fd = openat(h->wdir, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return wrong("openat(O_CREAT|O_EXCL)", errno);
	if (close(fd))
		return wrong("close", errno);
	if (unlinkat(h->wdir, name, 0))
		return wrong("unlinkat", errno);
	c->ops = 3;     /* CREATE, RELEASE, UNLINK */
	c->cycles = 1;
	return 0;
}

/* ---- readdirplus: open, getdents64 + a statx per entry until the end, close ---- */

struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};
#define NAME_AT offsetof(struct linux_dirent64, d_name)

/* Counts and checks one getdents64 buffer: every name one of ours, none
 * twice; each entry's attributes read as READDIRPLUS returns them. */
static int list_chunk(struct host_run *h, struct host_count *c, long len)
{
	long pos = 0;

	while (pos < len) {
		const struct linux_dirent64 *d = (const void *)(h->dir.dents + pos);
		unsigned long idx;
		struct statx stx;
		char *end;

		size_t nlen = d->d_reclen > NAME_AT ? d->d_reclen - NAME_AT : 0;

		if (d->d_reclen > len - pos || !memchr(d->d_name, 0, nlen))
			return wrong("getdents64: a record out of bounds", 0);
		pos += d->d_reclen;
		c->entries++;
		if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
			continue;
		if (statx(h->dir.fd, d->d_name, STATX_FLAGS, STATX_MASK, &stx))
			return wrong("statx of a listed name", errno);
		idx = strtoul(d->d_name + 1, &end, 10);
		if (d->d_name[0] != 'f' || *end || idx >= h->cfg->dir_entries ||
		    (h->dir.seen[idx / 8] & (1u << (idx % 8))) || !S_ISREG(stx.stx_mode))
			return wrong("getdents64: a name not ours, or twice", 0);
		h->dir.seen[idx / 8] |= (uint8_t)(1u << (idx % 8));
		h->dir.count++;
	}
	return 0;
}

int host_readdirplus(struct host_run *h, struct host_count *c)
{
	long n;

	c->ops = 1;
	if (h->dir.fd < 0) {
		h->dir.fd = openat(h->wdir, "dir", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (h->dir.fd < 0)
			return wrong("openat of the directory", errno);
		h->dir.count = 0;
		memset(h->dir.seen, 0, (h->cfg->dir_entries + 7) / 8);
		return 0;
	}
	n = syscall(SYS_getdents64, h->dir.fd, h->dir.dents, HOST_DENTS_SIZE);
	if (n < 0)
		return wrong("getdents64", errno);
	if (n > 0)
		return list_chunk(h, c, n);
	close(h->dir.fd);
	h->dir.fd = -1;
	c->ops = 2;     /* the empty READDIRPLUS and the RELEASEDIR */
	if (h->dir.count != h->cfg->dir_entries)
		return wrong("getdents64: the listing is incomplete", 0);
	c->cycles = 1;
	return 0;
}
