/*
 * wasm.c — the port for WebAssembly under WASI (clang --target=wasm32-wasi).
 *
 * WASI gives a monotonic clock and stdio over the directories the host
 * preopened (node:wasi, wasmtime --dir). There are no threads and no pid, so
 * ncpu is 1 and the temporary file of an atomic write is named by a counter.
 */
#define _POSIX_C_SOURCE 200809L
#include "port.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t port_now_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void port_log(const char *s) { fprintf(stderr, "%s\n", s); }

int port_read_file(const char *path, void **data, size_t *size, char *why)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, 128, "cannot open: %s", strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *nb = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
        if (!nb) { free(buf); buf = NULL; break; }
        buf = nb;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        snprintf(why, 128, "%s", bad ? "read error" : "out of memory");
        return -1;
    }
    *data = buf;
    *size = n;
    return 0;
}

/* One process per instance: a counter makes the temporary name unique. */
int port_write_file(const char *path, const void *data, size_t size, char *why)
{
    static unsigned long serial;
    size_t len = strlen(path);
    char *tmp = malloc(len + 32);
    if (!tmp) {
        snprintf(why, 128, "out of memory");
        return -1;
    }
    snprintf(tmp, len + 32, "%s.tmp.%lu", path, ++serial);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        snprintf(why, 128, "cannot create %s: %s", tmp, strerror(errno));
        free(tmp);
        return -1;
    }
    int ok = fwrite(data, 1, size, f) == size;
    ok = (fflush(f) == 0) && ok;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        snprintf(why, 128, "cannot write %s: %s", path, strerror(errno));
        remove(tmp);
        free(tmp);
        return -1;
    }
    free(tmp);
    return 0;
}

int port_ncpu(void) { return 1; }

const char *port_name(void) { return "wasm"; }
