/* Run-time statistics: the table/JSON report, the --stats-socket server thread and the --stats client. */
#include "daemon/stats.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "backend/passthrough.h"
#include "common/fd_io.h"
#include "common/log.h"
#include "common/unix_socket.h"
#include "daemon/deadline.h"
#include "protocol/fuse_server.h"
#include "transport/devfuse.h"
#include "transport/vhost_user.h"

/* hiprio plus request queues; more than ferryfsd ever creates. */
#define STATS_MAX_QUEUES 64
/* A client that connects and says nothing is dropped after this. */
#define STATS_REQUEST_TIMEOUT_MS 2000

/* What one report needs, gathered once so table and JSON agree. */
struct stats_snapshot {
	struct fuse_stats fuse;
	unsigned nqueues;
	struct vu_queue_stats queues[STATS_MAX_QUEUES];
	unsigned nthreads;           /* queue threads, hiprio's first */
	struct vu_thread_placement threads[STATS_MAX_QUEUES];
	bool has_devfuse;
	struct devfuse_stats devfuse;
	bool has_deadline;
	struct deadline_counts deadline;
	uint64_t requests, errors;   /* over all opcodes */
	bool has_quota;
	struct quota_usage quota;
};

/* The opcode slot i if it has anything to report, with its name. */
static const struct fuse_op_stats *snapshot_op(const struct stats_snapshot *s, unsigned i,
					       const char **name)
{
	*name = fuse_stats_slot_name(i);
	return s->fuse.op[i].count && *name ? &s->fuse.op[i] : NULL;
}

static int snapshot_take(const struct stats_sources *src, struct stats_snapshot **out)
{
	struct stats_snapshot *snap = calloc(1, sizeof(*snap));

	if (!snap)
		return -ENOMEM;
	fuse_server_stats(src->session, &snap->fuse);
	for (unsigned i = 0; i < FUSE_STATS_SLOTS; i++) {
		snap->requests += snap->fuse.op[i].count;
		snap->errors += snap->fuse.op[i].errors;
	}
	if (src->vu_dev) {
		snap->nqueues = vu_dev_stats_snapshot(src->vu_dev, snap->queues, STATS_MAX_QUEUES);
		if (snap->nqueues > STATS_MAX_QUEUES)
			snap->nqueues = STATS_MAX_QUEUES;
		snap->nthreads = vu_dev_placement_snapshot(src->vu_dev, snap->threads,
							   STATS_MAX_QUEUES);
		if (snap->nthreads > STATS_MAX_QUEUES)
			snap->nthreads = STATS_MAX_QUEUES;
	}
	snap->has_quota = passthrough_quota_usage(src->backend, &snap->quota);
	if (src->devfuse) {
		snap->has_devfuse = true;
		devfuse_stats_snapshot(src->devfuse, &snap->devfuse);
	}
	if (src->deadline) {
		snap->has_deadline = true;
		deadline_get_counts(src->deadline, &snap->deadline);
	}
	*out = snap;
	return 0;
}

/* The quota's figures in the order of their JSON names. */
#define QUOTA_FIGURES 6
static const char *const quota_figure_names[QUOTA_FIGURES] = {
	"limit_bytes", "used_bytes", "limit_inodes", "used_inodes", "scans", "refused",
};

static void quota_figures(const struct quota_usage *u, unsigned long long v[QUOTA_FIGURES])
{
	v[0] = u->limit_bytes;
	v[1] = u->used_bytes;
	v[2] = u->limit_inodes;
	v[3] = u->used_inodes;
	v[4] = u->scans;
	v[5] = u->refused;
}

static void json_hist(FILE *out, const struct ferry_hist *h)
{
	bool first = true;

	/* Only non-empty buckets, as [floor, count] pairs. */
	fputc('[', out);
	for (unsigned b = 0; b < FERRY_HIST_BUCKETS; b++) {
		if (!h->bucket[b])
			continue;
		fprintf(out, "%s[%llu,%llu]", first ? "" : ",",
			(unsigned long long)ferry_hist_bucket_floor(b),
			(unsigned long long)h->bucket[b]);
		first = false;
	}
	fputc(']', out);
}

static void report_json(const struct stats_snapshot *s, FILE *out)
{
	bool first = true;

	fputs("{\"ops\":[", out);
	for (unsigned i = 0; i < FUSE_STATS_SLOTS; i++) {
		const char *name;
		const struct fuse_op_stats *op = snapshot_op(s, i, &name);

		if (!op)
			continue;
		fprintf(out, "%s{\"op\":\"%s\",\"opcode\":%u,\"count\":%llu,\"errors\":%llu,"
			"\"latency_us\":{\"p50\":%llu,\"p99\":%llu,\"buckets\":",
			first ? "" : ",", name, i, (unsigned long long)op->count,
			(unsigned long long)op->errors,
			(unsigned long long)ferry_hist_quantile_floor(&op->latency_us, 0.5),
			(unsigned long long)ferry_hist_quantile_floor(&op->latency_us, 0.99));
		json_hist(out, &op->latency_us);
		fputs("}}", out);
		first = false;
	}
	fprintf(out, "],\"requests\":%llu,\"errors\":%llu,\"write_runs\":%llu,\"run_writes\":%llu",
		(unsigned long long)s->requests, (unsigned long long)s->errors,
		(unsigned long long)s->fuse.write_runs, (unsigned long long)s->fuse.run_writes);
	if (s->nqueues) {
		bool first_q = true;

		/* Only queues that served: the device offers many more than a
		 * frontend usually starts. */
		fprintf(out, ",\"transport\":\"vhost-user\",\"queue_count\":%u,\"queues\":[",
			s->nqueues);
		for (unsigned i = 0; i < s->nqueues; i++) {
			const struct vu_queue_stats *q = &s->queues[i];

			if (!q->requests)
				continue;
			fprintf(out, "%s{\"index\":%u,\"requests\":%llu,\"batches\":%llu,"
				"\"poll_hits\":%llu,\"sleeps\":%llu,\"shared_cpu_waits\":%llu,"
				"\"calls\":%llu,\"batch_size\":",
				first_q ? "" : ",", q->index,
				(unsigned long long)q->requests, (unsigned long long)q->batches,
				(unsigned long long)q->poll_hits, (unsigned long long)q->sleeps,
				(unsigned long long)q->shared_cpu_waits, (unsigned long long)q->calls);
			json_hist(out, &q->batch_size);
			fputs(",\"depth\":", out);
			json_hist(out, &q->depth);
			fputc('}', out);
			first_q = false;
		}
		fputc(']', out);
		/* "cpus": null when not pinned (no --queue-cpus). */
		fputs(",\"threads\":[", out);
		for (unsigned i = 0; i < s->nthreads; i++) {
			const struct vu_thread_placement *t = &s->threads[i];

			fprintf(out, "%s{\"worker\":%u,\"thread_id\":%d,\"cpus\":", i ? "," : "",
				t->worker, t->thread_id);
			if (t->pinned)
				fprintf(out, "\"%s\"", t->cpus);
			else
				fputs("null", out);
			fputs(",\"queues\":[", out);
			for (unsigned k = 0; k < t->nqueues; k++)
				fprintf(out, "%s%u", k ? "," : "", t->queue[k]);
			fputs("]}", out);
		}
		fputc(']', out);
	}
	if (s->has_devfuse) {
		fprintf(out, ",\"transport\":\"devfuse\",\"devfuse\":{\"threads\":%u,"
			"\"requests\":%llu,\"replies_lost\":%llu,\"in_flight\":",
			s->devfuse.threads, (unsigned long long)s->devfuse.requests,
			(unsigned long long)s->devfuse.replies_lost);
		json_hist(out, &s->devfuse.in_flight);
		fputc('}', out);
	}
	/* A limit of 0: that quantity has none. */
	if (s->has_quota) {
		unsigned long long v[QUOTA_FIGURES];

		quota_figures(&s->quota, v);
		fputs(",\"quota\":{", out);
		for (unsigned i = 0; i < QUOTA_FIGURES; i++)
			fprintf(out, "%s\"%s\":%llu", i ? "," : "", quota_figure_names[i], v[i]);
		fputc('}', out);
	}
	/* null without --request-timeout. */
	if (s->has_deadline)
		fprintf(out, ",\"request_timeout\":{\"seconds\":%g,\"stuck\":%u,\"stuck_max\":%u,"
			"\"timed_out\":%llu,\"refused\":%llu,\"returned_late\":%llu}",
			s->deadline.seconds, s->deadline.stuck, s->deadline.stuck_max,
			(unsigned long long)s->deadline.timed_out,
			(unsigned long long)s->deadline.refused,
			(unsigned long long)s->deadline.returned_late);
	else
		fputs(",\"request_timeout\":null", out);
	fputs("}\n", out);
}

static void report_table(const struct stats_snapshot *s, FILE *out)
{
	unsigned idle = 0;

	/* Latencies are log2 bucket floors: "16" means 16 to 31 us. */
	fprintf(out, "%-16s %12s %10s %9s %9s %9s\n", "op", "count", "errors",
		"p50 us", "p99 us", "max us");
	for (unsigned i = 0; i < FUSE_STATS_SLOTS; i++) {
		const char *name;
		const struct fuse_op_stats *op = snapshot_op(s, i, &name);

		if (!op)
			continue;
		fprintf(out, "%-16s %12llu %10llu %9llu %9llu %9llu\n", name,
			(unsigned long long)op->count, (unsigned long long)op->errors,
			(unsigned long long)ferry_hist_quantile_floor(&op->latency_us, 0.5),
			(unsigned long long)ferry_hist_quantile_floor(&op->latency_us, 0.99),
			(unsigned long long)ferry_hist_quantile_floor(&op->latency_us, 1.0));
	}
	fprintf(out, "%-16s %12llu %10llu\n", "total", (unsigned long long)s->requests,
		(unsigned long long)s->errors);
	if (s->fuse.write_runs)
		fprintf(out, "write runs: %llu system calls wrote %llu adjacent WRITEs\n",
			(unsigned long long)s->fuse.write_runs,
			(unsigned long long)s->fuse.run_writes);
	for (unsigned i = 0; i < s->nqueues; i++) {
		const struct vu_queue_stats *q = &s->queues[i];

		if (!q->requests) {
			idle++;
			continue;
		}
		fprintf(out, "queue %u: %llu requests in %llu batches; batch size p50 %llu "
			"max %llu; depth p50 %llu max %llu; waits %llu polled, %llu slept, "
			"%llu on a shared CPU; %llu calls\n",
			q->index,
			(unsigned long long)q->requests, (unsigned long long)q->batches,
			(unsigned long long)ferry_hist_quantile_floor(&q->batch_size, 0.5),
			(unsigned long long)ferry_hist_quantile_floor(&q->batch_size, 1.0),
			(unsigned long long)ferry_hist_quantile_floor(&q->depth, 0.5),
			(unsigned long long)ferry_hist_quantile_floor(&q->depth, 1.0),
			(unsigned long long)q->poll_hits, (unsigned long long)q->sleeps,
			(unsigned long long)q->shared_cpu_waits, (unsigned long long)q->calls);
	}
	if (idle)
		fprintf(out, "%u other queue(s) idle\n", idle);
	for (unsigned i = 0; i < s->nthreads; i++) {
		const struct vu_thread_placement *t = &s->threads[i];

		if (!t->thread_id)
			continue;
		fprintf(out, "queue thread %u: thread %d on CPU %s; queues", t->worker,
			t->thread_id, t->pinned ? t->cpus : "any (not pinned)");
		for (unsigned k = 0; k < t->nqueues; k++)
			fprintf(out, "%s%u", k ? "," : " ", t->queue[k]);
		fputs(t->nqueues ? "\n" : " none now\n", out);
	}
	if (s->has_devfuse)
		fprintf(out, "devfuse: %u threads, %llu requests, %llu replies lost; "
			"in flight p50 %llu max %llu\n", s->devfuse.threads,
			(unsigned long long)s->devfuse.requests,
			(unsigned long long)s->devfuse.replies_lost,
			(unsigned long long)ferry_hist_quantile_floor(&s->devfuse.in_flight, 0.5),
			(unsigned long long)ferry_hist_quantile_floor(&s->devfuse.in_flight, 1.0));
	if (s->has_quota) {
		unsigned long long v[QUOTA_FIGURES];

		quota_figures(&s->quota, v);
		fprintf(out, "quota: %llu of %llu bytes, %llu of %llu inodes used (limit 0: "
			"none); %llu changes refused; tree measured %llu times\n",
			v[1], v[0], v[3], v[2], v[5], v[4]);
	}
	if (s->has_deadline)
		fprintf(out, "request timeout %g s: %llu timed out, %u host call(s) stuck now "
			"(at most %u), %llu refused at the cap, %llu returned late\n",
			s->deadline.seconds, (unsigned long long)s->deadline.timed_out,
			s->deadline.stuck, s->deadline.stuck_max,
			(unsigned long long)s->deadline.refused,
			(unsigned long long)s->deadline.returned_late);
}

int stats_report(const struct stats_sources *src, bool json, FILE *out)
{
	struct stats_snapshot *snap;
	int ret = snapshot_take(src, &snap);

	if (ret)
		return ret;
	if (json)
		report_json(snap, out);
	else
		report_table(snap, out);
	free(snap);
	return ferror(out) ? -EIO : 0;
}

void stats_log_table(const struct stats_sources *src)
{
	char *text = NULL, *save = NULL;
	size_t len = 0;
	FILE *mem;

	if (ferry_log_level < LOG_LVL_INFO)
		return;
	mem = open_memstream(&text, &len);
	if (!mem)
		return;
	if (stats_report(src, false, mem) == 0 && fflush(mem) == 0) {
		log_info("statistics:");
		for (char *line = strtok_r(text, "\n", &save); line;
		     line = strtok_r(NULL, "\n", &save))
			log_info("  %s", line);
	}
	fclose(mem);
	free(text);
}

/* ------------------------------------------------------------ server */

struct stats_server {
	struct stats_sources src;
	char *path;
	int listen_fd;
	int stop_fd;
	pthread_t thread;
};

/* One query: read the request line, answer, close. */
static void serve_client(struct stats_server *srv, int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char request[16] = "";
	char *text = NULL;
	size_t len = 0, got = 0;
	FILE *mem;
	bool json;

	while (got < sizeof(request) - 1 && !memchr(request, '\n', got)) {
		ssize_t n;

		if (poll(&pfd, 1, STATS_REQUEST_TIMEOUT_MS) <= 0)
			goto out;
		n = read(fd, request + got, sizeof(request) - 1 - got);
		if (n <= 0)
			goto out;
		got += (size_t)n;
	}
	request[got] = '\0';
	if (!strcmp(request, "json\n")) {
		json = true;
	} else if (!strcmp(request, "table\n")) {
		json = false;
	} else {
		static const char bad[] = "error: send \"table\\n\" or \"json\\n\"\n";

		ferry_write_all(fd, bad, sizeof(bad) - 1, true);
		goto out;
	}
	mem = open_memstream(&text, &len);
	if (!mem)
		goto out;
	if (stats_report(&srv->src, json, mem) == 0 && fflush(mem) == 0)
		ferry_write_all(fd, text, len, true);
	fclose(mem);
	free(text);
out:
	close(fd);
}

static void *server_thread(void *arg)
{
	struct stats_server *srv = arg;

	for (;;) {
		struct pollfd pfd[2] = {
			{ .fd = srv->listen_fd, .events = POLLIN },
			{ .fd = srv->stop_fd, .events = POLLIN },
		};
		int fd;

		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_err("stats socket: poll: %s", strerror(errno));
			break;
		}
		if (pfd[1].revents)
			break;
		if (!(pfd[0].revents & POLLIN))
			continue;
		if (ferry_unix_accept(srv->listen_fd, &fd) < 0)
			continue;
		serve_client(srv, fd);
	}
	return NULL;
}

int stats_listen(const char *path, int *listen_fd)
{
	/* The same listener the vhost-user socket uses: stale socket
	 * removed, mode 0600 fixed before listen(). */
	return ferry_unix_listen(path, NULL, listen_fd);
}

int stats_server_start(struct stats_server **out, int listen_fd, const char *path,
		       const struct stats_sources *src)
{
	struct stats_server *srv = calloc(1, sizeof(*srv));
	int ret;

	if (!srv) {
		ret = -ENOMEM;
		goto err_fd;
	}
	srv->src = *src;
	srv->listen_fd = listen_fd;
	srv->stop_fd = -1;
	if (path) {
		srv->path = strdup(path);
		if (!srv->path) {
			ret = -ENOMEM;
			goto err;
		}
	}
	srv->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (srv->stop_fd < 0) {
		ret = -errno;
		goto err;
	}
	ret = -pthread_create(&srv->thread, NULL, server_thread, srv);
	if (ret)
		goto err;
	*out = srv;
	return 0;

err:
	if (srv->stop_fd >= 0)
		close(srv->stop_fd);
	free(srv->path);
	free(srv);
err_fd:
	close(listen_fd);
	return ret;
}

void stats_server_stop(struct stats_server *srv)
{
	uint64_t one = 1;

	if (!srv)
		return;
	if (write(srv->stop_fd, &one, sizeof(one)) == sizeof(one))
		pthread_join(srv->thread, NULL);
	else
		log_err("stats socket: cannot stop its thread; leaving it");
	/* unlinkat: the seccomp filter allows it, not unlink. */
	if (srv->path)
		unlinkat(AT_FDCWD, srv->path, 0);
	close(srv->listen_fd);
	close(srv->stop_fd);
	free(srv->path);
	free(srv);
}

/* ------------------------------------------------------------ client */

int stats_query(const char *path, bool json, FILE *out, FILE *err)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	const char *request = json ? "json\n" : "table\n";
	char buf[4096];
	size_t received = 0;
	int fd, ret;

	if (strlen(path) >= sizeof(addr.sun_path)) {
		fprintf(err, "ferryfsd: --stats: socket path too long\n");
		return -ENAMETOOLONG;
	}
	memcpy(addr.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (const struct sockaddr *)&addr, sizeof(addr)) < 0) {
		ret = -errno;
		fprintf(err, "ferryfsd: --stats: cannot connect to %s: %s (is ferryfsd "
			"running with --stats-socket=%s?)\n", path, strerror(errno), path);
		goto out;
	}
	ret = ferry_write_all(fd, request, strlen(request), true);
	if (ret) {
		fprintf(err, "ferryfsd: --stats: %s\n", strerror(-ret));
		goto out;
	}
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			fprintf(err, "ferryfsd: --stats: %s\n", strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		fwrite(buf, 1, (size_t)n, out);
		received += (size_t)n;
	}
	if (received == 0) {
		fprintf(err, "ferryfsd: --stats: %s sent no report\n", path);
		ret = -EPROTO;
	}
out:
	close(fd);
	return ret;
}

/* ---- --stats-socket over the daemon's life --------------------------- */

int stats_socket_listen(struct stats_socket *ss, const char *path, bool remove_at_exit)
{
	int ret;

	if (!path)
		return 0;
	ss->path = path;
	ss->remove_at_exit = remove_at_exit;
	ret = stats_listen(path, &ss->fd);
	if (ret)
		log_err("--stats-socket=%s: %s", path, strerror(-ret));
	return ret;
}

int stats_socket_serve(struct stats_socket *ss, const struct stats_sources *src,
		       struct stats_server **srv)
{
	int ret;

	*srv = NULL;
	if (ss->fd < 0)
		return 0;
	ret = stats_server_start(srv, ss->fd, ss->remove_at_exit ? ss->path : NULL, src);
	ss->fd = -1;
	if (ret)
		log_err("--stats-socket=%s: %s", ss->path, strerror(-ret));
	else
		log_info("statistics on %s (ferryfsd --stats=%s)", ss->path, ss->path);
	return ret;
}

void stats_socket_end(const struct stats_sources *src, struct stats_server *srv)
{
	stats_server_stop(srv);
	stats_log_table(src);
}

void stats_socket_close(struct stats_socket *ss)
{
	if (ss->fd < 0)
		return;
	close(ss->fd);
	ss->fd = -1;
	if (ss->remove_at_exit)
		unlinkat(AT_FDCWD, ss->path, 0);
}
