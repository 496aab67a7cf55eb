/* vhost-user device state transfer: SET_DEVICE_STATE_FD and CHECK_DEVICE_STATE around the service's save/load hooks. */
#include "transport/vhost_user_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include "common/log.h"
#include "transport/vhost_user_wire.h"

/*
 * QEMU reads the state from the pipe only after SET_DEVICE_STATE_FD is
 * answered, and a pipe holds 64 KiB: a hook run before the reply, on the
 * control thread, would block on a full pipe for ever. So the hook runs on
 * a thread of its own, started after the reply, and CHECK_DEVICE_STATE
 * waits for it.
 *
 * The hook does not get the frontend's pipe but one end of a socketpair;
 * a relay thread copies between the other end and the pipe. A blocked
 * read or write on a pipe cannot be interrupted from outside, so a
 * frontend that went away but kept its end of the pipe open (or never
 * reads it) would hold the hook, and the device's reset waiting for it,
 * for ever. The relay instead stops at a word (cancel_fd) and shuts its
 * end of the socketpair down, which ends the hook's read (EOF) or write
 * (EPIPE) at once. Only the control thread touches dev->transfer; the
 * threads write their results before they end, read after the join.
 */
struct vu_transfer {
	struct vu_dev *dev;
	uint32_t direction;
	int frontend_fd;              /* the pipe, non-blocking: the relay's */
	int hook_fd;                  /* the hook's end; its thread closes it */
	int relay_fd;                 /* the relay's end, non-blocking */
	int cancel_fd;                /* eventfd: the relay stops, and so the hook */
	int done_fd;                  /* eventfd: a thread ended */
	pthread_t hook_thread, relay_thread;
	bool hook_started, relay_started;
	unsigned running;             /* atomic: threads not ended yet */
	int result;                   /* the hook's */
	int relay_result;
	char reason[256];
};

static const char *direction_name(uint32_t direction)
{
	return direction == VU_TRANSFER_SAVE ? "save" : "load";
}

static void thread_ended(struct vu_transfer *t)
{
	__atomic_sub_fetch(&t->running, 1, __ATOMIC_RELEASE);
	eventfd_signal(t->done_fd);
}

static void *hook_thread(void *arg)
{
	struct vu_transfer *t = arg;
	const struct ferry_service *h = t->dev->service;
	void *opaque = t->dev->opaque;

	t->result = t->direction == VU_TRANSFER_SAVE ?
		h->save_state(opaque, t->hook_fd, t->reason, sizeof(t->reason)) :
		h->load_state(opaque, t->hook_fd, t->reason, sizeof(t->reason));
	/* A save's end of stream; a load that stopped early stops the relay. */
	close_fd(&t->hook_fd);
	thread_ended(t);
	return NULL;
}

/* Copies src to dst (both non-blocking) until EOF on src: 0, -ECANCELED
 * when told to stop, or -errno. */
static int relay(struct vu_transfer *t, int src, int dst)
{
	uint8_t buf[65536];
	size_t have = 0, off = 0;

	for (;;) {
		struct pollfd p[2] = {
			{ .fd = t->cancel_fd, .events = POLLIN },
			{ .fd = have ? dst : src, .events = have ? POLLOUT : POLLIN },
		};
		ssize_t n;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (p[0].revents)
			return -ECANCELED;
		n = have ? write(dst, buf + off, have) : read(src, buf, sizeof(buf));
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n < 0)
			return -errno;
		if (have) {
			off += (size_t)n;
			have -= (size_t)n;
		} else if (n == 0) {
			return 0;
		} else {
			have = (size_t)n;
			off = 0;
		}
	}
}

static void *relay_thread(void *arg)
{
	struct vu_transfer *t = arg;

	t->relay_result = t->direction == VU_TRANSFER_SAVE ?
		relay(t, t->relay_fd, t->frontend_fd) : relay(t, t->frontend_fd, t->relay_fd);
	/* The hook reads what is queued, then EOF; or its write fails. */
	shutdown(t->relay_fd, SHUT_RDWR);
	/* QEMU reads to EOF (save), or learns that nobody reads (load). */
	close_fd(&t->frontend_fd);
	thread_ended(t);
	return NULL;
}

/* Stops the relay, waits for both threads and frees everything. */
static void transfer_free(struct vu_transfer *t)
{
	if (!t)
		return;
	eventfd_signal(t->cancel_fd);
	if (t->relay_started)
		pthread_join(t->relay_thread, NULL);
	if (t->hook_started)
		pthread_join(t->hook_thread, NULL);
	close_fd(&t->frontend_fd);
	close_fd(&t->hook_fd);
	close_fd(&t->relay_fd);
	close_fd(&t->cancel_fd);
	close_fd(&t->done_fd);
	free(t);
}

bool vu_transfer_running(const struct vu_dev *dev)
{
	return dev->transfer && __atomic_load_n(&dev->transfer->running, __ATOMIC_ACQUIRE) > 0;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

/* The transfer's socketpair and eventfds around fd (taken over). */
static int transfer_new(struct vu_transfer **out, struct vu_dev *dev, uint32_t direction,
			int fd)
{
	struct vu_transfer *t = calloc(1, sizeof(*t));
	int sv[2], ret;

	if (!t) {
		close_fd(&fd);
		return -ENOMEM;
	}
	t->dev = dev;
	t->direction = direction;
	t->frontend_fd = fd;
	t->hook_fd = t->relay_fd = -1;
	t->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	t->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (t->cancel_fd < 0 || t->done_fd < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		ret = -errno;
		goto err;
	}
	t->hook_fd = sv[0];
	t->relay_fd = sv[1];
	ret = set_nonblock(t->frontend_fd);
	if (ret == 0)
		ret = set_nonblock(t->relay_fd);
	if (ret < 0)
		goto err;
	*out = t;
	return 0;

err:
	transfer_free(t);
	return ret;
}

int vu_transfer_begin(struct vu_dev *dev, uint32_t direction, uint32_t phase, int fd)
{
	int ret = -EINVAL;

	if (!dev->service->save_state || !dev->service->load_state) {
		log_err("SET_DEVICE_STATE_FD: this service cannot migrate its state");
		ret = -ENOTSUP;
		goto err;
	}
	if (direction != VU_TRANSFER_SAVE && direction != VU_TRANSFER_LOAD) {
		log_err("SET_DEVICE_STATE_FD: unknown direction %u", direction);
		goto err;
	}
	if (phase != VU_TRANSFER_PHASE_STOPPED) {
		log_err("SET_DEVICE_STATE_FD: unknown phase %u", phase);
		goto err;
	}
	if (fd < 0) {
		log_err("SET_DEVICE_STATE_FD without an fd");
		goto err;
	}
	/* A transfer QEMU gave up on without CHECK_DEVICE_STATE (it does so
	 * when reading the pipe fails) is over once its threads ended. */
	if (dev->transfer) {
		if (vu_transfer_running(dev)) {
			log_err("SET_DEVICE_STATE_FD: a %s is still running",
				direction_name(dev->transfer->direction));
			ret = -EBUSY;
			goto err;
		}
		transfer_free(dev->transfer);
		dev->transfer = NULL;
	}
	/* The hooks' contract: no worker runs, nothing is in flight. A
	 * stopped ring finished all it took (GET_VRING_BASE drains). */
	for (unsigned i = 0; i < dev->nqueues; i++) {
		if (dev->queues[i].thread_running) {
			log_err("SET_DEVICE_STATE_FD (%s): queue %u still runs; stop every ring first",
				direction_name(direction), i);
			ret = -EBUSY;
			goto err;
		}
	}
	ret = transfer_new(&dev->transfer, dev, direction, fd);
	if (ret < 0)
		return ret;
	log_info("vhost-user: device state %s begins", direction_name(direction));
	return 0;

err:
	close_fd(&fd);
	return ret;
}

void vu_transfer_start(struct vu_dev *dev)
{
	struct vu_transfer *t = dev->transfer;
	sigset_t all, old;
	int ret;

	if (!t || t->relay_started)
		return;
	/* Every signal blocked, as on the queue threads: a write to a pipe or
	 * socket whose reader is gone fails with EPIPE instead of killing us. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	__atomic_store_n(&t->running, 2, __ATOMIC_RELAXED);
	ret = pthread_create(&t->relay_thread, NULL, relay_thread, t);
	if (ret == 0) {
		t->relay_started = true;
		ret = pthread_create(&t->hook_thread, NULL, hook_thread, t);
		if (ret == 0)
			t->hook_started = true;
		else
			eventfd_signal(t->cancel_fd);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret != 0) {
		/* CHECK_DEVICE_STATE reports it. */
		t->result = -ret;
		snprintf(t->reason, sizeof(t->reason), "cannot start a thread: %s", strerror(ret));
		__atomic_sub_fetch(&t->running, t->relay_started ? 1 : 2, __ATOMIC_RELEASE);
	}
}

/* Waits for the transfer's threads; a frontend that hangs up or a device
 * stop meanwhile cancels it (the wait then ends at once). */
static void transfer_wait(struct vu_dev *dev, struct vu_transfer *t)
{
	bool cancelled = false;

	while (__atomic_load_n(&t->running, __ATOMIC_ACQUIRE) > 0) {
		struct pollfd p[3] = {
			{ .fd = t->done_fd, .events = POLLIN },
			{ .fd = cancelled ? -1 : dev->conn_fd, .events = POLLRDHUP },
			{ .fd = cancelled ? -1 : dev->stop_fd, .events = POLLIN },
		};

		if (poll(p, 3, -1) < 0 && errno != EINTR)
			break;
		if (p[0].revents & POLLIN)
			eventfd_drain(t->done_fd);
		if (p[1].revents || p[2].revents) {
			log_warn("vhost-user: frontend gone or device stopping during a device state %s",
				 direction_name(t->direction));
			eventfd_signal(t->cancel_fd);
			cancelled = true;
		}
	}
}

int vu_transfer_check(struct vu_dev *dev)
{
	struct vu_transfer *t = dev->transfer;
	int ret;

	if (!t) {
		log_err("CHECK_DEVICE_STATE without a transfer");
		return -ENOENT;
	}
	transfer_wait(dev, t);
	dev->transfer = NULL;
	ret = t->result;
	/* A hook that succeeded into a pipe nobody read to the end (save),
	 * or a stream that broke off (load), still failed. */
	if (ret >= 0 && t->relay_result < 0) {
		ret = t->relay_result;
		snprintf(t->reason, sizeof(t->reason), "relay to the frontend's pipe: %s",
			 strerror(-ret));
	}
	if (ret < 0) {
		log_err("vhost-user: device state %s failed: %s (%s)", direction_name(t->direction),
			t->reason[0] ? t->reason : "no reason given", strerror(-ret));
	} else {
		log_info("vhost-user: device state %s done", direction_name(t->direction));
		/* The loaded session belongs to the driver that migrated here:
		 * no INIT follows, and the ring start must not reset it; the
		 * driver's end (a reboot, a disconnect) must. */
		if (t->direction == VU_TRANSFER_LOAD)
			dev->driver_active = true;
	}
	transfer_free(t);
	/* Rings set up while the hook ran were held back. */
	for (unsigned i = 0; i < dev->nqueues; i++)
		vu_queue_maybe_start(&dev->queues[i]);
	return ret < 0 ? ret : 0;
}

void vu_transfer_abort(struct vu_dev *dev)
{
	if (!dev->transfer)
		return;
	if (vu_transfer_running(dev))
		log_info("vhost-user: frontend gone during a device state %s; cancelled",
			 direction_name(dev->transfer->direction));
	transfer_free(dev->transfer);
	dev->transfer = NULL;
}
