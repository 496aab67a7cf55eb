/* Per-thread credential switching: whose ids a request runs under, and which capabilities stay. */
#ifndef FERRY_CREDS_H
#define FERRY_CREDS_H

#include <stdint.h>
#include <sys/types.h>

/*
 * Who decides what (docs/security.md, "Permissions: the guest's kernel
 * decides"). The guest's kernel has checked every request with the caller's
 * full credentials (virtio-fs and --mount mount with default_permissions)
 * before it sends it; the host cannot redo that check, since FUSE tells it
 * only uid and gid, not the supplementary groups or capabilities. So the
 * daemon acts with its own capabilities, and takes on the caller's ids only
 * where the ids decide the outcome rather than the permission:
 */
enum creds_role {
	/* Ownership: what the request creates belongs to the caller (fsuid,
	 * fsgid, or the directory's group under set-group-ID), while the
	 * daemon's capabilities stay, so the host repeats no permission
	 * check and strips no set-group-ID bit the guest's kernel kept. */
	CREDS_OWNER,
	/* As OWNER but without CAP_FSETID: the host kernel clears suid/sgid
	 * as it would for an unprivileged caller (a write or O_TRUNC the
	 * guest's kernel flagged with KILL_SUIDGID; creates from guests
	 * whose kernel does not strip set-group-ID itself). */
	CREDS_OWNER_NO_FSETID,
	/* The caller's ids and no capability at all: the host judges as it
	 * would judge the caller (FUSE_ACCESS, which asks exactly that). */
	CREDS_CALLER_ONLY,
};

/*
 * Makes euid changes keep the capability sets (SECBIT_NO_SETUID_FIXUP), for
 * the calling thread and every thread it starts afterwards. Needs
 * CAP_SETPCAP, so it runs before capabilities are limited; a no-op when the
 * bit is already set.
 */
int creds_keep_caps_on_switch(void);

/*
 * Switches the calling thread's effective uid/gid (and so its fsuid/fsgid)
 * to the given host ids, with the capabilities the role keeps. Only this
 * thread changes: glibc's setresuid() would change all threads.
 */
int creds_switch(uint32_t uid, uint32_t gid, enum creds_role role);
/* Back to 0/0, full capabilities and no supplementary group. Aborts if that
 * fails: serving on as a guest uid, or with a guest's group, is unsafe. */
void creds_restore(void);
/* Gives the calling thread one supplementary group until creds_restore.
 * Call it as 0/0, before creds_switch. */
int creds_add_supp_group(uint32_t gid);

/* Supplementary groups of root would follow every guest uid (CVE-2022-0358). */
int creds_drop_supplementary_groups(void);

/*
 * For a daemon that is root of a user namespace mapping a single uid and
 * gid (an unprivileged start): no other id exists there to switch to, and
 * setgroups is denied. From then on creds_switch keeps the daemon's ids
 * and only applies the role's capabilities, so everything created belongs
 * to the one mapped id; the supplementary-group calls do nothing (the
 * daemon's own groups are the user's and never follow a guest id). Call it
 * before any serving thread starts.
 */
void creds_use_single_id(void);

/* Sets this thread's umask; the first call gives the thread its own
 * fs_struct (unshare(CLONE_FS)) so umask stays per-thread. */
int creds_set_umask(mode_t mask);

#endif
