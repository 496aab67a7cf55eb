/* Several host directories under one share (--add-dir=NAME[,ro]:DIR): the option's syntax, and the guest inode numbers that keep them apart. */
#ifndef FERRY_ADDED_DIRS_H
#define FERRY_ADDED_DIRS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A fixed bound keeps the options a plain struct; an area number (the
 * main share is 0, the added dirs 1..ADDED_DIRS_MAX) fits in the bits
 * the guest inode numbers spend on it. */
#define ADDED_DIRS_MAX 32

/* One --add-dir: the strings are borrowed (argv's). */
struct added_dir {
	const char *name;       /* the entry at the share's root */
	size_t name_len;
	const char *dir;        /* the host directory, verbatim */
	bool read_only;
	/* The daemon opens dir before a sandbox hides the host's paths and
	 * hands the O_PATH fd over (opened: the backend owns fd then); else
	 * the backend opens dir itself. */
	bool opened;
	int fd;
};

struct added_dir_list {
	unsigned count;
	struct added_dir dirs[ADDED_DIRS_MAX];
};

/* Appends "NAME:DIR" or "NAME,ro:DIR": NAME ends at the first ':', so DIR
 * may hold any character. NAME is refused when empty, ".", "..", holding
 * '/', ',' or ':', too long, or given twice. 0, or -EINVAL with msg. */
int added_dir_add(struct added_dir_list *l, const char *spec, char *msg, size_t msg_size);

/* The index (0-based) of the added dir named name (len bytes), or -1. */
int added_dir_find(const struct added_dir_list *l, const char *name, size_t len);

/*
 * Guest inode numbers when the share has added dirs. A host number below
 * 2^56 keeps its low bits and carries its area in the top byte; a larger
 * one (overlayfs's xino, some network file systems) gets the next number
 * of a table, in a range no area uses, kept for the daemon's life so it
 * stays the same each time the guest asks. Different objects of different
 * areas therefore never share a number.
 */
struct ino_remap {
	pthread_mutex_t lock;
	struct ino_remap_slot { uint64_t ino; uint32_t area; bool used; uint64_t guest; } *slots;
	size_t cap, count;
	uint64_t next;
};

#define INO_AREA_SHIFT 56
#define INO_REMAPPED_TAG (0xffull << INO_AREA_SHIFT)

void ino_remap_init(struct ino_remap *m);
void ino_remap_free(struct ino_remap *m);
/* The guest's number of host_ino in area. Out of memory for the table it
 * gives the host number itself: a number that may repeat, never a failed
 * request. */
uint64_t ino_remap_get(struct ino_remap *m, uint32_t area, uint64_t host_ino);

static inline uint64_t guest_ino(struct ino_remap *m, bool active, uint32_t area,
				 uint64_t host_ino)
{
	if (!active)
		return host_ino;
	if ((host_ino >> INO_AREA_SHIFT) == 0)
		return host_ino | ((uint64_t)area << INO_AREA_SHIFT);
	return ino_remap_get(m, area, host_ino);
}

#endif
