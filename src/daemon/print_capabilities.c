/* --print-capabilities: the JSON description libvirt reads to know what this vhost-user backend is. */
#include "daemon/print_capabilities.h"

void print_capabilities(FILE *out)
{
	/* libvirt reads this. "migrate-precopy": the vhost-user device can be
	 * migrated (docs/migration.md). "separate-options" is left out on
	 * purpose although ferryfsd understands the --shared-dir dialect:
	 * libvirt 10+ refuses <lock> for a daemon that lists it, and passes
	 * -o source=...,flock,posix_lock (with --uid-map and the rest) to
	 * one that does not (README "With libvirt"). */
	fprintf(out, "{\n  \"type\": \"fs\",\n  \"features\": [\n"
		"    \"migrate-precopy\"\n  ]\n}\n");
}
