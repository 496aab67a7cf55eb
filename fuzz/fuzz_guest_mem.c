/* The virtqueue fuzz targets' shared harness: their guest memory, the checks every popped chain must pass, and trimmed seeds. */
#include "fuzz_guest_mem.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_common.h"

/* Maps size bytes of memfd at offset as guest physical gpa into mem, at a
 * fixed fake uva. */
static void region_add(struct guest_mem *mem, int memfd, uint64_t gpa, uint64_t size,
		       uint64_t offset)
{
	struct guest_region_desc d = {
		.gpa = gpa, .size = size, .uva = 0x7f0000000000ull + gpa,
		.mmap_offset = offset,
	};
	struct guest_region r;

	if (guest_region_map(&r, &d, memfd) < 0 || guest_mem_insert(mem, &r) < 0)
		fuzz_fail("cannot map guest region at 0x%llx", (unsigned long long)gpa);
}

void fuzz_guest_init(struct fuzz_guest *g, const char *name, void (*write_seeds)(const char *dir))
{
	fuzz_init_log();
	g->memfd = memfd_create(name, MFD_CLOEXEC);
	if (g->memfd < 0 || ftruncate(g->memfd, FUZZ_MEM_SIZE) < 0)
		fuzz_fail("memfd");
	g->file_map = mmap(NULL, FUZZ_MEM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, g->memfd, 0);
	if (g->file_map == MAP_FAILED || guest_mem_new(&g->mem) < 0)
		fuzz_fail("mmap");
	region_add(g->mem, g->memfd, 0, FUZZ_REG, 0);
	region_add(g->mem, g->memfd, FUZZ_REG, FUZZ_REG, FUZZ_REG);
	region_add(g->mem, g->memfd, FUZZ_GPA_C, FUZZ_REG, 2 * FUZZ_REG);
	if (fuzz_seed_dir()) {
		write_seeds(fuzz_seed_dir());
		exit(0);
	}
}

void fuzz_guest_load(struct fuzz_guest *g, const uint8_t *image, size_t len)
{
	memset(g->file_map, 0, FUZZ_MEM_SIZE);
	memcpy(g->file_map, image, len < FUZZ_MEM_SIZE ? len : FUZZ_MEM_SIZE);
}

uint8_t *fuzz_vq_begin(struct virtq *vq, struct fuzz_guest *g, const uint8_t *data, size_t size)
{
	fuzz_guest_load(g, data + FUZZ_HDR, size - FUZZ_HDR);
	virtq_init(vq, 1);
	virtq_set_mem(vq, g->mem);
	virtq_set_features(vq, data[1] & 1, data[1] & 2);
	return g->mem->regions[0].host;
}

static bool iov_inside_one_region(const struct guest_mem *mem, const struct iovec *v)
{
	for (unsigned i = 0; i < mem->count; i++) {
		const struct guest_region *r = &mem->regions[i];
		const uint8_t *b = v->iov_base;

		if (b >= r->host && v->iov_len <= r->desc.size &&
		    b - r->host <= (ptrdiff_t)(r->desc.size - v->iov_len))
			return true;
	}
	return false;
}

void fuzz_check_elem(const struct guest_mem *mem, const struct virtq_elem *elem, unsigned num)
{
	uint64_t wr_total = 0;
	uint32_t sum = 0;

	FUZZ_ASSERT(elem->head < num, "head (buffer id) %u out of range", elem->head);
	FUZZ_ASSERT(elem->req.rd_cnt + elem->req.wr_cnt <= VIRTQ_MAX_SEGS, "too many segments");
	for (unsigned i = 0; i < elem->req.rd_cnt; i++) {
		const struct iovec *v = &elem->req.rd[i];

		FUZZ_ASSERT(iov_inside_one_region(mem, v), "readable iovec outside guest memory");
		for (size_t j = 0; j < v->iov_len; j++)
			sum += ((const uint8_t *)v->iov_base)[j];
	}
	for (unsigned i = 0; i < elem->req.wr_cnt; i++) {
		const struct iovec *v = &elem->req.wr[i];

		FUZZ_ASSERT(iov_inside_one_region(mem, v), "writable iovec outside guest memory");
		memset(v->iov_base, (int)(sum & 0xff), v->iov_len);
		wr_total += v->iov_len;
	}
	FUZZ_ASSERT(wr_total == elem->wr_len, "wr_len %u, iovecs hold %llu", elem->wr_len,
		    (unsigned long long)wr_total);
}

void fuzz_seed_put(struct fuzz_seed *s, uint64_t at, const void *p, size_t len)
{
	if (at > sizeof(s->mem) || len > sizeof(s->mem) - at)
		fuzz_fail("seed table: %zu bytes at 0x%llx do not fit", len, (unsigned long long)at);
	memcpy(s->mem + at, p, len);
}

void fuzz_write_seeds(const char *dir, size_t count,
		      const char *(*build)(struct fuzz_seed *s, size_t i))
{
	struct fuzz_seed s;

	for (size_t i = 0; i < count; i++) {
		size_t len = sizeof(s);
		const char *name;

		memset(&s, 0, sizeof(s));
		name = build(&s, i);
		while (len > FUZZ_HDR && ((const uint8_t *)&s)[len - 1] == 0)
			len--;
		fuzz_write_seed(dir, name, &s, len);
	}
}
