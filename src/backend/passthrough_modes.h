/* The passthrough backend's modes a user picks by name: guest caching and how an inode keeps its host file. */
#ifndef FERRY_PASSTHROUGH_MODES_H
#define FERRY_PASSTHROUGH_MODES_H

/* Apart from passthrough.h so that the daemon's option parser can hold
 * them without seeing the backend's ops. */
enum cache_mode { CACHE_AUTO, CACHE_ALWAYS, CACHE_NEVER, CACHE_METADATA };

/* How an inode keeps its host file: an O_PATH fd for its whole life, or a
 * file handle reopened only while requests use it. */
enum inode_file_handles { FILE_HANDLES_NEVER, FILE_HANDLES_PREFER, FILE_HANDLES_MANDATORY };

#endif
