/*
 * test_jit.c — port_jit: every compiler this build has compiles and loads C
 * that calls libm, and reports a syntax error with the compiler's words;
 * backend c keeps its cache: a hit leaves the entry untouched, a corrupt,
 * truncated or stale entry is rebuilt, KILN_CACHE_DIR (and XDG_CACHE_HOME) say
 * where, other flags are another entry.
 *
 * On the POSIX port both compilers must work where this build found them (cc
 * always, tcc where <libtcc.h> was: KN_HAVE_TCC): unavailable is a failure.
 * Elsewhere (wasm) each prints a SKIP line and must refuse with a reason.
 * The cache lives in a fresh directory under /tmp, removed at the end.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>

#include "../port/port.h"
#include "test.h"

#ifndef __wasi__
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

#ifdef KN_HAVE_TCC
#define TCC_BUILT 1
#else
#define TCC_BUILT 0
#endif

static const char *SRC = "#include <math.h>\ndouble f(double x) { return exp(x) + 1; }\n";

typedef double (*Fn)(double);

static Fn fn(PortModule *m, const char *name)
{
    Fn f = NULL;
    void *p = port_jit_sym(m, name);
    if (p) memcpy(&f, &p, sizeof p); /* ISO C has no cast from void * to a function pointer */
    return f;
}

/* compiles src, checks f(1) == want, frees the module; 1 if all went well */
static int compiles_to(int how, const char *src, const char *flags, double want)
{
    char why[256] = "";
    PortModule *m = port_jit(how, src, flags, NULL, 0, why);
    CHECK_MSG(m != NULL, "port_jit(%d, flags \"%s\"): %s", how, flags ? flags : "", why);
    if (!m) return 0;
    Fn f = fn(m, "f");
    int ok = CHECK(f != NULL);
    if (ok) {
        double got = f(1.0);
        ok = test_close(got, want, 1e-12, 0);
        CHECK_MSG(ok, "f(1) = %g, want %g", got, want);
    }
    port_jit_free(m);
    return ok;
}

static void test_compile(int how)
{
    compiles_to(how, SRC, NULL, exp(1.0) + 1);

    /* the headers the C renderer uses, and two modules alive at once */
    const char *saxpy =
        "#include <stdint.h>\n#include <string.h>\n#include <math.h>\n"
        "void saxpy(int64_t n, float a, const float *x, float *y) {\n"
        "    float t[4];\n"
        "    for (int64_t i = 0; i < n; i++) { memcpy(t, x + i, sizeof t[0]); y[i] += a * sqrtf(t[0]); }\n"
        "}\n"
        "int answer = 42;\n";
    char why[256] = "";
    PortModule *a = port_jit(how, SRC, NULL, NULL, 0, why);
    PortModule *b = port_jit(how, saxpy, "", NULL, 0, why);
    CHECK_MSG(a && b, "%s", why);
    if (a && b) {
        void (*k)(int64_t, float, const float *, float *) = NULL;
        void *p = port_jit_sym(b, "saxpy");
        if (p) memcpy(&k, &p, sizeof p);
        float x[3] = {1, 4, 9}, y[3] = {1, 1, 1};
        CHECK(k != NULL);
        if (k) k(3, 2.0f, x, y);
        CHECK(y[0] == 3 && y[1] == 5 && y[2] == 7);
        int *answer = port_jit_sym(b, "answer");
        CHECK(answer && *answer == 42);
        Fn f = fn(a, "f");
        CHECK(f && test_close(f(0.0), 2.0, 1e-15, 0));
        CHECK(port_jit_sym(a, "saxpy") == NULL);
        CHECK(port_jit_sym(a, "no_such_symbol") == NULL);
    }
    port_jit_free(a);
    port_jit_free(b);
    port_jit_free(NULL);
}

static void test_errors(int how)
{
    char why[256] = "";
    PortModule *m = port_jit(how, "double f(double x) { return x + ; }\n", NULL, NULL, 0, why);
    CHECK(m == NULL);
    CHECK_MSG(strstr(why, "error") && strlen(why) < 256, "why: \"%s\"", why);
    port_jit_free(m);
    why[0] = '\0';
    CHECK(port_jit(how, NULL, NULL, NULL, 0, why) == NULL && why[0]);
}

/* A function of this process the code calls, by the address syms gives (PORT_TCC links nothing
 * else of the process); without it the load fails and says which symbol */
static double host_twice(double x) { return 2 * x; }

static void test_symbols(void)
{
    char why[256] = "";
    double (*fp)(double) = host_twice;
    PortSymbol sym = {"host_twice", NULL};
    memcpy(&sym.addr, &fp, sizeof sym.addr);
    const char *src = "double host_twice(double);\ndouble f(double x) { return host_twice(x) + 1; }\n";
    PortModule *m = port_jit(PORT_TCC, src, NULL, &sym, 1, why);
    CHECK_MSG(m != NULL, "with the symbol: %s", why);
    void *p = m ? port_jit_sym(m, "f") : NULL;
    double (*f)(double) = NULL;
    if (p) memcpy(&f, &p, sizeof p);
    CHECK(f && f(3) == 7);
    port_jit_free(m);
    m = port_jit(PORT_TCC, src, NULL, NULL, 0, why);
    CHECK_MSG(m == NULL && strstr(why, "host_twice"), "without it: %s", m ? "loaded" : why);
    port_jit_free(m);
}

/* A source in pieces (port.h): a prelude of static helpers, parts that
 * use it, a standalone unit; pieces calling each other. cc compiles them
 * apart (threads > 1) or whole; tcc sees comments. Either way f(1) is the
 * same, and an error in one piece is reported. */
static void test_pieces(int how)
{
    char src[8192];
    size_t n;
    n = (size_t)snprintf(src, sizeof src, "#include <math.h>\nstatic inline double twice(double x) { return 2 * x; }\n");
    for (int i = 0; i < 12; i++) {
        if (i == 0) n += (size_t)snprintf(src + n, sizeof src - n, "%sdouble g0(double x) { return twice(x); }\n", PORT_PART);
        else
            n += (size_t)snprintf(src + n, sizeof src - n, "%sdouble g%d(double x);\ndouble g%d(double x) { return g%d(x) + twice(x); }\n",
                                  PORT_PART, i - 1, i, i - 1);
    }
    n += (size_t)snprintf(src + n, sizeof src - n, "%sdouble g11(double x);\ndouble f(double x) { return g11(x) + 1; }\n",
                          PORT_UNIT);
    int was = port_threads();
    for (int t = 3; t >= 1; t -= 2) { /* split, then whole: a different text each, so neither is cached */
        snprintf(src + n, sizeof src - n, "/* threads %d */\n", t);
        port_set_threads(t);
        compiles_to(how, src, NULL, 12 * 2.0 + 1); /* g11(1) = 12 twice(1) */
    }
    snprintf(src + n, sizeof src - n, "%sdouble h(double x) { return x + ; }\n", PORT_PART);
    char why[256] = "";
    PortModule *m = port_jit(how, src, NULL, NULL, 0, why);
    CHECK_MSG(m == NULL && strstr(why, "error"), "a bad piece: %s", m ? "compiled" : why);
    port_jit_free(m);
    port_set_threads(was);
}

/* For a compiler that is not there: a SKIP line, or a failure where it must be. */
static void unavailable(int how, const char *name, int wanted)
{
    char why[256] = "";
    PortModule *m = port_jit(how, SRC, NULL, NULL, 0, why);
    CHECK(m == NULL && why[0]);
    port_jit_free(m);
    if (wanted) CHECK_MSG(0, "%s should work in this build (port %s) but: %s", name, port_name(), why);
    else printf("SKIP jit %s: %s\n", name, why);
}

#ifndef __wasi__

/* how many *.so are in dir (-1: no dir); the path of one other than skip into name */
static int entries(const char *dir, char *name, size_t cap, const char *skip)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l <= 3 || strcmp(e->d_name + l - 3, ".so")) continue;
        n++;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (name && (!skip || strcmp(path, skip))) snprintf(name, cap, "%s", path);
    }
    closedir(d);
    return n;
}

/* names in dir other than *.so (a leftover temporary) */
static int others(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && !(l > 3 && !strcmp(e->d_name + l - 3, ".so"));
    }
    closedir(d);
    return n;
}

static int same_file(const struct stat *a, const struct stat *b)
{
    return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* replaces path's bytes with its first keep bytes, or with text if keep < 0 */
static void clobber(const char *path, long keep, const char *text)
{
    FILE *f = fopen(path, "rb");
    static char buf[1 << 20];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    f = fopen(path, "wb"); /* in place, as a disk error would */
    CHECK(f != NULL);
    if (!f) return;
    if (keep >= 0) fwrite(buf, 1, (size_t)keep < n ? (size_t)keep : n, f);
    else fputs(text, f);
    fclose(f);
}

static void rm_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        for (struct dirent *e; d && (e = readdir(d));) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char sub[1024];
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            rm_tree(sub);
        }
        if (d) closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

static void test_cache(const char *root)
{
    char dir[512], entry[1024], again[1024], why[256];
    struct stat s1, s2;
    double e1 = exp(1.0);
    snprintf(dir, sizeof dir, "%s/nested/cache", root); /* made with its parents */
    setenv("KILN_CACHE_DIR", dir, 1);

    /* cold, then a hit: the entry is the same file, untouched */
    CHECK(compiles_to(PORT_CC, SRC, NULL, e1 + 1));
    CHECK(entries(dir, entry, sizeof entry, NULL) == 1);
    CHECK(stat(entry, &s1) == 0);
    CHECK(compiles_to(PORT_CC, SRC, NULL, e1 + 1));
    CHECK(entries(dir, again, sizeof again, NULL) == 1 && !strcmp(entry, again));
    CHECK(stat(entry, &s2) == 0 && same_file(&s1, &s2));

    /* garbage, then a truncated ELF (dlopen would map past its end): rebuilt */
    clobber(entry, -1, "garbage, not an ELF file\n");
    CHECK(compiles_to(PORT_CC, SRC, NULL, e1 + 1));
    CHECK(stat(entry, &s2) == 0 && s2.st_size == s1.st_size);
    clobber(entry, s1.st_size / 2, NULL);
    CHECK(compiles_to(PORT_CC, SRC, NULL, e1 + 1));
    CHECK(stat(entry, &s2) == 0 && s2.st_size == s1.st_size);
    CHECK(compiles_to(PORT_CC, SRC, NULL, e1 + 1)); /* and the rebuilt one is a hit */
    CHECK(stat(entry, &s1) == 0 && same_file(&s1, &s2));
    CHECK(entries(dir, NULL, 0, NULL) == 1);

    /* flags are part of the key: another entry, built with them */
    const char *k = "#include <math.h>\n#ifndef K\n#define K 1\n#endif\ndouble f(double x) { return exp(x) + K; }\n";
    CHECK(compiles_to(PORT_CC, k, NULL, e1 + 1));
    CHECK(compiles_to(PORT_CC, k, "-DK=5", e1 + 5));
    CHECK(compiles_to(PORT_CC, k, " -DK=5  -O1", e1 + 5));
    CHECK(compiles_to(PORT_CC, k, NULL, e1 + 1));
    CHECK(entries(dir, NULL, 0, NULL) == 4);

    /* stale: a whole, valid entry of another key under this key's name */
    rm_tree(dir);
    CHECK(compiles_to(PORT_CC, "#include <math.h>\ndouble f(double x) { return exp(x) + 2; }\n", NULL, e1 + 2));
    CHECK(entries(dir, again, sizeof again, NULL) == 1);
    CHECK(compiles_to(PORT_CC, SRC, NULL, e1 + 1));
    CHECK(entries(dir, entry, sizeof entry, again) == 2);
    CHECK(strcmp(entry, again) != 0 && rename(again, entry) == 0);
    CHECK(compiles_to(PORT_CC, SRC, NULL, e1 + 1)); /* not e + 2 */

    /* the compiler's complaints come back; nothing is left behind */
    PortModule *m = port_jit(PORT_CC, SRC, "-fno-such-flag-kiln", NULL, 0, why);
    CHECK_MSG(!m && strstr(why, "no-such-flag-kiln"), "why: \"%s\"", why);
    m = port_jit(PORT_CC, "double f(double x) { return undeclared_thing(x); }\n", "-Werror", NULL, 0, why);
    CHECK_MSG(!m && strstr(why, "undeclared_thing") && !strstr(why, dir), "why: \"%s\"", why);
    CHECK(others(dir) == 0);

    /* an unusable cache directory says so */
    setenv("KILN_CACHE_DIR", "/dev/null/kiln", 1);
    m = port_jit(PORT_CC, SRC, NULL, NULL, 0, why);
    CHECK_MSG(!m && strstr(why, "cache directory"), "why: \"%s\"", why);

    /* without KILN_CACHE_DIR: $XDG_CACHE_HOME/kiln */
    unsetenv("KILN_CACHE_DIR");
    snprintf(dir, sizeof dir, "%s/xdg", root);
    setenv("XDG_CACHE_HOME", dir, 1);
    CHECK(compiles_to(PORT_CC, SRC, NULL, e1 + 1));
    snprintf(dir, sizeof dir, "%s/xdg/kiln", root);
    CHECK(entries(dir, NULL, 0, NULL) == 1);
    unsetenv("XDG_CACHE_HOME");
    snprintf(dir, sizeof dir, "%s/default", root);
    setenv("KILN_CACHE_DIR", dir, 1);

    /* no compiler: unavailable, and port_jit says which command failed */
    setenv("KILN_CC", "/nonexistent/kiln-cc", 1);
    CHECK(port_jit_available(PORT_CC) == 0);
    char line[256] = "x";
    CHECK(port_jit_version(PORT_CC, line) == 0 && line[0] == '\0');
    m = port_jit(PORT_CC, SRC, NULL, NULL, 0, why);
    CHECK_MSG(!m && strstr(why, "kiln-cc"), "why: \"%s\"", why);
    unsetenv("KILN_CC");
    CHECK(port_jit_available(PORT_CC) == 1);
}

/* The compiler's --version line is remembered in the cache directory (a
 * cc-*.id file per compiler file), so a warm start spawns nothing: a
 * remembered line is used (another line: another key, another entry), a
 * bad one is not (the real line: the entry there is). The command is
 * switched to make the process forget the line it knows. */
static void set_id(const char *dir, const char *text)
{
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        if (!strncmp(e->d_name, "cc-", 3)) {
            char path[1024];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            clobber(path, -1, text);
        }
    if (d) closedir(d);
}

static void test_identity(const char *root)
{
    char dir[512];
    double e1 = exp(1.0);
    snprintf(dir, sizeof dir, "%s/identity", root);
    setenv("KILN_CACHE_DIR", dir, 1);
    setenv("KILN_CC", "cc -w", 1);
    CHECK(compiles_to(PORT_CC, SRC, NULL, e1 + 1));
    CHECK(entries(dir, NULL, 0, NULL) == 1 && others(dir) == 1); /* the .so and the .id */
    char line[256], real[256];
    CHECK(port_jit_version(PORT_CC, real) == 1 && real[0] && !strchr(real, '\n'));
    set_id(dir, "another compiler 1.0");
    setenv("KILN_CC", "cc", 1);
    CHECK(compiles_to(PORT_CC, SRC, NULL, e1 + 1));
    setenv("KILN_CC", "cc -w", 1);
    CHECK(compiles_to(PORT_CC, SRC, NULL, e1 + 1));
    CHECK(port_jit_version(PORT_CC, line) == 1 && !strcmp(line, "another compiler 1.0")); /* what flags see */
    CHECK(entries(dir, NULL, 0, NULL) == 3); /* "cc" its own; "cc -w" under the remembered line */
    set_id(dir, "two\nlines\n");
    setenv("KILN_CC", "cc", 1);
    CHECK(compiles_to(PORT_CC, SRC, NULL, e1 + 1));
    setenv("KILN_CC", "cc -w", 1);
    CHECK(compiles_to(PORT_CC, SRC, NULL, e1 + 1));
    CHECK(entries(dir, NULL, 0, NULL) == 3); /* both under their real lines: no new entry */
    unsetenv("KILN_CC");
    snprintf(dir, sizeof dir, "%s/default", root);
    setenv("KILN_CACHE_DIR", dir, 1);
}

#endif

int main(void)
{
    int posix = !strcmp(port_name(), "posix");
    char why[256] = "";
    CHECK(port_jit(0, SRC, NULL, NULL, 0, why) == NULL && why[0]);
    CHECK(port_jit_available(0) == 0);
    char version[256] = "x";
    CHECK(port_jit_version(PORT_TCC, version) == 0 && version[0] == '\0'); /* in the process: no --version */

#ifndef __wasi__
    char root[] = "/tmp/kiln-test-jit-XXXXXX";
    if (!CHECK(mkdtemp(root) != NULL)) TEST_END("jit"); /* returns */
    char dir[512];
    snprintf(dir, sizeof dir, "%s/default", root);
    setenv("KILN_CACHE_DIR", dir, 1); /* never the user's cache */
#endif

    if (port_jit_available(PORT_TCC)) {
        test_compile(PORT_TCC);
        test_errors(PORT_TCC);
        test_pieces(PORT_TCC);
        test_symbols();
    } else {
        unavailable(PORT_TCC, "tcc", posix && TCC_BUILT);
    }

    if (port_jit_available(PORT_CC)) {
        test_compile(PORT_CC);
        test_errors(PORT_CC);
        test_pieces(PORT_CC);
#ifndef __wasi__
        test_cache(root);
        test_identity(root);
#endif
    } else {
        unavailable(PORT_CC, "cc", posix);
    }

#ifndef __wasi__
    rm_tree(root);
    CHECK(access(root, F_OK) != 0);
#endif
    TEST_END("jit");
}
