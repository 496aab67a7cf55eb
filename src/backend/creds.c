/* Per-thread credential switching with raw setres[ug]id syscalls, keeping the capabilities a role needs. */
#include "backend/creds.h"

#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/prctl.h>
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
/* The effective capability set is below the permitted one (a role other
 * than CREDS_OWNER); creds_restore raises it again. */
static __thread bool thread_caps_lowered;
/* Set once SECBIT_NO_SETUID_FIXUP is in force for the process's threads
 * (creds_keep_caps_on_switch runs before any serving thread starts, and
 * threads inherit the bit). Without it no switch is made at all. */
static bool keeps_caps_on_switch;
/* creds_use_single_id: the ids never change, only the capabilities. */
static bool single_id;

void creds_use_single_id(void)
{
	single_id = true;
}

int creds_keep_caps_on_switch(void)
{
	int bits = prctl(PR_GET_SECUREBITS);

	if (bits < 0)
		return -errno;
	/* Without it, an euid off 0 empties the effective set and the host
	 * re-checks permissions as the bare uid/gid, without the groups the
	 * guest's kernel counted. */
	if (!(bits & SECBIT_NO_SETUID_FIXUP) &&
	    prctl(PR_SET_SECUREBITS, bits | SECBIT_NO_SETUID_FIXUP) < 0)
		return -errno;
	keeps_caps_on_switch = true;
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

/* Sets the effective set to the permitted one less the capabilities in
 * drop (a mask over both words, by CAP_TO_INDEX). capset with pid 0
 * changes the calling thread only. */
static int caps_set_effective(const uint32_t drop[2])
{
	struct __user_cap_header_struct hdr;
	struct __user_cap_data_struct data[2];
	int ret = caps_read(&hdr, data);

	if (ret < 0)
		return ret;
	for (int i = 0; i < 2; i++)
		data[i].effective = data[i].permitted & ~drop[i];
	if (syscall(SYS_capset, &hdr, data) < 0)
		return -errno;
	return 0;
}

static int lower_caps(enum creds_role role)
{
	uint32_t drop[2] = { 0, 0 };

	if (role == CREDS_OWNER)
		return 0;
	if (role == CREDS_CALLER_ONLY) {
		drop[0] = drop[1] = UINT32_MAX;
	} else {
		drop[CAP_TO_INDEX(CAP_FSETID)] = CAP_TO_MASK(CAP_FSETID);
	}
	thread_caps_lowered = true;
	return caps_set_effective(drop);
}

int creds_switch(uint32_t uid, uint32_t gid, enum creds_role role)
{
	int ret;

	/* -1 tells setres[ug]id "leave unchanged": the request would run as
	 * root. The guest kernel sends it for ids it cannot map. */
	if (uid == UINT32_MAX || gid == UINT32_MAX)
		return -EPERM;
	/* Switching without the bit would silently judge requests by the
	 * bare ids again. */
	if (!keeps_caps_on_switch)
		return -EPERM;
	if (single_id)
		goto lower;
	/* gid first, then uid: both need CAP_SETGID/CAP_SETUID, which the
	 * kept capabilities still hold after either change. */
	if (gid != thread_egid) {
		if (syscall(SYS_setresgid, -1, gid, -1) < 0)
			return -errno;
		thread_egid = gid;
	}
	if (uid != thread_euid) {
		if (syscall(SYS_setresuid, -1, uid, -1) < 0) {
			ret = -errno;
			goto restore;
		}
		thread_euid = uid;
	}
lower:
	/* Last: CREDS_CALLER_ONLY gives up CAP_SETUID too. */
	ret = lower_caps(role);
	if (ret == 0)
		return 0;
restore:
	creds_restore();
	return ret;
}

void creds_restore(void)
{
	static const uint32_t none[2] = { 0, 0 };

	/* Capabilities first: setres[ug]id back to 0 needs CAP_SETGID, and
	 * with SECBIT_NO_SETUID_FIXUP the euid change does not bring them. */
	if (thread_caps_lowered) {
		if (caps_set_effective(none) < 0) {
			log_err("cannot restore the capabilities: %d", errno);
			abort();
		}
		thread_caps_lowered = false;
	}
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
	if (single_id)
		return 0;
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
	if (single_id)
		return 0;
	/* The raw syscall would only change this thread; glibc's wrapper
	 * changes them all, which is what a process-wide drop wants. */
	if (setgroups(0, NULL) < 0)
		return -errno;
	return 0;
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
