/* xattr name mapping between guest and host: QEMU virtiofsd's -o xattrmap= rules. */
#ifndef FERRY_XATTRMAP_H
#define FERRY_XATTRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Linux's XATTR_NAME_MAX; <linux/limits.h> is not pulled in here. */
#define XATTRMAP_NAME_MAX 255
/* Rules a map may hold, the expansion of a `map` rule and the implicit
 * terminator included. */
#define XATTRMAP_MAX_RULES 64

enum xattrmap_type {
	XATTRMAP_PREFIX,        /* client: prepend; server: strip */
	XATTRMAP_OK,            /* pass unchanged */
	XATTRMAP_BAD,           /* client: EPERM; server: hide */
	XATTRMAP_UNSUPPORTED,   /* client: ENOTSUP; server: hide (Rust virtiofsd) */
};

#define XATTRMAP_CLIENT 1u
#define XATTRMAP_SERVER 2u

struct xattrmap_rule {
	enum xattrmap_type type;
	unsigned scope;                       /* XATTRMAP_CLIENT | XATTRMAP_SERVER */
	uint16_t key_len, prepend_len;
	char key[XATTRMAP_NAME_MAX + 1];      /* matched against guest names */
	char prepend[XATTRMAP_NAME_MAX + 1];  /* matched against host names */
};

/* Fixed-size so the options and the backend can hold it by value. */
struct xattrmap {
	unsigned count;                       /* 0: no mapping configured */
	struct xattrmap_rule rules[XATTRMAP_MAX_RULES];
	/* What the guest's security.capability is stored as on the host when
	 * the map renames it (empty otherwise): the host kernel only clears
	 * the real name on write, truncate and chown, so the daemon must
	 * clear this one (CVE-2021-20263). */
	char capability_name[XATTRMAP_NAME_MAX + 1];
};

/*
 * Parses a rule list (":type:scope:key:prepend:" or ":map:key:prepend:",
 * any separator character, whitespace between rules). On error returns
 * -EINVAL and writes one line naming the rule (its number and text) to err.
 */
int xattrmap_parse(struct xattrmap *map, const char *spec, char *err,
		   size_t err_size);

/*
 * Guest name -> host name. Returns 0 with *host pointing at name itself or
 * at buf (XATTRMAP_NAME_MAX + 1 bytes); -EPERM (bad), -EOPNOTSUPP
 * (unsupported) or -ERANGE (the mapped name is too long).
 */
int xattrmap_to_host(const struct xattrmap *map, const char *name,
		     char buf[XATTRMAP_NAME_MAX + 1], const char **host);

/* Host name -> guest name: false when the guest must not see it, else
 * *guest points into host_name (a prefix stripped, or all of it). */
bool xattrmap_to_guest(const struct xattrmap *map, const char *host_name,
		       const char **guest);

#endif
