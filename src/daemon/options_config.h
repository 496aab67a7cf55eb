/* Translates ferryfsd's parsed options into the backend's, the FUSE session's and the migration's configurations. */
#ifndef FERRY_OPTIONS_CONFIG_H
#define FERRY_OPTIONS_CONFIG_H

#include "backend/passthrough.h"
#include "daemon/options.h"
#include "migration/save_load.h"
#include "protocol/fuse_server.h"

/* FUSE_MAX_MAX_PAGES in Linux is 256: 1 MiB requests with 4 KiB pages. */
#define FERRY_MAX_WRITE (1u << 20)

/* The backend's options; the sandbox fills in proc_self_fd and may
 * change shared_dir afterwards. */
void options_to_passthrough(const struct ferry_options *o, struct passthrough_opts *pt);
/* The session's options. */
void options_to_session(const struct ferry_options *o, struct fuse_server_opts *se);
/* How a migration finds inodes again, and what source and destination must
 * agree on. */
void options_to_migration(const struct ferry_options *o, struct migration_config *m);
/* The seccomp action: as given, else the build's default. */
enum seccomp_mode options_seccomp_mode(const struct ferry_options *o);

#endif
