/* The 64-bit integer mixer the hash tables share (the inode table, the migration stream's indexes). */
#ifndef FERRY_COMMON_HASH_H
#define FERRY_COMMON_HASH_H

#include <stdint.h>

/*
 * MurmurHash3's fmix64 finaliser: every input bit affects every output
 * bit, so node ids, inode numbers and counters that differ only in high
 * or low bits spread over a power-of-two bucket array. Not keyed: the
 * tables that hold guest-chosen keys bound their chains elsewhere.
 */
static inline uint64_t ferry_mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

#endif
