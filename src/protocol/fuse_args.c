/* Reading a request's copied arguments: strings, names, xattr names, and the extensions of creating ops. */
#include "protocol/fuse_internal.h"

#include <errno.h>
#include <string.h>

/*
 * Everything here reads req->arg, the worker's copy of the arguments
 * (the guest cannot change it under us), and never past req->arg_len, or
 * for extensions past in.len; each length the guest gives is checked
 * against what is left before it is used.
 */

/* A NUL-terminated string at the cursor, inside the argument block. */
int fuse_arg_string(struct fuse_request *req, const char **str, size_t *len)
{
	const char *start = req->arg + req->arg_pos;
	const char *nul;

	if (req->arg_pos >= req->arg_len)
		return -EINVAL;
	nul = memchr(start, '\0', req->arg_len - req->arg_pos);
	if (!nul)
		return -EINVAL;
	*str = start;
	*len = (size_t)(nul - start);
	req->arg_pos += *len + 1;
	return 0;
}

/* A directory entry name: the backend resolves it relative to a directory
 * fd, so '/' or ".." would walk out of it. */
int fuse_arg_name(struct fuse_request *req, const char **name, bool allow_dots)
{
	size_t len;
	int rc;

	rc = fuse_arg_string(req, name, &len);
	if (rc < 0)
		return rc;
	if (len == 0 || memchr(*name, '/', len))
		return -EINVAL;
	if (len > NAME_MAX)
		return -ENAMETOOLONG;
	if (!allow_dots && (strcmp(*name, ".") == 0 || strcmp(*name, "..") == 0))
		return -EINVAL;
	return 0;
}

/* xattr names may hold '/' but are otherwise bounded like Linux does. */
int fuse_arg_xattr_name(struct fuse_request *req, const char **name)
{
	size_t len;
	int rc;

	rc = fuse_arg_string(req, name, &len);
	if (rc < 0)
		return rc;
	if (len == 0)
		return -EINVAL;
	if (len > FERRY_XATTR_NAME_MAX)
		return -ERANGE;
	return 0;
}

/* One fuse_secctx_header block: the total size, the count, then per context
 * a fuse_secctx, a NUL-terminated xattr name and the value. Linux sends at
 * most one context (the active LSM's); we pass the first on. */
static int parse_secctx(struct fuse_request *req, const char *p, size_t len)
{
	struct fuse_secctx_header hdr;
	struct fuse_secctx one;
	const char *name, *nul;
	size_t left;

	if (len < sizeof(hdr))
		return -EINVAL;
	memcpy(&hdr, p, sizeof(hdr));
	if (hdr.size < sizeof(hdr) || hdr.size > len)
		return -EINVAL;
	if (hdr.nr_secctx == 0)
		return 0;
	left = hdr.size - sizeof(hdr);
	p += sizeof(hdr);
	if (left < sizeof(one))
		return -EINVAL;
	memcpy(&one, p, sizeof(one));
	name = p + sizeof(one);
	left -= sizeof(one);
	nul = memchr(name, '\0', left);
	if (!nul || nul == name || (size_t)(nul - name) > FERRY_XATTR_NAME_MAX)
		return -EINVAL;
	left -= (size_t)(nul - name) + 1;
	if (one.size > left || one.size > FERRY_XATTR_SIZE_MAX)
		return -EINVAL;
	req->ctx.secctx_name = name;
	req->ctx.secctx_value = nul + 1;
	req->ctx.secctx_size = one.size;
	return 0;
}

/* A FUSE_EXT_GROUPS extension: nr_groups, then the groups. Linux sends
 * the one group of the caller's that owns the parent directory, and only
 * when it is not the caller's primary group; we pass the first on. */
static int parse_supp_groups(struct fuse_request *req, const char *p, size_t len)
{
	struct ferry_fuse_supp_groups sg;
	uint32_t gid;

	if (len < sizeof(sg))
		return -EINVAL;
	memcpy(&sg, p, sizeof(sg));
	if (sg.nr_groups > (len - sizeof(sg)) / sizeof(gid))
		return -EINVAL;
	if (sg.nr_groups == 0)
		return 0;
	memcpy(&gid, p + sizeof(sg), sizeof(gid));
	req->ctx.supp_gid = gid;
	req->ctx.has_supp_gid = true;
	return 0;
}

/*
 * What a creating op carries besides its arguments: the new inode's
 * security context and the caller's supplementary group. Before 7.38 the
 * context is one more argument after the names; from 7.38 on both are
 * extensions after the arguments, found by total_extlen, each with a
 * fuse_ext_header whose type says which (< 32: a context block). Types not
 * agreed at INIT are skipped, as the client may add more in later versions.
 */
int fuse_arg_create_ext(struct fuse_request *req)
{
	const bool secctx = req->se->conn.flags & FUSE_SECURITY_CTX;
	const bool groups = req->se->conn.flags & FUSE_CREATE_SUPP_GROUP;
	const char *p;
	size_t len;

	if (req->se->conn.proto_minor < 38) {
		if (!secctx || req->arg_pos >= req->arg_len)
			return 0;
		return parse_secctx(req, req->arg + req->arg_pos,
				    req->arg_len - req->arg_pos);
	}
	p = req->arg + req->arg_len;
	len = (size_t)req->in.total_extlen * 8;
	while (len > 0) {
		struct fuse_ext_header ext;
		int rc = 0;

		if (len < sizeof(ext))
			return -EINVAL;
		memcpy(&ext, p, sizeof(ext));
		if (ext.size < sizeof(ext) || ext.size > len)
			return -EINVAL;
		if (ext.type <= FUSE_MAX_NR_SECCTX && secctx)
			rc = parse_secctx(req, p, ext.size);
		else if (ext.type == FERRY_FUSE_EXT_GROUPS && groups)
			rc = parse_supp_groups(req, p + sizeof(ext), ext.size - sizeof(ext));
		if (rc < 0)
			return rc;
		p += ext.size;
		len -= ext.size;
	}
	return 0;
}
