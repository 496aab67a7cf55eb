/* One builder per FUSE request ferryfs-load sends, laid out as the Linux driver lays it out. */
#ifndef FERRY_LOAD_FUSE_REQUESTS_H
#define FERRY_LOAD_FUSE_REQUESTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fuse_client.h"

#define FR_RDP_BUF 4096u   /* READDIRPLUS size: what the Linux driver asks for, one page */

/*
 * Each builder starts a new request in s with the given unique id, sets
 * what fc_check expects of the reply, and returns 0 or -errno (-E2BIG when
 * it does not fit the slot). The chain is then ready for submission.
 */

/* READ of size bytes at off into the slot's data buffer, poisoned first
 * (in full when full_check, see fc_pattern_verify). */
int fr_read(struct fc_slot *s, uint64_t unique, uint64_t nodeid, uint64_t fh,
	    uint64_t off, uint32_t size, bool full_check);
/* WRITE of size bytes of the file pattern at off. */
int fr_write(struct fc_slot *s, uint64_t unique, uint64_t nodeid, uint64_t fh,
	     uint64_t off, uint32_t size);
/* A request on a name in parent: opcode, an optional argument of alen
 * bytes before the name, and reply bytes of reply arguments. */
int fr_name(struct fc_slot *s, uint64_t unique, uint32_t opcode, uint64_t parent,
	    const char *name, const void *arg, uint32_t alen, uint32_t reply);
int fr_lookup(struct fc_slot *s, uint64_t unique, uint64_t parent, const char *name);
/* CREATE of a new regular file, O_RDWR | O_EXCL. */
int fr_create(struct fc_slot *s, uint64_t unique, uint64_t parent, const char *name);
/* RELEASE or RELEASEDIR (opcode) of fh. */
int fr_release(struct fc_slot *s, uint64_t unique, uint32_t opcode, uint64_t nodeid,
	       uint64_t fh, uint32_t flags);
int fr_fsync(struct fc_slot *s, uint64_t unique, uint64_t nodeid, uint64_t fh);
int fr_getattr(struct fc_slot *s, uint64_t unique, uint64_t nodeid);
/* OPEN or OPENDIR (opcode). */
int fr_open(struct fc_slot *s, uint64_t unique, uint32_t opcode, uint64_t nodeid,
	    uint32_t flags);
/* READDIRPLUS of FR_RDP_BUF bytes from off into the data buffer. */
int fr_readdirplus(struct fc_slot *s, uint64_t unique, uint64_t nodeid, uint64_t fh,
		   uint64_t off);

/* Checks that an entry reply names an inode of type mode_type: 0, or
 * -EBADMSG with "what: ..." in why. */
int fr_check_entry(const struct fuse_entry_out *e, uint32_t mode_type, const char *what,
		   char *why, size_t whylen);

#endif
