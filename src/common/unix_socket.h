/* Unix-socket listeners for the daemon's sockets: stale socket files, modes, groups, accept. */
#ifndef FERRY_UNIX_SOCKET_H
#define FERRY_UNIX_SOCKET_H

/*
 * Creates a listening stream socket at path, close-on-exec, mode 0600, or
 * 0660 owned by the named group. A socket file nobody listens on (left by
 * a dead daemon) is replaced; one someone listens on (-EADDRINUSE) or a
 * file that is not a socket (-EEXIST) is left alone. Used by the
 * vhost-user listener and the stats socket alike.
 */
int ferry_unix_listen(const char *path, const char *group, int *listen_fd);
/* Waits for one connection on listen_fd; the new fd is close-on-exec. */
int ferry_unix_accept(int listen_fd, int *conn_fd);

#endif
