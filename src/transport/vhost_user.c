/* vhost-user-fs device: its life (new, serve, stop, free), device resets, queue statistics. */
#include "transport/vhost_user.h"

#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <linux/virtio_fs.h>

#include "common/log.h"
#include "transport/guest_mem.h"
#include "transport/vhost_user_internal.h"
#include "transport/vhost_user_msg.h"
#include "transport/vhost_user_wire.h"

/* The vring index travels in 8 bits. */
#define VU_MAX_QUEUES 256

/* LOG_SHMFD: dirty logging, which QEMU needs before it migrates at all.
 * CONFIG is added per device, only when it has a tag: QEMU's
 * vhost-user-fs-pci has its own tag and warns about a backend offering
 * config space. DEVICE_STATE only when the service can save and load. */
static const uint64_t base_protocol_features =
	BIT(VU_PROTO_F_MQ) | BIT(VU_PROTO_F_LOG_SHMFD) | BIT(VU_PROTO_F_REPLY_ACK) |
	BIT(VU_PROTO_F_BACKEND_REQ) | BIT(VU_PROTO_F_CONFIGURE_MEM_SLOTS);

/*
 * Tells the user that the driver which used the queues is gone, once per
 * driver. Queue threads the new driver already started are stopped around
 * the call, so the user never sees a request during it.
 */
void vu_dev_driver_gone(struct vu_dev *dev, const char *why)
{
	if (!dev->driver_active)
		return;
	for (unsigned i = 0; i < dev->nqueues; i++) {
		struct vu_queue *q = &dev->queues[i];

		q->restart_after_reset = q->thread_running;
		vu_queue_stop_thread(q);
		/* Positions the old driver left say nothing about the new one. */
		q->stop_pos_valid = false;
	}
	dev->driver_active = false;
	log_info("vhost-user: device reset (%s)", why);
	if (dev->service->reset)
		dev->service->reset(dev->opaque);
	for (unsigned i = 0; i < dev->nqueues; i++) {
		struct vu_queue *q = &dev->queues[i];

		if (q->restart_after_reset)
			vu_queue_maybe_start(q);
		q->restart_after_reset = false;
	}
}

/* Back to the state of a fresh connection: threads stopped, fds closed,
 * memory unmapped. */
static void dev_reset(struct vu_dev *dev)
{
	for (unsigned i = 0; i < dev->nqueues; i++) {
		struct vu_queue *q = &dev->queues[i];

		vu_queue_stop_thread(q);
		close_fd(&q->kick_fd);
		close_call_fd(&q->call_fd);
		close_fd(&q->err_fd);
		q->enabled = false;
		q->err_signalled = false;
		q->num = 0;
		q->addr_set = false;
		q->stop_pos_valid = false;
		virtq_init(&q->vq, i);
		virtq_set_mem(&q->vq, dev->mem);
	}
	/* Before the reset: a hook must not run into service->reset. */
	vu_transfer_abort(dev);
	vu_dev_driver_gone(dev, "frontend disconnected");
	guest_mem_clear(dev->mem);
	dirty_log_free(dev->log);
	dev->log = NULL;
	close_fd(&dev->log_call_fd);
	close_fd(&dev->backend_req_fd);
	dev->features = 0;
	dev->protocol_features = 0;
}

int vu_dev_new(struct vu_dev **out, const struct vu_fs_config *config,
	       const struct ferry_service *service, void *opaque)
{
	struct vu_dev *dev;
	unsigned max_request_queues;
	size_t tag_len;
	unsigned i = 0;
	int ret;

	if (!config || !ferry_service_valid(service))
		return -EINVAL;
	/* No tag is fine: QEMU's vhost-user-fs-pci has its own tag property
	 * and does not read ours. */
	tag_len = config->tag ? strlen(config->tag) : 0;
	max_request_queues = config->max_request_queues ?
		config->max_request_queues : config->num_request_queues;
	if (tag_len > sizeof(dev->config_space.tag) ||
	    config->num_request_queues == 0 ||
	    max_request_queues < config->num_request_queues ||
	    max_request_queues >= VU_MAX_QUEUES)
		return -EINVAL;

	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return -ENOMEM;
	dev->service = service;
	dev->opaque = opaque;
	dev->conn_fd = -1;
	dev->backend_req_fd = -1;
	dev->log_call_fd = -1;
	if (tag_len)
		memcpy(dev->config_space.tag, config->tag, tag_len);
	dev->config_space.num_request_queues = htole32(config->num_request_queues);
	dev->nqueues = 1 + max_request_queues;
	dev->offered_protocol_features = base_protocol_features |
		(tag_len ? BIT(VU_PROTO_F_CONFIG) : 0) |
		(service->save_state && service->load_state ? BIT(VU_PROTO_F_DEVICE_STATE) : 0);
	dev->poll_max_ns = (uint64_t)config->poll_max_us * 1000u;
	dev->poll_slots = (int)wait_pacing_worker_cpus();
	if (config->queue_cpus)
		dev->queue_cpus = *config->queue_cpus;

	dev->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (dev->stop_fd < 0) {
		ret = -errno;
		goto err_dev;
	}
	ret = guest_mem_new(&dev->mem);
	if (ret < 0)
		goto err_stop_fd;
	dev->queues = calloc(dev->nqueues, sizeof(dev->queues[0]));
	if (!dev->queues) {
		ret = -ENOMEM;
		goto err_mem;
	}
	for (i = 0; i < dev->nqueues; i++) {
		struct vu_queue *q = &dev->queues[i];

		q->dev = dev;
		q->index = i;
		q->kick_fd = q->call_fd = q->err_fd = -1;
		virtq_init(&q->vq, i);
		virtq_set_mem(&q->vq, dev->mem);
		q->ctl_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (q->ctl_fd < 0) {
			ret = -errno;
			goto err_queues;
		}
		pthread_mutex_init(&q->lock, NULL);
		pthread_mutex_init(&q->done_lock, NULL);
	}
	ret = vu_workers_new(dev);
	if (ret < 0)
		goto err_queues;
	*out = dev;
	return 0;

err_queues:
	while (i-- > 0) {
		pthread_mutex_destroy(&dev->queues[i].lock);
		pthread_mutex_destroy(&dev->queues[i].done_lock);
		close(dev->queues[i].ctl_fd);
	}
	free(dev->queues);
err_mem:
	guest_mem_free(dev->mem);
err_stop_fd:
	close(dev->stop_fd);
err_dev:
	free(dev);
	return ret;
}

unsigned vu_dev_stats_snapshot(const struct vu_dev *dev, struct vu_queue_stats *out,
			       unsigned max)
{
	for (unsigned i = 0; i < dev->nqueues && i < max; i++) {
		const struct vu_queue *q = &dev->queues[i];

		memset(&out[i], 0, sizeof(out[i]));
		out[i].index = q->index;
		out[i].requests = ferry_count_read(&q->st.requests);
		out[i].batches = ferry_count_read(&q->st.batches);
		out[i].poll_hits = ferry_count_read(&q->st.poll_hits);
		out[i].sleeps = ferry_count_read(&q->st.sleeps);
		out[i].shared_cpu_waits = ferry_count_read(&q->st.shared_cpu_waits);
		out[i].calls = ferry_count_read(&q->st.calls);
		ferry_hist_accumulate(&out[i].batch_size, &q->st.batch_size);
		ferry_hist_accumulate(&out[i].depth, &q->st.depth);
	}
	return dev->nqueues;
}

int vu_dev_serve(struct vu_dev *dev, int conn_fd)
{
	struct vu_msg *m;
	int ret = 0;

	/* The message buffer is 4 KiB plus; keep it off the stack. */
	m = malloc(sizeof(*m));
	if (!m) {
		close(conn_fd);
		return -ENOMEM;
	}
	dev->conn_fd = conn_fd;
	for (;;) {
		struct pollfd pfd[2] = {
			{ .fd = conn_fd, .events = POLLIN },
			{ .fd = dev->stop_fd, .events = POLLIN },
		};

		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			log_err("vhost-user: poll: %s", strerror(errno));
			break;
		}
		if (pfd[1].revents & POLLIN) {
			log_info("vhost-user: stop requested");
			break;
		}
		if (!pfd[0].revents)
			continue;
		ret = vu_msg_recv(conn_fd, m);
		/* EOF inside a message is still the frontend going away
		 * (killed mid-write), not a protocol error. */
		if (ret == -ECONNRESET)
			ret = 0;
		if (ret == 0) {
			log_info("vhost-user: frontend disconnected");
			break;
		}
		if (ret < 0) {
			log_err("vhost-user: receive failed: %s", strerror(-ret));
			break;
		}
		ret = vu_dispatch(dev, m);
		if (ret < 0) {
			log_err("vhost-user: dropping the connection after %s failed: %s",
				vu_request_name(m->hdr.request), strerror(-ret));
			break;
		}
	}
	dev_reset(dev);
	close(conn_fd);
	dev->conn_fd = -1;
	free(m);
	return ret;
}

void vu_dev_stop(struct vu_dev *dev)
{
	/* write() on an eventfd is async-signal-safe; nothing else here. */
	eventfd_signal(dev->stop_fd);
}

void vu_dev_free(struct vu_dev *dev)
{
	if (!dev)
		return;
	dev_reset(dev);
	vu_workers_free(dev);
	for (unsigned i = 0; i < dev->nqueues; i++) {
		pthread_mutex_destroy(&dev->queues[i].lock);
		pthread_mutex_destroy(&dev->queues[i].done_lock);
		close(dev->queues[i].ctl_fd);
	}
	free(dev->queues);
	guest_mem_free(dev->mem);
	close(dev->stop_fd);
	free(dev);
}
