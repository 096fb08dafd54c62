/*
 * baremetal.c — the port for microcontrollers (Cortex-M, newlib), no OS.
 *
 * There is no file system and no clock that kiln can know about, so the board
 * supplies what it has by defining strong versions of two weak hooks:
 *
 *     void kn_board_log(const char *s);   // one line, no newline; default: drop it
 *     uint64_t kn_board_now_ns(void);     // monotonic ns; default: 0 (no clock)
 *
 * e.g. a board with a UART defines kn_board_log to write s and "\r\n" to it,
 * and one with DWT_CYCCNT defines kn_board_now_ns from the cycle counter.
 */
#include "port.h"

#include <stdio.h>

void kn_board_log(const char *s);
uint64_t kn_board_now_ns(void);

__attribute__((weak)) void kn_board_log(const char *s) { (void)s; }

__attribute__((weak)) uint64_t kn_board_now_ns(void) { return 0; }

uint64_t port_now_ns(void) { return kn_board_now_ns(); }

void port_log(const char *s) { kn_board_log(s); }

int port_read_file(const char *path, void **data, size_t *size, char *why)
{
    *data = NULL; /* never read by callers, but set, so compilers that inline this see so */
    *size = 0;
    snprintf(why, 128, "cannot open %.80s: no file system on bare metal", path);
    return -1;
}

int port_write_file(const char *path, const void *data, size_t size, char *why)
{
    (void)data;
    (void)size;
    snprintf(why, 128, "cannot write %.80s: no file system on bare metal", path);
    return -1;
}

const char *port_name(void) { return "baremetal"; }

/* No compiler on a microcontroller: models come here exported ahead of time. */
#define NO_JIT_REASON "bare metal: export the model ahead of time"
#include "single_port.h"
