/* Signalling and draining an eventfd, inline: one is on every reply's path. */
#ifndef FERRY_EVENTFD_SIGNAL_H
#define FERRY_EVENTFD_SIGNAL_H

#include <stdint.h>
#include <unistd.h>

/* Adds 1 to eventfd fd's counter; nothing for fd < 0. */
static inline void eventfd_signal(int fd)
{
	uint64_t one = 1;
	ssize_t r;

	if (fd < 0)
		return;
	/* Can only fail if the counter is about to overflow, and then the
	 * reader is already due to wake up. */
	r = write(fd, &one, sizeof(one));
	(void)r;
}

/* Takes the counter of eventfd fd (non-blocking fds: nothing to take is fine). */
static inline void eventfd_drain(int fd)
{
	uint64_t v;
	ssize_t r = read(fd, &v, sizeof(v));

	(void)r;
}

#endif
