/* Counts the host fds held on the guest's behalf so a guest cannot exhaust them. */
#ifndef FERRY_FD_BUDGET_H
#define FERRY_FD_BUDGET_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/*
 * Every inode holds an O_PATH fd and every open handle another; both are
 * created at the guest's request. Without a bound a guest walking a large
 * tree would make open() fail everywhere in the daemon (eventfds, the
 * vhost-user socket), so guest-caused opens fail with ENFILE first.
 */
struct fd_budget {
	atomic_long used;
	long limit;
};

/* Returns 0 when the caller may open one more fd, -ENFILE when over. */
static inline int fd_budget_take(struct fd_budget *b)
{
	if (atomic_fetch_add_explicit(&b->used, 1, memory_order_relaxed) >= b->limit) {
		atomic_fetch_sub_explicit(&b->used, 1, memory_order_relaxed);
		return -ENFILE;
	}
	return 0;
}

/* Whether less than a quarter of the budget is left: optional work (such
 * as READDIRPLUS prefetching) stops there. */
static inline bool fd_budget_low(struct fd_budget *b)
{
	return atomic_load_explicit(&b->used, memory_order_relaxed) >=
	       b->limit - b->limit / 4;
}

/* Whether half the budget is used: from there an idle handle inode gives
 * its fd back (inode_put), so that what the guest merely knows never
 * takes more than half the fds from what it has open. */
static inline bool fd_budget_half_used(struct fd_budget *b)
{
	return atomic_load_explicit(&b->used, memory_order_relaxed) >= b->limit / 2;
}

static inline void fd_budget_give_back(struct fd_budget *b)
{
	atomic_fetch_sub_explicit(&b->used, 1, memory_order_relaxed);
}

#endif
