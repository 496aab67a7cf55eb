/* Reads and writes between a host file and the guest's iovecs. */
#ifndef FERRY_FILE_IO_H
#define FERRY_FILE_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* Reads or writes up to max bytes at off through iov, batching the iovecs
 * so any count works; a short transfer ends it (EOF, full disk, or data
 * that RWF_NOWAIT in flags would have waited for) and what was done is
 * returned, -errno when nothing was. */
ssize_t iov_transfer(bool write, int fd, const struct iovec *iov, unsigned cnt,
		     size_t max, uint64_t off, int flags);
/* The same from byte skip of the list on: off is the file offset of that
 * byte. A list shorter than skip transfers nothing. */
ssize_t iov_transfer_part(bool write, int fd, const struct iovec *iov, unsigned cnt,
			  size_t skip, size_t max, uint64_t off, int flags);

#endif
