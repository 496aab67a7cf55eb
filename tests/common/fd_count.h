/* Counts this process's open file descriptors: a leak shows as growth between two counts. */
#ifndef FERRY_TEST_FD_COUNT_H
#define FERRY_TEST_FD_COUNT_H

/* Open fds (the count's own directory fd not included), or -errno. */
int fd_count(void);

#endif
