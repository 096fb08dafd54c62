/*
 * wasm.c — the port for WebAssembly under WASI (clang --target=wasm32-wasi).
 *
 * WASI gives a monotonic clock and stdio over the directories the host
 * preopened (node:wasi, wasmtime --dir). There are no threads and no pid, so
 * ncpu is 1 and the temporary file of an atomic write is named by a counter.
 */
#define _POSIX_C_SOURCE 200809L
#include "stdio_port.h"

/* One process per instance: a counter makes the temporary name unique. */
int port_write_file(const char *path, const void *data, size_t size, char *why)
{
    static unsigned long serial;
    return stdio_write_file(path, data, size, why, ++serial);
}

int port_ncpu(void) { return 1; }

/* ---- one thread: parallel work runs inline ---- */

int port_threads(void) { return 1; }

void port_set_threads(int n) { (void)n; }

int port_parallel_for(int n, void (*fn)(void *arg, int i), void *arg)
{
    for (int i = 0; i < n; i++) fn(arg, i);
    return 1;
}

const char *port_name(void) { return "wasm"; }

/* No compiler runs inside a WASI instance; targets/wasm emits module bytes instead. */
PortModule *port_jit(int how, const char *source, const char *flags, char *why)
{
    (void)how;
    (void)source;
    (void)flags;
    snprintf(why, 256, "no JIT on this platform (wasm): use backend wasm or interp");
    return NULL;
}

void *port_jit_sym(PortModule *m, const char *name)
{
    (void)m;
    (void)name;
    return NULL;
}

void port_jit_free(PortModule *m) { (void)m; }

int port_jit_available(int how)
{
    (void)how;
    return 0;
}
