/* Helpers shared by the fuzz targets: seed writing, fd counting, quiet logs. */
#ifndef FERRY_FUZZ_COMMON_H
#define FERRY_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* The entry points libFuzzer calls. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The seeds in fuzz/corpus/ are written by the targets themselves, so their
 * format lives next to the parser: with FERRY_FUZZ_WRITE_SEEDS=DIR set, a
 * target's LLVMFuzzerInitialize calls its seed builder and exits. */
const char *fuzz_seed_dir(void);
void fuzz_write_seed(const char *dir, const char *name, const void *buf, size_t len);

/* Daemon log at error level and silenced, or at debug level on stderr when
 * FERRY_FUZZ_DEBUG is set (to replay one input). */
void fuzz_init_log(void);

/* Aborts with a message: the fuzzer records the input as a crash. */
void fuzz_fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

#define FUZZ_ASSERT(cond, ...) do { if (!(cond)) fuzz_fail(__VA_ARGS__); } while (0)

#endif
