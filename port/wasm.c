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

const char *port_name(void) { return "wasm"; }

/* No compiler runs inside a WASI instance; targets/wasm emits module bytes instead. */
#define NO_JIT_REASON "wasm: use backend wasm or interp"
#include "single_port.h"
