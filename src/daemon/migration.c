/* Live migration in the daemon: the options both sides must agree on, and the save/load hooks of the vhost-user service. */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "daemon/service.h"

/* ---- what source and destination must agree on ------------------------ */

static uint32_t crc_u64(uint32_t crc, uint64_t v)
{
	unsigned char b[8];

	for (unsigned i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (8 * i));
	return mig_crc32c(crc, b, sizeof(b));
}

static uint32_t idmap_digest(uint32_t crc, const struct idmap *m)
{
	crc = crc_u64(crc, m->nrules);
	crc = crc_u64(crc, m->strict);
	for (unsigned i = 0; i < m->nrules && i < IDMAP_MAX_RULES; i++) {
		crc = crc_u64(crc, m->rules[i].kind);
		crc = crc_u64(crc, m->rules[i].from);
		crc = crc_u64(crc, m->rules[i].to);
		crc = crc_u64(crc, m->rules[i].count);
	}
	return crc;
}

static uint32_t xattrmap_digest(uint32_t crc, const struct xattrmap *m)
{
	crc = crc_u64(crc, m->count);
	for (unsigned i = 0; i < m->count && i < XATTRMAP_MAX_RULES; i++) {
		const struct xattrmap_rule *r = &m->rules[i];

		crc = crc_u64(crc, r->type);
		crc = crc_u64(crc, r->scope);
		crc = crc_u64(crc, r->key_len);
		crc = mig_crc32c(crc, r->key, r->key_len);
		crc = crc_u64(crc, r->prepend_len);
		crc = mig_crc32c(crc, r->prepend, r->prepend_len);
	}
	return crc;
}

/* The id and xattr maps decide which host ids and names a guest's request
 * becomes: a destination with other maps would act as someone else. Field
 * by field, so padding never counts; 0 when neither is configured. */
static uint64_t config_digest(const struct ferry_options *o)
{
	uint32_t ids, names;

	if (idmap_empty(&o->uid_map) && idmap_empty(&o->gid_map) && o->xattrmap.count == 0)
		return 0;
	ids = idmap_digest(idmap_digest(0, &o->uid_map), &o->gid_map);
	names = xattrmap_digest(0, &o->xattrmap);
	return ((uint64_t)ids << 32 | names) ? ((uint64_t)ids << 32 | names) : 1;
}

static const uint8_t cache_modes[] = {
	[CACHE_AUTO] = MIG_CACHE_AUTO, [CACHE_ALWAYS] = MIG_CACHE_ALWAYS,
	[CACHE_NEVER] = MIG_CACHE_NEVER, [CACHE_METADATA] = MIG_CACHE_METADATA,
};
static const uint8_t file_handle_modes[] = {
	[FILE_HANDLES_NEVER] = MIG_FH_NEVER, [FILE_HANDLES_PREFER] = MIG_FH_PREFER,
	[FILE_HANDLES_MANDATORY] = MIG_FH_MANDATORY,
};

void daemon_migration_config(const struct ferry_options *o, struct daemon_state *st)
{
	struct mig_options *m = &st->mig_options;
	const struct { bool on; uint32_t bit; } flags[] = {
		{ o->writeback, MIG_OPT_WRITEBACK }, { o->posix_acl, MIG_OPT_POSIX_ACL },
		{ o->xattr, MIG_OPT_XATTR },
		{ o->announce_submounts, MIG_OPT_ANNOUNCE_SUBMOUNTS },
		{ o->killpriv_v2, MIG_OPT_KILLPRIV_V2 },
		{ o->readdirplus, MIG_OPT_READDIRPLUS },
		{ o->security_label, MIG_OPT_SECURITY_LABEL }, { o->flock, MIG_OPT_FLOCK },
		{ o->posix_lock, MIG_OPT_POSIX_LOCK }, { o->allow_mmap, MIG_OPT_ALLOW_MMAP },
		{ o->readonly, MIG_OPT_READONLY },
		{ o->allow_direct_io, MIG_OPT_ALLOW_DIRECT_IO },
		{ o->preserve_noatime, MIG_OPT_PRESERVE_NOATIME },
	};

	memset(m, 0, sizeof(*m));
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		if (flags[i].on)
			m->flags |= flags[i].bit;
	m->cache_mode = cache_modes[o->cache];
	m->file_handles = file_handle_modes[o->inode_file_handles];
	m->migration_mode = (uint8_t)o->migration_mode;
	m->config_digest = config_digest(o);
	st->mig.mode = o->migration_mode;
	st->mig.guest_error = o->migration_on_error == MIGRATION_ON_ERROR_GUEST_ERROR;
	st->mig.verify_handles = o->migration_verify_handles;
	st->mig.confirm_paths = o->migration_confirm_paths;
}

/* ---- the hooks -------------------------------------------------------- */

static double ms_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/* Every table stays as it was: a cancelled migration goes on serving. */
int daemon_save_state(void *opaque, int fd, char *reason, size_t reason_size)
{
	struct daemon_state *st = opaque;
	struct mig_session session;
	struct mig_buf buf = { 0 };
	struct timespec t0;
	int ret;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = fuse_server_export(st->session, &session);
	if (ret) {
		snprintf(reason, reason_size, "the FUSE session is between states: %s",
			 strerror(-ret));
		goto out;
	}
	ret = passthrough_mig_save(st->pt, &st->mig, &session, &st->mig_options,
				   &buf, reason, reason_size);
	if (ret)
		goto out;
	ret = mig_write_fd(fd, buf.data, buf.len);
	if (ret) {
		snprintf(reason, reason_size, "writing the state: %s", strerror(-ret));
		goto out;
	}
	log_info("migration: state saved, %zu bytes in %.1f ms", buf.len, ms_since(&t0));
out:
	if (ret)
		log_err("migration: cannot save the state: %s", reason);
	mig_buf_free(&buf);
	return ret;
}

/* All of it or nothing: decoded and checked whole, resolved in the share,
 * and only then installed. */
int daemon_load_state(void *opaque, int fd, char *reason, size_t reason_size)
{
	struct daemon_state *st = opaque;
	struct mig_limits lim;
	struct mig_buf buf = { 0 };
	struct mig_state *state = NULL;
	struct pt_mig_load *load = NULL;
	struct timespec t0;
	int ret;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	passthrough_mig_limits(st->pt, &lim);
	ret = mig_read_fd(fd, &lim, &buf);
	if (ret) {
		snprintf(reason, reason_size, "reading the state: %s", strerror(-ret));
		goto out;
	}
	ret = mig_decode(buf.data, buf.len, &lim, &state, reason, reason_size);
	if (ret == 0)
		ret = mig_options_compare(&state->options, &st->mig_options, reason,
					  reason_size);
	if (ret == 0)
		ret = passthrough_mig_prepare(st->pt, &st->mig, state, &load, reason,
					      reason_size);
	if (ret == 0) {
		ret = fuse_server_import(st->session, &state->session, reason, reason_size);
		if (ret)
			passthrough_mig_abort(st->pt, load);
		else
			passthrough_mig_commit(st->pt, load);
	}
	if (ret == 0)
		log_info("migration: state loaded, %zu bytes, %zu inodes, %zu handles "
			 "in %.1f ms", buf.len, state->n_inodes, state->n_open_files,
			 ms_since(&t0));
out:
	if (ret)
		log_err("migration: cannot load the state: %s", reason);
	mig_state_free(state);
	mig_buf_free(&buf);
	return ret;
}
