/* ferryfsd's seccomp allow-list: built, loaded on every thread, and loaded by tests to check it. */
#ifndef FERRY_SECCOMP_H
#define FERRY_SECCOMP_H

#include <seccomp.h>
#include <stdbool.h>

#include "daemon/options.h"

/*
 * Builds the allow-list filter for action (not SECCOMP_NONE): every system
 * call the transport, protocol and backend make; any other gets action.
 * host_fuse adds what host FUSE mode (--mount) needs besides. Tests load
 * the same filter to check it.
 */
int seccomp_filter_build(enum seccomp_mode action, bool host_fuse, scmp_filter_ctx *out);
/* kill, but log in sanitizer builds (their runtimes make calls of their own). */
enum seccomp_mode seccomp_default(void);
/* Builds and loads it on every thread of the process. */
int seccomp_install(enum seccomp_mode action, bool host_fuse);

#endif
