/* Guest memory table: the frontend's shared-memory regions and address translation. */
#include "transport/guest_mem.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "common/log.h"

/* True if [a, a + len) wraps past the top of the 64-bit space. A range that
 * ends exactly at 2^64 is fine: its last byte is UINT64_MAX. */
static bool range_wraps(uint64_t a, uint64_t len)
{
	return len != 0 && a + (len - 1) < a;
}

static bool ranges_overlap(uint64_t a, uint64_t a_len, uint64_t b, uint64_t b_len)
{
	/* Compare last bytes, not ends, so ranges reaching 2^64 work. */
	return a <= b + (b_len - 1) && b <= a + (a_len - 1);
}

int guest_region_map(struct guest_region *r, const struct guest_region_desc *desc,
		     int fd)
{
	struct stat st;
	uint64_t map_len;
	void *base;

	memset(r, 0, sizeof(*r));
	if (desc->size == 0 || range_wraps(desc->gpa, desc->size) ||
	    range_wraps(desc->uva, desc->size) ||
	    range_wraps(desc->mmap_offset, desc->size)) {
		log_err("memory region gpa 0x%llx size 0x%llx uva 0x%llx offset 0x%llx: "
			"empty or wraps around",
			(unsigned long long)desc->gpa, (unsigned long long)desc->size,
			(unsigned long long)desc->uva,
			(unsigned long long)desc->mmap_offset);
		return -EINVAL;
	}
	/* Mapping from offset 0 keeps mmap's offset page-aligned whatever the
	 * page size of the backing file (hugetlbfs included). */
	map_len = desc->mmap_offset + desc->size;
	if (map_len < desc->size || map_len > SIZE_MAX)
		return -EINVAL;
	if (fstat(fd, &st) < 0) {
		int err = -errno;
		log_err("memory region fd %d: %s", fd, strerror(errno));
		return err;
	}
	/* Touching a shared mapping past the end of a file is SIGBUS, so a
	 * region larger than its file is refused up front. */
	if (S_ISREG(st.st_mode) && (uint64_t)st.st_size < map_len) {
		log_err("memory region needs %llu bytes of its fd, file has %lld",
			(unsigned long long)map_len, (long long)st.st_size);
		return -EINVAL;
	}
	base = mmap(NULL, (size_t)map_len, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_NORESERVE, fd, 0);
	if (base == MAP_FAILED) {
		int err = -errno;
		log_err("mmap of memory region (%llu bytes): %s",
			(unsigned long long)map_len, strerror(errno));
		return err;
	}
	r->desc = *desc;
	r->map_base = base;
	r->map_len = (size_t)map_len;
	r->host = (uint8_t *)base + desc->mmap_offset;
	return 0;
}

void guest_region_unmap(struct guest_region *r)
{
	if (r->map_base)
		munmap(r->map_base, r->map_len);
	memset(r, 0, sizeof(*r));
}

int guest_mem_new(struct guest_mem **out)
{
	struct guest_mem *mem = calloc(1, sizeof(*mem));

	if (!mem)
		return -ENOMEM;
	*out = mem;
	return 0;
}

void guest_mem_clear(struct guest_mem *mem)
{
	for (unsigned i = 0; i < mem->count; i++)
		guest_region_unmap(&mem->regions[i]);
	mem->count = 0;
}

void guest_mem_free(struct guest_mem *mem)
{
	if (!mem)
		return;
	guest_mem_clear(mem);
	free(mem);
}

int guest_mem_insert(struct guest_mem *mem, const struct guest_region *r)
{
	const struct guest_region_desc *d = &r->desc;
	unsigned pos = 0;

	if (mem->count >= GUEST_MEM_MAX_REGIONS)
		return -ENOSPC;
	for (unsigned i = 0; i < mem->count; i++) {
		const struct guest_region_desc *o = &mem->regions[i].desc;

		/* Overlaps in uva would make ring translation ambiguous,
		 * overlaps in gpa make buffer translation ambiguous. */
		if (ranges_overlap(d->gpa, d->size, o->gpa, o->size) ||
		    ranges_overlap(d->uva, d->size, o->uva, o->size)) {
			log_err("memory region gpa 0x%llx+0x%llx uva 0x%llx overlaps "
				"gpa 0x%llx+0x%llx uva 0x%llx",
				(unsigned long long)d->gpa, (unsigned long long)d->size,
				(unsigned long long)d->uva, (unsigned long long)o->gpa,
				(unsigned long long)o->size, (unsigned long long)o->uva);
			return -EEXIST;
		}
		if (o->gpa < d->gpa)
			pos = i + 1;
	}
	memmove(&mem->regions[pos + 1], &mem->regions[pos],
		(mem->count - pos) * sizeof(mem->regions[0]));
	mem->regions[pos] = *r;
	mem->count++;
	return 0;
}

int guest_mem_remove(struct guest_mem *mem, const struct guest_region_desc *desc,
		     struct guest_region *removed)
{
	for (unsigned i = 0; i < mem->count; i++) {
		const struct guest_region_desc *o = &mem->regions[i].desc;

		if (o->gpa != desc->gpa || o->size != desc->size || o->uva != desc->uva)
			continue;
		*removed = mem->regions[i];
		memmove(&mem->regions[i], &mem->regions[i + 1],
			(mem->count - i - 1) * sizeof(mem->regions[0]));
		mem->count--;
		return 0;
	}
	return -ENOENT;
}

/* The region containing gpa, by binary search over the sorted table. */
static const struct guest_region *find_gpa(const struct guest_mem *mem, uint64_t gpa)
{
	unsigned lo = 0, hi = mem->count;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;
		const struct guest_region *r = &mem->regions[mid];

		if (gpa < r->desc.gpa)
			hi = mid;
		else if (gpa - r->desc.gpa >= r->desc.size)
			lo = mid + 1;
		else
			return r;
	}
	return NULL;
}

int guest_mem_gpa_to_iov(const struct guest_mem *mem, uint64_t gpa, uint64_t len,
			 struct iovec *iov, unsigned max, unsigned *cnt)
{
	unsigned n = *cnt;

	if (range_wraps(gpa, len))
		return -EFAULT;
	while (len > 0) {
		const struct guest_region *r = find_gpa(mem, gpa);
		uint64_t off, chunk;

		if (!r)
			return -EFAULT;
		if (n >= max)
			return -E2BIG;
		off = gpa - r->desc.gpa;
		chunk = r->desc.size - off;
		if (chunk > len)
			chunk = len;
		iov[n].iov_base = r->host + off;
		iov[n].iov_len = (size_t)chunk;
		n++;
		len -= chunk;
		/* No wrap: range_wraps() above bounds gpa + len. */
		gpa += chunk;
	}
	*cnt = n;
	return 0;
}

void *guest_mem_gpa_to_ptr(const struct guest_mem *mem, uint64_t gpa, uint64_t len)
{
	const struct guest_region *r;

	if (len == 0 || range_wraps(gpa, len))
		return NULL;
	r = find_gpa(mem, gpa);
	if (!r || len > r->desc.size - (gpa - r->desc.gpa))
		return NULL;
	return r->host + (gpa - r->desc.gpa);
}

void *guest_mem_uva_to_ptr(const struct guest_mem *mem, uint64_t uva, uint64_t len)
{
	if (len == 0 || range_wraps(uva, len))
		return NULL;
	/* Linear: only ring setup translates frontend addresses. */
	for (unsigned i = 0; i < mem->count; i++) {
		const struct guest_region *r = &mem->regions[i];

		if (uva < r->desc.uva || uva - r->desc.uva >= r->desc.size)
			continue;
		if (len > r->desc.size - (uva - r->desc.uva))
			return NULL;
		return r->host + (uva - r->desc.uva);
	}
	return NULL;
}

int guest_mem_uva_to_gpa(const struct guest_mem *mem, uint64_t uva, uint64_t *gpa)
{
	for (unsigned i = 0; i < mem->count; i++) {
		const struct guest_region *r = &mem->regions[i];

		if (uva >= r->desc.uva && uva - r->desc.uva < r->desc.size) {
			*gpa = r->desc.gpa + (uva - r->desc.uva);
			return 0;
		}
	}
	return -EFAULT;
}

int guest_mem_host_to_gpa(const struct guest_mem *mem, const void *p, uint64_t len,
			  uint64_t *gpa)
{
	uintptr_t a = (uintptr_t)p;

	for (unsigned i = 0; i < mem->count; i++) {
		const struct guest_region *r = &mem->regions[i];
		uintptr_t h = (uintptr_t)r->host;

		if (a >= h && a - h < r->desc.size && len <= r->desc.size - (a - h)) {
			*gpa = r->desc.gpa + (a - h);
			return 0;
		}
	}
	return -EFAULT;
}
