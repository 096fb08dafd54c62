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

/* the same clock in milliseconds, for timings people read */
static inline double port_now_ms(void) { return (double)port_now_ns() / 1e6; }

/* one line of diagnostics (no newline in s); the default log sink */
void port_log(const char *s);

/* Read a whole file into *data (allocated with malloc, caller frees).
 * Returns 0, or -1 with a reason in why (at least 128 bytes). */
int port_read_file(const char *path, void **data, size_t *size, char *why);

/* Write a file atomically: write path.tmp.<pid>, then rename over path,
 * so an interrupted write never leaves a half-written file. 0 or -1. */
int port_write_file(const char *path, const void *data, size_t size, char *why);

/* p .. p+n (from malloc) is about to be written through: where the platform
 * has large pages on request (Linux: transparent huge pages, madvise), its
 * 2 MiB-aligned interior is faulted in 2 MiB at a time. A hint: nothing
 * happens where there are none, and nothing is reported. */
void port_advise_large(void *p, size_t n);

/* number of hardware threads (1 where unknown) */
int port_ncpu(void);

/* ---- a thread pool ----
 *
 *     static void square(void *arg, int i) { float *x = arg; x[i] *= x[i]; }
 *     port_parallel_for(n, square, x);   // every i in [0, n) once, on up to port_threads() threads
 *
 * port_threads() is the number of threads parallel work may use: the last
 * port_set_threads(n > 0), else $KILN_NUM_THREADS (read once, at the first
 * call) if it is a positive integer, else port_ncpu(); at most
 * PORT_MAX_THREADS, and always 1 on wasm and bare metal. port_set_threads(0)
 * goes back to that default; call it while no parallel_for runs.
 *
 * port_parallel_for runs fn(arg, i) once for each i in [0, n), the calling
 * thread taking part, and returns when all have returned; it returns the
 * number of threads that took part (1: it ran inline, as it does for n <= 1,
 * one thread, wasm, bare metal, or a call from inside fn). Indices are
 * handed out one at a time under a lock, in no fixed order: meant for a few
 * coarse tasks (a GEMM's column blocks), not for millions of tiny ones.
 * Posix: port_threads() - 1 workers are started (pthreads) the first time
 * they are needed, then sleep on a condition variable between calls; more
 * are started if port_threads() grows. They are never joined: they live
 * until the process exits. Calls from several threads are safe but
 * serialised by a mutex (one runs at a time). */
enum { PORT_MAX_THREADS = 64 };
int port_parallel_for(int n, void (*fn)(void *arg, int i), void *arg);
int port_threads(void);
void port_set_threads(int n);

/* the name of this port: "posix", "wasm", "baremetal" */
const char *port_name(void);

/* ---- compile C source and load it into this process ----
 *
 *     char why[256];
 *     PortModule *m = port_jit(PORT_CC, "double f(double x) { return x + 1; }", "-mavx2", NULL, 0, why);
 *     if (!m) { ...fall back, say why... }
 *     double (*f)(double);
 *     void *p = port_jit_sym(m, "f");
 *     memcpy(&f, &p, sizeof p);       // ISO C has no void * -> function pointer cast
 *     f(1.0);
 *     port_jit_free(m);               // f is gone with it
 *
 * posix.c has both compilers; wasm.c and baremetal.c have none (available 0).
 */
typedef struct PortModule PortModule;

enum {
    PORT_TCC = 1, /* libtcc in this process: milliseconds, scalar C only (no vector extensions) */
    PORT_CC = 2   /* $KILN_CC or cc -O2 -std=gnu99 -fPIC -shared, then dlopen; cached by content hash */
};

/* A function of this process that loaded code may call: PORT_TCC links it by address (the caller's
 * table); PORT_CC's shared objects find it by name, as the dynamic linker resolves them. */
typedef struct PortSymbol {
    const char *name;
    void *addr;
} PortSymbol;

/* Compiles source (C99; may include <math.h>, <stdint.h>, <string.h>; links libm) and loads it.
 * Returns the module, or NULL with a reason in why (at least 256 bytes): no such compiler here, the
 * compiler's first error, the cache directory unusable. flags: extra compiler options separated by
 * spaces, e.g. "-mavx2 -mfma", or NULL; they are part of the cache key; tcc ignores them.
 * PORT_CC caches <key>.so in $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln;
 * a corrupt or stale entry is deleted and rebuilt. syms (nsyms of them, or NULL): functions of this
 * process the code calls. Thread-safe; never prints. */
PortModule *port_jit(int how, const char *source, const char *flags, const PortSymbol *syms, int nsyms, char *why);

/* Boundaries in a source for PORT_CC, which then compiles its pieces as
 * separate objects, several at once (one per thread of the port's pool),
 * and links them into one module; to tcc they are comments. The text
 * before the first boundary is the prelude (static helpers, macros); a
 * piece after PORT_PART needs it and is compiled with it, a piece after
 * PORT_UNIT is a whole translation unit by itself. Pieces may call each
 * other's external functions. */
#define PORT_PART "\n/* kiln: part */\n"
#define PORT_UNIT "\n/* kiln: unit */\n"

/* the address of an external symbol of m, or NULL */
void *port_jit_sym(PortModule *m, const char *name);

/* unloads m (NULL is fine); its functions and data are gone */
void port_jit_free(PortModule *m);

/* 1 if that compiler can be used here (the first call may run it once), else 0 */
int port_jit_available(int how);

/* The first line of that compiler's `--version` into line (at least 256 bytes), for
 * flags that only some compilers take: 1, or 0 where it cannot be used here (PORT_TCC
 * has none: 0). */
int port_jit_version(int how, char *line);

/* The path of file name in PORT_CC's cache directory (created if missing),
 * for other caches of compiled work: 1, or 0 where there is none (no such
 * directory here, or the path does not fit cap). */
int port_cache_path(const char *name, char *path, size_t cap);

/* What identifies the build of kiln running now, so that work cached by
 * another build is never taken for this one's: posix hashes the path, size,
 * inode and modification time of the file holding kiln's code; 0 where it
 * cannot be known (then nothing may be cached across processes). */
uint64_t port_build_id(void);

#endif
