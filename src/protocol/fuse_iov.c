/* Copying to, from and slicing of iovec lists over guest memory. */
#include "protocol/fuse_internal.h"

#include <errno.h>
#include <string.h>

size_t iov_length(const struct iovec *iov, unsigned cnt)
{
	size_t total = 0;

	for (unsigned i = 0; i < cnt; i++) {
		/* A hostile descriptor list must not wrap the total into a
		 * small, plausible-looking length. */
		if (iov[i].iov_len > SIZE_MAX - total)
			return SIZE_MAX;
		total += iov[i].iov_len;
	}
	return total;
}

size_t iov_copy_from(void *dst, const struct iovec *iov, unsigned cnt,
		     size_t offset, size_t len)
{
	char *out = dst;
	size_t done = 0;

	for (unsigned i = 0; i < cnt && done < len; i++) {
		size_t seg = iov[i].iov_len;

		if (offset >= seg) {
			offset -= seg;
			continue;
		}
		size_t n = seg - offset;
		if (n > len - done)
			n = len - done;
		memcpy(out + done, (const char *)iov[i].iov_base + offset, n);
		done += n;
		offset = 0;
	}
	return done;
}

size_t iov_copy_to(const struct iovec *iov, unsigned cnt, size_t offset,
		   const void *src, size_t len)
{
	const char *in = src;
	size_t done = 0;

	for (unsigned i = 0; i < cnt && done < len; i++) {
		size_t seg = iov[i].iov_len;

		if (offset >= seg) {
			offset -= seg;
			continue;
		}
		size_t n = seg - offset;
		if (n > len - done)
			n = len - done;
		memcpy((char *)iov[i].iov_base + offset, in + done, n);
		done += n;
		offset = 0;
	}
	return done;
}

int iov_slice(struct iovec *out, unsigned max, const struct iovec *iov,
	      unsigned cnt, size_t offset, size_t len)
{
	unsigned n_out = 0;
	size_t left = len;

	for (unsigned i = 0; i < cnt && left > 0; i++) {
		size_t seg = iov[i].iov_len;

		if (offset >= seg) {
			offset -= seg;
			continue;
		}
		size_t n = seg - offset;
		if (n > left)
			n = left;
		if (n_out == max)
			return -E2BIG;
		out[n_out].iov_base = (char *)iov[i].iov_base + offset;
		out[n_out].iov_len = n;
		n_out++;
		left -= n;
		offset = 0;
	}
	if (left > 0)
		return -EINVAL;
	return (int)n_out;
}
