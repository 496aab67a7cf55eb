/* Signals handed to a spinning thread are each written once, never lost, and written before signal_handoff_forget returns. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/signal_handoff.h"
#include "../common/check.h"

/* What the eventfd counted since the last look (non-blocking). */
static uint64_t take_count(int efd)
{
	uint64_t v = 0;

	if (read(efd, &v, sizeof(v)) != (ssize_t)sizeof(v))
		return 0;
	return v;
}

static void test_single_thread(int efd)
{
	CHECK_MSG(!signal_handoff_post(efd), "nobody spins: a post is refused, the caller writes");
	CHECK(take_count(efd) == 0);
	CHECK_MSG(signal_handoff_open(), "the first spinner takes the role");
	CHECK_MSG(!signal_handoff_open(), "a second spinner does not");
	CHECK_MSG(!signal_handoff_post(-1), "no fd, nothing to hand over");
	CHECK_MSG(signal_handoff_post(efd), "a spinner takes a post");
	CHECK_MSG(!signal_handoff_post(efd), "a second post while the first waits is refused");
	CHECK_MSG(take_count(efd) == 0, "nothing is written before the spinner serves");
	signal_handoff_serve();
	CHECK_EQ(take_count(efd), 1);
	signal_handoff_serve();
	CHECK_MSG(take_count(efd) == 0, "a serve with nothing handed over writes nothing");
	CHECK(signal_handoff_post(efd));
	signal_handoff_close();
	CHECK_MSG(take_count(efd) == 1, "closing writes what was handed over");
	CHECK_MSG(!signal_handoff_post(efd), "after close a post is refused");
	signal_handoff_forget(efd);
	CHECK_MSG(signal_handoff_open(), "the role can be taken again");
	signal_handoff_close();
}

#define POSTS 200000

static atomic_bool stop_spinning;

/* Takes the role, serves a while, lets go, again: posts race every step. */
static void *spinner(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop_spinning)) {
		if (!signal_handoff_open())
			continue;
		for (unsigned i = 0; i < 64; i++)
			signal_handoff_serve();
		signal_handoff_close();
	}
	return NULL;
}

/* Every signal is written exactly once, whoever writes it, and all before
 * the forget that follows returns. */
static void test_two_threads(int efd)
{
	pthread_t t;
	uint64_t counted = 0, handed = 0;
	unsigned forget_short = 0;

	atomic_store(&stop_spinning, false);
	if (pthread_create(&t, NULL, spinner, NULL) != 0) {
		CHECK_MSG(0, "spinner thread");
		return;
	}
	for (unsigned i = 1; i <= POSTS; i++) {
		if (signal_handoff_post(efd))
			handed++;
		else
			CHECK(eventfd_write(efd, 1) == 0);
		if (i % 64 == 0) {
			signal_handoff_forget(efd);
			counted += take_count(efd);
			if (counted != i)
				forget_short++;
		}
	}
	atomic_store(&stop_spinning, true);
	pthread_join(t, NULL);
	CHECK_MSG(forget_short == 0, "after each forget the eventfd counted every signal so far (%u short)",
		  forget_short);
	CHECK_MSG(counted == POSTS, "%llu signals counted of %u", (unsigned long long)counted, POSTS);
	CHECK_MSG(handed > 0, "the spinner took %llu of them", (unsigned long long)handed);
}

int main(void)
{
	int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

	if (efd < 0) {
		perror("eventfd");
		return 1;
	}
	test_single_thread(efd);
	test_two_threads(efd);
	close(efd);
	return check_result();
}
