/* The daemon process around the service: --daemonize and its ready byte, stdio, the open-file limit. */
#ifndef FERRY_DAEMON_LIFECYCLE_H
#define FERRY_DAEMON_LIFECYCLE_H

#include "daemon/options.h"

/* --rlimit-nofile, or without it the soft limit raised to the hard one. */
int raise_nofile_limit(const struct ferry_options *o);

/* *out = path made absolute (NULL for NULL); the caller frees it. */
int absolute_path(const char *path, char **out);

/*
 * --daemonize: forks; the parent waits until the child calls daemon_ready()
 * (it listens or is mounted), then exits 0, or 1 if the child failed first
 * (ready_fd closed without the byte). Before the backend is set up:
 * threads do not follow fork. The child gets the pipe's end in *ready_fd.
 */
int daemonize(int *ready_fd);
/* The daemonized child's stdin, stdout and stderr become /dev/null. */
void daemon_detach_stdio(void);
/* Leaves the working directory and lets the waiting parent exit; nothing
 * when ready_fd is -1 (not daemonized). Closes ready_fd. */
void daemon_ready(int ready_fd);

#endif
