/* Summing and quantiles for the log2 histograms of common/stats.h. */
#include "common/stats.h"

void ferry_hist_accumulate(struct ferry_hist *dst, const struct ferry_hist *src)
{
	for (unsigned b = 0; b < FERRY_HIST_BUCKETS; b++)
		dst->bucket[b] += ferry_count_read(&src->bucket[b]);
}

uint64_t ferry_hist_total(const struct ferry_hist *h)
{
	uint64_t total = 0;

	for (unsigned b = 0; b < FERRY_HIST_BUCKETS; b++)
		total += ferry_count_read(&h->bucket[b]);
	return total;
}

uint64_t ferry_hist_quantile_floor(const struct ferry_hist *h, double q)
{
	uint64_t total = ferry_hist_total(h), seen = 0;
	/* The rank of the quantile, rounded up, at least the first value. */
	double rank = q * (double)total;

	if (total == 0)
		return 0;
	for (unsigned b = 0; b < FERRY_HIST_BUCKETS; b++) {
		seen += ferry_count_read(&h->bucket[b]);
		if ((double)seen >= rank && seen > 0)
			return ferry_hist_bucket_floor(b);
	}
	return ferry_hist_bucket_floor(FERRY_HIST_BUCKETS - 1);
}
