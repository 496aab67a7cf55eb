/* The negotiated FUSE session as a migration carries it: export on the source, checked import on the destination. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "protocol/fuse_internal.h"

static uint16_t pages_of(uint32_t max_write)
{
	return (uint16_t)((max_write + FERRY_PAGE_SIZE - 1) / FERRY_PAGE_SIZE);
}

int fuse_server_export(struct fuse_server *se, struct mig_session *out)
{
	int state = atomic_load_explicit(&se->state, memory_order_acquire);

	memset(out, 0, sizeof(*out));
	if (state == SESSION_NEW)
		return 0;
	if (state != SESSION_READY)
		return -EBUSY;
	/* What INIT answered, field by field (fuse_do_init). */
	out->initialized = true;
	out->major = FERRY_FUSE_MAJOR;
	out->minor = se->conn.proto_minor;
	out->max_write = se->conn.max_write;
	out->flags = se->conn.flags;
	out->max_readahead = se->max_readahead;
	out->time_gran = 1;
	out->max_pages = pages_of(se->conn.max_write);
	out->max_background = FERRY_MAX_BACKGROUND;
	out->congestion_threshold = FERRY_CONGESTION_THRESHOLD;
	return 0;
}

/*
 * Only what this server could itself have answered to some INIT: a stream
 * claiming a flag it does not offer, a newer minor or another max_write
 * would make it serve a guest that expects something it does not do.
 */
static int check_import(const struct fuse_server *se, const struct mig_session *in,
			char *reason, size_t size)
{
	uint64_t extra = in->flags & ~fuse_init_offered_flags(se);

	if (in->major != FERRY_FUSE_MAJOR)
		return mig_refuse(reason, size, -EPROTO, "session: FUSE major %u, not %u",
			      in->major, FERRY_FUSE_MAJOR);
	if (in->minor < FERRY_FUSE_MIN_MINOR || in->minor > FERRY_FUSE_MINOR)
		return mig_refuse(reason, size, -EPROTO,
			      "session: FUSE minor %u outside this server's 7.%u..7.%u",
			      in->minor, FERRY_FUSE_MIN_MINOR, FERRY_FUSE_MINOR);
	if (extra)
		return mig_refuse(reason, size, -EINVAL,
			      "session: INIT flags 0x%llx not offered here "
			      "(other options on the source?)", (unsigned long long)extra);
	if (in->minor < 38 && (in->flags & FUSE_CREATE_SUPP_GROUP))
		return mig_refuse(reason, size, -EINVAL,
			      "session: CREATE_SUPP_GROUP agreed with minor %u", in->minor);
	if (in->max_write != se->opts.max_write)
		return mig_refuse(reason, size, -EINVAL,
			      "session: max_write %u on the source, %u here",
			      in->max_write, se->opts.max_write);
	/* max_background and congestion_threshold are taken as they come:
	 * they only limit the guest's own queueing (a source before this
	 * server answered them sends 0, the kernel's 12 and 9), nothing here
	 * depends on them. */
	if (in->max_pages != pages_of(in->max_write) || in->time_gran != 1 ||
	    in->map_alignment)
		return mig_refuse(reason, size, -EINVAL,
			      "session: max_pages %u, time_gran %u, map_alignment %u: "
			      "not what this server answers", in->max_pages,
			      in->time_gran, in->map_alignment);
	return 0;
}

int fuse_server_import(struct fuse_server *se, const struct mig_session *in,
			char *reason, size_t size)
{
	int expected = SESSION_NEW;
	int ret;

	if (!in->initialized)
		return 0;       /* the guest had not mounted: its INIT comes here */
	ret = check_import(se, in, reason, size);
	if (ret)
		return ret;
	if (!atomic_compare_exchange_strong(&se->state, &expected, SESSION_INITIALIZING))
		return mig_refuse(reason, size, -EBUSY,
			      "session: this server's guest already sent INIT");
	memset(&se->conn, 0, sizeof(se->conn));
	se->conn.proto_minor = in->minor;
	se->conn.flags = in->flags;
	se->conn.max_write = in->max_write;
	se->max_readahead = in->max_readahead;
	se->setxattr_in_size = (in->flags & FUSE_SETXATTR_EXT) ?
		sizeof(struct fuse_setxattr_in) : FUSE_COMPAT_SETXATTR_IN_SIZE;
	if (se->ops->init) {
		ret = se->ops->init(se->fs, &se->conn);
		if (ret < 0) {
			atomic_store_explicit(&se->state, SESSION_NEW, memory_order_release);
			return mig_refuse(reason, size, ret, "session: backend init: %s",
				      strerror(-ret));
		}
		/* The guest keeps what the source agreed: a backend here that
		 * withdraws a flag (other id options) cannot serve it. */
		if (se->conn.flags != in->flags) {
			atomic_store_explicit(&se->state, SESSION_NEW, memory_order_release);
			return mig_refuse(reason, size, -EINVAL,
				      "session: the source agreed FUSE_ALLOW_IDMAP, this "
				      "server's id options withdraw it");
		}
	}
	log_info("fuse: session %u.%u, flags 0x%llx, max_write %u taken over from "
		 "the migration source", FERRY_FUSE_MAJOR, in->minor,
		 (unsigned long long)in->flags, in->max_write);
	atomic_store_explicit(&se->state, SESSION_READY, memory_order_release);
	return 0;
}
