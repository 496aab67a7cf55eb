/* Eventfd signals a busy thread hands to a thread that spins idle, which writes them instead. */
#include "common/signal_handoff.h"

#include <sched.h>
#include <stdatomic.h>

#include "common/eventfd_signal.h"

/*
 * One word: NOBODY when no thread spins for it, IDLE while one does with
 * nothing handed over, else the fd to signal. Only a poster moves IDLE to
 * an fd, and only the spinner moves an fd back, after writing to it: so a
 * word that no longer holds fd means its signal is written.
 */
#define HANDOFF_NOBODY (-1)
#define HANDOFF_IDLE (-2)

static _Atomic int handoff_word = HANDOFF_NOBODY;

bool signal_handoff_open(void)
{
	int expect = HANDOFF_NOBODY;

	return atomic_compare_exchange_strong(&handoff_word, &expect, HANDOFF_IDLE);
}

void signal_handoff_serve(void)
{
	int fd = atomic_load_explicit(&handoff_word, memory_order_acquire);

	if (fd < 0)
		return;
	eventfd_signal(fd);
	atomic_store_explicit(&handoff_word, HANDOFF_IDLE, memory_order_release);
}

void signal_handoff_close(void)
{
	for (;;) {
		int expect = HANDOFF_IDLE;

		signal_handoff_serve();
		if (atomic_compare_exchange_strong(&handoff_word, &expect, HANDOFF_NOBODY))
			return;
	}
}

bool signal_handoff_post(int fd)
{
	int expect = HANDOFF_IDLE;

	/* A plain look first: with nobody spinning, no locked instruction
	 * on every call. */
	if (fd < 0 || atomic_load_explicit(&handoff_word, memory_order_relaxed) != HANDOFF_IDLE)
		return false;
	/* Release: what the caller published before (a used ring's index)
	 * is visible to the reader the spinner wakes. */
	return atomic_compare_exchange_strong_explicit(&handoff_word, &expect, fd,
						       memory_order_release,
						       memory_order_relaxed);
}

void signal_handoff_forget(int fd)
{
	if (fd < 0)
		return;
	while (atomic_load_explicit(&handoff_word, memory_order_acquire) == fd)
		sched_yield();
}
