/* Run-time statistics: the table/JSON report, the --stats-socket server thread and the --stats client. */
#ifndef FERRY_DAEMON_STATS_H
#define FERRY_DAEMON_STATS_H

#include <stdbool.h>
#include <stdio.h>

struct fuse_server;
struct vu_dev;
struct devfuse;
struct passthrough;
struct deadline;

/* Where the counters come from: the session and exactly one transport. */
struct stats_sources {
	struct fuse_server *session;
	struct vu_dev *vu_dev;
	struct devfuse *devfuse;
	struct passthrough *backend;   /* its quota, if any; may be NULL */
	struct deadline *deadline;   /* --request-timeout; NULL without it */
};

/* Writes the report as an aligned text table or as one JSON object. */
int stats_report(const struct stats_sources *src, bool json, FILE *out);
/* Logs the table line by line at info level (the report at exit). */
void stats_log_table(const struct stats_sources *src);

struct stats_server;

/* Listens on a unix socket at path (a stale socket is removed; mode 0600):
 * before the sandbox, which hides the host's paths. */
int stats_listen(const char *path, int *listen_fd);
/* Answers each connection on listen_fd (taken over) from a thread of its
 * own: the client sends "table\n" or "json\n" and gets the report, then
 * the connection closes. path is removed at stop when given (NULL in a
 * sandbox, where the same path would name a file in the share). */
int stats_server_start(struct stats_server **out, int listen_fd, const char *path,
		       const struct stats_sources *src);
/* Stops the thread, closes the socket and removes its path. NULL is fine. */
void stats_server_stop(struct stats_server *srv);

/* --stats-socket: listening before the sandbox hides the host's paths;
 * answered once the transport exists and the process is in its final form
 * (daemon() forks, and threads do not follow). */
struct stats_socket {
	const char *path;      /* NULL: no --stats-socket */
	int fd;                /* listening; -1 once the server took it */
	bool remove_at_exit;   /* the host's paths are still ours to see */
};
/* Listens on path (NULL: nothing to do); logs why it cannot. */
int stats_socket_listen(struct stats_socket *ss, const char *path, bool remove_at_exit);
/* Once only serving is left: the server takes the socket over; *srv is
 * NULL when there is none. Logs where it answers, or why not. */
int stats_socket_serve(struct stats_socket *ss, const struct stats_sources *src,
		       struct stats_server **srv);
/* Stops the server (NULL is fine) and logs the report at exit, with
 * --log-level=info or more. */
void stats_socket_end(const struct stats_sources *src, struct stats_server *srv);
/* A socket the server never took: closed, and removed when ours to. */
void stats_socket_close(struct stats_socket *ss);

/* The --stats client: asks the daemon at path and copies the report to
 * out. Returns 0 or -errno (with a message on err). */
int stats_query(const char *path, bool json, FILE *out, FILE *err);

#endif
