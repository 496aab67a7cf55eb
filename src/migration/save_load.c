/* Live migration of the daemon's device state: the FUSE session and the passthrough tables saved to, and loaded from, the device-state fd. */
#include "migration/save_load.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/log.h"

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

/* Field by field, so padding never counts. */
uint64_t migration_config_digest(const struct idmap *uid_map, const struct idmap *gid_map,
				 const struct xattrmap *xattrmap)
{
	uint32_t ids, names;

	if (idmap_empty(uid_map) && idmap_empty(gid_map) && xattrmap->count == 0)
		return 0;
	ids = idmap_digest(idmap_digest(0, uid_map), gid_map);
	names = xattrmap_digest(0, xattrmap);
	return ((uint64_t)ids << 32 | names) ? ((uint64_t)ids << 32 | names) : 1;
}

/* ---- the hooks -------------------------------------------------------- */

static double ms_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

int migration_save(struct fuse_server *session, struct passthrough *pt,
		   const struct migration_config *cfg, int fd,
		   char *reason, size_t reason_size)
{
	struct mig_session negotiated;
	struct mig_buf buf = { 0 };
	struct timespec t0;
	int ret;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = fuse_server_export(session, &negotiated);
	if (ret) {
		snprintf(reason, reason_size, "the FUSE session is between states: %s",
			 strerror(-ret));
		goto out;
	}
	ret = passthrough_mig_save(pt, &cfg->backend, &negotiated, &cfg->agreed,
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

int migration_load(struct fuse_server *session, struct passthrough *pt,
		   const struct migration_config *cfg, int fd,
		   char *reason, size_t reason_size)
{
	struct mig_limits lim;
	struct mig_buf buf = { 0 };
	struct mig_state *state = NULL;
	struct pt_mig_load *load = NULL;
	struct timespec t0;
	int ret;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	passthrough_mig_limits(pt, &lim);
	ret = mig_read_fd(fd, &lim, &buf);
	if (ret) {
		snprintf(reason, reason_size, "reading the state: %s", strerror(-ret));
		goto out;
	}
	ret = mig_decode(buf.data, buf.len, &lim, &state, reason, reason_size);
	if (ret == 0)
		ret = mig_options_compare(&state->options, &cfg->agreed, reason,
					  reason_size);
	if (ret == 0)
		ret = passthrough_mig_prepare(pt, &cfg->backend, state, &load, reason,
					      reason_size);
	if (ret == 0) {
		ret = fuse_server_import(session, &state->session, reason, reason_size);
		if (ret)
			passthrough_mig_abort(pt, load);
		else
			passthrough_mig_commit(pt, load);
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
