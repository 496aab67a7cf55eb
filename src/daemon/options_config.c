/* Translates ferryfsd's parsed options into the backend's, the FUSE session's and the migration's configurations. */
#include "daemon/options_config.h"

#include <string.h>

#include "daemon/options_table.h"
#include "daemon/seccomp.h"

/* options.def's "to" column: which of the two configurations get a field,
 * by the same member name. Each function says what COPY_BACKEND and
 * COPY_SESSION do before it includes the list. */
#define TO_BACKEND(field) COPY_BACKEND(field)
#define TO_SESSION(field) COPY_SESSION(field)
#define TO_BOTH(field) COPY_BACKEND(field) COPY_SESSION(field)
#define NOT_COPIED(field)

void options_to_passthrough(const struct ferry_options *o, struct passthrough_opts *pt)
{
	memset(pt, 0, sizeof(*pt));
#define COPY_BACKEND(field) pt->field = o->field;
#define COPY_SESSION(field)
#define OPTION(type, field, default_, to, ...) to(field)
#define SWITCH(field, to, ...) to(field)
#include "daemon/options.def"
#undef COPY_BACKEND
#undef COPY_SESSION
	pt->file_handles = o->inode_file_handles;
}

void options_to_session(const struct ferry_options *o, struct fuse_server_opts *se)
{
	memset(se, 0, sizeof(*se));
#define COPY_BACKEND(field)
#define COPY_SESSION(field) se->field = o->field;
#define OPTION(type, field, default_, to, ...) to(field)
#define SWITCH(field, to, ...) to(field)
#include "daemon/options.def"
#undef COPY_BACKEND
#undef COPY_SESSION
	se->max_write = FERRY_MAX_WRITE;
}

static const uint8_t cache_modes[] = {
	[CACHE_AUTO] = MIG_CACHE_AUTO, [CACHE_ALWAYS] = MIG_CACHE_ALWAYS,
	[CACHE_NEVER] = MIG_CACHE_NEVER, [CACHE_METADATA] = MIG_CACHE_METADATA,
};
static const uint8_t file_handle_modes[] = {
	[FILE_HANDLES_NEVER] = MIG_FH_NEVER, [FILE_HANDLES_PREFER] = MIG_FH_PREFER,
	[FILE_HANDLES_MANDATORY] = MIG_FH_MANDATORY,
};

void options_to_migration(const struct ferry_options *o, struct migration_config *m)
{
	struct mig_options *agreed = &m->agreed;

	memset(m, 0, sizeof(*m));
	/* The bool fields whose row names a MIG_OPT_* bit (options.def). */
	for (size_t i = 0; i < opt_row_count; i++) {
		const struct opt_row *r = &opt_rows[i];

		if (r->agreed && *(const bool *)((const char *)o + r->field - 1))
			agreed->flags |= r->agreed;
	}
	agreed->cache_mode = cache_modes[o->cache];
	agreed->file_handles = file_handle_modes[o->inode_file_handles];
	agreed->migration_mode = (uint8_t)o->migration_mode;
	agreed->config_digest = migration_config_digest(&o->uid_map, &o->gid_map, &o->xattrmap);
	m->backend.mode = o->migration_mode;
	m->backend.guest_error = o->migration_on_error == MIGRATION_ON_ERROR_GUEST_ERROR;
	m->backend.verify_handles = o->migration_verify_handles;
	m->backend.confirm_paths = o->migration_confirm_paths;
}

enum seccomp_mode options_seccomp_mode(const struct ferry_options *o)
{
	/* Sanitizer runtimes make calls of their own, so their default differs. */
	return o->seccomp_set ? o->seccomp : seccomp_default();
}
