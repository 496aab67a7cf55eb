/* Which shares and which opcodes the request pool serves (pool_policy.h says why). */
#include "daemon/pool_policy.h"

#include <linux/fuse.h>
#include <linux/magic.h>

#include "common/log.h"

/* Not in every linux/magic.h. */
#define FS_MAGIC_FUSE 0x65735546ul
#define FS_MAGIC_CEPH 0x00c36400ul
#define FS_MAGIC_SMB2 0xfe534d42ul
#define FS_MAGIC_CIFS 0xff534d42ul
#define FS_MAGIC_LUSTRE 0x0bd00bd0ul
#define FS_MAGIC_9P 0x01021997ul

bool pool_policy_storage_remote(unsigned long fs_type)
{
	switch (fs_type) {
	case FS_MAGIC_FUSE:
	case FS_MAGIC_CEPH:
	case FS_MAGIC_SMB2:
	case FS_MAGIC_CIFS:
	case FS_MAGIC_LUSTRE:
	case FS_MAGIC_9P:
	case NFS_SUPER_MAGIC:
	case SMB_SUPER_MAGIC:
	case AFS_SUPER_MAGIC:
	case AFS_FS_MAGIC:
	case CODA_SUPER_MAGIC:
		return true;
	default:
		return false;
	}
}

bool pool_policy_opcode_pooled(uint32_t opcode)
{
	switch (opcode) {
	case FUSE_LOOKUP:
	case FUSE_GETATTR:
	case FUSE_SETATTR:
	case FUSE_READLINK:
	case FUSE_SYMLINK:
	case FUSE_MKNOD:
	case FUSE_MKDIR:
	case FUSE_UNLINK:
	case FUSE_RMDIR:
	case FUSE_RENAME:
	case FUSE_LINK:
	case FUSE_OPEN:
	case FUSE_STATFS:
	case FUSE_RELEASE:
	case FUSE_FSYNC:
	case FUSE_SETXATTR:
	case FUSE_GETXATTR:
	case FUSE_LISTXATTR:
	case FUSE_REMOVEXATTR:
	case FUSE_FLUSH:
	case FUSE_OPENDIR:
	case FUSE_RELEASEDIR:
	case FUSE_FSYNCDIR:
	case FUSE_ACCESS:
	case FUSE_CREATE:
	case FUSE_FALLOCATE:
	case FUSE_RENAME2:
	case FUSE_LSEEK:
	case FUSE_COPY_FILE_RANGE:
		return true;
	default:
		return false;
	}
}

bool pool_trial_next(struct pool_trial *t, uint64_t now_ns)
{
	bool settled = t->phase == POOL_TRIAL_KEPT;
	unsigned len = settled ? POOL_TRIAL_SETTLED : POOL_TRIAL_PROBE;
	uint64_t min_ns = settled ? POOL_TRIAL_SETTLED_MIN_NS : POOL_TRIAL_PROBE_MIN_NS;
	uint64_t took;

	if (t->count > 0 && now_ns - t->last_ns > POOL_TRIAL_GAP_NS)
		t->count = 0;
	if (t->count == 0)
		t->start_ns = now_ns;
	t->last_ns = now_ns;
	if (++t->count <= len || now_ns - t->start_ns < min_ns)
		return t->pooled;
	/* Time per candidate: a phase ends on a count or on a time,
	 * whichever comes last, so two phases differ in length. */
	took = (now_ns - t->start_ns) / (t->count - 1);
	switch (t->phase) {
	case POOL_TRIAL_INLINE:
		t->inline_ns = took;
		t->phase = POOL_TRIAL_POOLED;
		t->pooled = true;
		break;
	case POOL_TRIAL_POOLED:
		t->pooled = took * 100 <= t->inline_ns * POOL_TRIAL_KEEP_PERCENT;
		t->phase = POOL_TRIAL_KEPT;
		log_debug("request pool: a slow request took %llu ns on the pool, %llu on the "
			  "queue thread: %s", (unsigned long long)took,
			  (unsigned long long)t->inline_ns,
			  t->pooled ? "the pool serves them" : "the queue thread serves them");
		break;
	case POOL_TRIAL_KEPT:
		t->phase = POOL_TRIAL_INLINE;
		t->pooled = false;
		break;
	}
	t->count = 1;
	t->start_ns = now_ns;
	return t->pooled;
}
