/* Whose ids a passthrough op runs as: the per-op side of the credential model in creds.h. */
#include "backend/pt_internal.h"

/*
 * FUSE_ALLOW_IDMAP agreed: a request that creates nothing carries
 * FUSE_INVALID_UIDGID for both ids instead of its caller's (the guest's
 * kernel judged it, with default_permissions, and may have seen it through
 * an idmapped mount). A creating request always names the owner to give.
 */
static bool caller_unnamed(const struct passthrough *pt, const struct fuse_request_ctx *ctx)
{
	return pt->callers_unnamed && ctx->uid == FUSE_INVALID_UIDGID &&
	       ctx->gid == FUSE_INVALID_UIDGID;
}

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
 * An unnamed caller has nothing to refuse (pt_init withdraws
 * FUSE_ALLOW_IDMAP where the id options refuse some callers).
 */
int pt_check_caller(const struct passthrough *pt, const struct fuse_request_ctx *ctx)
{
	uint32_t uid, gid;

	if (caller_unnamed(pt, ctx))
		return 0;
	return host_ids(pt, ctx, &uid, &gid);
}

/* Takes on the caller's ids in the given role until pt_as_daemon. */
static int as_ids(struct passthrough *pt, const struct fuse_request_ctx *ctx,
		  enum creds_role role)
{
	uint32_t uid, gid;
	int ret = host_ids(pt, ctx, &uid, &gid);

	if (ret < 0 || !pt->switch_creds)
		return ret;
	return creds_switch(uid, gid, role);
}

/*
 * As as_ids, for an op that creates nothing. An unnamed caller keeps the
 * daemon's ids and drops what the role drops (CAP_FSETID, so the host
 * clears suid/sgid on a write as the guest asked); the role that asks the
 * host to judge the caller (FUSE_ACCESS, which such a client never sends)
 * has no one to judge and is refused.
 */
int pt_as_caller(struct passthrough *pt, const struct fuse_request_ctx *ctx,
		 enum creds_role role)
{
	if (!caller_unnamed(pt, ctx))
		return as_ids(pt, ctx, role);
	if (role == CREDS_CALLER_ONLY)
		return -EPERM;
	return pt->switch_creds ? creds_switch(0, 0, role) : 0;
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
	ret = as_ids(pt, ctx, pt->guest_strips_sgid ? CREDS_OWNER : pt_host_judged_role(ctx));
	if (ret < 0 && pt->switch_creds)
		creds_restore();
	return ret;
}
