/* --add-dir: the syntax of NAME[,ro]:DIR, and the table of guest inode numbers for host numbers too large to carry an area. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/added_dirs.h"
#include "common/hash.h"

int added_dir_find(const struct added_dir_list *l, const char *name, size_t len)
{
	for (unsigned i = 0; i < l->count; i++)
		if (l->dirs[i].name_len == len && !memcmp(l->dirs[i].name, name, len))
			return (int)i;
	return -1;
}

int added_dir_add(struct added_dir_list *l, const char *spec, char *msg, size_t msg_size)
{
	const char *colon = strchr(spec, ':');
	struct added_dir d = { .name = spec, .fd = -1 };
	size_t field;

	if (!colon || !colon[1]) {
		snprintf(msg, msg_size, "'%s': NAME:DIR or NAME,ro:DIR is needed", spec);
		return -EINVAL;
	}
	field = (size_t)(colon - spec);
	d.dir = colon + 1;
	d.name_len = strcspn(spec, ",:");
	if (d.name_len < field) {
		/* The flags between NAME and ':' ("ro" the only one). */
		if (field - d.name_len != 3 || memcmp(spec + d.name_len, ",ro", 3)) {
			snprintf(msg, msg_size, "'%.*s': the only flag after NAME is ',ro'",
				 (int)field, spec);
			return -EINVAL;
		}
		d.read_only = true;
	}
	if (d.name_len == 0 || d.name_len > NAME_MAX ||
	    memchr(spec, '/', d.name_len) ||
	    (d.name_len == 1 && spec[0] == '.') ||
	    (d.name_len == 2 && spec[0] == '.' && spec[1] == '.')) {
		snprintf(msg, msg_size, "'%.*s': NAME must be one file name, not '.' or '..' "
			 "(no '/', ',' or ':')", (int)d.name_len, spec);
		return -EINVAL;
	}
	if (added_dir_find(l, spec, d.name_len) >= 0) {
		snprintf(msg, msg_size, "'%.*s': NAME given twice", (int)d.name_len, spec);
		return -EINVAL;
	}
	if (l->count >= ADDED_DIRS_MAX) {
		snprintf(msg, msg_size, "at most %d added directories", ADDED_DIRS_MAX);
		return -EINVAL;
	}
	l->dirs[l->count++] = d;
	return 0;
}

void ino_remap_init(struct ino_remap *m)
{
	memset(m, 0, sizeof(*m));
	pthread_mutex_init(&m->lock, NULL);
}

void ino_remap_free(struct ino_remap *m)
{
	free(m->slots);
	pthread_mutex_destroy(&m->lock);
	memset(m, 0, sizeof(*m));
}

static size_t slot_of(const struct ino_remap *m, uint32_t area, uint64_t ino)
{
	size_t i = ferry_mix64(ino ^ area) & (m->cap - 1);

	while (m->slots[i].used && (m->slots[i].ino != ino || m->slots[i].area != area))
		i = (i + 1) & (m->cap - 1);
	return i;
}

/* Doubles the table (a power of two, at most half full). */
static int grow(struct ino_remap *m)
{
	struct ino_remap_slot *old = m->slots;
	size_t old_cap = m->cap, cap = old_cap ? old_cap * 2 : 64;

	m->slots = calloc(cap, sizeof(*m->slots));
	if (!m->slots) {
		m->slots = old;
		return -ENOMEM;
	}
	m->cap = cap;
	for (size_t i = 0; i < old_cap; i++)
		if (old[i].used)
			m->slots[slot_of(m, old[i].area, old[i].ino)] = old[i];
	free(old);
	return 0;
}

uint64_t ino_remap_get(struct ino_remap *m, uint32_t area, uint64_t host_ino)
{
	uint64_t guest = host_ino;
	size_t i;

	pthread_mutex_lock(&m->lock);
	if ((m->count + 1) * 2 > m->cap && grow(m) < 0)
		goto out;
	i = slot_of(m, area, host_ino);
	if (!m->slots[i].used) {
		m->slots[i] = (struct ino_remap_slot){
			.ino = host_ino, .area = area, .used = true,
			.guest = INO_REMAPPED_TAG | ++m->next,
		};
		m->count++;
	}
	guest = m->slots[i].guest;
out:
	pthread_mutex_unlock(&m->lock);
	return guest;
}
