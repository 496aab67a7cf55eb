/* A fork where one side waits on a pipe until the other writes a byte or exits: --daemonize, the unmount watcher. */
#ifndef FERRY_FORK_PIPE_H
#define FERRY_FORK_PIPE_H

#include <stdbool.h>
#include <sys/types.h>

/*
 * Forks with a CLOEXEC pipe between the two sides: the waiting side (the
 * child if child_waits, else the parent) gets the read end in *fd, the
 * other the write end, which it keeps open while the waiter should wait.
 * Returns as fork does (the child's pid, or 0 in the child), or -errno
 * with no end left open.
 */
pid_t fork_with_pipe(bool child_waits, int *fd);

#endif
