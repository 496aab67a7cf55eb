/* The wake signal's handler: installed without SA_RESTART so that a blocking call it interrupts returns EINTR. */
#include "common/wake_signal.h"

#include <errno.h>

static void on_wake_signal(int sig)
{
	(void)sig;
}

int wake_signal_install(void)
{
	struct sigaction sa = { .sa_handler = on_wake_signal };

	sigemptyset(&sa.sa_mask);
	if (sigaction(wake_signal(), &sa, NULL) < 0)
		return -errno;
	return 0;
}
