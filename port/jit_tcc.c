/*
 * jit_tcc.c — backend tcc for posix.c: libtcc compiles C source into memory
 * in this process (milliseconds; scalar code only, as TinyCC ignores vector
 * extensions). The Makefile defines KN_HAVE_TCC and links -ltcc where
 * <libtcc.h> exists; without it this file is stubs that say so, and posix.c
 * is the same either way.
 *
 * libtcc 0.9.27 keeps global state across TCCStates, so every call into it
 * holds one lock. A module owns its TCCState: the code lives until
 * jit_tcc_delete.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "port.h"

void *jit_tcc_new(const char *source, const PortSymbol *syms, int nsyms, char *why);
void *jit_tcc_sym(void *state, const char *name);
void jit_tcc_delete(void *state);
int jit_tcc_available(void);

#ifdef KN_HAVE_TCC

#include <libtcc.h>
#include <pthread.h>

static pthread_mutex_t tcc_lock = PTHREAD_MUTEX_INITIALIZER;

/* tcc's errors, joined with "; " and cut at 255 bytes; its first warning
 * only if there is no error */
typedef struct {
    char *why;
    size_t len;
    char warning[256];
} Errors;

static void on_error(void *opaque, const char *msg)
{
    Errors *e = opaque;
    if (strstr(msg, "warning:")) {
        if (!e->warning[0]) snprintf(e->warning, sizeof e->warning, "tcc: %.250s", msg);
        return;
    }
    if (e->len >= 255) return;
    const char *sep = e->len ? "; " : strncmp(msg, "tcc: ", 5) ? "tcc: " : "";
    int n = snprintf(e->why + e->len, 256 - e->len, "%s%s", sep, msg);
    if (n > 0) e->len += (size_t)n < 256 - e->len ? (size_t)n : 255 - e->len;
    for (char *p = e->why; *p; p++) /* "In file included from ...:\n<string>:1: error: ..." */
        if (*p == '\n') *p = ' ';
}

/* Compiles and relocates source; NULL with tcc's errors in why. Holds the lock. */
static TCCState *compile_locked(const char *source, const PortSymbol *syms, int nsyms, char *why)
{
    Errors e = {why, 0, ""};
    why[0] = '\0';
    TCCState *s = tcc_new();
    if (!s) {
        snprintf(why, 256, "tcc: out of memory");
        return NULL;
    }
    tcc_set_error_func(s, &e, on_error);
    tcc_set_output_type(s, TCC_OUTPUT_MEMORY);
    for (int i = 0; i < nsyms; i++) tcc_add_symbol(s, syms[i].name, syms[i].addr);
    if (tcc_compile_string(s, source) < 0 || tcc_add_library(s, "m") < 0 ||
        tcc_relocate(s, TCC_RELOCATE_AUTO) < 0) {
        if (!e.len) snprintf(why, 256, "%s", e.warning[0] ? e.warning : "tcc: compilation failed");
        tcc_delete(s);
        return NULL;
    }
    return s;
}

void *jit_tcc_new(const char *source, const PortSymbol *syms, int nsyms, char *why)
{
    pthread_mutex_lock(&tcc_lock);
    TCCState *s = compile_locked(source, syms, nsyms, why);
    pthread_mutex_unlock(&tcc_lock);
    return s;
}

void *jit_tcc_sym(void *state, const char *name)
{
    pthread_mutex_lock(&tcc_lock);
    void *p = tcc_get_symbol(state, name);
    pthread_mutex_unlock(&tcc_lock);
    return p;
}

void jit_tcc_delete(void *state)
{
    pthread_mutex_lock(&tcc_lock);
    tcc_delete(state);
    pthread_mutex_unlock(&tcc_lock);
}

/* Linked in is not enough: tcc also needs its runtime (libtcc1.a) and
 * headers from the tcc package. One probe compile, remembered. */
int jit_tcc_available(void)
{
    static int known, ok;
    pthread_mutex_lock(&tcc_lock);
    if (!known) {
        char why[256];
        TCCState *s = compile_locked("int kn_probe(void) { return 1; }", NULL, 0, why);
        ok = s != NULL;
        if (s) tcc_delete(s);
        known = 1;
    }
    pthread_mutex_unlock(&tcc_lock);
    return ok;
}

#else

void *jit_tcc_new(const char *source, const PortSymbol *syms, int nsyms, char *why)
{
    (void)source;
    (void)syms;
    (void)nsyms;
    snprintf(why, 256, "tcc: kiln was built without libtcc (apt-get install tcc libtcc-dev, then rebuild)");
    return NULL;
}

void *jit_tcc_sym(void *state, const char *name)
{
    (void)state;
    (void)name;
    return NULL;
}

void jit_tcc_delete(void *state) { (void)state; }

int jit_tcc_available(void) { return 0; }

#endif
