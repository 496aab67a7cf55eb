/* vhost-user device state transfer: SET_DEVICE_STATE_FD and CHECK_DEVICE_STATE around the handler's save/load hooks. */
#include "transport/vhost_user_internal.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "transport/vhost_user_wire.h"

/*
 * QEMU reads the state from the pipe only after SET_DEVICE_STATE_FD is
 * answered, and a pipe holds 64 KiB: a hook run before the reply, on the
 * control thread, would block on a full pipe for ever. So the hook runs on
 * a thread of its own, started after the reply, and CHECK_DEVICE_STATE
 * joins it. Only the control thread touches dev->transfer; the hook's
 * thread writes result, reason and done, read after the join (or after
 * done, with acquire).
 */
struct vu_transfer {
	struct vu_dev *dev;
	pthread_t thread;
	bool started;                 /* thread was created: join it */
	bool done;                    /* atomic: the hook returned */
	int fd;                       /* the pipe; the thread closes it */
	uint32_t direction;
	int result;
	char reason[256];
};

static const char *direction_name(uint32_t direction)
{
	return direction == VU_TRANSFER_SAVE ? "save" : "load";
}

static void *transfer_thread(void *arg)
{
	struct vu_transfer *t = arg;
	const struct ferry_handler *h = t->dev->handler;
	void *opaque = t->dev->opaque;

	t->result = t->direction == VU_TRANSFER_SAVE ?
		h->save_state(opaque, t->fd, t->reason, sizeof(t->reason)) :
		h->load_state(opaque, t->fd, t->reason, sizeof(t->reason));
	/* QEMU reads to EOF (save) or waits for us to stop reading (load). */
	close_fd(&t->fd);
	__atomic_store_n(&t->done, true, __ATOMIC_RELEASE);
	return NULL;
}

static void transfer_free(struct vu_transfer *t)
{
	if (!t)
		return;
	if (t->started)
		pthread_join(t->thread, NULL);
	close_fd(&t->fd);
	free(t);
}

bool vu_transfer_running(const struct vu_dev *dev)
{
	return dev->transfer && dev->transfer->started &&
	       !__atomic_load_n(&dev->transfer->done, __ATOMIC_ACQUIRE);
}

int vu_transfer_begin(struct vu_dev *dev, uint32_t direction, uint32_t phase, int fd)
{
	struct vu_transfer *t;
	int ret = -EINVAL;

	if (!dev->handler->save_state || !dev->handler->load_state) {
		log_err("SET_DEVICE_STATE_FD: this handler cannot migrate its state");
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
	 * when reading the pipe fails) is over once its hook returned. */
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
	t = calloc(1, sizeof(*t));
	if (!t) {
		ret = -ENOMEM;
		goto err;
	}
	t->dev = dev;
	t->fd = fd;
	t->direction = direction;
	dev->transfer = t;
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

	if (!t || t->started)
		return;
	/* Every signal blocked, as on the queue threads: a write to a pipe
	 * whose reader is gone fails with EPIPE instead of killing us. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = pthread_create(&t->thread, NULL, transfer_thread, t);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret != 0) {
		/* CHECK_DEVICE_STATE reports it. */
		t->result = -ret;
		snprintf(t->reason, sizeof(t->reason), "cannot start a thread: %s", strerror(ret));
		close_fd(&t->fd);
		t->done = true;
		return;
	}
	t->started = true;
}

int vu_transfer_check(struct vu_dev *dev)
{
	struct vu_transfer *t = dev->transfer;
	int ret;

	if (!t) {
		log_err("CHECK_DEVICE_STATE without a transfer");
		return -ENOENT;
	}
	dev->transfer = NULL;
	if (t->started)
		pthread_join(t->thread, NULL);
	t->started = false;
	ret = t->result;
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
	/* A frontend that went away closed its end of the pipe: the hook
	 * gets EPIPE or EOF and returns (a load refuses the cut stream). */
	log_info("vhost-user: frontend gone during a device state %s",
		 direction_name(dev->transfer->direction));
	transfer_free(dev->transfer);
	dev->transfer = NULL;
}
