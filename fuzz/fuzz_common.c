/* Helpers shared by the fuzz targets: seed writing, fd counting, failure reports. */
#include "fuzz_common.h"

#include "common/log.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

const char *fuzz_seed_dir(void)
{
	return getenv("FERRY_FUZZ_WRITE_SEEDS");
}

void fuzz_write_seed(const char *dir, const char *name, const void *buf, size_t len)
{
	char path[4096];
	FILE *f;

	mkdir(dir, 0755);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

void fuzz_init_log(void)
{
	FILE *null;

	if (getenv("FERRY_FUZZ_DEBUG")) {
		ferry_log_init(LOG_LVL_DEBUG, false);
		return;
	}
	ferry_log_init(LOG_LVL_ERROR, false);
	/* The daemon logs every refused message, which is what the fuzzer
	 * sends most. Its log goes through the stderr FILE; libFuzzer and
	 * the sanitizers write to fd 2 themselves and keep reporting. */
	null = fopen("/dev/null", "w");
	if (null)
		stderr = null;
}

void fuzz_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	dprintf(STDERR_FILENO, "FUZZ FAILURE: ");
	vdprintf(STDERR_FILENO, fmt, ap);
	dprintf(STDERR_FILENO, "\n");
	va_end(ap);
	abort();
}
