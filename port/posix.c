/*
 * posix.c — the port for Linux and other POSIX systems.
 *
 * Besides files and the clock (stdio_port.h) it compiles C and loads it:
 * PORT_TCC through jit_tcc.c (libtcc in memory), PORT_CC through the system
 * compiler and dlopen, with a cache on disk:
 *
 *   key    kn_hash over the format version, the compiler command, the first
 *          line of its --version (run once per process), the flags and the
 *          source, with a NUL between fields; 16 hex digits
 *   entry  <cache dir>/<key>.so: the compiler's shared object followed by a
 *          32-byte trailer: "KILNSO02", key, body size, kn_hash of the body
 *          (little-endian; the ELF loader never reads past its segments)
 *
 * An entry is checked before dlopen, so a truncated file is never mapped: a
 * missing trailer, a wrong size or hash (corrupt), or another key or format
 * (stale) deletes it and it is rebuilt once; so is one that dlopen refuses.
 * A build runs in a fresh directory <cache dir>/tmp-XXXXXX and ends with
 * rename(), so readers see a whole entry or none, and two processes building
 * one key both succeed. Nothing is ever evicted.
 */
#define _POSIX_C_SOURCE 200809L
#define _GNU_SOURCE /* dladdr (port_build_id) */
#include "stdio_port.h"
#include "../src/hash.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

void port_advise_large(void *p, size_t n)
{
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)2 << 20;
    uintptr_t lo = ((uintptr_t)p + huge - 1) & ~(huge - 1), hi = ((uintptr_t)p + n) & ~(huge - 1);
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)p;
    (void)n;
#endif
}

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

/* ---- thread pool ----
 *
 * One job at a time (call_lock). The caller publishes fn, arg and n under
 * lock, bumps gen and wakes the workers; every worker whose id is below
 * job_helpers takes indices from next until none are left, then counts
 * itself out of running; the caller takes indices too and waits for running
 * to reach 0, so no worker can still be inside fn, or miss a generation,
 * when it returns. A pthread key marks the threads inside a job (the workers
 * and the caller), so that a nested call runs inline instead of deadlocking.
 */
static pthread_mutex_t call_lock = PTHREAD_MUTEX_INITIALIZER; /* serialises callers */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;      /* everything below */
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;        /* gen changed */
static pthread_cond_t done = PTHREAD_COND_INITIALIZER;        /* running reached 0 */
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static pthread_key_t in_job;
static int nworkers;        /* started, never stopped */
static unsigned long gen;   /* one per job */
static void (*job_fn)(void *, int);
static void *job_arg;
static int job_n, next, job_helpers, running;
static int env_threads, set_threads; /* 0: unset */

static int ncpu; /* port_ncpu() when the pool was set up: sysconf reads sysfs, too slow per kernel */

static void pool_init(void)
{
    ncpu = port_ncpu();
    const char *e = getenv("KILN_NUM_THREADS");
    char *end;
    long v = e ? strtol(e, &end, 10) : 0;
    if (e && *e && !*end && v > 0) env_threads = v < PORT_MAX_THREADS ? (int)v : PORT_MAX_THREADS;
    (void)pthread_key_create(&in_job, NULL);
}

int port_threads(void)
{
    pthread_once(&pool_once, pool_init);
    int n = set_threads ? set_threads : env_threads ? env_threads : ncpu;
    return n < PORT_MAX_THREADS ? n : PORT_MAX_THREADS;
}

void port_set_threads(int n) { set_threads = n > 0 ? (n < PORT_MAX_THREADS ? n : PORT_MAX_THREADS) : 0; }

/* How long a thread polls before it sleeps: about 50-100 us, so that back-to-back jobs (a step's
 * GEMMs) wake no one through the kernel, while an idle pool soon stops using the CPU. The lock
 * still orders every access; the polls only read (GCC/clang builtins: C99 has no atomics). */
enum { SPIN = 20000 };

static void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Step k of a spin-wait: a pause, and every 64th step a yield. On a
 * machine with more runnable threads than cores, the thread that this one
 * waits for may be queued behind it on the same core, and pure spinning
 * holds it off for the whole spin, at every job (gpt's forward on 2 threads
 * beside other busy processes ran several times slower than on 1); on a
 * quiet machine sched_yield returns at once. */
static void relax_step(int k)
{
    if ((k & 63) == 63) sched_yield();
    else relax();
}

/* Runs indices of the current job until none are left; lock held on entry and exit. */
static void take_indices(void)
{
    while (next < job_n) {
        int i = next++;
        pthread_mutex_unlock(&lock);
        job_fn(job_arg, i);
        pthread_mutex_lock(&lock);
    }
}

/* A worker's id and the generation current when it was made: it may first
 * run after the job it was made for was published, and must not skip it. */
static struct { int id; unsigned long gen; } born[PORT_MAX_THREADS];

static void *worker(void *p)
{
    int id = *(const int *)p; /* born[id].id, the struct's first member */
    pthread_setspecific(in_job, &in_job);
    pthread_mutex_lock(&lock);
    unsigned long seen = born[id].gen;
    for (;;) {
        if (gen == seen) { /* spin a little first: a futex wake-up costs tens of microseconds */
            pthread_mutex_unlock(&lock);
            for (int k = 0; k < SPIN && __atomic_load_n(&gen, __ATOMIC_ACQUIRE) == seen; k++) relax_step(k);
            pthread_mutex_lock(&lock);
        }
        while (gen == seen) pthread_cond_wait(&wake, &lock);
        seen = gen;
        if (id >= job_helpers) continue;
        take_indices();
        __atomic_store_n(&running, running - 1, __ATOMIC_RELEASE);
        if (running == 0) pthread_cond_signal(&done);
    }
    return NULL;
}

/* Starts workers until there are want (or pthread_create fails); call_lock held. */
static void start_workers(int want)
{
    while (nworkers < want) {
        pthread_t t;
        pthread_attr_t at;
        int ok = pthread_attr_init(&at) == 0;
        ok = ok && pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED) == 0;
        born[nworkers].id = nworkers;
        born[nworkers].gen = gen; /* gen changes only under call_lock, which we hold */
        ok = ok && pthread_create(&t, &at, worker, &born[nworkers]) == 0;
        pthread_attr_destroy(&at);
        if (!ok) break;
        pthread_mutex_lock(&lock);
        nworkers++;
        pthread_mutex_unlock(&lock);
    }
}

int port_parallel_for(int n, void (*fn)(void *arg, int i), void *arg)
{
    int t = port_threads();
    if (n <= 1 || t <= 1 || pthread_getspecific(in_job)) {
        for (int i = 0; i < n; i++) fn(arg, i);
        return 1;
    }
    pthread_mutex_lock(&call_lock);
    start_workers(t - 1);
    pthread_setspecific(in_job, &in_job);
    pthread_mutex_lock(&lock);
    job_fn = fn, job_arg = arg, job_n = n, next = 0;
    int helpers = (n < t ? n : t) - 1;
    if (helpers > nworkers) helpers = nworkers;
    job_helpers = helpers;
    __atomic_store_n(&running, helpers, __ATOMIC_RELEASE);
    __atomic_store_n(&gen, gen + 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&wake);
    take_indices();
    if (running > 0) {
        pthread_mutex_unlock(&lock);
        for (int k = 0; k < SPIN && __atomic_load_n(&running, __ATOMIC_ACQUIRE) > 0; k++) relax_step(k);
        pthread_mutex_lock(&lock);
    }
    while (running > 0) pthread_cond_wait(&done, &lock);
    pthread_mutex_unlock(&lock);
    pthread_setspecific(in_job, NULL);
    pthread_mutex_unlock(&call_lock);
    return helpers + 1;
}

/* ---- JIT ---- */

/* jit_tcc.c: libtcc, or stubs that say it is not built in */
void *jit_tcc_new(const char *source, const PortSymbol *syms, int nsyms, char *why);
void *jit_tcc_sym(void *state, const char *name);
void jit_tcc_delete(void *state);
int jit_tcc_available(void);

#define JIT_FORMAT "kiln-jit-2" /* bump when the flags, trailer or layout change */
#define JIT_MAGIC "KILNSO02"
#define JIT_TRAILER 32
#define JIT_PATH 4096

struct PortModule {
    int how;      /* PORT_TCC, PORT_CC */
    void *handle; /* TCCState *, or dlopen's handle */
};

/* a string and its terminating NUL, so that fields cannot run into each other */
static uint64_t hash_str(uint64_t h, const char *s) { return kn_hash_more(h, s, strlen(s) + 1); }

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> 8 * i);
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* An argument vector built from space-separated words (no quoting). */
typedef struct {
    char *argv[128];
    int argc;
    char buf[4096];
    size_t used;
} Args;

/* Appends s as one argument (split = 0) or as its space-separated words;
 * 0 if they do not fit. */
static int args_add(Args *a, const char *s, int split)
{
    while (s && *s) {
        while (split && (*s == ' ' || *s == '\t' || *s == '\n')) s++;
        size_t n = split ? strcspn(s, " \t\n") : strlen(s);
        if (!n) break;
        if (a->argc + 2 > (int)(sizeof a->argv / sizeof *a->argv) || a->used + n + 1 > sizeof a->buf) return 0;
        a->argv[a->argc++] = memcpy(a->buf + a->used, s, n);
        a->buf[a->used + n] = '\0';
        a->used += n + 1;
        s += n;
    }
    a->argv[a->argc] = NULL;
    return 1;
}

/* Runs argv (argv[0] found through PATH), stdin from /dev/null, and puts the
 * start of its stdout and stderr in out (the rest is read and dropped).
 * Returns its exit status, or -1 with a reason in out if it could not run. */
static int run(char *const argv[], char *out, size_t cap)
{
    int fd[2];
    if (pipe(fd) != 0) {
        snprintf(out, cap, "cannot make a pipe: %s", strerror(errno));
        return -1;
    }
    fcntl(fd[0], F_SETFD, FD_CLOEXEC);
    fcntl(fd[1], F_SETFD, FD_CLOEXEC);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 2);
    pid_t pid;
    int err = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    if (err) {
        close(fd[0]);
        snprintf(out, cap, "cannot run '%.100s': %s", argv[0], strerror(err));
        return -1;
    }
    size_t n = 0;
    for (;;) {
        char sink[512];
        int keep = n + 1 < cap;
        ssize_t r = keep ? read(fd[0], out + n, cap - 1 - n) : read(fd[0], sink, sizeof sink);
        if (r > 0 && keep) n += (size_t)r;
        if (r > 0 || (r < 0 && errno == EINTR)) continue;
        break;
    }
    out[n] = '\0';
    close(fd[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR) {
            snprintf(out, cap, "cannot wait for '%.100s': %s", argv[0], strerror(errno));
            return -1;
        }
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127 && !n) { /* a libc whose spawn reports exec failure so */
        snprintf(out, cap, "cannot run '%.100s'", argv[0]);
        return -1;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The compiler's identity: the first line of `$cmd --version`, asked once per
 * command per process. 1 with it in ident (256 bytes), or 0 with why. */
static int cache_dir(char *dir, char *why);

/* The file the command's first word runs (through $PATH if it has no '/')
 * and its stat; 0 if none is found. */
static int compiler_file(const char *cmd, char *path, struct stat *st)
{
    size_t n = strcspn(cmd += strspn(cmd, " "), " ");
    if (!n || n >= 512) return 0;
    if (memchr(cmd, '/', n)) {
        snprintf(path, JIT_PATH, "%.*s", (int)n, cmd);
        return stat(path, st) == 0;
    }
    for (const char *p = getenv("PATH"); p && *p;) {
        size_t m = strcspn(p, ":");
        if (m && m < 3000) {
            snprintf(path, JIT_PATH, "%.*s/%.*s", (int)m, p, (int)n, cmd);
            if (stat(path, st) == 0 && S_ISREG(st->st_mode)) return 1;
        }
        p += m + (p[m] == ':');
    }
    return 0;
}

/* The first line of `cmd --version` as remembered in the cache directory
 * for the compiler's file as it is now (path, size, inode, modification
 * time), so that a warm start spawns no process: 1 (in line), or 0. */
static int identity_file(const char *cmd, char *file)
{
    char path[JIT_PATH], dir[JIT_PATH], why[256];
    struct stat st;
    if (!compiler_file(cmd, path, &st) || !cache_dir(dir, why)) return 0;
    uint64_t v[4] = {(uint64_t)st.st_size, (uint64_t)st.st_ino, (uint64_t)st.st_mtim.tv_sec,
                     (uint64_t)st.st_mtim.tv_nsec};
    uint64_t h = kn_hash_more(hash_str(hash_str(0, cmd), path), v, sizeof v);
    return snprintf(file, JIT_PATH, "%.4000s/cc-%016" PRIx64 ".id", dir, h) < JIT_PATH;
}

static int compiler_identity(const char *cmd, char *ident, char *why)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static char known[256], line[256], reason[256]; /* for the command `known` */
    static int ok;
    pthread_mutex_lock(&lock);
    if (!known[0] || strcmp(known, cmd) != 0) {
        Args a = {.argc = 0};
        char out[512];
        char file[JIT_PATH], err[128];
        void *data = NULL;
        size_t size = 0;
        int have = identity_file(cmd, file);
        snprintf(known, sizeof known, "%s", cmd);
        ok = 0;
        if (have && port_read_file(file, &data, &size, err) == 0 && size > 0 && size < sizeof line &&
            !memchr(data, '\n', size) && !memchr(data, '\0', size)) {
            memcpy(line, data, size), line[size] = '\0';
            ok = 1;
        } else if (!args_add(&a, cmd, 1) || !a.argc || !args_add(&a, "--version", 0)) {
            snprintf(reason, sizeof reason, "cc: bad compiler command '%.100s' (KILN_CC)", cmd);
        } else {
            int st = run(a.argv, out, sizeof out);
            out[strcspn(out, "\n")] = '\0';
            if (st == 0 && out[0]) {
                snprintf(line, sizeof line, "%.255s", out);
                ok = 1;
                if (have) port_write_file(file, line, strlen(line), reason); /* a cache: no error if not */
            } else if (st < 0) {
                snprintf(reason, sizeof reason, "cc: %.200s (set KILN_CC to a C compiler)", out);
            } else {
                snprintf(reason, sizeof reason, "cc: '%.60s --version' failed (exit %d): %.120s", cmd, st, out);
            }
        }
        free(data);
    }
    int r = ok;
    snprintf(r ? ident : why, 256, "%s", r ? line : reason);
    pthread_mutex_unlock(&lock);
    return r;
}

/* mkdir -p, the directories it makes private to the user */
static int mkdir_p(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        int r = mkdir(path, 0700);
        *p = '/';
        if (r != 0 && errno != EEXIST) return -1;
    }
    if (mkdir(path, 0700) != 0 && errno != EEXIST) return -1;
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

/* $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln, else
 * ${TMPDIR:-/tmp}/kiln-<uid> (which must then be ours alone: anyone who could
 * write there could make us load their code); created if missing. */
static int cache_dir(char *dir, char *why)
{
    const char *e;
    int n, shared = 0;
    if ((e = getenv("KILN_CACHE_DIR")) && *e) n = snprintf(dir, JIT_PATH, "%s", e);
    else if ((e = getenv("XDG_CACHE_HOME")) && *e) n = snprintf(dir, JIT_PATH, "%s/kiln", e);
    else if ((e = getenv("HOME")) && *e) n = snprintf(dir, JIT_PATH, "%s/.cache/kiln", e);
    else {
        e = getenv("TMPDIR");
        n = snprintf(dir, JIT_PATH, "%s/kiln-%lu", e && *e ? e : "/tmp", (unsigned long)getuid());
        shared = 1;
    }
    if (n < 0 || n > 4000) { /* the "%.4000s" below */
        snprintf(why, 256, "cc: cache directory path too long");
        return 0;
    }
    while (n > 1 && dir[n - 1] == '/') dir[--n] = '\0';
    if (mkdir_p(dir) != 0) {
        snprintf(why, 256, "cc: cannot create cache directory %.160s: %s", dir, strerror(errno));
        return 0;
    }
    struct stat st;
    if (shared && (stat(dir, &st) != 0 || st.st_uid != getuid() || (st.st_mode & 022))) {
        snprintf(why, 256, "cc: cache directory %.160s is not private to this user", dir);
        return 0;
    }
    return 1;
}

/* Checks entry's trailer and dlopens it: 1 (loaded into *h), 0 (no entry),
 * or -1 (corrupt, stale or refused by dlopen; reason in why). */
static int load(const char *entry, uint64_t key, void **h, char *why)
{
    struct stat st;
    if (stat(entry, &st) != 0 && errno == ENOENT) return 0;
    void *data;
    size_t size;
    char err[128];
    if (port_read_file(entry, &data, &size, err) != 0) {
        snprintf(why, 256, "cannot read %.120s: %.100s", entry, err);
        return -1;
    }
    const unsigned char *t = (const unsigned char *)data + (size >= JIT_TRAILER ? size - JIT_TRAILER : 0);
    const char *bad = NULL;
    if (size < JIT_TRAILER || memcmp(t, JIT_MAGIC, 8) != 0) bad = "no kiln trailer (corrupt or from another version)";
    else if (get64(t + 8) != key) bad = "stale: built for another key";
    else if (get64(t + 16) != size - JIT_TRAILER) bad = "corrupt: wrong size";
    else if (get64(t + 24) != kn_hash(data, size - JIT_TRAILER)) bad = "corrupt: wrong checksum";
    free(data);
    if (bad) {
        snprintf(why, 256, "%.120s: %s", entry, bad);
        return -1;
    }
    *h = dlopen(entry, RTLD_NOW | RTLD_LOCAL);
    if (!*h) {
        snprintf(why, 256, "dlopen: %.200s", dlerror());
        return -1;
    }
    return 1;
}

/* Appends the trailer to the compiled object at path. */
static int add_trailer(const char *path, uint64_t key, char *why)
{
    void *data;
    size_t size;
    char err[128];
    if (port_read_file(path, &data, &size, err) != 0) {
        snprintf(why, 256, "cc: cannot read its output: %s", err);
        return 0;
    }
    unsigned char t[JIT_TRAILER];
    memcpy(t, JIT_MAGIC, 8);
    put64(t + 8, key);
    put64(t + 16, size);
    put64(t + 24, kn_hash(data, size));
    free(data);
    FILE *f = fopen(path, "ab");
    int ok = f && fwrite(t, 1, sizeof t, f) == sizeof t;
    if (f) ok = (fclose(f) == 0) && ok;
    if (!ok) snprintf(why, 256, "cc: cannot append to its output: %s", strerror(errno));
    return ok;
}

/* whether [p, end) contains needle */
static int line_has(const char *p, const char *end, const char *needle)
{
    size_t n = strlen(needle);
    for (; p + n <= end; p++)
        if (!memcmp(p, needle, n)) return 1;
    return 0;
}

/* The compiler's complaint in one line of why: its lines that say "error"
 * (or the linker's) less the counts, else all of them; the temporary
 * directory dropped; joined with " | ". */
static void compiler_message(const char *out, const char *tmp, int status, char *why)
{
    size_t tl = strlen(tmp), n = (size_t)snprintf(why, 256, "cc: exit %d: ", status);
    int some = line_has(out, out + strlen(out), "error") || line_has(out, out + strlen(out), "ld:");
    for (const char *p = out; *p && n < 240; p += *p == '\n') {
        const char *eol = p + strcspn(p, "\n");
        if (some && ((!line_has(p, eol, "error") && !line_has(p, eol, "ld:")) ||
                     line_has(p, eol, " generated.") || line_has(p, eol, "treated as errors"))) {
            p = eol;
            continue;
        }
        for (; p < eol && n < 240; p++) {
            if (!strncmp(p, tmp, tl) && p[tl] == '/') p += tl; /* and the loop steps over the '/' */
            else why[n++] = *p;
        }
        if (*eol && n < 237) n += (size_t)snprintf(why + n, 256 - n, " | ");
        p = eol;
    }
    while (n > 0 && (why[n - 1] == ' ' || why[n - 1] == '|')) n--;
    why[n] = '\0';
}

/* ---- building: one object per job, several at once, linked into one .so ---- */

enum { MAX_JOBS = 16 };

typedef struct {
    const char *cmd, *flags, *tmp;
    const char *source;            /* the whole text */
    size_t prelude;                /* its first bytes that PORT_PART pieces need */
    size_t from[MAX_JOBS], to[MAX_JOBS]; /* each job's stretch of the text (whole pieces) */
    int with_prelude[MAX_JOBS];
    int njobs, single;             /* single: one job, compiled and linked in one step */
    int status[MAX_JOBS];          /* 0 ok, else the compiler's exit (or -1) */
    char out[MAX_JOBS][1024];      /* its messages */
} Jobs;

/* Writes job i's text to tmp/job<i>.c and compiles it (to job<i>.o, or to
 * kernel.so when single). */
static void compile_job(void *arg, int i)
{
    Jobs *j = arg;
    char c[JIT_PATH], o[JIT_PATH], err[256];
    snprintf(c, sizeof c, "%.4000s/job%d.c", j->tmp, i);
    if (j->single) snprintf(o, sizeof o, "%.4000s/kernel.so", j->tmp);
    else snprintf(o, sizeof o, "%.4000s/job%d.o", j->tmp, i);
    FILE *f = fopen(c, "wb");
    int ok = f != NULL;
    if (ok && j->with_prelude[i]) ok = fwrite(j->source, 1, j->prelude, f) == j->prelude;
    if (ok) ok = fwrite(j->source + j->from[i], 1, j->to[i] - j->from[i], f) == j->to[i] - j->from[i];
    if (f && fclose(f) != 0) ok = 0;
    if (!ok) {
        snprintf(err, sizeof err, "%s", strerror(errno));
        snprintf(j->out[i], sizeof j->out[i], "cannot write %.100s: %s", c, err);
        j->status[i] = -1;
        return;
    }
    Args a = {.argc = 0};
    if (!args_add(&a, j->cmd, 1) || !args_add(&a, "-O2 -std=gnu99 -fPIC", 1) ||
        !args_add(&a, j->single ? "-shared" : "-c", 0) || !args_add(&a, j->flags, 1) || !args_add(&a, "-o", 0) ||
        !args_add(&a, o, 0) || !args_add(&a, c, 0) || (j->single && !args_add(&a, "-lm", 0))) {
        snprintf(j->out[i], sizeof j->out[i], "too many flags: %.200s", j->flags);
        j->status[i] = -1;
        return;
    }
    j->status[i] = run(a.argv, j->out[i], sizeof j->out[i]);
}

/* Where the next boundary after p starts (NULL: none), and its kind. */
/* Where the next boundary after p starts (NULL: none), and its kind: one
 * scan for what both boundaries begin with, so splitting is linear. */
static const char *next_boundary(const char *p, int *unit)
{
    static const char both[] = "\n/* kiln: "; /* PORT_PART's and PORT_UNIT's common start */
    for (const char *b = strstr(p, both); b; b = strstr(b + 1, both)) {
        if (!strncmp(b, PORT_PART, strlen(PORT_PART))) return *unit = 0, b;
        if (!strncmp(b, PORT_UNIT, strlen(PORT_UNIT))) return *unit = 1, b;
    }
    return NULL;
}

/* Splits the source into at most MAX_JOBS jobs of consecutive whole pieces,
 * each of one kind, of about equal size; one job when it has no boundaries
 * or the kinds alternate more often than there are jobs. */
static void plan_jobs(Jobs *j, int want)
{
    const char *src = j->source;
    size_t n = strlen(src);
    int unit;
    const char *b = next_boundary(src, &unit);
    j->prelude = b ? (size_t)(b - src) : n;
    j->njobs = 1, j->single = 1, j->from[0] = 0, j->to[0] = n, j->with_prelude[0] = 0;
    if (!b || want < 2) return;
    size_t per = (n - j->prelude) / (size_t)(want < MAX_JOBS ? want : MAX_JOBS) + 1;
    int nj = 0;
    while (b) {
        int kind = unit;
        const char *e = next_boundary(b + 1, &unit);
        size_t from = (size_t)(b - src), to = e ? (size_t)(e - src) : n;
        int k = nj - 1; /* the last job ends where this piece starts */
        if (k >= 0 && j->with_prelude[k] == !kind && (j->to[k] - j->from[k] < per || nj == MAX_JOBS))
            j->to[k] = to; /* one more piece for it */
        else if (nj < MAX_JOBS)
            j->from[nj] = from, j->to[nj] = to, j->with_prelude[nj] = !kind, nj++;
        else { /* out of jobs: everything as one */
            j->njobs = 1, j->from[0] = 0, j->to[0] = n, j->with_prelude[0] = 0;
            return;
        }
        b = e;
    }
    j->njobs = nj, j->single = 0;
}

/* Compiles source into entry: in a fresh temporary directory, then rename. */
static int build(const char *cmd, const char *flags, const char *source, const char *dir, const char *entry,
                 uint64_t key, char *why)
{
    char tmp[JIT_PATH], so[JIT_PATH];
    snprintf(tmp, sizeof tmp, "%.4000s/tmp-XXXXXX", dir);
    if (!mkdtemp(tmp)) {
        snprintf(why, 256, "cc: cannot make a directory in %.160s: %s", dir, strerror(errno));
        return 0;
    }
    snprintf(so, sizeof so, "%.4020s/kernel.so", tmp);
    Jobs *j = calloc(1, sizeof *j);
    if (!j) {
        snprintf(why, 256, "cc: out of memory");
        rmdir(tmp);
        return 0;
    }
    j->cmd = cmd, j->flags = flags, j->tmp = tmp, j->source = source;
    int threads = port_threads();
    plan_jobs(j, threads > 1 ? 4 * threads : 1); /* a few per thread: the pieces differ in cost */
    if (j->njobs > 1 && threads > 1) port_parallel_for(j->njobs, compile_job, j);
    else
        for (int i = 0; i < j->njobs; i++) compile_job(j, i);
    int ok = 1;
    for (int i = 0; i < j->njobs && ok; i++) {
        if (j->status[i] < 0) snprintf(why, 256, "cc: %.250s", j->out[i]), ok = 0;
        else if (j->status[i] > 0) compiler_message(j->out[i], tmp, j->status[i], why), ok = 0;
    }
    if (ok && !j->single) { /* link the objects */
        Args a = {.argc = 0};
        char obj[MAX_JOBS][JIT_PATH], out[2048];
        int okargs = args_add(&a, cmd, 1) && args_add(&a, "-shared -fPIC", 1) && args_add(&a, flags, 1) &&
                     args_add(&a, "-o", 0) && args_add(&a, so, 0);
        for (int i = 0; i < j->njobs && okargs; i++) {
            snprintf(obj[i], sizeof obj[i], "%.4000s/job%d.o", tmp, i);
            okargs = args_add(&a, obj[i], 0);
        }
        okargs = okargs && args_add(&a, "-lm", 0);
        int st = okargs ? run(a.argv, out, sizeof out) : -1;
        if (!okargs) snprintf(why, 256, "cc: too many flags: %.200s", flags), ok = 0;
        else if (st < 0) snprintf(why, 256, "cc: %.250s", out), ok = 0;
        else if (st > 0) compiler_message(out, tmp, st, why), ok = 0;
    }
    if (ok && add_trailer(so, key, why)) {
        ok = rename(so, entry) == 0;
        if (!ok) snprintf(why, 256, "cc: cannot rename into %.160s: %s", entry, strerror(errno));
    } else ok = 0;
    for (int i = 0; i < j->njobs; i++) {
        char f[JIT_PATH];
        snprintf(f, sizeof f, "%.4000s/job%d.c", tmp, i);
        remove(f);
        snprintf(f, sizeof f, "%.4000s/job%d.o", tmp, i);
        remove(f);
    }
    remove(so);
    rmdir(tmp);
    free(j);
    return ok;
}

static PortModule *jit_cc(const char *source, const char *flags, char *why)
{
    const char *cmd = getenv("KILN_CC");
    if (!cmd || !*cmd) cmd = "cc";
    char ident[256], dir[JIT_PATH], entry[JIT_PATH];
    if (!compiler_identity(cmd, ident, why)) return NULL;
    uint64_t key = hash_str(0, JIT_FORMAT);
    key = hash_str(key, cmd);
    key = hash_str(key, ident);
    key = hash_str(key, flags ? flags : "");
    key = hash_str(key, source);
    if (!cache_dir(dir, why)) return NULL;
    snprintf(entry, sizeof entry, "%.4000s/%016" PRIx64 ".so", dir, key);

    void *h = NULL;
    char stale[256];
    int r = load(entry, key, &h, stale);
    if (r < 0) remove(entry);
    if (r != 1) {
        if (!build(cmd, flags, source, dir, entry, key, why)) return NULL;
        if ((r = load(entry, key, &h, stale)) != 1) {
            snprintf(why, 256, "cc: %.250s", r ? stale : "the new cache entry vanished");
            if (r) remove(entry);
            return NULL;
        }
    }
    PortModule *m = malloc(sizeof *m);
    if (!m) {
        dlclose(h);
        snprintf(why, 256, "out of memory");
        return NULL;
    }
    m->how = PORT_CC;
    m->handle = h;
    return m;
}

PortModule *port_jit(int how, const char *source, const char *flags, const PortSymbol *syms, int nsyms, char *why)
{
    if (!source) {
        snprintf(why, 256, "port_jit: no source");
        return NULL;
    }
    if (how == PORT_CC) return jit_cc(source, flags, why);
    if (how != PORT_TCC) {
        snprintf(why, 256, "port_jit: unknown compiler %d", how);
        return NULL;
    }
    void *s = jit_tcc_new(source, syms, nsyms, why);
    PortModule *m = s ? malloc(sizeof *m) : NULL;
    if (s && !m) {
        jit_tcc_delete(s);
        snprintf(why, 256, "out of memory");
    }
    if (m) {
        m->how = PORT_TCC;
        m->handle = s;
    }
    return m;
}

void *port_jit_sym(PortModule *m, const char *name)
{
    if (!m) return NULL;
    return m->how == PORT_TCC ? jit_tcc_sym(m->handle, name) : dlsym(m->handle, name);
}

void port_jit_free(PortModule *m)
{
    if (!m) return;
    if (m->how == PORT_TCC) jit_tcc_delete(m->handle);
    else dlclose(m->handle);
    free(m);
}

int port_cache_path(const char *name, char *path, size_t cap)
{
    char dir[JIT_PATH], why[256];
    if (!cache_dir(dir, why)) return 0;
    int n = snprintf(path, cap, "%s/%s", dir, name);
    return n > 0 && (size_t)n < cap;
}

uint64_t port_build_id(void)
{
    Dl_info di;
    struct stat st;
    if (!dladdr((void *)(uintptr_t)port_build_id, &di) || !di.dli_fname || stat(di.dli_fname, &st) != 0) return 0;
    uint64_t h = hash_str(0, di.dli_fname), v[4] = {(uint64_t)st.st_size, (uint64_t)st.st_ino,
                                                              (uint64_t)st.st_mtim.tv_sec, (uint64_t)st.st_mtim.tv_nsec};
    h = kn_hash_more(h, v, sizeof v);
    return h ? h : 1;
}

int port_jit_available(int how)
{
    char ident[256], why[256];
    const char *cmd = getenv("KILN_CC");
    if (how == PORT_TCC) return jit_tcc_available();
    if (how != PORT_CC) return 0;
    return compiler_identity(cmd && *cmd ? cmd : "cc", ident, why);
}

int port_jit_version(int how, char *line)
{
    char why[256];
    const char *cmd = getenv("KILN_CC");
    line[0] = '\0';
    return how == PORT_CC && compiler_identity(cmd && *cmd ? cmd : "cc", line, why);
}
