/* ferryfs-load's data pattern: the copy-based fill writes what fc_pattern says word by word, and the checks catch a misplaced, shifted or stale sector. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../load/fuse_client.h"
#include "../common/check.h"

#define BIG (1u << 20)

/* The oracle: the definition, one word at a time. */
static bool fill_matches(const uint64_t *buf, uint64_t off, uint32_t len)
{
	for (uint32_t i = 0; i < len / 8; i++)
		if (buf[i] != fc_pattern(off + 8ull * i))
			return false;
	return true;
}

static void fills_match_the_definition(uint64_t *buf)
{
	static const uint64_t offs[] = { 0, 8, 504, 512, 4096, 4096 * 7 + 520, 1ull << 40, (1ull << 40) + 4088 };
	static const uint32_t lens[] = { 8, 496, 512, 4096, 65536, BIG };
	bool all = true;

	for (size_t o = 0; o < sizeof(offs) / sizeof(offs[0]); o++)
		for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
			memset(buf, 0xa5, BIG + 8);
			fc_pattern_fill(buf, offs[o], lens[l]);
			all &= fill_matches(buf, offs[o], lens[l]);
			/* Nothing past len is written. */
			all &= ((uint8_t *)buf)[lens[l]] == 0xa5;
		}
	CHECK_MSG(all, "the fill equals fc_pattern at every word, from aligned and unaligned offsets");
}

static void sector_words_are_unique(void)
{
	const uint32_t sectors = 1u << 16;
	uint64_t *first = malloc(sizeof(*first) * sectors);
	bool distinct = true, apart = true;

	for (uint32_t s = 0; s < sectors; s++)
		first[s] = fc_pattern((uint64_t)s * FC_PATTERN_SECTOR);
	for (uint32_t s = 0; s < sectors && distinct; s++)
		for (uint32_t t = s + 1; t < s + 64 && t < sectors; t++)
			distinct &= first[s] != first[t];
	for (uint32_t s = 0; s < sectors && apart; s++)
		for (uint32_t w = 8; w < FC_PATTERN_SECTOR; w += 8)
			apart &= first[s] != fc_pattern(w);
	free(first);
	CHECK_MSG(distinct, "each sector's first word differs from its neighbours'");
	CHECK_MSG(apart, "no sector's first word equals a template word");
}

static void checks_catch_wrong_data(uint64_t *buf)
{
	const uint64_t off = 1ull << 30;
	uint64_t bad = 0;

	fc_pattern_fill(buf, off, 65536);
	CHECK_MSG(!fc_pattern_check(buf, off, 65536, &bad), "a filled block passes the full check");
	CHECK_MSG(!fc_pattern_verify(buf, off, 65536, false, &bad), "and the sparse check");

	fc_pattern_fill(buf, off + 4096, 65536);
	CHECK_MSG(fc_pattern_verify(buf, off, 65536, false, &bad) && bad == off,
		  "the sparse check catches the block of another page, at its first word");
	fc_pattern_fill(buf, off + 512, 65536);
	CHECK_MSG(fc_pattern_check(buf, off, 65536, &bad) && bad == off,
		  "the full check catches a block one sector off");
	fc_pattern_fill(buf, off, 65536);
	memmove(buf + 1, buf, 65536 - 8);
	CHECK_MSG(fc_pattern_check(buf, off, 65536, &bad) && bad == off + 8,
		  "the full check catches data shifted by one word, at the second word");
	fc_pattern_fill(buf, off, 65536);
	buf[700] ^= 1;
	CHECK_MSG(fc_pattern_check(buf, off, 65536, &bad) && bad == off + 8 * 700,
		  "the full check catches one flipped bit in a template word, at its offset");
	fc_pattern_fill(buf, off, 65536);
	fc_pattern_poison(buf, off, 65536, FC_CHECK_STRIDE_SPARSE);
	CHECK_MSG(fc_pattern_verify(buf, off, 65536, false, &bad) && bad == off,
		  "a poisoned buffer that no read overwrote fails the sparse check");
}

int main(void)
{
	uint64_t *buf = aligned_alloc(4096, BIG + 4096);

	fills_match_the_definition(buf);
	sector_words_are_unique();
	checks_catch_wrong_data(buf);
	free(buf);
	return check_result();
}
