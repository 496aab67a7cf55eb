/* ferryfsd's capabilities: keeps the ones the file operations need, changed by --modcaps. */
#include "daemon/caps.h"

#include <cap-ng.h>
#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"

int ferry_modcaps_walk(const char *list, int (*each)(int cap, bool add, void *opaque),
		       void *opaque)
{
	const char *p = list;

	if (!*p)
		return -EINVAL;
	while (*p) {
		char name[64];
		size_t len = strcspn(p, ":,");
		const char *start = p + 1;
		bool add = *p == '+';
		int cap, ret;

		if ((*p != '+' && *p != '-') || len < 2 || len >= sizeof(name))
			return -EINVAL;
		for (size_t i = 0; i < len - 1; i++)
			name[i] = (char)tolower((unsigned char)start[i]);
		name[len - 1] = '\0';
		cap = capng_name_to_capability(strncmp(name, "cap_", 4) ? name : name + 4);
		if (cap < 0)
			return -EINVAL;
		ret = each(cap, add, opaque);
		if (ret)
			return ret;
		p += len;
		if (*p && !*++p)
			return -EINVAL;     /* a trailing separator */
	}
	return 0;
}

/* What the file operations need: ownership and mode changes, bypassing
 * permission checks as root does, switching to the guest's ids, device
 * nodes and file capabilities. */
static const int kept_caps[] = {
	CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID, CAP_SETGID,
	CAP_SETUID, CAP_MKNOD, CAP_SETFCAP,
};

static int modcap_apply(int cap, bool add, void *opaque)
{
	(void)opaque;
	return capng_update(add ? CAPNG_ADD : CAPNG_DROP,
			    CAPNG_EFFECTIVE | CAPNG_PERMITTED | CAPNG_BOUNDING_SET,
			    (unsigned)cap) ? -EINVAL : 0;
}

int caps_limit(const char *modcaps, bool file_handles)
{
	int ret;

	if (geteuid() != 0)
		return 0;
	capng_clear(CAPNG_SELECT_BOTH);
	for (size_t i = 0; i < sizeof(kept_caps) / sizeof(*kept_caps); i++)
		if (modcap_apply(kept_caps[i], true, NULL))
			return -EINVAL;
	/* open_by_handle_at() requires it. */
	if (file_handles && modcap_apply(CAP_DAC_READ_SEARCH, true, NULL))
		return -EINVAL;
	if (modcaps) {
		ret = ferry_modcaps_walk(modcaps, modcap_apply, NULL);
		if (ret)
			return ret;
	}
	if (capng_apply(CAPNG_SELECT_BOTH) == 0)
		return 0;
	/* Trimming the bounding set needs CAP_SETPCAP, which a container may
	 * not grant; the permitted set is what matters for the daemon. */
	log_warn("capabilities: cannot trim the bounding set; limiting the "
		 "effective and permitted sets only");
	if (capng_apply(CAPNG_SELECT_CAPS))
		return -EPERM;
	return 0;
}
