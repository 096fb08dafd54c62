/*
 * port.h — everything kiln needs from the platform, chosen at link time:
 * posix.c (Linux, macOS), wasm.c (wasm32-wasi), baremetal.c (Cortex-M).
 * src/ calls nothing else outside libc and libm.
 *
 * Functions that a platform cannot provide return an error value (-1, NULL)
 * rather than being left out, so every port links the same library.
 */
#ifndef KN_PORT_H
#define KN_PORT_H

#include <stddef.h>
#include <stdint.h>

/* monotonic clock in nanoseconds; 0 where there is none */
uint64_t port_now_ns(void);

/* one line of diagnostics (no newline in s); the default log sink */
void port_log(const char *s);

/* Read a whole file into *data (allocated with malloc, caller frees).
 * Returns 0, or -1 with a reason in why (at least 128 bytes). */
int port_read_file(const char *path, void **data, size_t *size, char *why);

/* Write a file atomically: write path.tmp.<pid>, then rename over path,
 * so an interrupted write never leaves a half-written file. 0 or -1. */
int port_write_file(const char *path, const void *data, size_t size, char *why);

/* number of hardware threads (1 where unknown) */
int port_ncpu(void);

/* the name of this port: "posix", "wasm", "baremetal" */
const char *port_name(void);

#endif
