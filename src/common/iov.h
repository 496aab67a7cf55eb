/* Copying to, from and slicing of iovec lists over guest memory; every layer uses these. */
#ifndef FERRY_IOV_H
#define FERRY_IOV_H

#include <stddef.h>
#include <sys/uio.h>

/*
 * The lists come from a hostile guest's descriptors: lengths saturate
 * instead of wrapping, and a copy stops where the list ends, returning the
 * bytes it copied (fewer than asked when the list is shorter).
 */
size_t iov_length(const struct iovec *iov, unsigned cnt);
/* Copies len bytes of the list, from offset on, into dst. */
size_t iov_copy_from(void *dst, const struct iovec *iov, unsigned cnt,
		     size_t offset, size_t len);
/* Copies len bytes of src into the list, from offset on. */
size_t iov_copy_to(const struct iovec *iov, unsigned cnt, size_t offset,
		   const void *src, size_t len);
/* Fills out with the part of iov in [offset, offset+len); returns the
 * number of entries or -E2BIG when more than max are needed, -EINVAL when
 * iov is shorter than offset+len. */
int iov_slice(struct iovec *out, unsigned max, const struct iovec *iov,
	      unsigned cnt, size_t offset, size_t len);

#endif
