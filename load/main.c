/* ferryfs-load: command line, result report and exit status of the load generator. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <signal.h>
#include <time.h>

#include "load.h"
#include "migrate.h"

static void usage(FILE *f)
{
	fprintf(f,
"usage: ferryfs-load --socket PATH --workload W [options]\n"
"       ferryfs-load --host DIR --workload W [options]\n"
"       ferryfs-load --socket PATH --migrate-to PATH2 [--inodes N] [--json]\n"
"Plays a virtio-fs guest against a vhost-user-fs backend and measures it.\n"
"  --socket PATH        the backend's vhost-user socket\n"
"  --host DIR           no backend: the workload as the host's own system calls\n"
"                       in DIR (pread, pwrite, statx, openat+close+unlinkat,\n"
"                       getdents64+statx per entry, ...), each of\n"
"                       --host-threads threads one call at a time: the bound\n"
"                       for a daemon serving DIR at that depth\n"
"                       (--queue-depth and --queues do not apply; an op is a\n"
"                       call that stands for one FUSE request; cpu per op is\n"
"                       this process's, and the part of it spent filling the\n"
"                       blocks it writes, a driver's work, is also given\n"
"                       apart). --host-pread DIR is the same\n"
"  --workload W         read randread write randwrite getattr lookup\n"
"                       create-unlink readdirplus mixed write-fsync\n"
"  --block-size BYTES   I/O size, 4k..1m, multiple of 512 (default 4k)\n"
"  --queue-depth N      requests in flight per request queue (default 16)\n"
"  --host-threads N     --host: threads making calls at once (default 1); the\n"
"                       host's bound at a daemon's --queue-depth N\n"
"  --queues N           request queues besides hiprio (default 1)\n"
"  --seconds S          measured interval (default 5)\n"
"  --ops N              measured interval: until N requests were answered (--host:\n"
"                       until N calls, a step of several calls whole), however\n"
"                       long that takes; instead of --seconds\n"
"  --warmup S           unmeasured interval before it (default 1)\n"
"  --idle S             then stay connected with nothing in flight for S s and\n"
"                       report the daemon's CPU meanwhile (with --daemon-pid);\n"
"                       \"ferryfs-load: idle ...\" on stderr when it begins\n"
"  --cold DIR           DIR is the directory the backend shares (with --host:\n"
"                       --host's DIR): once the data file is written, sync it\n"
"                       and keep dropping it from the host's page cache (every\n"
"                       20 ms), so reads come from the disk or the file system's\n"
"                       server\n"
"  --file-size BYTES    data file size (default 64m)\n"
"  --dir-entries N      readdirplus directory size (default 10000)\n"
"  --keep-lookups       send the workload's FORGETs only when it ends, as a guest\n"
"                       whose dentry cache keeps every entry: the backend then\n"
"                       knows every inode listed (its memory for --dir-entries)\n"
"  --daemon-pid PID     read this process's CPU time from /proc\n"
"  --watch-pid PID      also report this process's CPU (and its children's) over\n"
"                       the measured interval, e.g. the FUSE client of a share\n"
"                       on a network file system (watch_cpu_pct in the JSON)\n"
"  --event-idx on|off   negotiate VIRTIO_RING_F_EVENT_IDX (default: on if offered,\n"
"                       as a Linux guest does)\n"
"  --packed             packed virtqueues (VIRTIO_F_RING_PACKED); fails if the\n"
"                       backend does not offer them\n"
"  --poll               spin on the used rings instead of waiting for calls\n"
"  --publish-batch      make requests available and notify the backend once per\n"
"                       round, after refilling every completed slot (as\n"
"                       older ferryfs-load did); default: each request as\n"
"                       it is queued, as Linux's virtio driver does\n"
"  --seed N             random offsets' seed (default 1)\n"
"  --json               last line of output is one JSON object\n"
"  --migrate-to PATH2   no workload: play both frontends of a live migration,\n"
"                       --socket's backend (the source) saves its state\n"
"                       (SET_DEVICE_STATE_FD), PATH2's loads it, and the\n"
"                       old node ids and handles are used through PATH2;\n"
"                       prints the times and the stream's size; leaves its\n"
"                       ferryfs-load-mig.PID directory in the share\n"
"  --inodes N           --migrate-to: files the source knows (default 1000)\n"
"Exit status: 0 all replies right, 1 wrong replies, 2 could not run,\n"
"3 (--migrate-to) the source offers no DEVICE_STATE protocol feature.\n");
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': mul = 1ull << 10; end++; break;
	case 'm': case 'M': mul = 1ull << 20; end++; break;
	case 'g': case 'G': mul = 1ull << 30; end++; break;
	default: break;
	}
	if (*end == 'i')
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end || v > UINT64_MAX / mul)
		return -EINVAL;
	*out = v * mul;
	return 0;
}

static int parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
	uint64_t v;

	if (parse_size(s, &v) || v < min || v > max)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

static int parse_secs(const char *s, double *out)
{
	char *end;

	*out = strtod(s, &end);
	return (*end || *out < 0 || *out > 86400) ? -EINVAL : 0;
}

enum { O_SOCKET = 256, O_HOST, O_WORKLOAD, O_BS, O_QD, O_QUEUES, O_SECONDS, O_WARMUP,
       O_IDLE, O_COLD, O_FSIZE, O_DIRENT, O_PID, O_EIDX, O_POLL, O_PACKED, O_SEED, O_JSON, O_HELP,
       O_MIGRATE, O_INODES, O_KEEP, O_WATCH, O_PUBLISH_BATCH, O_OPS, O_HOST_THREADS };

static int parse_args(int argc, char **argv, struct load_cfg *c)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, O_SOCKET },
		{ "host", required_argument, NULL, O_HOST },
		{ "host-pread", required_argument, NULL, O_HOST },
		{ "workload", required_argument, NULL, O_WORKLOAD },
		{ "block-size", required_argument, NULL, O_BS },
		{ "queue-depth", required_argument, NULL, O_QD },
		{ "host-threads", required_argument, NULL, O_HOST_THREADS },
		{ "queues", required_argument, NULL, O_QUEUES },
		{ "seconds", required_argument, NULL, O_SECONDS },
		{ "ops", required_argument, NULL, O_OPS },
		{ "warmup", required_argument, NULL, O_WARMUP },
		{ "idle", required_argument, NULL, O_IDLE },
		{ "cold", required_argument, NULL, O_COLD },
		{ "file-size", required_argument, NULL, O_FSIZE },
		{ "dir-entries", required_argument, NULL, O_DIRENT },
		{ "daemon-pid", required_argument, NULL, O_PID },
		{ "event-idx", required_argument, NULL, O_EIDX },
		{ "poll", no_argument, NULL, O_POLL },
		{ "publish-batch", no_argument, NULL, O_PUBLISH_BATCH },
		{ "packed", no_argument, NULL, O_PACKED },
		{ "seed", required_argument, NULL, O_SEED },
		{ "json", no_argument, NULL, O_JSON },
		{ "help", no_argument, NULL, O_HELP },
		{ "migrate-to", required_argument, NULL, O_MIGRATE },
		{ "inodes", required_argument, NULL, O_INODES },
		{ "keep-lookups", no_argument, NULL, O_KEEP },
		{ "watch-pid", required_argument, NULL, O_WATCH },
		{ 0 },
	};
	uint32_t v;
	int o, bad = 0;

	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case O_SOCKET: c->socket = optarg; break;
		case O_HOST: c->host_dir = optarg; break;
		case O_WORKLOAD: c->workload = optarg; break;
		case O_BS: bad |= parse_u32(optarg, 512, 1u << 20, &c->block_size); break;
		case O_QD: bad |= parse_u32(optarg, 1, 1024, &c->queue_depth); break;
		case O_HOST_THREADS: bad |= parse_u32(optarg, 1, 1024, &c->host_threads); break;
		case O_QUEUES: bad |= parse_u32(optarg, 1, LOAD_MAX_QUEUES, &c->queues); break;
		case O_SECONDS: bad |= parse_secs(optarg, &c->seconds); break;
		case O_OPS: bad |= parse_size(optarg, &c->ops) || !c->ops; break;
		case O_WARMUP: bad |= parse_secs(optarg, &c->warmup); break;
		case O_IDLE: bad |= parse_secs(optarg, &c->idle); break;
		case O_COLD: c->cold_dir = optarg; break;
		case O_FSIZE: bad |= parse_size(optarg, &c->file_size); break;
		case O_DIRENT: bad |= parse_u32(optarg, 1, 1000000, &c->dir_entries); break;
		case O_PID: bad |= parse_u32(optarg, 1, INT_MAX, &v); c->daemon_pid = (pid_t)v; break;
		case O_WATCH: bad |= parse_u32(optarg, 1, INT_MAX, &v); c->watch_pid = (pid_t)v; break;
		case O_EIDX:
			if (!strcmp(optarg, "on"))
				c->event_idx = 1;
			else if (!strcmp(optarg, "off"))
				c->event_idx = 0;
			else
				bad = -EINVAL;
			break;
		case O_POLL: c->poll = true; break;
		case O_PUBLISH_BATCH: c->publish_batch = true; break;
		case O_PACKED: c->packed = true; break;
		case O_SEED: { uint64_t s; bad |= parse_size(optarg, &s); c->seed = s; break; }
		case O_JSON: c->json = true; break;
		case O_HELP: usage(stdout); exit(0);
		case O_MIGRATE: c->migrate_to = optarg; break;
		case O_INODES: bad |= parse_u32(optarg, 1, 10000000, &v); c->inodes = v; break;
		case O_KEEP: c->keep_lookups = true; break;
		default: return -EINVAL;
		}
		if (bad) {
			fprintf(stderr, "ferryfs-load: bad value for option: %s\n", optarg);
			return -EINVAL;
		}
	}
	if (c->migrate_to) {
		if (optind != argc || !c->socket || c->host_dir || c->workload) {
			fprintf(stderr, "ferryfs-load: --migrate-to needs --socket and no --workload or --host\n");
			return -EINVAL;
		}
		return 0;
	}
	if (optind != argc || !c->socket == !c->host_dir || !c->workload) {
		fprintf(stderr, "ferryfs-load: --workload and one of --socket, --host are required\n");
		return -EINVAL;
	}
	if (c->host_threads && !c->host_dir) {
		fprintf(stderr, "ferryfs-load: --host-threads is --host's depth; with --socket use --queue-depth\n");
		return -EINVAL;
	}
	if (!load_workload_valid(c->workload)) {
		fprintf(stderr, "ferryfs-load: unknown workload '%s'\n", c->workload);
		return -EINVAL;
	}
	if (c->block_size % 512) {
		fprintf(stderr, "ferryfs-load: --block-size must be a multiple of 512\n");
		return -EINVAL;
	}
	if (c->file_size < c->block_size) {
		fprintf(stderr, "ferryfs-load: --file-size must hold at least one block\n");
		return -EINVAL;
	}
	if (c->seconds <= 0) {
		fprintf(stderr, "ferryfs-load: --seconds must be positive\n");
		return -EINVAL;
	}
	return 0;
}

static int migrate_main(const struct load_cfg *c)
{
	struct mig_result m;
	int ret = migrate_run(c, &m);

	if (m.no_device_state)
		return 3;
	printf("migrate %s -> %s: %" PRIu64 " inodes known, %" PRIu64 " handles open, setup %.1f ms\n",
	       c->socket, c->migrate_to, m.inodes, m.open_files, m.setup_ms);
	printf("suspend %.2f ms, save %.2f ms, stream %" PRIu64 " bytes (%.1f per inode), load %.2f ms, start %.2f ms\n",
	       m.suspend_ms, m.save_ms, m.stream_bytes,
	       m.inodes ? (double)m.stream_bytes / (double)m.inodes : 0.0, m.load_ms, m.start_ms);
	if (m.announced)
		printf("dirty log: %" PRIu64 " of %" PRIu64 " pages written while logging are marked\n",
		       m.log_marked, m.log_expected);
	else
		printf("dirty log: none (not offered: no VHOST_F_LOG_ALL or LOG_SHMFD; or the run stopped first)\n");
	printf("after the move: %" PRIu64 " GETATTRs of old node ids, %" PRIu64 " READs through old handles, %" PRIu64 " LOOKUPs (same node id), %.1f ms\n",
	       m.getattrs, m.reads, m.lookups, m.verify_ms);
	printf("errors: %" PRIu64 "%s\n", m.errors, ret ? " (run aborted)" : "");
	if (c->json)
		printf("{\"inodes\":%" PRIu64 ",\"handles\":%" PRIu64 ",\"stream_bytes\":%" PRIu64
		       ",\"setup_ms\":%.3f,\"suspend_ms\":%.3f,\"save_ms\":%.3f,\"load_ms\":%.3f,"
		       "\"start_ms\":%.3f,\"verify_ms\":%.3f,\"getattrs\":%" PRIu64 ",\"reads\":%" PRIu64
		       ",\"lookups\":%" PRIu64 ",\"announced\":%s,\"log_expected\":%" PRIu64
		       ",\"log_marked\":%" PRIu64 ",\"errors\":%" PRIu64 ",\"workdir\":\"%s\",\"aborted\":%s}\n",
		       m.inodes, m.open_files, m.stream_bytes, m.setup_ms, m.suspend_ms, m.save_ms,
		       m.load_ms, m.start_ms, m.verify_ms, m.getattrs, m.reads, m.lookups,
		       m.announced ? "true" : "false", m.log_expected, m.log_marked, m.errors,
		       m.workdir ? m.workdir : "", ret ? "true" : "false");
	free(m.workdir);
	if (m.errors)
		return 1;
	if (ret)
		fprintf(stderr, "ferryfs-load: migration run failed: %s\n", strerror(-ret));
	return ret ? 2 : 0;
}

int main(int argc, char **argv)
{
	struct load_cfg c = {
		.block_size = 4096, .queue_depth = 16, .queues = 1, .seconds = 5,
		.warmup = 1, .file_size = 64ull << 20, .dir_entries = 10000, .seed = 1,
		.event_idx = -1, .inodes = 1000,
	};
	struct load_result res;
	double el, ops_s, mib_s, cpu_op, self_op, fill_op, idle_pct, watch_pct;
	int ret;

	if (parse_args(argc, argv, &c)) {
		usage(stderr);
		return 2;
	}
	/* A backend that goes away mid-run must not kill us before we report. */
	signal(SIGPIPE, SIG_IGN);
	if (c.migrate_to)
		return migrate_main(&c);
	ret = c.host_dir ? host_run(&c, &res) : load_run(&c, &res);
	if (ret && !res.errors) {
		fprintf(stderr, "ferryfs-load: run failed: %s\n", strerror(-ret));
		return 2;
	}
	el = res.elapsed_s > 0 ? res.elapsed_s : 1;
	ops_s = (double)res.ops / el;
	mib_s = (double)res.bytes / el / (1 << 20);
	cpu_op = res.daemon_cpu_us >= 0 && res.ops ? res.daemon_cpu_us / (double)res.ops : -1;
	self_op = res.ops ? res.load_cpu_us / (double)res.ops : -1;
	fill_op = res.fill_cpu_us >= 0 && res.ops ? res.fill_cpu_us / (double)res.ops : -1;

	if (c.ops)
		printf("workload %s: block size %u, queue depth %u x %u queue(s), %" PRIu64 " answers (warmup %.1f s), file %llu bytes\n",
		       c.workload, c.block_size, c.queue_depth, c.queues, c.ops, c.warmup,
		       (unsigned long long)c.file_size);
	else
		printf("workload %s: block size %u, queue depth %u x %u queue(s), %.1f s (warmup %.1f s), file %llu bytes\n",
		       c.workload, c.block_size, c.queue_depth, c.queues, c.seconds, c.warmup,
		       (unsigned long long)c.file_size);
	if (c.host_dir)
		printf("backend: none, the host's own system calls in %s, %u thread(s)\n", c.host_dir,
		       c.host_threads ? c.host_threads : 1);
	else
		printf("backend: FUSE 7.%u, max_write %u, max_pages %u, event_idx %s, indirect %s, rings %s, queues %llu\n",
		       res.proto_minor, res.max_write, res.max_pages, res.event_idx ? "on" : "off",
		       res.indirect ? "on" : "off", res.packed ? "packed" : "split", (unsigned long long)res.queue_num_max);
	printf("ops %" PRIu64 " in %.3f s: %.0f ops/s, %.1f MiB/s", res.ops, el, ops_s, mib_s);
	if (res.cycles)
		printf(", %" PRIu64 " cycles", res.cycles);
	if (res.entries)
		printf(", %" PRIu64 " entries", res.entries);
	printf("\nlatency us: p50 %.1f  p99 %.1f  p99.9 %.1f  mean %.1f  max %.1f\n",
	       res.lat_p50_us, res.lat_p99_us, res.lat_p999_us, res.lat_mean_us, res.lat_max_us);
	if (cpu_op >= 0)
		printf("daemon cpu: %.2f us/op (%.0f%% of one cpu)\n", cpu_op,
		       res.daemon_cpu_us / el / 1e4);
	else
		printf("daemon cpu: unknown (no --daemon-pid)\n");
	printf("load cpu: %.2f us/op; kicks %" PRIu64 ", calls %" PRIu64 "\n", self_op,
	       res.kicks, res.calls);
	if (fill_op >= 0)
		printf("of which filling the blocks written: %.2f us/op (a driver's work in a daemon's run)\n",
		       fill_op);
	watch_pct = res.watch_cpu_us >= 0 ? res.watch_cpu_us / el / 1e4 : -1;
	if (watch_pct >= 0)
		printf("watched pid %d: %.1f%% of one cpu\n", (int)c.watch_pid, watch_pct);
	idle_pct = res.idle_daemon_cpu_us >= 0 && c.idle > 0 ?
		   res.idle_daemon_cpu_us / c.idle / 1e4 : -1;
	if (idle_pct >= 0)
		printf("idle %.1f s: daemon cpu %.1f%% of one cpu\n", c.idle, idle_pct);
	printf("errors: %" PRIu64 "%s\n", res.errors, ret ? " (run aborted)" : "");
	if (res.quirk_destroy_empty)
		printf("quirks: DESTROY answered with an empty reply (%" PRIu64 "x), accepted\n",
		       res.quirk_destroy_empty);
	if (c.json)
		printf("{\"workload\":\"%s\",\"block_size\":%u,\"queue_depth\":%u,\"queues\":%u,"
		       "\"seconds\":%.3f,\"warmup\":%.3f,\"file_size\":%llu,\"event_idx\":%s,"
		       "\"packed\":%s,\"poll\":%s,\"publish_batch\":%s,\"elapsed_s\":%.6f,\"ops\":%" PRIu64 ",\"cycles\":%" PRIu64
		       ",\"entries\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"ops_per_sec\":%.1f,"
		       "\"mib_per_sec\":%.3f,\"lat_p50_us\":%.2f,\"lat_p99_us\":%.2f,"
		       "\"lat_p999_us\":%.2f,\"lat_mean_us\":%.2f,\"lat_max_us\":%.2f,"
		       "\"daemon_cpu_us_per_op\":%.3f,\"load_cpu_us_per_op\":%.3f,\"fill_us_per_op\":%.3f,"
		       "\"kicks\":%" PRIu64 ",\"calls\":%" PRIu64 ",\"fuse_minor\":%u,"
		       "\"idle_daemon_cpu_pct\":%.2f,\"watch_cpu_pct\":%.2f,\"errors\":%" PRIu64 ",\"quirk_destroy_empty\":%" PRIu64 ","
		       "\"ops_target\":%" PRIu64 ",\"lat_backwards\":%" PRIu64 ",\"host_threads\":%u,\"aborted\":%s}\n",
		       c.workload, c.block_size, c.queue_depth, c.queues, c.seconds, c.warmup,
		       (unsigned long long)c.file_size, res.event_idx ? "true" : "false",
		       res.packed ? "true" : "false", c.poll ? "true" : "false",
		       c.publish_batch ? "true" : "false", el, res.ops, res.cycles, res.entries, res.bytes,
		       ops_s, mib_s, res.lat_p50_us, res.lat_p99_us, res.lat_p999_us,
		       res.lat_mean_us, res.lat_max_us, cpu_op, self_op, fill_op, res.kicks, res.calls,
		       res.proto_minor, idle_pct, watch_pct, res.errors, res.quirk_destroy_empty, c.ops,
		       res.lat_backwards, c.host_dir ? (c.host_threads ? c.host_threads : 1) : 0,
		       ret ? "true" : "false");
	if (res.errors)
		return 1;
	return ret ? 2 : 0;
}
