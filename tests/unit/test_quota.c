/* The share's quota through the real passthrough and a FUSE session on real files: usage measured at start and after the host's changes, EDQUOT for each kind of change past a limit with nothing changed, STATFS showing the quota, room back after a removal. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/pt_session.h"
#include "../common/raw_req.h"
#include "../common/scratch.h"
#include "backend/passthrough.h"
#include "backend/pt_migration.h"
#include "backend/quota.h"
#include "migration/stream.h"
#include "common/log.h"
#include "protocol/fuse_server.h"
#include "../common/check.h"

/*
 * Oracles: the host directory itself (what a refused change left, the
 * sizes the acknowledged writes add up to) and the test's own sum of the
 * tree's st_blocks and inodes, each file with several names once.
 */

#define LIMIT_BYTES (1024 * 1024)
#define LIMIT_INODES 40
#define CHUNK (64 * 1024)

static char scratch[] = "/tmp/ferry-quota-XXXXXX";
static struct raw_reply rep;
static struct pt_session ses;
static uint64_t unique = 1;

static int req(uint32_t opcode, uint64_t nodeid, const void *a, size_t a_len,
	       const void *b, size_t b_len, const void *c, size_t c_len)
{
	struct fuse_in_header h = { .opcode = opcode, .nodeid = nodeid, .unique = unique++ };

	return raw_req_send(ses.w, h, a, a_len, b, b_len, c, c_len, &rep);
}

/* CREATE name in dir: its nodeid and handle, or the error. */
static int create_file(uint64_t dir, const char *name, uint64_t *nodeid, uint64_t *fh)
{
	struct fuse_create_in in = { .flags = O_RDWR, .mode = 0644 };
	struct fuse_entry_out e;
	struct fuse_open_out o;
	int err = req(FUSE_CREATE, dir, &in, sizeof(in), NM(name), NULL, 0);

	if (err == 0) {
		memcpy(&e, rep.arg, sizeof(e));
		memcpy(&o, rep.arg + sizeof(e), sizeof(o));
		*nodeid = e.nodeid;
		*fh = o.fh;
	}
	return err;
}

/* WRITE of len bytes at off: the count written, or the error. */
static long write_at(uint64_t nodeid, uint64_t fh, uint64_t off, size_t len)
{
	static char data[CHUNK], buf[CHUNK + 512];
	struct fuse_write_in in = { .fh = fh, .offset = off, .size = (uint32_t)len };
	struct fuse_in_header h = { .opcode = FUSE_WRITE, .nodeid = nodeid, .unique = unique++ };
	struct fuse_write_out o;
	size_t n;

	/* Larger than raw_req_send's pieces: built whole. */
	memset(data, 'q', sizeof(data));
	n = raw_req_build(buf, sizeof(buf), h, &in, sizeof(in), data, len, NULL, 0);
	raw_req_run(ses.w, buf, n, sizeof(rep.h) + sizeof(rep.arg), NULL, &rep);
	if (rep.h.error)
		return rep.h.error;
	memcpy(&o, rep.arg, sizeof(o));
	return o.size;
}

static int statfs_of(struct fuse_kstatfs *st)
{
	struct fuse_statfs_out o;
	int err = req(FUSE_STATFS, FUSE_ROOT_ID, NULL, 0, NULL, 0, NULL, 0);

	if (err == 0) {
		memcpy(&o, rep.arg, sizeof(o));
		*st = o.st;
	}
	return err;
}

static struct quota_usage usage(void)
{
	struct quota_usage u = { 0 };

	CHECK(passthrough_quota_usage(ses.pt, &u));
	return u;
}

/* The oracle: the tree's allocated bytes and inodes by the test's own
 * walk (the shell's du and find would agree). */
struct seen { dev_t dev; ino_t ino; };

static void tree_measure(const char *dir, uint64_t *bytes, uint64_t *inodes,
			 struct seen *seen, size_t *nseen)
{
	char path[1024];
	struct dirent *de;
	struct stat st;
	DIR *d;

	if (lstat(dir, &st) < 0)
		return;
	*bytes += (uint64_t)st.st_blocks * 512;
	(*inodes)++;
	d = opendir(dir);
	while (d && (de = readdir(d))) {
		bool dup = false;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (lstat(path, &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			tree_measure(path, bytes, inodes, seen, nseen);
			continue;
		}
		for (size_t i = 0; i < *nseen; i++)
			dup |= seen[i].dev == st.st_dev && seen[i].ino == st.st_ino;
		if (dup)
			continue;
		if (*nseen < 256)
			seen[(*nseen)++] = (struct seen){ st.st_dev, st.st_ino };
		*bytes += (uint64_t)st.st_blocks * 512;
		(*inodes)++;
	}
	if (d)
		closedir(d);
}

static void check_usage_is_tree(struct passthrough *pt, const char *when);

static void check_matches_tree(const char *when)
{
	check_usage_is_tree(ses.pt, when);
}

static void host_file(const char *rel, size_t len)
{
	char path[512], *buf = malloc(len ? len : 1);
	int fd;

	scratch_path(path, sizeof(path), scratch, rel);
	memset(buf, 'h', len);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, buf, len) != (ssize_t)len || fsync(fd) < 0)
		CHECK_MSG(0, "host: writing %s", rel);
	if (fd >= 0)
		close(fd);
	free(buf);
}

static off_t host_size(const char *rel)
{
	char path[512];
	struct stat st;

	scratch_path(path, sizeof(path), scratch, rel);
	return stat(path, &st) == 0 ? st.st_size : -1;
}

static void test_parse(void)
{
	static const struct { const char *s; uint64_t v; } good[] = {
		{ "0", 0 }, { "4096", 4096 }, { "1K", 1024 }, { "1k", 1024 }, { "10M", 10ULL << 20 },
		{ "2G", 2ULL << 30 }, { "3T", 3ULL << 40 }, { "5GiB", 5ULL << 30 }, { "7MB", 7ULL << 20 },
	};
	static const char *const bad[] = { "", "K", "-1", "1X", "1KK", "1 K", "1Ki", "99999999T",
					   "18446744073709551616" };
	uint64_t v;
	bool ok = true;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		ok &= quota_parse_size(good[i].s, &v) == 0 && v == good[i].v;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok &= quota_parse_size(bad[i], &v) < 0;
	CHECK_MSG(ok, "SIZE: K M G T binary, iB/B accepted; empty, signs, junk, overflow refused");
}

/* Writes CHUNKs to big until EDQUOT: the host file holds exactly what was
 * acknowledged, and the refused write changed nothing. */
static void test_write_past(uint64_t big, uint64_t fh, uint64_t *acked)
{
	struct quota_usage u;
	long n = 0;
	int writes = 0;
	off_t before;

	*acked = 0;
	while (writes++ < 64) {
		n = write_at(big, fh, *acked, CHUNK);
		if (n < 0)
			break;
		*acked += (uint64_t)n;
	}
	CHECK_MSG(n == -EDQUOT, "writing past --quota-bytes: EDQUOT (got %ld after %llu bytes)", n,
		  (unsigned long long)*acked);
	CHECK_MSG(host_size("big") == (off_t)*acked, "the host file holds the %llu acknowledged "
		  "bytes (size %lld)", (unsigned long long)*acked, (long long)host_size("big"));
	u = usage();
	CHECK_MSG(u.used_bytes <= LIMIT_BYTES && u.used_bytes + CHUNK > LIMIT_BYTES - 4096,
		  "usage %llu stays within the limit and near it", (unsigned long long)u.used_bytes);
	before = host_size("big");
	CHECK_MSG(write_at(big, fh, *acked, CHUNK) == -EDQUOT && host_size("big") == before,
		  "a refused write is refused whole: nothing written");
	/* Overwriting what is there allocates nothing. */
	CHECK_MSG(write_at(big, fh, 0, CHUNK) == CHUNK, "overwriting allocated data still works");
}

static void test_other_changes(uint64_t big, uint64_t fh)
{
	struct fuse_fallocate_in fa = { .fh = fh, .offset = 4 * LIMIT_BYTES, .length = CHUNK };
	struct fuse_mkdir_in mk = { .mode = 0755 };
	struct fuse_link_in li = { .oldnodeid = big };
	struct fuse_setxattr_in sx = { .size = 100 };
	char body[200];
	int err;

	err = req(FUSE_FALLOCATE, big, &fa, sizeof(fa), NULL, 0, NULL, 0);
	CHECK_MSG(err == -EDQUOT && host_size("big") < 4 * LIMIT_BYTES,
		  "fallocate past the limit: EDQUOT, size unchanged (%d)", err);
	/* Fill the last bytes: no room is left for anything. */
	for (uint64_t off = 2 * LIMIT_BYTES; write_at(big, fh, off, 4096) == 4096; off += 4096)
		;
	err = req(FUSE_MKDIR, FUSE_ROOT_ID, &mk, sizeof(mk), NM("newdir"), NULL, 0);
	CHECK_MSG(err == -EDQUOT && host_size("newdir") < 0,
		  "mkdir with no block left: EDQUOT, no directory (%d)", err);
	strcpy(body, "user.q");
	memset(body + strlen(body) + 1, 'x', 100);
	/* Without FUSE_SETXATTR_EXT the request has the short header. */
	err = req(FUSE_SETXATTR, big, &sx, FUSE_COMPAT_SETXATTR_IN_SIZE, body,
		  strlen("user.q") + 1 + 100, NULL, 0);
	CHECK_MSG(err == -EDQUOT, "setxattr with no byte left: EDQUOT (%d)", err);
	err = req(FUSE_LINK, FUSE_ROOT_ID, &li, sizeof(li), NM("big-link"), NULL, 0);
	CHECK_MSG(err == -EDQUOT, "link with no byte left: EDQUOT (%d)", err);
	err = req(FUSE_SYMLINK, FUSE_ROOT_ID, NM("sl"), NM("target"), NULL, 0);
	CHECK_MSG(err == -EDQUOT, "symlink with no byte left: EDQUOT (%d)", err);
}

static void test_inodes(void)
{
	struct quota_usage u = usage();
	uint64_t nodeid, fh, made = 0, room = LIMIT_INODES - u.used_inodes;
	char name[32];
	int err = 0;

	while (made < LIMIT_INODES + 5) {
		snprintf(name, sizeof(name), "n%llu", (unsigned long long)made);
		err = create_file(FUSE_ROOT_ID, name, &nodeid, &fh);
		if (err)
			break;
		made++;
	}
	CHECK_MSG(err == -EDQUOT && made == room,
		  "creates past --quota-inodes: EDQUOT after exactly the %llu left (made %llu, %d)",
		  (unsigned long long)room, (unsigned long long)made, err);
	snprintf(name, sizeof(name), "n%llu", (unsigned long long)made);
	CHECK_MSG(host_size(name) < 0, "the refused create left no file on the host");
}

static void check_usage_is_tree(struct passthrough *pt, const char *when)
{
	static struct seen seen[256];
	uint64_t bytes = 0, inodes = 0;
	size_t nseen = 0;
	struct quota_usage u = { 0 };

	CHECK(passthrough_quota_usage(pt, &u));
	tree_measure(scratch, &bytes, &inodes, seen, &nseen);
	CHECK_MSG(u.used_bytes == bytes && u.used_inodes == inodes,
		  "%s: usage %llu bytes %llu inodes, the tree holds %llu bytes %llu inodes", when,
		  (unsigned long long)u.used_bytes, (unsigned long long)u.used_inodes,
		  (unsigned long long)bytes, (unsigned long long)inodes);
}

/*
 * A live migration with a quota on both sides: the destination, started
 * before the source's last writes, measures the tree when the load
 * commits, so the usage needs no field of the stream.
 */
static void test_migration(const struct passthrough_opts *o, const struct fuse_server_opts *se)
{
	struct pt_mig_opts mo = { .mode = MIG_MODE_FIND_PATHS };
	struct mig_session session = { 0 };
	struct mig_options agreed = { 0 };
	struct pt_session dst = { 0 };
	struct mig_limits lim = { 0 };
	struct mig_state *st = NULL;
	struct pt_mig_load *load = NULL;
	struct mig_buf buf = { 0 };
	uint64_t node, fh;
	char reason[512] = "";

	if (pt_session_open(&dst, o, se) < 0) {
		CHECK_MSG(0, "a destination session with a quota");
		return;
	}
	/* The source goes on changing the tree after the destination measured. */
	for (int i = 0; i < 5; i++) {
		char name[16];

		snprintf(name, sizeof(name), "n%d", i);
		CHECK(req(FUSE_UNLINK, FUSE_ROOT_ID, NM(name), NULL, 0, NULL, 0) == 0);
	}
	CHECK_MSG(create_file(FUSE_ROOT_ID, "during-migration", &node, &fh) == 0 &&
		  write_at(node, fh, 0, CHUNK) == CHUNK, "the source writes after the destination started");
	CHECK_MSG(passthrough_mig_save(ses.pt, &mo, &session, &agreed, &buf, reason,
				       sizeof(reason)) == 0, "a save with a quota is accepted: %s", reason);
	passthrough_mig_limits(dst.pt, &lim);
	if (mig_decode(buf.data, buf.len, &lim, &st, reason, sizeof(reason)) == 0 &&
	    passthrough_mig_prepare(dst.pt, &mo, st, &load, reason, sizeof(reason)) == 0) {
		passthrough_mig_commit(dst.pt, load);
		CHECK_MSG(1, "a load with a quota is accepted");
		check_usage_is_tree(dst.pt, "the destination after the load");
	} else {
		CHECK_MSG(0, "a load with a quota is accepted: %s", reason);
	}
	mig_state_free(st);
	mig_buf_free(&buf);
	pt_session_close(&dst);
}

static int open_session(const struct passthrough_opts *o, const struct fuse_server_opts *se,
			const struct fuse_init_in *init)
{
	if (pt_session_open(&ses, o, se) < 0) {
		CHECK_MSG(0, "a session with a quota on %s", scratch);
		return -1;
	}
	return req(FUSE_INIT, 0, init, sizeof(*init), NULL, 0, NULL, 0);
}

int main(void)
{
	struct passthrough_opts pt_opts = { .cache = CACHE_NEVER, .timeout = -1, .xattr = true,
					    .quota_bytes = LIMIT_BYTES,
					    .quota_inodes = LIMIT_INODES };
	struct fuse_server_opts se_opts = { .max_write = 1 << 20, .xattr = true };
	struct fuse_init_in init = { .major = FUSE_KERNEL_VERSION, .minor = 38,
				     .max_readahead = 65536, .flags = FUSE_INIT_EXT };
	struct fuse_kstatfs sf;
	struct quota_usage u, before;
	uint64_t big, fh, acked;
	char a[512], b[512];

	ferry_log_init(LOG_LVL_WARN, false);
	test_parse();
	if (scratch_start(scratch) != 0)
		return 1;
	/* Before the daemon starts: a file, one with two names, a directory. */
	host_file("old", 100 * 1024);
	host_file("linked", 8192);
	scratch_path(a, sizeof(a), scratch, "linked");
	scratch_path(b, sizeof(b), scratch, "linked2");
	CHECK(link(a, b) == 0);
	scratch_path(a, sizeof(a), scratch, "d");
	CHECK(mkdir(a, 0755) == 0);
	pt_opts.shared_dir = scratch;
	if (open_session(&pt_opts, &se_opts, &init) != 0)
		return scratch_finish(scratch, check_result());
	check_matches_tree("at start");
	u = usage();
	CHECK_MSG(u.limit_bytes == LIMIT_BYTES && u.limit_inodes == LIMIT_INODES && u.scans == 1,
		  "the limits as given, one walk");

	CHECK_MSG(statfs_of(&sf) == 0 && sf.blocks * sf.frsize == LIMIT_BYTES &&
		  sf.bfree == (LIMIT_BYTES - u.used_bytes) / sf.frsize && sf.bavail == sf.bfree &&
		  sf.files == LIMIT_INODES && sf.ffree == LIMIT_INODES - u.used_inodes,
		  "STATFS: the quota's totals and what is left (%llu blocks of %u, %llu free; "
		  "%llu files, %llu free)", (unsigned long long)sf.blocks, sf.frsize,
		  (unsigned long long)sf.bfree, (unsigned long long)sf.files,
		  (unsigned long long)sf.ffree);

	CHECK_MSG(create_file(FUSE_ROOT_ID, "big", &big, &fh) == 0, "CREATE big");
	test_write_past(big, fh, &acked);
	check_matches_tree("after the writes");
	test_other_changes(big, fh);
	check_matches_tree("after the refused changes");
	u = usage();
	CHECK_MSG(u.refused >= 6, "the stats count the refusals (%llu)",
		  (unsigned long long)u.refused);

	/* Room comes back when the file goes. */
	CHECK_MSG(req(FUSE_UNLINK, FUSE_ROOT_ID, NM("big"), NULL, 0, NULL, 0) == 0, "UNLINK big");
	CHECK_MSG(req(FUSE_RELEASE, big, &(struct fuse_release_in){ .fh = fh },
		      sizeof(struct fuse_release_in), NULL, 0, NULL, 0) == 0, "RELEASE big");
	check_matches_tree("after the unlink");
	CHECK_MSG(create_file(FUSE_ROOT_ID, "again", &big, &fh) == 0 &&
		  write_at(big, fh, 0, CHUNK) == CHUNK, "after the unlink, writes fit again");
	req(FUSE_RELEASE, big, &(struct fuse_release_in){ .fh = fh },
	    sizeof(struct fuse_release_in), NULL, 0, NULL, 0);
	test_inodes();
	check_matches_tree("after the creates");

	/* The host adds a file: counted once the figures are old enough to be
	 * measured again (a STATFS asks). */
	host_file("d/from-host", 200 * 1024);
	sleep(3);
	CHECK(statfs_of(&sf) == 0);
	check_matches_tree("after the host added a file (a walk later)");
	u = usage();
	CHECK_MSG(u.scans >= 2, "the tree was walked again (%llu walks)",
		  (unsigned long long)u.scans);

	/* A restart measures the same. */
	before = usage();
	pt_session_close(&ses);
	if (open_session(&pt_opts, &se_opts, &init) == 0) {
		u = usage();
		CHECK_MSG(u.used_bytes == before.used_bytes && u.used_inodes == before.used_inodes,
			  "after a restart: %llu bytes %llu inodes, as before it",
			  (unsigned long long)u.used_bytes, (unsigned long long)u.used_inodes);
		test_migration(&pt_opts, &se_opts);
	}
	pt_session_close(&ses);

	/* A tree deeper than the walk enters still starts (what lies below
	 * is counted as the guest changes it; the start says so). */
	{
		int fd, ok = 1;

		scratch_path(a, sizeof(a), scratch, "deep");
		ok &= mkdir(a, 0755) == 0;
		fd = open(a, O_PATH | O_DIRECTORY);
		for (int i = 0; ok && i < 300; i++) {
			int sub;

			ok &= mkdirat(fd, "d", 0755) == 0;
			sub = openat(fd, "d", O_PATH | O_DIRECTORY);
			close(fd);
			fd = sub;
			ok &= fd >= 0;
		}
		if (fd >= 0)
			close(fd);
		CHECK_MSG(ok && open_session(&pt_opts, &se_opts, &init) == 0,
			  "a share 300 directories deep starts with a quota");
		pt_session_close(&ses);
	}

	/* No limit: no quota, STATFS as the host's. */
	pt_opts.quota_bytes = 0;
	pt_opts.quota_inodes = 0;
	if (open_session(&pt_opts, &se_opts, &init) == 0)
		CHECK_MSG(!passthrough_quota_usage(ses.pt, &u) && statfs_of(&sf) == 0 &&
			  sf.blocks * sf.frsize > LIMIT_BYTES, "without a limit: no quota");
	pt_session_close(&ses);
	return scratch_finish(scratch, check_result());
}
