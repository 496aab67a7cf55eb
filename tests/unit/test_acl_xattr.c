/* Tests POSIX ACL values under uid/gid maps: the format check against hostile values, the id translation both ways, and, through the real protocol and passthrough, what the host stores and the guest reads. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "backend/acl_xattr.h"
#include "backend/passthrough.h"
#include "protocol/fuse_server.h"
#include "../common/pt_session.h"
#include "../common/raw_req.h"
#include "../common/scratch.h"
#include "../common/check.h"

#define NOID ACL_XATTR_UNDEFINED_ID
#define UOBJ ACL_XATTR_TAG_USER_OBJ
#define USR ACL_XATTR_TAG_USER
#define GOBJ ACL_XATTR_TAG_GROUP_OBJ
#define GRP ACL_XATTR_TAG_GROUP
#define MSK ACL_XATTR_TAG_MASK
#define OTH ACL_XATTR_TAG_OTHER

/* The tests run on little-endian hosts, where the wire layout is the
 * struct's. */
struct acl_entry_le { uint16_t tag, perm; uint32_t id; };

static size_t acl_blob(uint8_t *buf, const struct acl_entry_le *e, size_t n)
{
	uint32_t version = ACL_XATTR_VERSION;

	memcpy(buf, &version, 4);
	memcpy(buf + 4, e, n * sizeof(*e));
	return 4 + n * sizeof(*e);
}

/* The id of entry i of a value. */
static uint32_t id_at(const uint8_t *v, size_t i)
{
	uint32_t id;

	memcpy(&id, v + 4 + i * 8 + 4, 4);
	return id;
}

static struct idmap uids, gids;

/* uids and gids made afresh from their rules (NULL-ended lists) through add. */
static void maps_set(int (*add)(struct idmap *, const char *), const char *const *uid_rules,
		     const char *const *gid_rules)
{
	memset(&uids, 0, sizeof(uids));
	memset(&gids, 0, sizeof(gids));
	for (size_t i = 0; uid_rules[i]; i++)
		CHECK_MSG(add(&uids, uid_rules[i]) == 0, "uid rule %s", uid_rules[i]);
	for (size_t i = 0; gid_rules[i]; i++)
		CHECK_MSG(add(&gids, gid_rules[i]) == 0, "gid rule %s", gid_rules[i]);
}

static void maps_translate(void)
{
	maps_set(idmap_add_translate,
		 (const char *const[]){ "map:1000:5000:10", "forbid-guest:4000:10",
					"squash-host:8000:3000:1", NULL },
		 (const char *const[]){ "map:2000:6000:10", NULL });
}

static void maps_namespace(void)
{
	maps_set(idmap_add_namespace_range,
		 (const char *const[]){ ":0:0:1:", ":1000:5000:10:", NULL },
		 (const char *const[]){ ":0:0:1:", ":2000:6000:10:", NULL });
}

static int to_host(const void *v, size_t size, uint8_t *out)
{
	return acl_xattr_to_host(&uids, &gids, v, size, out);
}

/* ---- the codec ------------------------------------------------------------ */

static void test_codec(void)
{
	const struct acl_entry_le good[] = {
		{ UOBJ, 6, NOID }, { USR, 4, 1003 }, { GOBJ, 4, NOID }, { GRP, 2, 2004 },
		{ MSK, 6, NOID }, { OTH, 0, NOID },
	};
	static uint8_t big[65536], out[65536];
	uint8_t v[128], bad[128];
	size_t n;

	maps_translate();
	n = acl_blob(v, good, 6);
	CHECK_MSG(to_host(v, n, out) == 0 && id_at(out, 1) == 5003 && id_at(out, 3) == 6004 &&
	          id_at(out, 0) == NOID && id_at(out, 5) == NOID, "guest 1003/2004 stored as 5003/6004");
	CHECK_MSG(memcmp(v, out, 4 + 8) == 0 && id_at(v, 1) == 1003, "the guest's value is left alone");
	CHECK_MSG(acl_xattr_to_guest(&uids, &gids, out, n) == 0 && memcmp(out, v, n) == 0,
	          "back to guest ids: the value the guest set");
	CHECK_MSG(to_host(v, 0, out) == 0, "no bytes: a removal, nothing to translate");
	CHECK_MSG(to_host(v, 4, out) == 0 && memcmp(out, v, 4) == 0, "the header alone");

	/* hostile values, each refused whole */
	for (size_t cut = 1; cut < n; cut++) {
		if ((cut - 4) % 8 == 0 && cut >= 4)
			continue;
		CHECK_MSG(to_host(v, cut, out) == -EINVAL, "truncated to %zu bytes: EINVAL", cut);
	}
	static const uint32_t versions[] = { 0, 1, 3, 0x02000000, 0xffffffff };
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
		memcpy(bad, v, n);
		memcpy(bad, &versions[i], 4);
		CHECK_MSG(to_host(bad, n, out) == -EINVAL, "version %#x: EINVAL", versions[i]);
		CHECK_MSG(acl_xattr_to_guest(&uids, &gids, bad, n) == -EIO,
		          "a stored value of version %#x: EIO", versions[i]);
	}
	static const uint16_t tags[] = { 0, 0x03, 0x40, 0x8000, 0xffff };
	for (size_t i = 0; i < sizeof(tags) / sizeof(tags[0]); i++) {
		memcpy(bad, v, n);
		memcpy(bad + 4 + 8 * 2, &tags[i], 2);
		CHECK_MSG(to_host(bad, n, out) == -EINVAL, "tag %#x: EINVAL", tags[i]);
	}
	memcpy(bad, v, n);
	bad[4 + 8 + 2] = 8;
	CHECK_MSG(to_host(bad, n, out) == -EINVAL, "permission bits beyond rwx: EINVAL");
	memcpy(bad, v, n);
	memset(bad + 4 + 4, 0, 4);
	CHECK_MSG(to_host(bad, n, out) == -EINVAL, "an id in ACL_USER_OBJ's entry: EINVAL");

	/* ids the map refuses, and (uid_t)-1 */
	const struct acl_entry_le forbidden[] = { { UOBJ, 6, NOID }, { USR, 4, 4001 }, { GOBJ, 4, NOID },
						   { MSK, 4, NOID }, { OTH, 0, NOID } };
	const struct acl_entry_le no_id[] = { { UOBJ, 6, NOID }, { GRP, 4, NOID }, { GOBJ, 4, NOID },
					       { MSK, 4, NOID }, { OTH, 0, NOID } };
	CHECK_MSG(to_host(v, acl_blob(v, forbidden, 5), out) == -EINVAL, "forbid-guest uid: EINVAL");
	CHECK_MSG(to_host(v, acl_blob(v, no_id, 5), out) == -EINVAL, "ACL_GROUP of (gid_t)-1: EINVAL");

	/* the most entries a value can hold, and one byte over a whole entry */
	size_t count = (sizeof(big) - 4) / 8;
	uint32_t version = ACL_XATTR_VERSION;
	memcpy(big, &version, 4);
	for (size_t i = 0; i < count; i++) {
		struct acl_entry_le e = { USR, 7, 1000 + (uint32_t)(i % 10) };

		memcpy(big + 4 + 8 * i, &e, 8);
	}
	CHECK_MSG(to_host(big, 4 + 8 * count, out) == 0 && id_at(out, count - 1) == 5000 + (count - 1) % 10,
	          "%zu entries, all translated", count);
	CHECK_MSG(to_host(big, 4 + 8 * count + 1, out) == -EINVAL, "a trailing byte: EINVAL");

	/* host to guest: no rule, squash-host, (uid_t)-1 */
	const struct acl_entry_le host[] = { { UOBJ, 6, NOID }, { USR, 4, 1234 }, { USR, 4, 8000 },
					      { USR, 4, NOID }, { GOBJ, 4, NOID }, { GRP, 4, 6009 },
					      { MSK, 4, NOID }, { OTH, 0, NOID } };
	n = acl_blob(v, host, 8);
	CHECK_MSG(acl_xattr_to_guest(&uids, &gids, v, n) == 0 && id_at(v, 1) == 1234 &&
	          id_at(v, 2) == 3000 && id_at(v, 3) == IDMAP_OVERFLOW_ID && id_at(v, 5) == 2009 &&
	          id_at(v, 0) == NOID, "host 1234/8000/-1/g6009 shown as 1234/3000/65534/g2009");

	maps_namespace();
	const struct acl_entry_le unmapped_u[] = { { UOBJ, 6, NOID }, { USR, 4, 1500 }, { GOBJ, 4, NOID },
						    { MSK, 4, NOID }, { OTH, 0, NOID } };
	const struct acl_entry_le unmapped_g[] = { { UOBJ, 6, NOID }, { GOBJ, 4, NOID }, { GRP, 4, 1005 },
						    { MSK, 4, NOID }, { OTH, 0, NOID } };
	CHECK_MSG(to_host(v, acl_blob(v, unmapped_u, 5), out) == -EINVAL, "a uid outside the ranges: EINVAL");
	CHECK_MSG(to_host(v, acl_blob(v, unmapped_g, 5), out) == -EINVAL,
	          "a gid outside the gid ranges (inside the uid ones): EINVAL");
	n = acl_blob(v, host, 8);
	CHECK_MSG(acl_xattr_to_guest(&uids, &gids, v, n) == 0 && id_at(v, 1) == IDMAP_OVERFLOW_ID &&
	          id_at(v, 2) == IDMAP_OVERFLOW_ID && id_at(v, 5) == 2009,
	          "host ids outside the ranges shown as the overflow id");

	CHECK_MSG(acl_xattr_name("system.posix_acl_access") && acl_xattr_name("system.posix_acl_default") &&
	          !acl_xattr_name("system.posix_acl_accessx") && !acl_xattr_name("user.posix_acl_access") &&
	          !acl_xattr_name("system.posix_acl_"), "the two ACL names and nothing else");
	memset(&uids, 0, sizeof(uids));
	memset(&gids, 0, sizeof(gids));
	CHECK_MSG(!acl_xattr_translates(&uids, &gids), "no map: values pass as they are");
}

/* ---- through the protocol and the real passthrough ------------------------ */

static char scratch[] = "/tmp/ferry-acl-xattr-XXXXXX";
static struct pt_session ses;
static uint64_t next_unique = 1;
static struct raw_reply rep;

static int send_req(uint32_t opcode, uint64_t nodeid, const void *arg, size_t arg_len,
		    const void *p1, size_t p1_len, const void *p2, size_t p2_len)
{
	struct fuse_in_header h = { .opcode = opcode, .nodeid = nodeid, .unique = next_unique++ };

	return raw_req_send(ses.w, h, arg, arg_len, p1, p1_len, p2, p2_len, &rep);
}

static void host_path(char *buf, size_t size, const char *rel)
{
	scratch_path(buf, size, scratch, rel);
}

static ssize_t host_get(const char *rel, const char *name, uint8_t *val, size_t size)
{
	return scratch_getxattr(scratch, rel, name, val, size);
}

static int host_set(const char *rel, const char *name, const void *val, size_t size)
{
	char path[128];

	host_path(path, sizeof(path), rel);
	return lsetxattr(path, name, val, size, 0);
}

static uint64_t lookup(const char *name)
{
	struct fuse_entry_out e = { 0 };

	if (send_req(FUSE_LOOKUP, FUSE_ROOT_ID, NM(name), NULL, 0, NULL, 0) == 0)
		memcpy(&e, rep.arg, sizeof(e));
	return e.nodeid;
}

static int set_req(uint64_t nodeid, const char *name, const void *value, size_t size)
{
	struct fuse_setxattr_in in = { .size = (uint32_t)size };
	uint8_t body[1024];
	size_t nlen = strlen(name) + 1;

	memcpy(body, name, nlen);
	memcpy(body + nlen, value, size);
	return send_req(FUSE_SETXATTR, nodeid, &in, sizeof(in), body, nlen + size, NULL, 0);
}

/* GETXATTR of size bytes (0: the size probe); the reply's error, the
 * length in *len and the value in val. */
static int get_req(uint64_t nodeid, const char *name, uint32_t size, uint8_t *val, size_t *len)
{
	struct fuse_getxattr_in in = { .size = size };
	int ret = send_req(FUSE_GETXATTR, nodeid, &in, sizeof(in), NM(name), NULL, 0);

	*len = 0;
	if (ret)
		return ret;
	if (size == 0) {
		struct fuse_getxattr_out out;

		memcpy(&out, rep.arg, sizeof(out));
		*len = out.size;
	} else {
		*len = rep.h.len - sizeof(rep.h);
		memcpy(val, rep.arg, *len);
	}
	return 0;
}

static void make_host_file(const char *rel, bool dir)
{
	char path[128];
	int fd;

	host_path(path, sizeof(path), rel);
	if (dir) {
		CHECK_MSG(mkdir(path, 0755) == 0, "host: mkdir %s", rel);
		return;
	}
	fd = open(path, O_CREAT | O_WRONLY, 0644);
	CHECK_MSG(fd >= 0, "host: create %s", rel);
	if (fd >= 0)
		close(fd);
}

static void session_begin(struct passthrough_opts *pt_opts, const char *what)
{
	struct fuse_server_opts se_opts = {
		.max_write = 128 * 1024, .xattr = true, .posix_acl = true,
	};
	struct fuse_init_in init = {
		.major = FUSE_KERNEL_VERSION, .minor = 37, .max_readahead = 1 << 20,
		.flags = FUSE_INIT_EXT | FUSE_MAX_PAGES | FUSE_POSIX_ACL | FUSE_DONT_MASK |
			 FUSE_SETXATTR_EXT,
	};

	pt_opts->shared_dir = scratch;
	pt_opts->cache = CACHE_AUTO;
	pt_opts->timeout = -1;
	pt_opts->xattr = true;
	pt_opts->uid_map = uids;
	pt_opts->gid_map = gids;
	CHECK_MSG(pt_session_open(&ses, pt_opts, &se_opts) == 0, "%s: session", what);
	CHECK_MSG(send_req(FUSE_INIT, 0, &init, sizeof(init), NULL, 0, NULL, 0) == 0, "%s: INIT", what);
}

/* --translate-uid/gid rules and an --xattrmap that renames ACL names both ways. */
static void test_translate_session(void)
{
	static struct passthrough_opts pt_opts;
	char err[256];
	const struct acl_entry_le acc[] = {
		{ UOBJ, 6, NOID }, { USR, 4, 1003 }, { GOBJ, 4, NOID }, { GRP, 2, 2004 },
		{ MSK, 6, NOID }, { OTH, 0, NOID },
	};
	const struct acl_entry_le forbidden[] = {
		{ UOBJ, 6, NOID }, { USR, 4, 4001 }, { GOBJ, 4, NOID }, { MSK, 4, NOID }, { OTH, 0, NOID },
	};
	const struct acl_entry_le host_acl[] = {
		{ UOBJ, 6, NOID }, { USR, 4, 1234 }, { USR, 4, 5007 }, { USR, 4, 8000 },
		{ GOBJ, 4, NOID }, { GRP, 4, 6008 }, { MSK, 4, NOID }, { OTH, 0, NOID },
	};
	uint8_t v[256], got[256], before[256];
	size_t n, len;
	ssize_t hn, hb;
	uint64_t f, d, h, raw;

	maps_translate();
	memset(&pt_opts, 0, sizeof(pt_opts));
	/* The guest's default ACL stored under a user.* name; the guest's
	 * name posix_acl_access becoming the host's access ACL name. */
	CHECK_MSG(xattrmap_parse(&pt_opts.xattrmap,
				 ":prefix:client:system.posix_acl_default:user.stored.: "
				 ":prefix:client:posix_acl_:system.: :ok:all:::", err, sizeof(err)) == 0,
	          "the map parses: %s", err);
	make_host_file("f", false);
	make_host_file("d", true);
	make_host_file("h", false);
	make_host_file("raw", false);
	session_begin(&pt_opts, "translate");
	f = lookup("f");
	d = lookup("d");
	h = lookup("h");
	raw = lookup("raw");
	CHECK_MSG(f && d && h && raw, "LOOKUPs");

	n = acl_blob(v, acc, 6);
	CHECK_MSG(set_req(f, "system.posix_acl_access", v, n) == 0, "SETXATTR access ACL");
	hn = host_get("f", "system.posix_acl_access", got, sizeof(got));
	CHECK_MSG(hn == (ssize_t)n && id_at(got, 1) == 5003 && id_at(got, 3) == 6004,
	          "host: user 5003, group 6004 (%u, %u)", id_at(got, 1), id_at(got, 3));
	CHECK_MSG(get_req(f, "system.posix_acl_access", 0, got, &len) == 0 && len == n,
	          "size probe: %zu bytes", len);
	CHECK_MSG(get_req(f, "system.posix_acl_access", sizeof(got), got, &len) == 0 && len == n &&
	          memcmp(got, v, n) == 0, "GETXATTR: the guest's own ids back");

	hb = host_get("f", "system.posix_acl_access", before, sizeof(before));
	CHECK_MSG(set_req(f, "system.posix_acl_access", v, acl_blob(v, forbidden, 5)) == -EINVAL,
	          "a forbidden guest uid: EINVAL");
	hn = host_get("f", "system.posix_acl_access", got, sizeof(got));
	CHECK_MSG(hn == hb && memcmp(got, before, (size_t)hb) == 0, "... and the host's ACL unchanged");
	v[0] = 1;
	CHECK_MSG(set_req(f, "system.posix_acl_access", v, 4 + 8 * 5) == -EINVAL, "version 1: EINVAL");
	CHECK_MSG(set_req(f, "system.posix_acl_access", v, 7) == -EINVAL, "7 bytes: EINVAL");
	hn = host_get("f", "system.posix_acl_access", got, sizeof(got));
	CHECK_MSG(hn == hb && memcmp(got, before, (size_t)hb) == 0, "... the host's ACL still unchanged");

	/* set on the host, read in the guest */
	n = acl_blob(v, host_acl, 8);
	CHECK_MSG(host_set("h", "system.posix_acl_access", v, n) == 0, "host: setxattr h");
	CHECK_MSG(get_req(h, "system.posix_acl_access", sizeof(got), got, &len) == 0 && len == n &&
	          id_at(got, 1) == 1234 && id_at(got, 2) == 1007 && id_at(got, 3) == 3000 &&
	          id_at(got, 5) == 2008, "host 1234/5007/8000/g6008 read as 1234/1007/3000/g2008");

	/* the map: a default ACL stored under user.stored.*, in host ids */
	n = acl_blob(v, acc, 6);
	CHECK_MSG(set_req(d, "system.posix_acl_default", v, n) == 0, "SETXATTR default ACL (renamed)");
	hn = host_get("d", "user.stored.system.posix_acl_default", got, sizeof(got));
	CHECK_MSG(hn == (ssize_t)n && id_at(got, 1) == 5003 && id_at(got, 3) == 6004,
	          "host: the renamed default ACL holds host ids");
	CHECK_MSG(host_get("d", "system.posix_acl_default", got, sizeof(got)) < 0,
	          "host: no real default ACL");
	CHECK_MSG(get_req(d, "system.posix_acl_default", sizeof(got), got, &len) == 0 && len == n &&
	          memcmp(got, v, n) == 0, "GETXATTR of the renamed default ACL: guest ids");
	/* a guest name that is no ACL's but the host's is: still translated */
	CHECK_MSG(set_req(raw, "posix_acl_access", v, n) == 0, "SETXATTR posix_acl_access");
	hn = host_get("raw", "system.posix_acl_access", got, sizeof(got));
	CHECK_MSG(hn == (ssize_t)n && id_at(got, 1) == 5003, "host: a real ACL in host ids");
	CHECK_MSG(set_req(raw, "posix_acl_access", v, acl_blob(v, forbidden, 5)) == -EINVAL,
	          "... a forbidden uid refused through that name too");
	/* other xattrs keep their bytes */
	n = acl_blob(v, acc, 6);
	CHECK_MSG(set_req(raw, "user.blob", v, n) == 0 &&
	          host_get("raw", "user.blob", got, sizeof(got)) == (ssize_t)n && memcmp(got, v, n) == 0,
	          "user.blob holding ACL-like bytes stored as sent");
	CHECK_MSG(set_req(raw, "user.short", "abc", 3) == 0, "any bytes in a user.* value");
	pt_session_close(&ses);
}

/* --uid-map/--gid-map: strict ranges, ids outside them refused or shown as 65534. */
static void test_namespace_session(void)
{
	static struct passthrough_opts pt_opts;
	const struct acl_entry_le acc[] = {
		{ UOBJ, 6, NOID }, { USR, 4, 0 }, { USR, 4, 1005 }, { GOBJ, 4, NOID },
		{ GRP, 4, 2009 }, { MSK, 6, NOID }, { OTH, 0, NOID },
	};
	const struct acl_entry_le outside[] = {
		{ UOBJ, 6, NOID }, { USR, 4, 1500 }, { GOBJ, 4, NOID }, { MSK, 4, NOID }, { OTH, 0, NOID },
	};
	const struct acl_entry_le host_acl[] = {
		{ UOBJ, 6, NOID }, { USR, 4, 5001 }, { USR, 4, 7777 }, { GOBJ, 4, NOID },
		{ GRP, 4, 7777 }, { MSK, 4, NOID }, { OTH, 0, NOID },
	};
	uint8_t v[256], got[256];
	size_t n, len;
	ssize_t hn;
	uint64_t nf, nh;

	maps_namespace();
	memset(&pt_opts, 0, sizeof(pt_opts));
	make_host_file("nf", false);
	make_host_file("nh", false);
	session_begin(&pt_opts, "namespace");
	nf = lookup("nf");
	nh = lookup("nh");
	CHECK_MSG(nf && nh, "LOOKUPs");
	CHECK_MSG(set_req(nf, "system.posix_acl_access", v, acl_blob(v, outside, 5)) == -EINVAL,
	          "a uid outside the ranges: EINVAL");
	CHECK_MSG(host_get("nf", "system.posix_acl_access", got, sizeof(got)) < 0 && errno == ENODATA,
	          "... and no ACL on the host");
	n = acl_blob(v, acc, 7);
	CHECK_MSG(set_req(nf, "system.posix_acl_access", v, n) == 0, "SETXATTR inside the ranges");
	hn = host_get("nf", "system.posix_acl_access", got, sizeof(got));
	CHECK_MSG(hn == (ssize_t)n && id_at(got, 1) == 0 && id_at(got, 2) == 5005 && id_at(got, 4) == 6009,
	          "host: 0, 5005, group 6009");
	n = acl_blob(v, host_acl, 7);
	CHECK_MSG(host_set("nh", "system.posix_acl_access", v, n) == 0, "host: setxattr nh");
	CHECK_MSG(get_req(nh, "system.posix_acl_access", sizeof(got), got, &len) == 0 && len == n &&
	          id_at(got, 1) == 1001 && id_at(got, 2) == IDMAP_OVERFLOW_ID &&
	          id_at(got, 4) == IDMAP_OVERFLOW_ID, "host 5001/7777/g7777 read as 1001/65534/g65534");
	pt_session_close(&ses);
}

/*
 * No map: a daemon in a user namespace (an unprivileged start) gets
 * (uid_t)-1 from the host for ids outside it, which the guest's kernel
 * cannot take. A renamed ACL lets the host hold such bytes here.
 */
static void test_no_map_session(void)
{
	static struct passthrough_opts pt_opts;
	char err[256];
	const struct acl_entry_le host_acl[] = {
		{ UOBJ, 6, NOID }, { USR, 4, 1234 }, { USR, 4, NOID }, { GOBJ, 4, NOID },
		{ GRP, 4, NOID }, { MSK, 4, NOID }, { OTH, 0, NOID },
	};
	uint8_t v[256], got[256];
	size_t n, len;
	uint64_t nm;

	memset(&uids, 0, sizeof(uids));
	memset(&gids, 0, sizeof(gids));
	memset(&pt_opts, 0, sizeof(pt_opts));
	CHECK_MSG(xattrmap_parse(&pt_opts.xattrmap,
				 ":prefix:client:system.posix_acl_access:user.stored.: :ok:all:::",
				 err, sizeof(err)) == 0, "the map parses: %s", err);
	make_host_file("nm", false);
	session_begin(&pt_opts, "no map");
	nm = lookup("nm");
	CHECK_MSG(nm != 0, "LOOKUP");
	n = acl_blob(v, host_acl, 7);
	CHECK_MSG(host_set("nm", "user.stored.system.posix_acl_access", v, n) == 0, "host: setxattr nm");
	CHECK_MSG(get_req(nm, "system.posix_acl_access", sizeof(got), got, &len) == 0 && len == n &&
	          id_at(got, 1) == 1234 && id_at(got, 2) == IDMAP_OVERFLOW_ID &&
	          id_at(got, 4) == IDMAP_OVERFLOW_ID && id_at(got, 0) == NOID,
	          "(uid_t)-1 from the host read as 65534, other ids as they are");
	CHECK_MSG(host_set("nm", "user.stored.system.posix_acl_access", "junk", 4) == 0 &&
	          get_req(nm, "system.posix_acl_access", sizeof(got), got, &len) == 0 && len == 4 &&
	          memcmp(got, "junk", 4) == 0, "without a map a value that is no ACL passes as before");
	n = acl_blob(v, host_acl, 7);
	CHECK_MSG(set_req(nm, "system.posix_acl_access", v, n) == 0 &&
	          host_get("nm", "user.stored.system.posix_acl_access", got, sizeof(got)) == (ssize_t)n &&
	          memcmp(got, v, n) == 0, "without a map SETXATTR stores the bytes sent");
	pt_session_close(&ses);
}

int main(void)
{
	test_codec();
	if (!root_or_skip_case("the session part needs root (ACLs for other ids)"))
		return check_result();
	if (scratch_start(scratch) != 0)
		return 1;
	test_translate_session();
	test_namespace_session();
	test_no_map_session();
	return scratch_finish(scratch, check_result());
}
