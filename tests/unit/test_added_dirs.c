/* --add-dir through the real passthrough and a FUSE session: NAME at the root, '..' kept inside, distinct inode numbers, EXDEV between the dirs, EROFS in a read-only one, migration refused. */
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
#include "backend/added_dirs.h"
#include "backend/passthrough.h"
#include "common/log.h"
#include "protocol/fuse_server.h"
#include "../common/check.h"

/*
 * The oracle is the host: what a refused request would have changed is
 * read back there, and the inode numbers the guest gets are compared with
 * the host's own (the low bits the same, the area in the top byte).
 */

static char scratch[] = "/tmp/ferry-added-dirs-XXXXXX";
static struct raw_reply rep;
static struct pt_session ses;

static int call(uint32_t opcode, uint64_t nodeid, const void *a, size_t a_len,
		const void *b, size_t b_len)
{
	static uint64_t unique = 1;
	struct fuse_in_header h = { .opcode = opcode, .nodeid = nodeid, .unique = unique++ };

	return raw_req_send(ses.w, h, a, a_len, b, b_len, NULL, 0, &rep);
}

/* LOOKUP: the entry in *e; 0 or the error. */
static int lookup_entry(uint64_t parent, const char *name, struct fuse_entry_out *e)
{
	int err = call(FUSE_LOOKUP, parent, NM(name), NULL, 0);

	if (err == 0)
		memcpy(e, rep.arg, sizeof(*e));
	return err;
}

static uint64_t node_of(uint64_t parent, const char *name)
{
	struct fuse_entry_out e;

	return lookup_entry(parent, name, &e) == 0 ? e.nodeid : 0;
}

static uint64_t ino_of(uint64_t parent, const char *name)
{
	struct fuse_entry_out e;

	return lookup_entry(parent, name, &e) == 0 ? e.attr.ino : 0;
}

static uint64_t host_ino(const char *rel)
{
	char path[512];
	struct stat st;

	scratch_path(path, sizeof(path), scratch, rel);
	return lstat(path, &st) == 0 ? st.st_ino : 0;
}

static bool host_has(const char *rel)
{
	return host_ino(rel) != 0;
}

static void host_file(const char *rel)
{
	char path[512];
	int fd;

	scratch_path(path, sizeof(path), scratch, rel);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK_MSG(fd >= 0 && write(fd, "x", 1) == 1, "host: file %s", rel);
	if (fd >= 0)
		close(fd);
}

static void host_dir(const char *rel)
{
	char path[512];

	scratch_path(path, sizeof(path), scratch, rel);
	CHECK_MSG(mkdir(path, 0755) == 0, "host: mkdir %s", rel);
}

/* FUSE_RENAME carries two names after its argument: send it by hand. */
static int rename_names(uint64_t dir, const char *name, uint64_t newdir, const char *newname)
{
	static uint64_t unique = 1u << 20;
	struct fuse_rename_in in = { .newdir = newdir };
	struct fuse_in_header h = { .opcode = FUSE_RENAME, .nodeid = dir, .unique = unique++ };

	return raw_req_send(ses.w, h, &in, sizeof(in), NM(name), NM(newname), &rep);
}

static int link_into(uint64_t nodeid, uint64_t newdir, const char *newname)
{
	struct fuse_link_in in = { .oldnodeid = nodeid };

	return call(FUSE_LINK, newdir, &in, sizeof(in), NM(newname));
}

static int make_dir(uint64_t parent, const char *name)
{
	struct fuse_mkdir_in in = { .mode = 0755 };

	return call(FUSE_MKDIR, parent, &in, sizeof(in), NM(name));
}

static int create_in(uint64_t parent, const char *name)
{
	struct fuse_create_in in = { .flags = O_WRONLY, .mode = 0644 };

	return call(FUSE_CREATE, parent, &in, sizeof(in), NM(name));
}

/* Every name of dir's listing, each followed by a space; a reply buffer
 * of a few entries makes the listing continue from the cookies handed
 * out, the added dirs' included. */
static void listing(uint64_t dir, bool plus, char *out, size_t size)
{
	struct fuse_open_in oi = { 0 };
	struct fuse_read_in rd = { .size = plus ? 400 : 80 };
	struct fuse_release_in rel = { 0 };
	size_t used = 0;

	out[0] = '\0';
	if (call(FUSE_OPENDIR, dir, &oi, sizeof(oi), NULL, 0) != 0)
		return;
	memcpy(&rd.fh, rep.arg, sizeof(rd.fh));
	rel.fh = rd.fh;
	while (call(plus ? FUSE_READDIRPLUS : FUSE_READDIR, dir, &rd, sizeof(rd), NULL, 0) == 0 &&
	       rep.used > sizeof(rep.h)) {
		size_t len = rep.used - sizeof(rep.h);

		for (size_t pos = 0; pos < len;) {
			size_t at = pos + (plus ? sizeof(struct fuse_entry_out) : 0);
			struct fuse_dirent de;

			memcpy(&de, rep.arg + at, sizeof(de));
			if (used + de.namelen + 2 < size)
				used += (size_t)sprintf(out + used, "%.*s ", (int)de.namelen,
							(const char *)rep.arg + at + FUSE_NAME_OFFSET);
			rd.offset = de.off;
			pos = at + FUSE_DIRENT_SIZE(&de);
		}
	}
	call(FUSE_RELEASEDIR, dir, &rel, sizeof(rel), NULL, 0);
}

static bool listed(const char *list, const char *name)
{
	char word[64];

	snprintf(word, sizeof(word), "%s ", name);
	for (const char *p = list; (p = strstr(p, word)) != NULL; p++)
		if (p == list || p[-1] == ' ')
			return true;
	return false;
}

static void test_syntax(void)
{
	static const char *const refused[] = {
		"noname", ":/tmp", "a:", ".:/tmp", "..:/tmp", "a/b:/tmp", "a,rw:/tmp",
		"a,ro,ro:/tmp", "dup:/tmp",
	};
	struct added_dir_list l = { 0 };
	char msg[256];

	CHECK_MSG(added_dir_add(&l, "dup:/x", msg, sizeof(msg)) == 0 &&
		  added_dir_add(&l, "c:/dir:with:colons", msg, sizeof(msg)) == 0 &&
		  added_dir_add(&l, "r,ro:/d", msg, sizeof(msg)) == 0,
		  "NAME:DIR, DIR with ':', NAME,ro:DIR accepted");
	CHECK(l.count == 3 && !strcmp(l.dirs[1].dir, "/dir:with:colons") && !l.dirs[1].read_only &&
	      l.dirs[2].read_only && l.dirs[2].name_len == 1 && !strcmp(l.dirs[2].dir, "/d"));
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		CHECK_MSG(added_dir_add(&l, refused[i], msg, sizeof(msg)) == -EINVAL,
			  "refused: --add-dir=%s (%s)", refused[i], msg);
}

static void test_ino_remap(void)
{
	struct ino_remap m;
	uint64_t big = 1ull << 60, a, b;

	ino_remap_init(&m);
	a = guest_ino(&m, true, 1, big);
	b = guest_ino(&m, true, 2, big);
	CHECK_MSG(a != b && a == guest_ino(&m, true, 1, big) &&
		  (a >> INO_AREA_SHIFT) == 0xff && (b >> INO_AREA_SHIFT) == 0xff,
		  "a host number above 2^56: one stable number per area, in the remapped range");
	for (uint64_t i = 0; i < 1000; i++)
		guest_ino(&m, true, 3, big + i);
	CHECK_MSG(guest_ino(&m, true, 1, big) == a, "the table keeps its numbers as it grows");
	CHECK(guest_ino(&m, true, 3, 42) == (42 | (3ull << INO_AREA_SHIFT)));
	CHECK(guest_ino(&m, false, 3, big) == big);
	ino_remap_free(&m);
}

static void test_start_refused(struct passthrough_opts *o)
{
	struct passthrough *pt = NULL;
	struct passthrough_opts bad = *o;
	char msg[256];

	bad.added_dirs = (struct added_dir_list){ 0 };
	added_dir_add(&bad.added_dirs, "m:/tmp", msg, sizeof(msg));
	CHECK_MSG(passthrough_new(&pt, &bad) == -EEXIST && !pt,
		  "NAME that the shared dir has already: the start is refused");
	bad.added_dirs = (struct added_dir_list){ 0 };
	added_dir_add(&bad.added_dirs, "x:/nonexistent-ferry-dir", msg, sizeof(msg));
	CHECK_MSG(passthrough_new(&pt, &bad) == -ENOENT && !pt,
		  "DIR that does not exist: the start is refused");
}

static void test_migration_refused(struct passthrough *pt)
{
	char reason[1100];

	CHECK_MSG(pt_session_mig_refused(pt, "--add-dir", reason, sizeof(reason)),
		  "a migration save and load are refused: %s", reason);
}

static void test_names(uint64_t one, uint64_t two)
{
	char list[1024];
	struct fuse_entry_out e;

	for (int plus = 0; plus < 2; plus++) {
		listing(FUSE_ROOT_ID, plus, list, sizeof(list));
		CHECK_MSG(listed(list, "m") && listed(list, "md") && listed(list, "one") &&
			  listed(list, "two") && listed(list, "again") && !listed(list, "main"),
			  "READDIR%s of the root: the share's entries and the added NAMEs (%s)",
			  plus ? "PLUS" : "", list);
	}
	listing(one, true, list, sizeof(list));
	CHECK_MSG(listed(list, "f1") && listed(list, "sub") && listed(list, ".."),
		  "READDIRPLUS of an added dir: its own entries (%s)", list);
	CHECK_MSG(lookup_entry(FUSE_ROOT_ID, "one", &e) == 0 && S_ISDIR(e.attr.mode) &&
		  e.nodeid == one, "LOOKUP of NAME at the root: the added dir");
	CHECK_MSG(node_of(one, "..") == FUSE_ROOT_ID && node_of(two, "..") == FUSE_ROOT_ID,
		  "'..' of an added dir is the share's root, not the host's parent");
	CHECK_MSG(node_of(node_of(one, "sub"), "..") == one, "'..' of a dir inside goes back to it");
	CHECK_MSG(make_dir(FUSE_ROOT_ID, "one") == -EEXIST, "MKDIR of NAME at the root: EEXIST");
	CHECK_MSG(call(FUSE_RMDIR, FUSE_ROOT_ID, NM("one"), NULL, 0) == -EBUSY &&
		  rename_names(FUSE_ROOT_ID, "one", FUSE_ROOT_ID, "renamed") == -EBUSY,
		  "RMDIR or RENAME of NAME at the root: EBUSY");
	CHECK_MSG(host_has("one/f1") && host_has("main/md"), "host: nothing changed");
}

/* Every object the guest reaches has its own number: the host's with
 * the area on top, so one host file in two added dirs is two numbers. */
static void test_inos(uint64_t one, uint64_t two, uint64_t again)
{
	uint64_t f1 = ino_of(one, "f1"), f1_again = ino_of(again, "f1"), m = ino_of(FUSE_ROOT_ID, "m");

	CHECK_MSG(m == host_ino("main/m"), "the shared dir's numbers are the host's");
	CHECK_MSG(f1 == (host_ino("one/f1") | (1ull << INO_AREA_SHIFT)) &&
		  f1_again == (host_ino("one/f1") | (3ull << INO_AREA_SHIFT)),
		  "an added dir's numbers carry its area: one host file in two dirs, two numbers");
	CHECK_MSG(ino_of(FUSE_ROOT_ID, "one") == (host_ino("one") | (1ull << INO_AREA_SHIFT)) &&
		  ino_of(two, "f2") == (host_ino("two/f2") | (2ull << INO_AREA_SHIFT)),
		  "the added dirs' roots and files: their area's numbers");
}

static void test_cross(uint64_t one, uint64_t again)
{
	uint64_t sub = node_of(one, "sub");

	CHECK_MSG(rename_names(one, "f1", FUSE_ROOT_ID, "f1") == -EXDEV &&
		  rename_names(FUSE_ROOT_ID, "m", one, "m") == -EXDEV &&
		  rename_names(one, "f1", again, "moved") == -EXDEV,
		  "RENAME between an added dir and the rest: EXDEV");
	CHECK_MSG(link_into(node_of(one, "f1"), FUSE_ROOT_ID, "l") == -EXDEV &&
		  link_into(node_of(FUSE_ROOT_ID, "m"), one, "l") == -EXDEV,
		  "LINK between an added dir and the rest: EXDEV");
	CHECK_MSG(host_has("one/f1") && host_has("main/m") && !host_has("main/f1") &&
		  !host_has("one/m") && !host_has("one/l") && !host_has("main/l"),
		  "host: nothing moved or linked");
	CHECK_MSG(rename_names(one, "f1", sub, "f1") == 0 && host_has("one/sub/f1") &&
		  rename_names(sub, "f1", one, "f1") == 0,
		  "RENAME within an added dir works");
}

static void test_read_only(uint64_t two)
{
	struct fuse_open_in oi = { .flags = O_WRONLY };
	struct fuse_setattr_in sa = { .valid = FATTR_MODE, .mode = 0600 };
	uint64_t f2 = node_of(two, "f2");

	CHECK_MSG(call(FUSE_OPEN, f2, &oi, sizeof(oi), NULL, 0) == -EROFS &&
		  call(FUSE_SETATTR, f2, &sa, sizeof(sa), NULL, 0) == -EROFS &&
		  create_in(two, "new") == -EROFS && make_dir(two, "d") == -EROFS &&
		  call(FUSE_UNLINK, two, NM("f2"), NULL, 0) == -EROFS &&
		  rename_names(two, "f2", two, "g2") == -EROFS,
		  "the ,ro dir: OPEN for writing, SETATTR, CREATE, MKDIR, UNLINK, RENAME give EROFS");
	CHECK_MSG(host_has("two/f2") && !host_has("two/new") && !host_has("two/g2"),
		  "host: the ,ro dir unchanged");
	CHECK_MSG(create_in(node_of(FUSE_ROOT_ID, "md"), "new") == 0 && host_has("main/md/new"),
		  "the shared dir stays writable");
}

/* A directory the host moves out of an added dir is not reachable by "..". */
static void test_escape(uint64_t one)
{
	char from[512], to[512];
	uint64_t deep;

	deep = node_of(node_of(one, "sub"), "deep");
	scratch_path(from, sizeof(from), scratch, "one/sub");
	scratch_path(to, sizeof(to), scratch, "outside/sub");
	CHECK_MSG(deep && rename(from, to) == 0, "host: one/sub moved out of the added dir");
	CHECK_MSG(call(FUSE_LOOKUP, deep, NM(".."), NULL, 0) == -EACCES,
		  "'..' of a dir moved out of the added dir: EACCES");
	CHECK(rename(to, from) == 0);
}

int main(void)
{
	struct passthrough_opts pt_opts = { .cache = CACHE_NEVER, .timeout = -1, .xattr = true };
	struct fuse_server_opts se_opts = { .max_write = 1 << 20, .xattr = true, .readdirplus = true };
	struct fuse_init_in init = { .major = FUSE_KERNEL_VERSION, .minor = 38,
				     .max_readahead = 65536,
				     .flags = FUSE_INIT_EXT | FUSE_DO_READDIRPLUS };
	char main_dir[512], spec[3][600], msg[256];
	uint64_t one, two, again;

	ferry_log_init(LOG_LVL_WARN, false);
	test_syntax();
	test_ino_remap();
	if (scratch_start(scratch) != 0)
		return 1;
	host_dir("main");
	host_dir("main/md");
	host_file("main/m");
	host_dir("one");
	host_file("one/f1");
	host_dir("one/sub");
	host_dir("one/sub/deep");
	host_dir("two");
	host_file("two/f2");
	host_dir("outside");
	scratch_path(main_dir, sizeof(main_dir), scratch, "main");
	pt_opts.shared_dir = main_dir;
	snprintf(spec[0], sizeof(spec[0]), "one:%s/one", scratch);
	snprintf(spec[1], sizeof(spec[1]), "two,ro:%s/two", scratch);
	snprintf(spec[2], sizeof(spec[2]), "again:%s/one", scratch);
	test_start_refused(&pt_opts);
	for (int i = 0; i < 3; i++)
		CHECK(added_dir_add(&pt_opts.added_dirs, spec[i], msg, sizeof(msg)) == 0);
	if (pt_session_open(&ses, &pt_opts, &se_opts) < 0) {
		CHECK_MSG(0, "a session on %s", main_dir);
		return scratch_finish(scratch, check_result());
	}
	CHECK_MSG(call(FUSE_INIT, 0, &init, sizeof(init), NULL, 0) == 0, "INIT");
	one = node_of(FUSE_ROOT_ID, "one");
	two = node_of(FUSE_ROOT_ID, "two");
	again = node_of(FUSE_ROOT_ID, "again");
	CHECK_MSG(one && two && again && one != again, "LOOKUP one, two, again");
	test_names(one, two);
	test_inos(one, two, again);
	test_cross(one, again);
	test_read_only(two);
	test_escape(one);
	test_migration_refused(ses.pt);
	pt_session_close(&ses);
	return scratch_finish(scratch, check_result());
}
