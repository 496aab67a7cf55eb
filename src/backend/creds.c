/* Per-thread credential switching with raw setres[ug]id syscalls. */
#include "backend/creds.h"

#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"

/* What this thread runs as, so unchanged creds cost no syscall. Threads
 * start as the daemon (0/0) and every switch is undone before returning. */
static __thread uint32_t thread_euid;
static __thread uint32_t thread_egid;
static __thread bool thread_has_own_fs;
static __thread mode_t thread_umask;
static __thread bool thread_has_supp_group;

int creds_switch(uint32_t uid, uint32_t gid)
{
	/* -1 tells setres[ug]id "leave unchanged": the request would run as
	 * root. The guest kernel sends it for ids it cannot map. */
	if (uid == UINT32_MAX || gid == UINT32_MAX)
		return -EPERM;
	/* gid first: once euid leaves 0 we lack CAP_SETGID. */
	if (gid != thread_egid) {
		if (syscall(SYS_setresgid, -1, gid, -1) < 0)
			return -errno;
		thread_egid = gid;
	}
	if (uid != thread_euid) {
		if (syscall(SYS_setresuid, -1, uid, -1) < 0) {
			int ret = -errno;

			creds_restore();
			return ret;
		}
		thread_euid = uid;
	}
	return 0;
}

void creds_restore(void)
{
	/* uid first: euid 0 brings back the capabilities setresgid needs. */
	if (thread_euid != 0) {
		if (syscall(SYS_setresuid, -1, 0, -1) < 0) {
			log_err("cannot restore euid 0: %d", errno);
			abort();
		}
		thread_euid = 0;
	}
	if (thread_egid != 0) {
		if (syscall(SYS_setresgid, -1, 0, -1) < 0) {
			log_err("cannot restore egid 0: %d", errno);
			abort();
		}
		thread_egid = 0;
	}
	/* A group kept past its request would be CVE-2022-0358 again. */
	if (thread_has_supp_group) {
		if (syscall(SYS_setgroups, 0, NULL) < 0) {
			log_err("cannot drop the supplementary group: %d", errno);
			abort();
		}
		thread_has_supp_group = false;
	}
}

int creds_add_supp_group(uint32_t gid)
{
	gid_t one = gid;

	if (gid == UINT32_MAX)
		return -EPERM;
	/* The raw syscall changes this thread only; glibc's wrapper would
	 * give the group to every thread. Needs euid 0 (CAP_SETGID), so it
	 * comes before creds_switch. */
	if (syscall(SYS_setgroups, 1, &one) < 0)
		return -errno;
	thread_has_supp_group = true;
	return 0;
}

int creds_drop_supplementary_groups(void)
{
	/* The raw syscall would only change this thread; glibc's wrapper
	 * changes them all, which is what a process-wide drop wants. */
	if (setgroups(0, NULL) < 0)
		return -errno;
	return 0;
}

static int caps_read(struct __user_cap_header_struct *hdr,
		     struct __user_cap_data_struct data[2])
{
	hdr->version = _LINUX_CAPABILITY_VERSION_3;
	hdr->pid = 0;
	if (syscall(SYS_capget, hdr, data) < 0)
		return -errno;
	return 0;
}

static int fsetid_effective(bool on)
{
	struct __user_cap_header_struct hdr;
	struct __user_cap_data_struct data[2];
	uint32_t bit = CAP_TO_MASK(CAP_FSETID);
	int ret = caps_read(&hdr, data);

	if (ret < 0)
		return ret;
	if (on)
		data[CAP_TO_INDEX(CAP_FSETID)].effective |=
			data[CAP_TO_INDEX(CAP_FSETID)].permitted & bit;
	else
		data[CAP_TO_INDEX(CAP_FSETID)].effective &= ~bit;
	/* capset with pid 0 changes the calling thread only. */
	if (syscall(SYS_capset, &hdr, data) < 0)
		return -errno;
	return 0;
}

int creds_drop_fsetid(void)
{
	return fsetid_effective(false);
}

void creds_restore_fsetid(void)
{
	if (fsetid_effective(true) < 0) {
		log_err("cannot restore CAP_FSETID: %d", errno);
		abort();
	}
}

int creds_set_umask(mode_t mask)
{
	if (!thread_has_own_fs) {
		if (unshare(CLONE_FS) < 0)
			return -errno;
		thread_has_own_fs = true;
		umask(mask);
		thread_umask = mask;
		return 0;
	}
	if (mask != thread_umask) {
		umask(mask);
		thread_umask = mask;
	}
	return 0;
}
