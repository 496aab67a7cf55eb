/* The signal that wakes a thread out of a blocking call (a /dev/fuse reader's read(), a waiting lock): its number and its handler. */
#ifndef FERRY_WAKE_SIGNAL_H
#define FERRY_WAKE_SIGNAL_H

#include <signal.h>

/* What pthread_kill() sends to wake a thread; SIGRTMIN is not a constant,
 * hence a function. Every layer that wakes threads uses this one signal. */
static inline int wake_signal(void)
{
	return SIGRTMIN;
}

/* Installs the wake signal's handler, which does nothing: its only job is
 * to make the blocking call return EINTR, which needs no SA_RESTART.
 * Installing it again is harmless. 0 or -errno. */
int wake_signal_install(void);

#endif
