/* Whose ids a passthrough op runs as: the per-op side of the credential model in creds.h. */
#include "backend/pt_internal.h"

/*
 * The host ids a guest request runs as; -EPERM for a forbidden guest id
 * (--translate-uid forbid-guest) and, for a daemon that switches ids, for
 * the -1 a guest's kernel sends for a caller it cannot map.
 */
static int host_ids(const struct passthrough *pt, const struct fuse_request_ctx *ctx,
		    uint32_t *uid, uint32_t *gid)
{
	int ret = idmap_to_host(&pt->opts.uid_map, ctx->uid, uid);

	if (ret == 0)
		ret = idmap_to_host(&pt->opts.gid_map, ctx->gid, gid);
	if (ret == 0 && pt->switch_creds && (*uid == UINT32_MAX || *gid == UINT32_MAX))
		ret = -EPERM;
	return ret;
}

/*
 * An op whose outcome the guest's kernel has already decided runs as the
 * daemon (creds.h says why); the caller is still refused if its ids are.
 */
int pt_check_caller(const struct passthrough *pt, const struct fuse_request_ctx *ctx)
{
	uint32_t uid, gid;

	return host_ids(pt, ctx, &uid, &gid);
}

/* Takes on the caller's ids in the given role until pt_as_daemon. */
int pt_as_caller(struct passthrough *pt, const struct fuse_request_ctx *ctx,
		 enum creds_role role)
{
	uint32_t uid, gid;
	int ret = host_ids(pt, ctx, &uid, &gid);

	if (ret < 0 || !pt->switch_creds)
		return ret;
	return creds_switch(uid, gid, role);
}

void pt_as_daemon(struct passthrough *pt)
{
	if (pt->switch_creds)
		creds_restore();
}

/*
 * For a guest that leaves a set-group-ID decision to the host: the host
 * judges the caller as unprivileged, except the guest's root, which holds
 * CAP_FSETID there and keeps the bit.
 */
enum creds_role pt_host_judged_role(const struct fuse_request_ctx *ctx)
{
	return ctx->uid == 0 ? CREDS_OWNER : CREDS_OWNER_NO_FSETID;
}

/*
 * Creating ops run as the caller's owner ids (creds.h) with the umask the
 * guest wants applied: none when its kernel already masked the mode, its
 * own with DONT_MASK so a default ACL can override it as it would locally.
 * For a guest that leaves set-group-ID stripping to the host, without
 * CAP_FSETID unless root, and with the parent's group as a supplementary
 * group when the guest sent it: the host then keeps a new file's
 * set-group-ID bit in a set-group-ID directory only for a member of the
 * directory's group. A group the id mapping refuses is left out, which
 * costs at most that bit.
 */
int pt_begin_create(struct passthrough *pt, const struct fuse_request_ctx *ctx,
		    uint32_t guest_umask)
{
	uint32_t host_gid;
	int ret = creds_set_umask(pt->dont_mask ? (guest_umask & 0777) : 0);

	if (ret < 0)
		return ret;
	if (pt->switch_creds && ctx->has_supp_gid &&
	    idmap_to_host(&pt->opts.gid_map, ctx->supp_gid, &host_gid) == 0) {
		ret = creds_add_supp_group(host_gid);
		if (ret < 0)
			return ret;
	}
	ret = pt_as_caller(pt, ctx, pt->guest_strips_sgid ? CREDS_OWNER :
						       pt_host_judged_role(ctx));
	if (ret < 0 && pt->switch_creds)
		creds_restore();
	return ret;
}
