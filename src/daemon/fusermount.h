/* Host FUSE mode without root: fusermount3 mounts and hands back the /dev/fuse fd. */
#ifndef FERRY_FUSERMOUNT_H
#define FERRY_FUSERMOUNT_H

/*
 * Runs fusermount3 (Debian's fuse3 package, setuid root) to mount a
 * fuse.ferryfs file system named source on mountpoint, with
 * default_permissions, nosuid and nodev, and receives the /dev/fuse fd in
 * *fuse_fd. *keep_fd is the write end of a pipe a watcher child waits on:
 * once it closes (the daemon exits, or is killed) the watcher detaches the
 * mount with fusermount3 -u -z. The caller keeps it open while serving.
 * 0 or -errno; fusermount3 prints why it refused.
 */
int fusermount_mount(const char *mountpoint, const char *source, int *fuse_fd,
		     int *keep_fd);

#endif
