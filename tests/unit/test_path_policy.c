/* Per-path policy through the real passthrough and a FUSE session: --read-only refuses every change with EROFS and --hide keeps entries out of sight and reach, however the guest names them. */
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
#include "backend/path_policy.h"
#include "common/log.h"
#include "protocol/fuse_server.h"
#include "../common/check.h"

/*
 * The oracle is the host directory itself: after every refused request the
 * protected files must read as they were written here, and every request
 * outside the subtree must still succeed.
 */

static char scratch[] = "/tmp/ferry-path-policy-XXXXXX";
static struct raw_reply rep;
static struct pt_session ses;

#ifndef FUSE_TMPFILE
#define FUSE_TMPFILE 51
#endif

static const char *const hidden_paths[] = { "a/secret", "hdir", "moving" };

static int send3(uint32_t opcode, uint64_t nodeid, const void *a, size_t a_len,
		 const void *b, size_t b_len, const void *c, size_t c_len)
{
	static uint64_t unique = 1;
	struct fuse_in_header h = { .opcode = opcode, .nodeid = nodeid, .unique = unique++ };

	return raw_req_send(ses.w, h, a, a_len, b, b_len, c, c_len, &rep);
}

static uint64_t lookup(uint64_t parent, const char *name)
{
	struct fuse_entry_out e;

	if (send3(FUSE_LOOKUP, parent, NM(name), NULL, 0, NULL, 0) != 0)
		return 0;
	memcpy(&e, rep.arg, sizeof(e));
	return e.nodeid;
}

static void forget(uint64_t nodeid)
{
	struct fuse_forget_in in = { .nlookup = 1 };
	struct fuse_in_header h = { .opcode = FUSE_FORGET, .nodeid = nodeid, .unique = 0 };
	uint8_t buf[sizeof(h) + sizeof(in)];
	size_t len = raw_req_build(buf, sizeof(buf), h, &in, sizeof(in), NULL, 0, NULL, 0);

	raw_req_run(ses.w, buf, len, sizeof(rep.h) + sizeof(rep.arg), NULL, &rep);
}

/* OPEN with flags: 0 and the handle in *fh, or the error. */
static int open_node(uint64_t nodeid, uint32_t flags, uint64_t *fh)
{
	struct fuse_open_in in = { .flags = flags };
	struct fuse_open_out o;
	int err = send3(FUSE_OPEN, nodeid, &in, sizeof(in), NULL, 0, NULL, 0);

	if (err == 0 && fh) {
		memcpy(&o, rep.arg, sizeof(o));
		*fh = o.fh;
	}
	return err;
}

static int mkdir_in(uint64_t parent, const char *name)
{
	struct fuse_mkdir_in in = { .mode = 0755 };

	return send3(FUSE_MKDIR, parent, &in, sizeof(in), NM(name), NULL, 0);
}

static int rename_to(uint64_t dir, const char *name, uint64_t newdir, const char *newname)
{
	struct fuse_rename_in in = { .newdir = newdir };

	return send3(FUSE_RENAME, dir, &in, sizeof(in), NM(name), NM(newname));
}

static int link_to(uint64_t nodeid, uint64_t newdir, const char *newname)
{
	struct fuse_link_in in = { .oldnodeid = nodeid };

	return send3(FUSE_LINK, newdir, &in, sizeof(in), NM(newname), NULL, 0);
}

static void host_path(char *buf, size_t size, const char *rel)
{
	scratch_path(buf, size, scratch, rel);
}

static void host_write(const char *rel, const char *text)
{
	char path[512];
	int fd;

	host_path(path, sizeof(path), rel);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		CHECK_MSG(0, "host: writing %s", rel);
	if (fd >= 0)
		close(fd);
}

static bool host_reads(const char *rel, const char *text)
{
	char path[512], buf[256];
	ssize_t n;
	int fd;

	host_path(path, sizeof(path), rel);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return false;
	buf[n] = '\0';
	return strcmp(buf, text) == 0;
}

static bool host_exists(const char *rel)
{
	char path[512];
	struct stat st;

	host_path(path, sizeof(path), rel);
	return lstat(path, &st) == 0;
}

static void host_mkdir(const char *rel)
{
	char path[512];

	host_path(path, sizeof(path), rel);
	CHECK_MSG(mkdir(path, 0755) == 0, "host: mkdir %s", rel);
}

/* One host node of a test tree: a directory, a file and its text, a hard
 * link to another node, or a symlink with its target. */
struct host_node {
	enum { NODE_DIR, NODE_FILE, NODE_HARDLINK, NODE_SYMLINK } kind;
	const char *rel;
	const char *arg;        /* the file's text, the link's other node, the symlink's target */
};

static void host_tree(const struct host_node *nodes, size_t count)
{
	char path[512], other[512];

	for (size_t i = 0; i < count; i++) {
		const struct host_node *n = &nodes[i];

		host_path(path, sizeof(path), n->rel);
		switch (n->kind) {
		case NODE_DIR:
			host_mkdir(n->rel);
			break;
		case NODE_FILE:
			host_write(n->rel, n->arg);
			break;
		case NODE_HARDLINK:
			host_path(other, sizeof(other), n->arg);
			CHECK_MSG(link(other, path) == 0, "host: hard link %s -> %s", n->rel, n->arg);
			break;
		case NODE_SYMLINK:
			CHECK_MSG(symlink(n->arg, path) == 0, "host: symlink %s -> %s", n->rel, n->arg);
			break;
		}
	}
}

/* The tree every read-only case starts from; out/hardlink is a second name
 * of a protected file, made on the host before start. */
static const struct host_node read_only_tree[] = {
	{ NODE_DIR, "ro", NULL }, { NODE_DIR, "ro/sub", NULL }, { NODE_DIR, "ro/sub/deeper", NULL },
	{ NODE_DIR, "ro/empty", NULL }, { NODE_DIR, "out", NULL }, { NODE_DIR, "out/d", NULL },
	{ NODE_FILE, "ro/file", "data" }, { NODE_FILE, "ro/linked", "linked" },
	{ NODE_FILE, "out/f", "free" },
	{ NODE_HARDLINK, "out/hardlink", "ro/linked" },
	{ NODE_SYMLINK, "out/to-ro", "../ro" },
};

static void make_tree(void)
{
	host_tree(read_only_tree, sizeof(read_only_tree) / sizeof(read_only_tree[0]));
}

static void test_syntax(void)
{
	static const char *const bad[] = { "", "/etc", "a/../b", "..", ".", "a/./b", "a/.." };
	struct path_list l = { 0 };
	char msg[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_MSG(path_list_add(&l, bad[i], msg, sizeof(msg)) == -EINVAL && l.count == 0,
			  "'%s' refused: %s", bad[i], msg);
	CHECK_MSG(path_list_add(&l, "a/b//c/", msg, sizeof(msg)) == 0 && l.count == 1,
		  "a/b//c/ taken");
	for (unsigned i = 1; i < PATH_POLICY_MAX; i++)
		path_list_add(&l, "x", msg, sizeof(msg));
	CHECK_MSG(path_list_add(&l, "y", msg, sizeof(msg)) == -EINVAL,
		  "one path over the bound refused: %s", msg);
}

/* A PATH that is missing, or reached only through a symlink, stops the start. */
static void test_start_refused(const struct passthrough_opts *base)
{
	static const char *const bad[] = { "missing", "out/to-ro", "out/to-ro/file", "out/f/x" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct passthrough_opts o = *base;
		struct passthrough *pt = NULL;
		char msg[256];
		int ret;

		memset(&o.read_only, 0, sizeof(o.read_only));
		path_list_add(&o.read_only, bad[i], msg, sizeof(msg));
		ret = passthrough_new(&pt, &o);
		CHECK_MSG(ret < 0, "--read-only=%s: the start fails (%s)", bad[i], strerror(-ret));
		if (ret == 0)
			passthrough_free(pt);
	}
}

static void test_reads(uint64_t ro, uint64_t file)
{
	struct fuse_read_in rd = { .size = 64 };
	struct fuse_access_in acc = { .mask = R_OK };
	struct fuse_getattr_in ga = { 0 };
	uint64_t fh;

	CHECK_MSG(open_node(file, O_RDONLY, &fh) == 0, "OPEN ro/file read-only works");
	rd.fh = fh;
	CHECK_MSG(send3(FUSE_READ, file, &rd, sizeof(rd), NULL, 0, NULL, 0) == 0 &&
		  rep.used == sizeof(rep.h) + 4 && !memcmp(rep.arg, "data", 4),
		  "READ ro/file gives its bytes");
	CHECK_MSG(send3(FUSE_GETATTR, file, &ga, sizeof(ga), NULL, 0, NULL, 0) == 0,
		  "GETATTR ro/file works");
	CHECK_MSG(send3(FUSE_ACCESS, file, &acc, sizeof(acc), NULL, 0, NULL, 0) == 0,
		  "ACCESS R_OK on ro/file works");
	CHECK_MSG(open_node(ro, O_RDONLY | O_DIRECTORY, NULL) == 0 ||
		  send3(FUSE_OPENDIR, ro, &(struct fuse_open_in){ 0 }, sizeof(struct fuse_open_in),
			NULL, 0, NULL, 0) == 0, "OPENDIR ro works");
}

/* Every change to the subtree, each refused with EROFS. */
static void test_changes(uint64_t root, uint64_t ro, uint64_t file, uint64_t out, uint64_t f)
{
	struct fuse_create_in ci = { .flags = O_RDWR, .mode = 0644 };
	struct fuse_mknod_in mk = { .mode = S_IFIFO | 0644 };
	struct fuse_setattr_in sa = { .valid = FATTR_SIZE, .size = 0 };
	struct fuse_setattr_in sm = { .valid = FATTR_MODE, .mode = S_IFDIR | 0700 };
	struct fuse_access_in acc = { .mask = W_OK };
	struct { uint32_t size, flags; } sx = { .size = 1 };
	struct fuse_rename2_in r2 = { .newdir = out, .flags = RENAME_EXCHANGE };
	uint64_t empty = lookup(ro, "empty"), d = lookup(out, "d"), fh;

	CHECK_MSG(open_node(file, O_WRONLY, NULL) == -EROFS, "OPEN ro/file O_WRONLY: EROFS");
	CHECK_MSG(open_node(file, O_RDWR, NULL) == -EROFS, "OPEN ro/file O_RDWR: EROFS");
	CHECK_MSG(open_node(file, O_RDONLY | O_TRUNC, NULL) == -EROFS,
		  "OPEN ro/file O_TRUNC: EROFS");
	CHECK_MSG(send3(FUSE_CREATE, ro, &ci, sizeof(ci), NM("new"), NULL, 0) == -EROFS,
		  "CREATE in ro: EROFS");
	CHECK_MSG(send3(FUSE_TMPFILE, ro, &ci, sizeof(ci), NM("tmp"), NULL, 0) == -EROFS,
		  "TMPFILE in ro: EROFS (%d)", rep.h.error);
	CHECK_MSG(mkdir_in(ro, "newdir") == -EROFS, "MKDIR in ro: EROFS");
	CHECK_MSG(send3(FUSE_MKNOD, ro, &mk, sizeof(mk), NM("fifo"), NULL, 0) == -EROFS,
		  "MKNOD in ro: EROFS");
	CHECK_MSG(send3(FUSE_SYMLINK, ro, NM("sl"), NM("target"), NULL, 0) == -EROFS,
		  "SYMLINK in ro: EROFS");
	CHECK_MSG(link_to(f, ro, "in") == -EROFS, "LINK out/f into ro: EROFS");
	CHECK_MSG(link_to(file, out, "file-out") == -EROFS, "LINK ro/file out of ro: EROFS");
	CHECK_MSG(send3(FUSE_UNLINK, ro, NM("file"), NULL, 0, NULL, 0) == -EROFS,
		  "UNLINK ro/file: EROFS");
	CHECK_MSG(send3(FUSE_RMDIR, ro, NM("empty"), NULL, 0, NULL, 0) == -EROFS,
		  "RMDIR ro/empty: EROFS");
	CHECK_MSG(send3(FUSE_RMDIR, root, NM("ro"), NULL, 0, NULL, 0) == -EROFS,
		  "RMDIR of the protected root itself: EROFS");
	CHECK_MSG(rename_to(ro, "file", out, "moved") == -EROFS, "RENAME out of ro: EROFS");
	CHECK_MSG(rename_to(out, "f", ro, "moved") == -EROFS, "RENAME into ro: EROFS");
	CHECK_MSG(rename_to(ro, "file", ro, "renamed") == -EROFS, "RENAME within ro: EROFS");
	CHECK_MSG(rename_to(root, "ro", root, "ro2") == -EROFS,
		  "RENAME of the protected root: EROFS");
	CHECK_MSG(rename_to(out, "d", root, "ro") == -EROFS,
		  "RENAME of an empty dir over the protected root: EROFS");
	CHECK_MSG(send3(FUSE_RENAME2, ro, &r2, sizeof(r2), NM("file"), NM("f")) == -EROFS,
		  "RENAME_EXCHANGE of ro/file with out/f: EROFS");
	CHECK_MSG(send3(FUSE_SETATTR, file, &sa, sizeof(sa), NULL, 0, NULL, 0) == -EROFS,
		  "SETATTR size of ro/file: EROFS");
	CHECK_MSG(send3(FUSE_SETATTR, ro, &sm, sizeof(sm), NULL, 0, NULL, 0) == -EROFS,
		  "SETATTR mode of the protected root: EROFS");
	CHECK_MSG(send3(FUSE_SETXATTR, file, &sx, sizeof(sx), NM("user.x"), "v", 1) == -EROFS,
		  "SETXATTR on ro/file: EROFS");
	CHECK_MSG(send3(FUSE_REMOVEXATTR, file, NM("user.x"), NULL, 0, NULL, 0) == -EROFS,
		  "REMOVEXATTR on ro/file: EROFS");
	CHECK_MSG(send3(FUSE_ACCESS, file, &acc, sizeof(acc), NULL, 0, NULL, 0) == -EROFS,
		  "ACCESS W_OK on ro/file: EROFS");
	/* WRITE, FALLOCATE and COPY_FILE_RANGE need a handle open for
	 * writing, which OPEN refused above; on a read-only one they fail. */
	CHECK_MSG(open_node(file, O_RDONLY, &fh) == 0, "OPEN ro/file read-only for the data ops");
	{
		struct fuse_write_in wr = { .fh = fh, .size = 4 };
		struct fuse_fallocate_in fa = { .fh = fh, .length = 4096 };

		CHECK_MSG(send3(FUSE_WRITE, file, &wr, sizeof(wr), "XXXX", 4, NULL, 0) != 0,
			  "WRITE through a read-only handle fails");
		CHECK_MSG(send3(FUSE_FALLOCATE, file, &fa, sizeof(fa), NULL, 0, NULL, 0) != 0,
			  "FALLOCATE through a read-only handle fails");
	}
	CHECK_MSG(empty != 0 && d != 0, "LOOKUP ro/empty and out/d");
	/* The same changes outside the subtree work: the policy is the
	 * subtree's, not the share's. */
	CHECK_MSG(mkdir_in(out, "made") == 0, "MKDIR in out works");
	CHECK_MSG(open_node(f, O_WRONLY, NULL) == 0, "OPEN out/f O_WRONLY works");
	CHECK_MSG(host_reads("ro/file", "data") && !host_exists("ro/new") &&
		  !host_exists("ro/newdir") && !host_exists("ro/fifo") && !host_exists("ro/sl") &&
		  !host_exists("ro/in") && !host_exists("ro/moved") && host_exists("ro/empty") &&
		  host_exists("ro") && !host_exists("ro2") && host_reads("out/f", "free"),
		  "the host's subtree is as it was written");
}

/* The subtree however the guest names it. */
static void test_names(uint64_t root, uint64_t ro, uint64_t out)
{
	uint64_t sub = lookup(ro, "sub"), deeper = lookup(sub, "deeper");
	uint64_t hl, hl2, file, dotdot, up_out, d = lookup(out, "d");
	char a[512], b[512];

	CHECK_MSG(sub && deeper, "LOOKUP ro/sub/deeper");
	/* "..": the guest's export operations look a parent up by "..";
	 * with the parent forgotten it is a new inode, whose policy comes
	 * from where it lies, not from the child's flag. */
	forget(sub);
	dotdot = lookup(deeper, "..");
	CHECK_MSG(dotdot != 0 && dotdot != sub, "LOOKUP '..' of ro/sub/deeper: a new inode");
	CHECK_MSG(mkdir_in(dotdot, "x") == -EROFS, "MKDIR in ro/sub reached by '..': EROFS");
	forget(out);
	up_out = lookup(d, "..");
	CHECK_MSG(up_out != 0 && up_out != out, "LOOKUP '..' of out/d: a new inode");
	CHECK_MSG(mkdir_in(up_out, "by-dotdot") == 0, "MKDIR in out reached by '..' works");
	out = up_out;

	/* A symlink is never followed by the daemon: the guest resolves
	 * out/to-ro by LOOKUPs from the root, which reach the same inode. */
	CHECK_MSG(send3(FUSE_READLINK, lookup(out, "to-ro"), NULL, 0, NULL, 0, NULL, 0) == 0 &&
		  rep.used == sizeof(rep.h) + 5 && !memcmp(rep.arg, "../ro", 5),
		  "READLINK out/to-ro gives ../ro");
	CHECK_MSG(lookup(root, "ro") == ro, "the symlink's target is the protected inode");

	/* A hard link made on the host before start, looked up by its
	 * outside name first: protected by identity. */
	hl = lookup(out, "hardlink");
	CHECK_MSG(hl != 0 && open_node(hl, O_WRONLY, NULL) == -EROFS,
		  "OPEN out/hardlink (another name of ro/linked) O_WRONLY: EROFS");
	/* A hard link made on the host after start to a file the guest
	 * knows: the same inode, already marked. */
	file = lookup(ro, "file");
	host_path(a, sizeof(a), "ro/file");
	host_path(b, sizeof(b), "out/late-link");
	CHECK_MSG(link(a, b) == 0, "host: hard link out/late-link -> ro/file after start");
	hl2 = lookup(out, "late-link");
	CHECK_MSG(hl2 == file && open_node(hl2, O_RDWR, NULL) == -EROFS,
		  "OPEN out/late-link O_RDWR: EROFS");
	unlink(b);

	/* The host renames the protected root after start: the policy
	 * follows the directory, not its old name. */
	host_path(a, sizeof(a), "ro");
	host_path(b, sizeof(b), "ro-moved");
	CHECK_MSG(rename(a, b) == 0, "host: rename ro -> ro-moved");
	forget(ro);
	{
		uint64_t moved = lookup(root, "ro-moved");

		CHECK_MSG(moved != 0 && mkdir_in(moved, "x") == -EROFS,
			  "MKDIR in ro-moved (the protected root renamed on the host): EROFS");
		CHECK_MSG(open_node(lookup(moved, "file"), O_WRONLY, NULL) == -EROFS,
			  "OPEN ro-moved/file O_WRONLY: EROFS");
	}
	CHECK_MSG(rename(b, a) == 0, "host: rename ro-moved -> ro");
	CHECK_MSG(host_reads("ro/file", "data") && host_reads("ro/linked", "linked") &&
		  !host_exists("ro/sub/x"), "the host's subtree is as it was written");
}

/* A daemon with a policy refuses to save or load a migration state, with a
 * reason that names the policy: the stream does not carry it. */
static void test_migration_refused(struct passthrough *pt)
{
	char reason[1100];

	CHECK_MSG(pt_session_mig_refused(pt, "per-path policy", reason, sizeof(reason)),
		  "a migration save and load are refused: %s", reason);
}

/* The names a READDIR (plus: READDIRPLUS) of dir gives, each followed by a
 * space after a leading one: " a b c ". */
static void list_names(uint64_t dir, bool plus, char *out, size_t size)
{
	struct fuse_open_in oi = { 0 };
	struct fuse_read_in rd = { .size = 4096 };
	struct fuse_release_in rel = { 0 };
	struct fuse_open_out oo;
	size_t used = 0;

	snprintf(out, size, " ");
	used = 1;
	if (send3(FUSE_OPENDIR, dir, &oi, sizeof(oi), NULL, 0, NULL, 0) != 0)
		return;
	memcpy(&oo, rep.arg, sizeof(oo));
	rd.fh = oo.fh;
	for (;;) {
		size_t len, pos = 0;

		if (send3(plus ? FUSE_READDIRPLUS : FUSE_READDIR, dir, &rd, sizeof(rd),
			  NULL, 0, NULL, 0) != 0)
			break;
		len = rep.used - sizeof(rep.h);
		if (len == 0)
			break;
		while (pos < len) {
			struct fuse_dirent de;
			size_t at = pos + (plus ? sizeof(struct fuse_entry_out) : 0);

			memcpy(&de, rep.arg + at, sizeof(de));
			used += (size_t)snprintf(out + used, size - used, "%.*s ", (int)de.namelen,
						 (const char *)rep.arg + at + FUSE_NAME_OFFSET);
			if (used >= size)
				used = size - 1;
			rd.offset = de.off;
			pos = at + FUSE_DIRENT_SIZE(&de);
		}
	}
	rel.fh = oo.fh;
	send3(FUSE_RELEASEDIR, dir, &rel, sizeof(rel), NULL, 0, NULL, 0);
}

/* The tree every hiding case starts from: host-made second names and a
 * symlink lead to the hidden files from the visible part. */
static const struct host_node hide_tree[] = {
	{ NODE_DIR, "a", NULL }, { NODE_DIR, "a/b", NULL }, { NODE_DIR, "hdir", NULL },
	{ NODE_DIR, "pub", NULL },
	{ NODE_FILE, "a/secret", "s" }, { NODE_FILE, "a/visible", "v" },
	{ NODE_FILE, "hdir/inner", "inner" }, { NODE_FILE, "moving", "m" }, { NODE_FILE, "pub/f", "f" },
	{ NODE_HARDLINK, "pub/secret-link", "a/secret" },
	{ NODE_HARDLINK, "pub/inner-link", "hdir/inner" },
	{ NODE_SYMLINK, "pub/to-secret", "../a/secret" },
};

static void make_hide_tree(void)
{
	host_tree(hide_tree, sizeof(hide_tree) / sizeof(hide_tree[0]));
}

static void test_hide(const struct passthrough_opts *base, const struct fuse_server_opts *se_opts,
		      const struct fuse_init_in *init)
{
	struct passthrough_opts o = *base;
	struct fuse_create_in ci = { .flags = O_RDWR, .mode = 0644 };
	char names[2048], a[512], b[512], msg[256];
	uint64_t adir, bdir, up, pub, f;

	memset(&o.read_only, 0, sizeof(o.read_only));
	for (size_t i = 0; i < sizeof(hidden_paths) / sizeof(hidden_paths[0]); i++)
		path_list_add(&o.hide, hidden_paths[i], msg, sizeof(msg));
	if (pt_session_open(&ses, &o, se_opts) < 0) {
		CHECK_MSG(0, "a session with --hide");
		return;
	}
	CHECK_MSG(send3(FUSE_INIT, 0, init, sizeof(*init), NULL, 0, NULL, 0) == 0, "INIT (hide)");
	/* The host renames a hidden root after start. */
	host_path(a, sizeof(a), "moving");
	host_path(b, sizeof(b), "pub/moved");
	CHECK_MSG(rename(a, b) == 0, "host: rename moving -> pub/moved after start");

	adir = lookup(FUSE_ROOT_ID, "a");
	pub = lookup(FUSE_ROOT_ID, "pub");
	f = lookup(pub, "f");
	CHECK_MSG(adir && pub && f, "LOOKUP a, pub, pub/f");
	list_names(adir, false, names, sizeof(names));
	CHECK_MSG(!strstr(names, " secret ") && strstr(names, " visible ") && strstr(names, " b "),
		  "READDIR a: no secret, visible and b listed (%s)", names);
	list_names(adir, true, names, sizeof(names));
	CHECK_MSG(!strstr(names, " secret ") && strstr(names, " visible "),
		  "READDIRPLUS a: no secret (%s)", names);
	list_names(FUSE_ROOT_ID, false, names, sizeof(names));
	CHECK_MSG(!strstr(names, " hdir ") && strstr(names, " a ") && strstr(names, " pub "),
		  "READDIR of the root: no hdir (%s)", names);
	list_names(pub, false, names, sizeof(names));
	CHECK_MSG(!strstr(names, " moved ") && !strstr(names, " secret-link ") &&
		  !strstr(names, " inner-link ") && strstr(names, " f ") && strstr(names, " to-secret "),
		  "READDIR pub: no moved, secret-link, inner-link (%s)", names);
	CHECK_MSG(lookup(adir, "secret") == 0 && rep.h.error == -ENOENT, "LOOKUP a/secret: ENOENT");
	CHECK_MSG(lookup(FUSE_ROOT_ID, "hdir") == 0 && rep.h.error == -ENOENT, "LOOKUP hdir: ENOENT");
	/* By "..": from a subdirectory up, then down to the hidden name. */
	bdir = lookup(adir, "b");
	forget(adir);
	up = lookup(bdir, "..");
	CHECK_MSG(up != 0 && lookup(up, "secret") == 0 && rep.h.error == -ENOENT,
		  "LOOKUP a/b/.. then secret: ENOENT");
	adir = up;
	/* Through a symlink: the guest resolves it by names, which end at
	 * the same refused LOOKUP. */
	CHECK_MSG(send3(FUSE_READLINK, lookup(pub, "to-secret"), NULL, 0, NULL, 0, NULL, 0) == 0 &&
		  !memcmp(rep.arg, "../a/secret", 11), "READLINK pub/to-secret gives ../a/secret");
	/* Host-made hard links: before start (of a hidden file and of a file
	 * in a hidden directory), after start (of a hidden file). */
	CHECK_MSG(lookup(pub, "secret-link") == 0 && rep.h.error == -ENOENT,
		  "LOOKUP pub/secret-link (hard link of a/secret): ENOENT");
	CHECK_MSG(lookup(pub, "inner-link") == 0 && rep.h.error == -ENOENT,
		  "LOOKUP pub/inner-link (hard link of hdir/inner): ENOENT");
	host_path(a, sizeof(a), "a/secret");
	host_path(b, sizeof(b), "pub/late-link");
	CHECK_MSG(link(a, b) == 0, "host: hard link pub/late-link -> a/secret after start");
	CHECK_MSG(lookup(pub, "late-link") == 0 && rep.h.error == -ENOENT,
		  "LOOKUP pub/late-link: ENOENT");
	/* After the host's rename: the object, not the name. */
	CHECK_MSG(lookup(pub, "moved") == 0 && rep.h.error == -ENOENT,
		  "LOOKUP pub/moved (a hidden root the host renamed): ENOENT");
	/* Ops that name a hidden entry: absent when it is the source,
	 * a name the guest may not take when it is the destination. */
	CHECK_MSG(rename_to(adir, "secret", adir, "taken") == -ENOENT, "RENAME a/secret away: ENOENT");
	CHECK_MSG(rename_to(pub, "f", adir, "secret") == -EACCES, "RENAME pub/f over a/secret: EACCES");
	CHECK_MSG(link_to(f, adir, "secret") == -EACCES, "LINK pub/f as a/secret: EACCES");
	CHECK_MSG(send3(FUSE_CREATE, adir, &ci, sizeof(ci), NM("secret"), NULL, 0) == -EACCES,
		  "CREATE a/secret: EACCES");
	CHECK_MSG(mkdir_in(FUSE_ROOT_ID, "hdir") == -EACCES, "MKDIR hdir: EACCES");
	CHECK_MSG(send3(FUSE_SYMLINK, adir, NM("secret"), NM("x"), NULL, 0) == -EACCES,
		  "SYMLINK a/secret: EACCES");
	CHECK_MSG(send3(FUSE_UNLINK, adir, NM("secret"), NULL, 0, NULL, 0) == -ENOENT,
		  "UNLINK a/secret: ENOENT");
	CHECK_MSG(send3(FUSE_RMDIR, FUSE_ROOT_ID, NM("hdir"), NULL, 0, NULL, 0) == -ENOENT,
		  "RMDIR hdir: ENOENT");
	CHECK_MSG(rename_to(pub, "f", pub, "g") == 0 && lookup(pub, "g") == f,
		  "RENAME pub/f -> pub/g works");
	CHECK_MSG(host_reads("a/secret", "s") && host_reads("hdir/inner", "inner") &&
		  host_reads("pub/moved", "m") && !host_exists("a/taken"),
		  "the hidden files are as the host wrote them");
	test_migration_refused(ses.pt);
	pt_session_close(&ses);
}

int main(void)
{
	struct passthrough_opts pt_opts = { .cache = CACHE_NEVER, .timeout = -1, .xattr = true };
	struct fuse_server_opts se_opts = { .max_write = 1 << 20, .xattr = true };
	struct fuse_init_in init = { .major = FUSE_KERNEL_VERSION, .minor = 38,
				     .max_readahead = 65536, .flags = FUSE_INIT_EXT };
	uint64_t ro, file, out, f;
	char msg[256];

	ferry_log_init(LOG_LVL_WARN, false);
	test_syntax();
	if (scratch_start(scratch) != 0)
		return 1;
	make_tree();
	pt_opts.shared_dir = scratch;
	test_start_refused(&pt_opts);
	CHECK_MSG(path_list_add(&pt_opts.read_only, "ro", msg, sizeof(msg)) == 0, "--read-only=ro");
	if (pt_session_open(&ses, &pt_opts, &se_opts) < 0) {
		CHECK_MSG(0, "a session on %s", scratch);
		return scratch_finish(scratch, check_result());
	}
	CHECK_MSG(send3(FUSE_INIT, 0, &init, sizeof(init), NULL, 0, NULL, 0) == 0, "INIT");
	ro = lookup(FUSE_ROOT_ID, "ro");
	file = lookup(ro, "file");
	out = lookup(FUSE_ROOT_ID, "out");
	f = lookup(out, "f");
	CHECK_MSG(ro && file && out && f, "LOOKUP ro, ro/file, out, out/f");
	test_reads(ro, file);
	test_changes(FUSE_ROOT_ID, ro, file, out, f);
	test_names(FUSE_ROOT_ID, ro, out);
	test_migration_refused(ses.pt);
	pt_session_close(&ses);
	make_hide_tree();
	se_opts.readdirplus = true;
	init.flags |= FUSE_DO_READDIRPLUS;
	test_hide(&pt_opts, &se_opts, &init);
	return scratch_finish(scratch, check_result());
}
