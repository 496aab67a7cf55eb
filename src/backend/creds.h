/* Per-thread credential switching so host permission checks use the guest's ids. */
#ifndef FERRY_CREDS_H
#define FERRY_CREDS_H

#include <stdint.h>
#include <sys/types.h>

/*
 * Switches the calling thread's effective uid/gid (and so its fsuid/fsgid)
 * to the guest's. Moving euid off 0 makes the kernel clear the effective
 * capability set, so CAP_DAC_OVERRIDE & co. stop bypassing the checks.
 * Only this thread changes: glibc's setresuid() would change all threads.
 */
int creds_switch(uint32_t uid, uint32_t gid);
/* Back to 0/0 and no supplementary group. Aborts if that fails: serving on
 * as a guest uid, or with a guest's group, is unsafe. */
void creds_restore(void);
/* Gives the calling thread one supplementary group until creds_restore.
 * Call it as 0/0, before creds_switch. */
int creds_add_supp_group(uint32_t gid);

/* Supplementary groups of root would follow every guest uid (CVE-2022-0358). */
int creds_drop_supplementary_groups(void);

/* Clears CAP_FSETID from this thread's effective set, so a write kills
 * suid/sgid as the guest's kernel asked (FUSE_WRITE_KILL_SUIDGID). */
int creds_drop_fsetid(void);
void creds_restore_fsetid(void);

/* Sets this thread's umask; the first call gives the thread its own
 * fs_struct (unshare(CLONE_FS)) so umask stays per-thread. */
int creds_set_umask(mode_t mask);

#endif
