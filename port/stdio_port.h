/*
 * stdio_port.h — the parts of a port that C's stdio, POSIX clocks and stat give:
 * included by posix.c and wasm.c, which differ only in threads, the cpu count
 * and how the temporary file of an atomic write is named.
 */
#ifndef KN_STDIO_PORT_H
#define KN_STDIO_PORT_H

#include <sys/stat.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "port.h"

uint64_t port_now_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void port_log(const char *s) { fprintf(stderr, "%s\n", s); }

/* 1 if path names a directory: fopen opens one for reading where the C
 * library allows it, and then every read fails with a bare EISDIR (or EBADF
 * under WASI), so the messages below ask first. */
static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int port_read_file(const char *path, void **data, size_t *size, char *why)
{
    if (is_dir(path)) {
        snprintf(why, 128, "is a directory, not a file");
        return -1;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, 128, "cannot open: %s", strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    int err = 0;
    errno = 0; /* what a failed read leaves there names why */
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) {
            err = ferror(f) ? (errno ? errno : EIO) : 0;
            break;
        }
        char *nb = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
        if (!nb) { free(buf); buf = NULL; break; }
        buf = nb;
        cap *= 2;
    }
    fclose(f);
    if (!buf || err) {
        free(buf);
        if (err) snprintf(why, 128, "cannot read: %s", strerror(err));
        else snprintf(why, 128, "out of memory");
        return -1;
    }
    *data = buf;
    *size = n;
    return 0;
}

/* Writes path.tmp.<id>, then renames it over path. The reason names the
 * problem, not the paths: the caller names path, and the temporary file is
 * no concern of the user's. */
static int stdio_write_file(const char *path, const void *data, size_t size, char *why, unsigned long id)
{
    if (is_dir(path)) { /* rename would fail only after the temporary file was written beside it */
        snprintf(why, 128, "is a directory, not a file");
        return -1;
    }
    size_t len = strlen(path);
    char *tmp = malloc(len + 32);
    if (!tmp) {
        snprintf(why, 128, "out of memory");
        return -1;
    }
    snprintf(tmp, len + 32, "%s.tmp.%lu", path, id);
    FILE *f = fopen(tmp, "wb");
    if (!f) { /* the file itself need not exist: ENOENT means its directory does not */
        int e = errno;
        snprintf(why, 128, "cannot create: %s", e == ENOENT ? "its directory does not exist" : strerror(e));
        free(tmp);
        return -1;
    }
    int ok = fwrite(data, 1, size, f) == size;
    ok = (fflush(f) == 0) && ok;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        snprintf(why, 128, "cannot write: %s", strerror(errno));
        remove(tmp);
        free(tmp);
        return -1;
    }
    free(tmp);
    return 0;
}

#endif
