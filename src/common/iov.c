/* Copying to, from and slicing of iovec lists over guest memory; every layer uses these. */
#include "common/iov.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
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

/*
 * The one walk both copies share: skip offset bytes of the list, then copy
 * up to len bytes between it and buf, in the direction to_iov says. Inlined
 * into each caller with to_iov constant, so each copies as a loop of its
 * own would. Segments are taken as size_t all the way: no length is
 * narrowed, so a long list cannot wrap a count into a small one.
 */
static inline __attribute__((always_inline)) size_t
iov_copy(const struct iovec *iov, unsigned cnt, size_t offset, char *buf,
	 size_t len, bool to_iov)
{
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
		if (to_iov)
			memcpy((char *)iov[i].iov_base + offset, buf + done, n);
		else
			memcpy(buf + done, (const char *)iov[i].iov_base + offset, n);
		done += n;
		offset = 0;
	}
	return done;
}

size_t iov_copy_from(void *dst, const struct iovec *iov, unsigned cnt,
		     size_t offset, size_t len)
{
	return iov_copy(iov, cnt, offset, dst, len, false);
}

size_t iov_copy_to(const struct iovec *iov, unsigned cnt, size_t offset,
		   const void *src, size_t len)
{
	/* Only read through buf: the cast drops const for the shared walk. */
	return iov_copy(iov, cnt, offset, (char *)src, len, true);
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
