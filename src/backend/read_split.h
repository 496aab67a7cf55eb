/* Large READs shared with a helper thread: both copy parts of one request from the page cache straight into the guest's buffers. */
#ifndef FERRY_READ_SPLIT_H
#define FERRY_READ_SPLIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* Reads shorter than this are read by the caller alone. */
#define READ_SPLIT_MIN (256u << 10)

struct read_split;

/* The helper thread starts on the first large read, in the process that
 * reads (ferryfsd forks after setup). Splitting is off with one CPU, or
 * with enabled false (tests read that way for the reference). */
int read_split_new(struct read_split **out, bool enabled);
/* Stops and joins the helper; no read may be running. */
void read_split_free(struct read_split *s);

/*
 * iov_transfer(false, fd, iov, cnt, size, off, 0), with the helper thread
 * reading some of the chunks when it is free: returns when every chunk is
 * done, so the helper never touches iov after the call. A short or failed
 * chunk ends the read there: the bytes before it, or its -errno when it
 * is the first.
 */
ssize_t read_split_read(struct read_split *s, int fd, const struct iovec *iov,
			unsigned cnt, size_t size, uint64_t off);

/* What the helper saved one split read, in ns (negative: it cost): the
 * time its chunks would have taken the caller (chunks - own of them, at
 * per_chunk_ns each), less the caller's wait for its last one, at most one
 * whole read's worth of loss. The back-off follows its average; exposed
 * for the tests. */
int64_t read_split_gain(unsigned chunks, unsigned own, uint64_t per_chunk_ns, uint64_t waited_ns);

/* Chunks the helper has read since the start (the log at the end, and
 * tests). */
uint64_t read_split_helped(struct read_split *s);

#endif
