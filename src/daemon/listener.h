/* The vhost-user socket: listened on (or inherited) before the sandbox, with the pid file locked beside it. */
#ifndef FERRY_DAEMON_LISTENER_H
#define FERRY_DAEMON_LISTENER_H

#include <stdbool.h>

#include "daemon/options.h"

/* The vhost-user socket and the pid file locked next to it. */
struct vu_listener {
	int fd;
	bool inherited;
	char *socket_path;     /* absolute: removed at exit, after a chdir */
	char *pid_path;
	int pid_fd;
	char where[64];
};

/* The socket of --socket-path (its pid file locked first, so a second
 * daemon never touches a socket another serves), or the one inherited
 * through --fd or socket activation. Logs why it failed. */
int listen_vhost_user(const struct ferry_options *o, struct vu_listener *l);
/* Ends what listen_vhost_user began; the socket and pid file are removed
 * only when this daemon created them and paths_reachable (in a sandbox the
 * same path would name a file in the share). */
void unlisten_vhost_user(struct vu_listener *l, bool paths_reachable);

#endif
