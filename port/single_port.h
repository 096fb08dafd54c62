/*
 * single_port.h — the parts of a port for a platform with one thread and no
 * compiler inside the process (wasm32-wasi, bare metal): parallel work runs
 * inline and the JIT says why it is not there. Included by wasm.c and
 * baremetal.c, each defining NO_JIT_REASON first.
 */
#ifndef KN_SINGLE_PORT_H
#define KN_SINGLE_PORT_H

#include <stdio.h>

#include "port.h"

int port_ncpu(void) { return 1; }

void port_advise_large(void *p, size_t n)
{
    (void)p;
    (void)n;
}

int port_threads(void) { return 1; }

void port_set_threads(int n) { (void)n; }

int port_parallel_for(int n, void (*fn)(void *arg, int i), void *arg)
{
    for (int i = 0; i < n; i++) fn(arg, i);
    return 1;
}

PortModule *port_jit(int how, const char *source, const char *flags, const PortSymbol *syms, int nsyms, char *why)
{
    (void)how;
    (void)source;
    (void)flags;
    (void)syms;
    (void)nsyms;
    snprintf(why, 256, "no JIT on this platform (%s)", NO_JIT_REASON);
    return NULL;
}

int port_cache_path(const char *name, char *path, size_t cap)
{
    (void)name;
    (void)path;
    (void)cap;
    return 0;
}

uint64_t port_build_id(void) { return 0; }

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

int port_jit_version(int how, char *line)
{
    (void)how;
    line[0] = '\0';
    return 0;
}

#endif
