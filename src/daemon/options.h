/* ferryfsd's command line: both the Rust virtiofsd's and QEMU's C virtiofsd's dialects. */
#ifndef FERRY_OPTIONS_H
#define FERRY_OPTIONS_H

#include <stdbool.h>
#include <stdio.h>

/* Only the value types of options it holds: the backend's code and the
 * protocol stay out of the parser (options_config.c translates). */
#include "backend/added_dirs.h"
#include "backend/idmap.h"
#include "backend/path_policy.h"
#include "backend/quota.h"
#include "backend/passthrough_modes.h"
#include "backend/xattrmap.h"
#include "common/cpu_list.h"
#include "common/log.h"
#include "migration/stream.h"

/* The first fd a socket-activating manager passes (SD_LISTEN_FDS_START). */
#define FERRY_LISTEN_FDS_START 3

/* --poll-max-us when not given: past ~50 us a spin costs more than the
 * wake-up it saves (docs/benchmarks.md, "Busy-polling"). */
#define FERRY_POLL_MAX_US_DEFAULT 50

enum run_action { ACTION_SERVE, ACTION_HELP, ACTION_VERSION, ACTION_PRINT_CAPS,
		  ACTION_STATS };

/* Listed in the order of the Rust virtiofsd's names; the first is the default. */
enum sandbox_mode { SANDBOX_NAMESPACE, SANDBOX_CHROOT, SANDBOX_NONE };
enum migration_on_error { MIGRATION_ON_ERROR_ABORT, MIGRATION_ON_ERROR_GUEST_ERROR };
enum seccomp_mode { SECCOMP_KILL, SECCOMP_LOG, SECCOMP_TRAP, SECCOMP_NONE };

/* What the command line says: one field per entry of options.def, whose
 * rows (options_table.c) set them; options_config.c hands them on to the
 * backend, the session and the migration. */
struct ferry_options {
#define OPTION(type, field, default_, to, ...) type field;
#define SWITCH(field, ...) bool field;
#define STATE(type, field, default_) type field;
#include "daemon/options.def"
};

/*
 * Parses argv into opts. On a bad or not-yet-supported option it writes one
 * message naming the option to err and returns -EINVAL; nothing is ever
 * accepted and then ignored. Without --socket-path or --fd, a socket passed
 * by systemd socket activation (LISTEN_PID/LISTEN_FDS) is used; the caller
 * unsets those variables.
 */
int ferry_options_parse(struct ferry_options *opts, int argc, char **argv,
			FILE *err);
void ferry_options_usage(FILE *out);

#endif
