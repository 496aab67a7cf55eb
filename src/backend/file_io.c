/* Reads and writes between a host file and the guest's iovecs. */
#include "backend/file_io.h"

#include <errno.h>
#include <unistd.h>

ssize_t iov_transfer(bool write, int fd, const struct iovec *iov, unsigned cnt,
		     size_t max, uint64_t off, int flags)
{
	return iov_transfer_part(write, fd, iov, cnt, 0, max, off, flags);
}

ssize_t iov_transfer_part(bool write, int fd, const struct iovec *iov, unsigned cnt,
			  size_t skip, size_t max, uint64_t off, int flags)
{
	struct iovec batch[64];
	size_t done = 0;
	unsigned i = 0;

	while (cnt > 0 && skip >= iov->iov_len) {
		skip -= iov->iov_len;
		iov++;
		cnt--;
	}
	while (i < cnt && done < max) {
		unsigned n = 0;
		size_t want = 0;
		ssize_t r;

		while (i + n < cnt && n < 64 && done + want < max) {
			batch[n] = iov[i + n];
			if (i + n == 0) {   /* skip < iov[0].iov_len */
				batch[0].iov_base = (char *)batch[0].iov_base + skip;
				batch[0].iov_len -= skip;
			}
			if (batch[n].iov_len > max - done - want)
				batch[n].iov_len = max - done - want;
			want += batch[n].iov_len;
			n++;
		}
		/* A one-segment buffer (a page-sized guest READ) goes through
		 * pread/pwrite: the kernel then skips importing an iovec array,
		 * a fixed cost that is a visible part of a small cached read. */
		if (n == 1 && flags == 0 && write)
			r = pwrite(fd, batch[0].iov_base, batch[0].iov_len, (off_t)(off + done));
		else if (n == 1 && flags == 0)
			r = pread(fd, batch[0].iov_base, batch[0].iov_len, (off_t)(off + done));
		else if (write)
			r = pwritev2(fd, batch, (int)n, (off_t)(off + done), flags);
		else
			r = preadv2(fd, batch, (int)n, (off_t)(off + done), flags);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return done ? (ssize_t)done : -errno;
		}
		done += r;
		if ((size_t)r < want)
			break;
		i += n;
	}
	return done;
}
