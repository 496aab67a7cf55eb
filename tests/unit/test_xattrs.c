/* Tests the xattrmap rule parser and, through the real protocol and passthrough on a scratch dir, mapped xattrs, POSIX ACLs, DONT_MASK and security contexts. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "backend/passthrough.h"
#include "backend/xattrmap.h"
#include "protocol/fuse_server.h"
#include "../common/pt_session.h"
#include "../common/raw_req.h"
#include "../common/scratch.h"
#include "../common/check.h"

/* ---- the parser and the mapping ---------------------------------------- */

static struct xattrmap map;
static char err[256];

static bool maps_to(const char *guest, const char *want_host)
{
	char buf[XATTRMAP_NAME_MAX + 1];
	const char *host;

	return xattrmap_to_host(&map, guest, buf, &host) == 0 && !strcmp(host, want_host);
}

static int host_verdict(const char *guest)
{
	char buf[XATTRMAP_NAME_MAX + 1];
	const char *host;

	return xattrmap_to_host(&map, guest, buf, &host);
}

static bool shown_as(const char *host, const char *want_guest)
{
	const char *guest;

	return xattrmap_to_guest(&map, host, &guest) && !strcmp(guest, want_guest);
}

static bool hidden(const char *host)
{
	const char *guest;

	return !xattrmap_to_guest(&map, host, &guest);
}

static int parse(const char *spec)
{
	memset(err, 0, sizeof(err));
	return xattrmap_parse(&map, spec, err, sizeof(err));
}

/* QEMU's example 1, and the map rule its docs call equivalent. */
static void check_prefix_everything(const char *spec)
{
	CHECK_MSG(parse(spec) == 0, "parse '%s'", spec);
	CHECK_MSG(maps_to("user.a", "user.virtiofs.user.a") &&
	          maps_to("trusted.t", "user.virtiofs.trusted.t"), "%s: every guest name prefixed", spec);
	CHECK_MSG(shown_as("user.virtiofs.trusted.t", "trusted.t"), "%s: prefix stripped in lists", spec);
	CHECK_MSG(hidden("security.selinux") && hidden("user.other"),
	          "%s: host names outside the prefix hidden", spec);
	CHECK_MSG(hidden("user.virtiofs."), "%s: the bare prefix (an empty guest name) hidden", spec);
	CHECK_MSG(!strcmp(map.capability_name, "user.virtiofs.security.capability"),
	          "%s: security.capability's host name known (%s)", spec, map.capability_name);
}

/* QEMU's example 2 ('/' separator, newlines between rules), and its map form. */
static void check_prefix_trusted(const char *spec)
{
	CHECK_MSG(parse(spec) == 0, "parse '%s'", spec);
	CHECK_MSG(maps_to("trusted.o", "user.virtiofs.trusted.o"), "trusted.* prefixed");
	CHECK_MSG(maps_to("user.x", "user.x") && maps_to("security.capability", "security.capability"),
	          "other names unchanged");
	CHECK_MSG(host_verdict("user.virtiofs.x") == -EPERM, "the guest cannot reach the prefix itself");
	CHECK_MSG(hidden("trusted.hostonly"), "host trusted.* hidden");
	CHECK_MSG(shown_as("user.virtiofs.trusted.o", "trusted.o") && shown_as("user.y", "user.y"),
	          "prefixed names stripped, others shown");
	CHECK_MSG(map.capability_name[0] == '\0', "security.capability not renamed: nothing to clear");
}

static void test_parser(void)
{
	char long_rule[600], many[64 * 12 + 1] = "";

	check_prefix_everything(":prefix:all::user.virtiofs.::bad:all:::");
	check_prefix_everything(" :map::user.virtiofs.: ");
	CHECK_MSG(map.count == 3, "map with an empty key: 2 rules + terminator (%u)", map.count);
	check_prefix_trusted("/prefix/all/trusted./user.virtiofs./\n"
			     "  /bad/server//trusted./\n"
			     "\t/bad/client/user.virtiofs.//\n"
			     "  /ok/all///");
	check_prefix_trusted("/map/trusted./user.virtiofs./");
	CHECK_MSG(map.count == 5, "map with a key: 4 rules + terminator (%u)", map.count);

	/* example 3, one rule per scope, each with its own separator */
	CHECK_MSG(parse("/bad/all/security./security./ |ok|all|||") == 0, "example 3 parses");
	CHECK_MSG(host_verdict("security.selinux") == -EPERM && hidden("security.selinux") &&
	          maps_to("user.z", "user.z"), "security.* refused and hidden, the rest passes");
	CHECK_MSG(parse(":ok:client:user.:: :ok:server::trusted.: :prefix:server::x.:") == 0,
	          "client-only and server-only rules");
	CHECK_MSG(maps_to("user.a", "user.a") && host_verdict("trusted.a") == -EPERM,
	          "a client name no rule matches is refused (the implicit terminator)");
	CHECK_MSG(shown_as("trusted.a", "trusted.a") && shown_as("x.y", "y") && hidden("user.a"),
	          "server rules only judge host names");
	CHECK_MSG(parse(":unsupported:all:security.:security.: :ok:all:::") == 0 &&
	          host_verdict("security.x") == -EOPNOTSUPP && hidden("security.x"),
	          "unsupported (the Rust virtiofsd's type): ENOTSUP and hidden");

	memset(long_rule, 0, sizeof(long_rule));
	snprintf(long_rule, sizeof(long_rule), ":prefix:all::%0200d:", 0);
	CHECK_MSG(parse(long_rule) == 0, "a 200-byte prefix");
	CHECK_MSG(host_verdict("user.0123456789012345678901234567890123456789012345678901234567") ==
	          -ERANGE, "a mapped name longer than 255 bytes: ERANGE");

	/* malformed rules: each refused with the rule named */
	static const struct { const char *spec, *want; } bad[] = {
		{ "", "no rules" },
		{ "  \n\t ", "no rules" },
		{ ":", "rule 1 (':'): ends before its type field" },
		{ ":prefix", "type field is closed with ':'" },
		{ ":prefix:all", "rule 1 (':prefix:all'): ends before its scope field" },
		{ ":prefix:all:trusted.", "key field" },
		{ ":prefix:all:trusted.:user.vm.", "prepend field" },
		{ ":ok:all::: :bad:client:", "rule 2 (':bad:client:'): ends before its key field" },
		{ ":foo:all:::", "unknown type 'foo' (expected prefix, ok, bad, unsupported or map)" },
		{ ":OK:all:::", "unknown type 'OK'" },
		{ ":prefix:everyone:::", "unknown scope 'everyone' (expected client, server or all)" },
		{ ":prefix::::", "unknown scope ''" },
		{ ":map:", "ends before its key field" },
		{ ":map:a:", "ends before its prepend field" },
		{ ":map::user.: :ok:all:::", "rule 2 (':ok:all:::'): follows a map rule" },
		{ ":map:a:b: :map:c:d:", "rule 2 (':map:c:d:'): follows a map rule" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		int ret = parse(bad[i].spec);

		CHECK_MSG(ret == -EINVAL && strstr(err, bad[i].want) && map.count == 0,
		          "refused '%s': %s", bad[i].spec, err);
	}
	snprintf(long_rule, sizeof(long_rule), ":ok:all:%0256d::", 0);
	CHECK_MSG(parse(long_rule) == -EINVAL && strstr(err, "key field is longer than 255"),
	          "a 256-byte key: %s", err);
	for (int i = 0; i < 64; i++)
		strcat(many, ":ok:all::: ");
	CHECK_MSG(parse(many) == -EINVAL && strstr(err, "rule 64") && strstr(err, "too many rules"),
	          "64 rules leave no room for the terminator: %s", err);
	many[0] = '\0';
	for (int i = 0; i < 60; i++)
		strcat(many, ":ok:all::: ");
	strcat(many, ":map:k:p:");
	CHECK_MSG(parse(many) == -EINVAL && strstr(err, "rule 61") && strstr(err, "too many rules"),
	          "a map's expansion counts against the limit too: %s", err);
}

/* ---- through the protocol and the real passthrough ---------------------- */

#define MAX_WRITE (128u * 1024u)
static char scratch[] = "/tmp/ferry-xattrs-XXXXXX";
static struct pt_session ses;
static uint64_t next_unique = 1;
static struct raw_reply rep;

/* Header, a fixed argument and up to two more pieces; the reply's error. */
static int send_req(uint32_t opcode, uint64_t nodeid, uint32_t uid,
		    const void *arg, size_t arg_len, const void *p1, size_t p1_len,
		    const void *p2, size_t p2_len)
{
	struct fuse_in_header h = { .opcode = opcode, .nodeid = nodeid,
				    .unique = next_unique++, .uid = uid, .gid = uid };

	return raw_req_send(ses.w, h, arg, arg_len, p1, p1_len, p2, p2_len, &rep);
}

static void host_path(char *buf, size_t size, const char *rel)
{
	scratch_path(buf, size, scratch, rel);
}

static ssize_t host_get(const char *rel, const char *name, char *val, size_t size)
{
	return scratch_getxattr(scratch, rel, name, val, size);
}

static mode_t host_mode(const char *rel)
{
	char path[128];
	struct stat st;

	host_path(path, sizeof(path), rel);
	return stat(path, &st) == 0 ? st.st_mode & 07777 : (mode_t)-1;
}

/* MKDIR as the 7.37 client (Linux 6.1) sends it: the security context
 * block right after the name. */
static int mkdir_req(uint64_t parent, const char *name, uint32_t mode, uint32_t umask,
		     const char *ctx_name, const char *ctx_value, uint64_t *nodeid)
{
	struct fuse_mkdir_in in = { .mode = mode, .umask = umask };
	uint8_t ctx[256];
	size_t ctx_len = 0;
	int ret;

	if (ctx_name) {
		struct fuse_secctx_header hdr = { .nr_secctx = 1 };
		struct fuse_secctx one = { .size = (uint32_t)strlen(ctx_value) + 1 };
		size_t nlen = strlen(ctx_name) + 1;

		ctx_len = sizeof(hdr) + sizeof(one) + nlen + one.size;
		hdr.size = (uint32_t)ctx_len;
		memcpy(ctx, &hdr, sizeof(hdr));
		memcpy(ctx + sizeof(hdr), &one, sizeof(one));
		memcpy(ctx + sizeof(hdr) + sizeof(one), ctx_name, nlen);
		memcpy(ctx + sizeof(hdr) + sizeof(one) + nlen, ctx_value, one.size);
	}
	ret = send_req(FUSE_MKDIR, parent, 0, &in, sizeof(in), NM(name), ctx, ctx_len);
	if (ret == 0 && nodeid) {
		struct fuse_entry_out e;

		memcpy(&e, rep.arg, sizeof(e));
		*nodeid = e.nodeid;
	}
	return ret;
}

/* SETXATTR with FUSE_SETXATTR_EXT's flags; in_size is the compat size
 * for a client that did not agree to it. */
static int setxattr_req_ext(uint64_t nodeid, uint32_t uid, const char *name,
			    const void *value, size_t size, uint32_t setxattr_flags,
			    size_t in_size)
{
	struct fuse_setxattr_in in = { .size = (uint32_t)size,
				       .setxattr_flags = setxattr_flags };
	uint8_t body[512];
	size_t nlen = strlen(name) + 1;

	memcpy(body, name, nlen);
	memcpy(body + nlen, value, size);
	return send_req(FUSE_SETXATTR, nodeid, uid, &in, in_size, body, nlen + size, NULL, 0);
}

static int setxattr_req(uint64_t nodeid, uint32_t uid, const char *name,
			const void *value, size_t size)
{
	return setxattr_req_ext(nodeid, uid, name, value, size, 0,
				sizeof(struct fuse_setxattr_in));
}

/* An access or default ACL as the guest's kernel encodes it. */
struct acl_entry_le { uint16_t tag, perm; uint32_t id; };
static size_t acl_blob(uint8_t *buf, const struct acl_entry_le *e, size_t n)
{
	uint32_t version = 2;

	memcpy(buf, &version, 4);
	memcpy(buf + 4, e, n * sizeof(*e));
	return 4 + n * sizeof(*e);
}

static bool list_has(const char *list, size_t len, const char *name)
{
	for (size_t i = 0; i < len; i += strlen(list + i) + 1)
		if (!strcmp(list + i, name))
			return true;
	return false;
}

static void test_session(void)
{
	struct fuse_init_in init = {
		.major = FUSE_KERNEL_VERSION, .minor = 37, .max_readahead = 1 << 20,
		.flags = FUSE_INIT_EXT | FUSE_MAX_PAGES | FUSE_POSIX_ACL | FUSE_DONT_MASK |
			 FUSE_SETXATTR_EXT,
		.flags2 = (uint32_t)(FUSE_SECURITY_CTX >> 32),
	};
	struct fuse_init_out io;
	uint64_t dir, sub, file;
	char val[256];
	uint8_t blob[64];
	bool host_security;
	ssize_t n;

	CHECK_MSG(send_req(FUSE_INIT, 0, 0, &init, sizeof(init), NULL, 0, NULL, 0) == 0, "INIT");
	memcpy(&io, rep.arg, sizeof(io));
	CHECK_MSG((io.flags & FUSE_POSIX_ACL) && (io.flags & FUSE_DONT_MASK) &&
	          (io.flags2 & (uint32_t)(FUSE_SECURITY_CTX >> 32)),
	          "POSIX_ACL, DONT_MASK and SECURITY_CTX agreed (flags 0x%x, flags2 0x%x)",
	          io.flags, io.flags2);

	/* the security context lands under its mapped name */
	CHECK_MSG(mkdir_req(FUSE_ROOT_ID, "d", 0777, 022, "security.selinux",
			    "system_u:object_r:test_t:s0", &dir) == 0, "MKDIR with a security context");
	CHECK_MSG(host_get("d", "user.guest.security.selinux", val, sizeof(val)) == 28 &&
	          !strcmp(val, "system_u:object_r:test_t:s0"),
	          "host: the label is stored as user.guest.security.selinux");
	CHECK_MSG(host_get("d", "security.selinux", val, sizeof(val)) < 0 ||
	          strcmp(val, "system_u:object_r:test_t:s0"), "host: its own security.selinux untouched");
	CHECK_MSG(mkdir_req(FUSE_ROOT_ID, "e", 0777, 022, "user.guest.x", "v", NULL) == -EPERM &&
	          host_mode("e") == (mode_t)-1,
	          "a context the map refuses fails the MKDIR and leaves no directory");

	/* names both ways */
	CHECK_MSG(setxattr_req(dir, 0, "security.test", "v", 1) == 0 &&
	          host_get("d", "user.guest.security.test", val, sizeof(val)) == 1,
	          "SETXATTR security.test: host has user.guest.security.test");
	CHECK_MSG(setxattr_req(dir, 0, "user.plain", "p", 1) == 0 &&
	          host_get("d", "user.plain", val, sizeof(val)) == 1, "user.plain passes unchanged");
	CHECK_MSG(setxattr_req(dir, 0, "user.guest.security.test", "x", 1) == -EPERM,
	          "the guest cannot write the mapped names directly (EPERM)");
	{
		char path[128];

		host_path(path, sizeof(path), "d");
		CHECK_MSG(lsetxattr(path, "user.guest.security.fromhost", "h", 1, 0) == 0,
		          "host sets user.guest.security.fromhost");
		host_security = lsetxattr(path, "security.hostonly", "h", 1, 0) == 0;
		if (!host_security)
			SKIP_CASE("host cannot set security.hostonly (%s)", strerror(errno));
	}
	{
		struct fuse_getxattr_in gi = { .size = 0 };
		uint32_t probe;

		CHECK_MSG(send_req(FUSE_LISTXATTR, dir, 0, &gi, sizeof(gi), NULL, 0, NULL, 0) == 0,
		          "LISTXATTR size probe");
		memcpy(&probe, rep.arg, sizeof(probe));
		gi.size = sizeof(val);
		CHECK_MSG(send_req(FUSE_LISTXATTR, dir, 0, &gi, sizeof(gi), NULL, 0, NULL, 0) == 0,
		          "LISTXATTR");
		n = rep.used - sizeof(rep.h);
		CHECK_MSG(probe >= n, "the probe (%u) covers the list (%zd)", probe, n);
		CHECK_MSG(list_has((char *)rep.arg, n, "security.selinux") &&
		          list_has((char *)rep.arg, n, "security.test") &&
		          list_has((char *)rep.arg, n, "security.fromhost") &&
		          list_has((char *)rep.arg, n, "user.plain"),
		          "the guest lists the unmapped names");
		CHECK_MSG(!(host_security && list_has((char *)rep.arg, n, "security.hostonly")) &&
		          !list_has((char *)rep.arg, n, "user.guest.security.test"),
		          "host security.* and the mapped names themselves hidden");
	}
	{
		struct fuse_getxattr_in gi = { .size = sizeof(val) };

		CHECK_MSG(send_req(FUSE_GETXATTR, dir, 0, &gi, sizeof(gi), NM("security.fromhost"),
			           NULL, 0) == 0 && rep.arg[0] == 'h', "GETXATTR through the map");
		CHECK_MSG(send_req(FUSE_REMOVEXATTR, dir, 0, NM("security.test"), NULL, 0, NULL, 0) == 0 &&
		          host_get("d", "user.guest.security.test", val, sizeof(val)) < 0 &&
		          errno == ENODATA, "REMOVEXATTR removes the mapped name");
	}

	/* DONT_MASK: the guest's umask applies unless a default ACL rules */
	CHECK_MSG(mkdir_req(dir, "plain", 0777, 027, NULL, NULL, NULL) == 0 &&
	          host_mode("d/plain") == 0750, "umask 027 applied without a default ACL (%o)",
	          host_mode("d/plain"));
	{
		const struct acl_entry_le def[] = {
			{ 0x01, 7, ~0u }, { 0x04, 7, ~0u }, { 0x20, 7, ~0u },
		};

		CHECK_MSG(setxattr_req(dir, 0, "system.posix_acl_default", blob,
				       acl_blob(blob, def, 3)) == 0 &&
		          host_get("d", "system.posix_acl_default", val, sizeof(val)) == 28,
		          "default ACL set from the guest lands on the host");
		CHECK_MSG(mkdir_req(dir, "inherits", 0777, 077, NULL, NULL, &sub) == 0 &&
		          host_mode("d/inherits") == 0777 &&
		          host_get("d/inherits", "system.posix_acl_default", val, sizeof(val)) == 28,
		          "under a default ACL the umask is ignored and the ACL inherited (%o)",
		          host_mode("d/inherits"));
	}

	/* an access ACL changes the mode on the host; a non-member clears sgid */
	{
		const struct acl_entry_le acc[] = {
			{ 0x01, 6, ~0u }, { 0x02, 6, 1234 }, { 0x04, 4, ~0u },
			{ 0x10, 4, ~0u }, { 0x20, 0, ~0u },
		};
		struct fuse_create_in ci = { .flags = O_RDWR, .mode = S_IFREG | 0666, .umask = 0 };
		struct fuse_entry_out e;
		char path[128];

		CHECK_MSG(send_req(FUSE_CREATE, sub, 0, &ci, sizeof(ci), NM("f"), NULL, 0) == 0,
		          "CREATE d/inherits/f");
		memcpy(&e, rep.arg, sizeof(e));
		file = e.nodeid;
		host_path(path, sizeof(path), "d/inherits/f");
		CHECK_MSG(chown(path, 1000, 2000) == 0 && chmod(path, 02670) == 0, "host: f is 1000:2000 2670");
		/* the guest's kernel says whether its caller is in group 2000 */
		CHECK_MSG(setxattr_req_ext(file, 1000, "system.posix_acl_access", blob,
				           acl_blob(blob, acc, 5), FUSE_SETXATTR_ACL_KILL_SGID,
				           sizeof(struct fuse_setxattr_in)) == 0,
		          "uid 1000, outside group 2000, sets an access ACL");
		CHECK_MSG(host_mode("d/inherits/f") == 0640,
		          "host mode follows the ACL and sgid goes as the guest's kernel asked (%o)",
		          host_mode("d/inherits/f"));
		CHECK_MSG(chmod(path, 02670) == 0, "host: f is 2670 again");
		CHECK_MSG(setxattr_req(file, 1000, "system.posix_acl_access", blob,
				       acl_blob(blob, acc, 5)) == 0,
		          "uid 1000, a member of group 2000 in the guest, sets it");
		CHECK_MSG(host_mode("d/inherits/f") == 02640,
		          "sgid stays for a member, without the group on the host (%o)",
		          host_mode("d/inherits/f"));
	}

	/* security.capability under the map is cleared on write, truncate, chown */
	{
		const uint8_t cap[20] = { 0x01, 0, 0, 0x02, 0x00, 0x20 };
		struct fuse_create_in ci = { .flags = O_RDWR, .mode = S_IFREG | 0755 };
		struct fuse_write_in wi = { .size = 4 };
		struct fuse_setattr_in sa = { .valid = FATTR_SIZE, .size = 1 };
		struct fuse_entry_out e;
		struct fuse_open_out o;

		CHECK_MSG(send_req(FUSE_CREATE, dir, 0, &ci, sizeof(ci), NM("cap"), NULL, 0) == 0,
		          "CREATE d/cap");
		memcpy(&e, rep.arg, sizeof(e));
		memcpy(&o, rep.arg + sizeof(e), sizeof(o));
		file = e.nodeid;
		CHECK_MSG(setxattr_req(file, 0, "security.capability", cap, sizeof(cap)) == 0 &&
		          host_get("d/cap", "user.guest.security.capability", val, sizeof(val)) == 20,
		          "security.capability stored under its mapped name");
		wi.fh = o.fh;
		CHECK_MSG(send_req(FUSE_WRITE, file, 0, &wi, sizeof(wi), "data", 4, NULL, 0) == 0 &&
		          host_get("d/cap", "user.guest.security.capability", val, sizeof(val)) < 0 &&
		          errno == ENODATA, "WRITE clears the mapped capability");
		CHECK_MSG(setxattr_req(file, 0, "security.capability", cap, sizeof(cap)) == 0 &&
		          send_req(FUSE_SETATTR, file, 0, &sa, sizeof(sa), NULL, 0, NULL, 0) == 0 &&
		          host_get("d/cap", "user.guest.security.capability", val, sizeof(val)) < 0,
		          "truncate clears it");
		sa = (struct fuse_setattr_in){ .valid = FATTR_UID, .uid = 1000 };
		CHECK_MSG(setxattr_req(file, 0, "security.capability", cap, sizeof(cap)) == 0 &&
		          send_req(FUSE_SETATTR, file, 0, &sa, sizeof(sa), NULL, 0, NULL, 0) == 0 &&
		          host_get("d/cap", "user.guest.security.capability", val, sizeof(val)) < 0,
		          "chown clears it");
		CHECK_MSG(setxattr_req(file, 1000, "security.capability", cap, sizeof(cap)) == 0 &&
		          send_req(FUSE_REMOVEXATTR, file, 1000, NM("security.capability"), NULL, 0,
			           NULL, 0) == 0 &&
		          host_get("d/cap", "user.guest.security.capability", val, sizeof(val)) < 0,
		          "the guest kernel's own removal on write (any writer) reaches the mapped name");
		CHECK_MSG(setxattr_req(file, 0, "user.keep", "k", 1) == 0 &&
		          send_req(FUSE_WRITE, file, 0, &wi, sizeof(wi), "more", 4, NULL, 0) == 0 &&
		          host_get("d/cap", "user.keep", val, sizeof(val)) == 1,
		          "other xattrs survive a write");
	}
}

/*
 * A client from before FUSE_SETXATTR_EXT cannot say whether an access ACL
 * drops sgid: the host judges the caller's ids as it always did, so a
 * caller outside the file's group loses the bit and root keeps it.
 */
static void test_acl_without_setxattr_ext(void)
{
	struct fuse_init_in init = {
		.major = FUSE_KERNEL_VERSION, .minor = 31, .max_readahead = 1 << 20,
		.flags = FUSE_MAX_PAGES | FUSE_POSIX_ACL | FUSE_DONT_MASK,
	};
	const struct acl_entry_le acc[] = {
		{ 0x01, 6, ~0u }, { 0x04, 4, ~0u }, { 0x10, 4, ~0u }, { 0x20, 0, ~0u },
	};
	struct fuse_entry_out e;
	uint8_t blob[64];
	char path[128];
	int fd;

	CHECK_MSG(send_req(FUSE_DESTROY, 0, 0, NULL, 0, NULL, 0, NULL, 0) == 0, "DESTROY");
	CHECK_MSG(send_req(FUSE_INIT, 0, 0, &init, sizeof(init), NULL, 0, NULL, 0) == 0,
	          "INIT 7.31 without SETXATTR_EXT");
	host_path(path, sizeof(path), "old-acl");
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	close(fd);
	CHECK_MSG(chown(path, 1000, 2000) == 0 && chmod(path, 02670) == 0, "host: old-acl is 1000:2000 2670");
	CHECK_MSG(send_req(FUSE_LOOKUP, FUSE_ROOT_ID, 0, NM("old-acl"), NULL, 0, NULL, 0) == 0,
	          "LOOKUP old-acl");
	memcpy(&e, rep.arg, sizeof(e));
	CHECK_MSG(setxattr_req_ext(e.nodeid, 1000, "system.posix_acl_access", blob,
			           acl_blob(blob, acc, 4), 0, FUSE_COMPAT_SETXATTR_IN_SIZE) == 0,
	          "uid 1000 (group 1000) sets an access ACL");
	CHECK_MSG(host_mode("old-acl") == 0640, "the host dropped sgid for a non-member (%o)",
	          host_mode("old-acl"));
	CHECK_MSG(chmod(path, 02670) == 0, "host: old-acl is 2670 again");
	CHECK_MSG(setxattr_req_ext(e.nodeid, 0, "system.posix_acl_access", blob,
			           acl_blob(blob, acc, 4), 0, FUSE_COMPAT_SETXATTR_IN_SIZE) == 0,
	          "root sets it");
	CHECK_MSG(host_mode("old-acl") == 02640, "root keeps sgid (%o)", host_mode("old-acl"));
}

/*
 * Where the host file system refuses an access ACL, the guest gets the
 * host's own error, whoever sets it and whether the host or the guest
 * judges sgid (GlusterFS without -o acl answers EOPNOTSUPP). A symlink
 * stands for such a file system: the host refuses ACLs on it, and the
 * /proc/self/fd path reaches the link itself. The oracle is the host's own
 * call on the same link.
 */
static void check_acl_refused_as_host(const char *session, size_t in_size)
{
	const struct acl_entry_le acc[] = {
		{ 0x01, 6, ~0u }, { 0x02, 4, 1000 }, { 0x04, 0, ~0u }, { 0x10, 4, ~0u },
		{ 0x20, 0, ~0u },
	};
	static const uint32_t callers[] = { 0, 1000 };
	uint8_t blob[64];
	size_t len = acl_blob(blob, acc, 5);
	struct fuse_entry_out e;
	char path[128];
	int want;

	host_path(path, sizeof(path), "acl-link");
	unlink(path);
	CHECK_MSG(symlink("target", path) == 0, "host: acl-link");
	want = lsetxattr(path, "system.posix_acl_access", blob, len, 0) < 0 ? errno : 0;
	CHECK_MSG(want != 0, "the host refuses an access ACL on a symlink (the oracle)");
	CHECK_MSG(send_req(FUSE_LOOKUP, FUSE_ROOT_ID, 0, NM("acl-link"), NULL, 0, NULL, 0) == 0,
	          "%s: LOOKUP acl-link", session);
	memcpy(&e, rep.arg, sizeof(e));
	for (size_t i = 0; i < sizeof(callers) / sizeof(callers[0]); i++) {
		int got = setxattr_req_ext(e.nodeid, callers[i], "system.posix_acl_access", blob,
					   len, FUSE_SETXATTR_ACL_KILL_SGID, in_size);

		CHECK_MSG(got == -want, "%s, uid %u: the access ACL got %d (%s), the host's own call %s",
		          session, callers[i], got, strerror(-got), strerror(want));
	}
}

int main(void)
{
	struct passthrough_opts pt_opts = { .cache = CACHE_AUTO, .timeout = -1, .xattr = true };
	struct fuse_server_opts se_opts = {
		.max_write = MAX_WRITE, .xattr = true, .posix_acl = true, .security_label = true,
	};

	test_parser();

	if (!root_or_skip_case("the session part needs root (host security.*, ids)"))
		return check_result();
	if (scratch_start(scratch) != 0)
		return 1;
	CHECK_MSG(xattrmap_parse(&pt_opts.xattrmap, ":map:security.:user.guest.:", err,
			         sizeof(err)) == 0, "the session's map parses");
	pt_opts.shared_dir = scratch;
	if (pt_session_open(&ses, &pt_opts, &se_opts) < 0) {
		fprintf(stderr, "cannot set up the session\n");
		return 1;
	}
	test_session();
	check_acl_refused_as_host("7.37, the guest judges sgid", sizeof(struct fuse_setxattr_in));
	test_acl_without_setxattr_ext();
	check_acl_refused_as_host("7.31, the host judges sgid", FUSE_COMPAT_SETXATTR_IN_SIZE);
	pt_session_close(&ses);
	return scratch_finish(scratch, check_result());
}
