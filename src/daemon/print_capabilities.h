/* --print-capabilities: the JSON description libvirt reads to know what this vhost-user backend is. */
#ifndef FERRY_DAEMON_PRINT_CAPABILITIES_H
#define FERRY_DAEMON_PRINT_CAPABILITIES_H

#include <stdio.h>

/* The vhost-user backend description (type and features) libvirt asks for. */
void print_capabilities(FILE *out);

#endif
