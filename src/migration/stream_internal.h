/* What the migration stream's encoder, decoder and helpers share and nobody else uses. */
#ifndef FERRY_MIGRATION_STREAM_INTERNAL_H
#define FERRY_MIGRATION_STREAM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/hash.h"
#include "migration/stream.h"

/* Fixed body sizes of version 1 (migration/stream.h). */
#define MIG_SESSION_SIZE 40u
#define MIG_OPTIONS_SIZE 16u
#define MIG_COUNTERS_FIXED 16u
#define MIG_INODE_FIXED 32u
#define MIG_INODE_PATH_FIXED 10u
#define MIG_INODE_FILE_HANDLE_FIXED 14u
#define MIG_OPEN_FILE_SIZE 24u
#define MIG_LOCK_SIZE 48u

/* Open addressing over item indexes: the decoder's uniqueness checks and
 * the state's lookups, without trusting any count the stream states. */
struct mig_index {
	uint64_t *hashes;
	uint32_t *slots;        /* item index + 1; 0 is empty */
	size_t cap;             /* power of two */
	size_t count;
};
typedef bool (*mig_eq_fn)(const void *ctx, uint32_t idx);
int mig_index_new(struct mig_index **out);
void mig_index_free(struct mig_index *ix);
/* The index of an item with hash h that eq accepts, or -1. */
long mig_index_find(const struct mig_index *ix, uint64_t h, mig_eq_fn eq, const void *ctx);
int mig_index_add(struct mig_index *ix, uint64_t h, uint32_t idx);

uint64_t mig_hash_bytes(uint64_t seed, const void *buf, size_t len);
uint64_t mig_path_hash(uint64_t parent, const char *name, size_t len);
uint64_t mig_fhandle_hash(const struct mig_file_handle *h);
bool mig_fhandle_equal(const struct mig_file_handle *a, const struct mig_file_handle *b);

/* Allocations that never move, freed all at once: names and handles are
 * pointed to by the inodes while the arrays around them grow. */
int mig_arena_new(struct mig_arena **out);
void mig_arena_free(struct mig_arena *a);
void *mig_arena_alloc(struct mig_arena *a, size_t size);

/* NULL when acceptable, else why not: shared by encoder and decoder so
 * that neither writes what the other refuses. */
const char *mig_check_name(const char *name, size_t len);
const char *mig_check_type(uint32_t type);

static inline void mig_put16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}

static inline void mig_put32(unsigned char *p, uint32_t v)
{
	mig_put16(p, (uint16_t)v);
	mig_put16(p + 2, (uint16_t)(v >> 16));
}

static inline void mig_put64(unsigned char *p, uint64_t v)
{
	mig_put32(p, (uint32_t)v);
	mig_put32(p + 4, (uint32_t)(v >> 32));
}

static inline uint16_t mig_get16(const unsigned char *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t mig_get32(const unsigned char *p)
{
	return (uint32_t)mig_get16(p) | (uint32_t)mig_get16(p + 2) << 16;
}

static inline uint64_t mig_get64(const unsigned char *p)
{
	return (uint64_t)mig_get32(p) | (uint64_t)mig_get32(p + 4) << 32;
}

#endif
