/*
 * posix.c — the port for Linux and other POSIX systems.
 */
#define _POSIX_C_SOURCE 200809L
#include "stdio_port.h"

#include <unistd.h>

int port_write_file(const char *path, const void *data, size_t size, char *why)
{
    return stdio_write_file(path, data, size, why, (unsigned long)getpid());
}

int port_ncpu(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

const char *port_name(void) { return "posix"; }
