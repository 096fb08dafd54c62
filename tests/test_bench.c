/*
 * test_bench.c — `kiln bench gemm` and `kiln bench ops` in a tiny smoke mode
 * (sizes 16 and 32, the workloads' steps at small sizes, one run each):
 * every JSON line parses, carries the
 * fields tools outside the project read (suite, case, impl, metric, median,
 * min, max, n), and every result check passes. No timing is asserted.
 */
#include <stdlib.h>

#include "test.h"
#include "../src/cli/bench.h"

#define MAXLINES 256

static char *lines[MAXLINES];
static int nlines;

static void collect(void *user, const char *line)
{
    (void)user;
    if (nlines < MAXLINES) {
        size_t n = strlen(line) + 1;
        if ((lines[nlines] = malloc(n))) memcpy(lines[nlines++], line, n);
    }
}

/* ---- a tiny JSON validator: one flat object of strings, numbers, null, true, false ---- */

#define MAXF 24
typedef struct {
    char key[MAXF][32];
    char str[MAXF][256]; /* the string value, or the literal text of any other */
    int kind[MAXF];      /* 's' string, 'n' number, '0' null, 'b' boolean */
    int n;
} Obj;

static const char *ws(const char *p)
{
    while (*p == ' ' || *p == '\t') p++;
    return p;
}

/* a JSON string into out (escapes \" \\ \uXXXX kept simple); returns past it, or NULL */
static const char *jstr(const char *p, char *out, size_t cap)
{
    size_t n = 0;
    if (*p++ != '"') return NULL;
    while (*p && *p != '"') {
        char c = *p++;
        if ((unsigned char)c < 0x20) return NULL;
        if (c == '\\') {
            c = *p++;
            if (c == 'u') {
                for (int i = 0; i < 4; i++)
                    if (!p[i] || !strchr("0123456789abcdefABCDEF", p[i])) return NULL;
                p += 4, c = '?';
            } else if (!c || !strchr("\"\\/bfnrt", c)) return NULL;
        }
        if (n + 1 < cap) out[n++] = c;
    }
    if (*p != '"') return NULL;
    out[n] = 0;
    return p + 1;
}

static const char *jnum(const char *p)
{
    const char *s = p;
    if (*p == '-') p++;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') while (*p >= '0' && *p <= '9') p++;
    else return NULL;
    if (*p == '.') {
        if (!(*++p >= '0' && *p <= '9')) return NULL;
        while (*p >= '0' && *p <= '9') p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!(*p >= '0' && *p <= '9')) return NULL;
        while (*p >= '0' && *p <= '9') p++;
    }
    return p > s ? p : NULL;
}

static int parse(const char *p, Obj *o)
{
    o->n = 0;
    p = ws(p);
    if (*p++ != '{') return 0;
    p = ws(p);
    if (*p == '}') return *ws(p + 1) == 0;
    for (;;) {
        if (o->n == MAXF) return 0;
        int i = o->n++;
        if (!(p = jstr(ws(p), o->key[i], sizeof o->key[i]))) return 0;
        for (int j = 0; j < i; j++)
            if (!strcmp(o->key[j], o->key[i])) return 0; /* duplicate key */
        p = ws(p);
        if (*p++ != ':') return 0;
        p = ws(p);
        const char *s = p;
        if (*p == '"') {
            if (!(p = jstr(p, o->str[i], sizeof o->str[i]))) return 0;
            o->kind[i] = 's';
        } else {
            if (!strncmp(p, "null", 4)) p += 4, o->kind[i] = '0';
            else if (!strncmp(p, "true", 4)) p += 4, o->kind[i] = 'b';
            else if (!strncmp(p, "false", 5)) p += 5, o->kind[i] = 'b';
            else if ((p = jnum(p))) o->kind[i] = 'n';
            else return 0;
            size_t n = (size_t)(p - s) < sizeof o->str[i] ? (size_t)(p - s) : sizeof o->str[i] - 1;
            memcpy(o->str[i], s, n);
            o->str[i][n] = 0;
        }
        p = ws(p);
        if (*p == ',') {
            p++;
            continue;
        }
        if (*p++ != '}') return 0;
        return *ws(p) == 0;
    }
}

static int field(const Obj *o, const char *key)
{
    for (int i = 0; i < o->n; i++)
        if (!strcmp(o->key[i], key)) return i;
    return -1;
}

/* The validator on its own: good and bad lines. */
static void test_validator(void)
{
    Obj o;
    CHECK(parse("{\"a\":\"x\\\"y\",\"b\":-1.5e-3,\"c\":null,\"d\":true}", &o) && o.n == 4);
    CHECK(o.kind[1] == 'n' && o.kind[2] == '0' && !strcmp(o.str[0], "x\"y"));
    CHECK(!parse("{\"a\":1,}", &o));
    CHECK(!parse("{\"a\":01}", &o));
    CHECK(!parse("{\"a\":1} x", &o));
    CHECK(!parse("{\"a\":1,\"a\":2}", &o));
    CHECK(!parse("{\"a\":nan}", &o));
    CHECK(!parse("{\"a\":\"tab\there\"}", &o));
}

/* Every line: valid JSON with the required fields; returns how many rows
 * were measured for impl (a number median) in suite. */
static int check_lines(const char *suite, const char *impl)
{
    static const char *const req[] = {"suite", "case", "impl", "metric", "median", "min", "max", "n"};
    int measured = 0;
    for (int l = 0; l < nlines; l++) {
        Obj o;
        int ok = parse(lines[l], &o);
        CHECK_MSG(ok, "not one JSON object: %s", lines[l]);
        if (!ok) continue;
        for (size_t r = 0; r < sizeof req / sizeof *req; r++)
            CHECK_MSG(field(&o, req[r]) >= 0, "no \"%s\" in %s", req[r], lines[l]);
        int fs = field(&o, "suite"), fi = field(&o, "impl"), fm = field(&o, "metric"), fmed = field(&o, "median");
        int fn = field(&o, "n"), fe = field(&o, "error"), fk = field(&o, "skipped");
        if (fs < 0 || fi < 0 || fm < 0 || fmed < 0 || fn < 0) continue;
        CHECK_MSG(o.kind[fs] == 's' && !strcmp(o.str[fs], suite), "suite: %s", lines[l]);
        CHECK_MSG(o.kind[field(&o, "case")] == 's' && o.kind[fi] == 's', "case/impl not strings: %s", lines[l]);
        const char *m = o.str[fm];
        CHECK_MSG(o.kind[fm] == 's' && (!strcmp(m, "ms") || !strcmp(m, "gflops") || !strcmp(m, "gbps") ||
                                        !strcmp(m, "bytes")),
                  "metric: %s", lines[l]);
        CHECK_MSG(o.kind[fn] == 'n', "n not a number: %s", lines[l]);
        if (fe >= 0 || fk >= 0) {
            CHECK_MSG(o.kind[fmed] == '0' && atoi(o.str[fn]) == 0, "an error or skip with values: %s", lines[l]);
            /* the only error allowed: OpenBLAS missing here (not a result check) */
            CHECK_MSG(fe < 0 || (!strcmp(o.str[fi], "openblas") && strstr(o.str[fe], "not available")),
                      "error: %s", lines[l]);
            CHECK_MSG(fk < 0, "skipped in smoke mode: %s", lines[l]);
            continue;
        }
        int nums = 1;
        for (int r = 4; r < 8; r++) nums = nums && o.kind[field(&o, req[r])] == 'n';
        CHECK_MSG(nums && atoi(o.str[fn]) == 1, "values not numbers, or n != 1 in smoke mode: %s", lines[l]);
        double med = atof(o.str[fmed]), mn = atof(o.str[field(&o, "min")]), mx = atof(o.str[field(&o, "max")]);
        CHECK_MSG(mn <= med && med <= mx && mn >= 0, "min <= median <= max: %s", lines[l]);
        if (!strcmp(o.str[fi], impl) && !strcmp(m, "ms")) measured++;
    }
    return measured;
}

/* bench_json, the writer of every suite's lines (bench train and infer's
 * too): the fields in order, strings escaped, null values without a measurement. */
static void test_json(void)
{
    char line[512];
    Obj o;
    double v[3] = {1.5, 1.25, 2};
    bench_json(&(BenchRecord){"train", "mlp/\"q\"", "kiln-c", "ms", v, 3, .batch = 64, .threads = 2}, line, sizeof line);
    CHECK_MSG(!strcmp(line, "{\"suite\":\"train\",\"case\":\"mlp/\\\"q\\\"\",\"impl\":\"kiln-c\",\"metric\":\"ms\","
                            "\"median\":1.5,\"min\":1.25,\"max\":2,\"n\":3,\"batch\":64,\"threads\":2}"),
              "%s", line);
    CHECK_MSG(parse(line, &o) && o.n == 10, "%s", line);
    bench_json(&(BenchRecord){"gemm", "16", "openblas", "ms", .error = "not\tavailable"}, line, sizeof line);
    CHECK_MSG(!strcmp(line, "{\"suite\":\"gemm\",\"case\":\"16\",\"impl\":\"openblas\",\"metric\":\"ms\","
                            "\"median\":null,\"min\":null,\"max\":null,\"n\":0,\"error\":\"not\\u0009available\"}"),
              "%s", line);
    CHECK_MSG(parse(line, &o) && o.n == 9, "%s", line);
}

static void clear(void)
{
    for (int i = 0; i < nlines; i++) free(lines[i]);
    nlines = 0;
}

int main(void)
{
    BenchOpts o;
    memset(&o, 0, sizeof o);
    o.json = o.quick = o.smoke = 1;
    o.emit = collect;
    test_validator();
    test_json();

    CHECK_MSG(bench_gemm(&o) == 0, "bench gemm: a result check failed");
    CHECK(nlines > 0);
    int n = check_lines("gemm", "kiln-c");
    CHECK_MSG(n == 3, "gemm: %d kiln-c rows measured, expected 3 (16, 32, 32x16x24)", n);
    for (int i = 0; i < nlines; i++) /* kiln-c, kiln-tcc, kiln-eager at every size */
        if (strstr(lines[i], "\"case\":\"16x16x16\"") && strstr(lines[i], "\"impl\":\"kiln-eager\"")) n = -1;
    CHECK_MSG(n == -1, "gemm: no kiln-eager row at 16x16x16");
    clear();

    CHECK_MSG(bench_ops(&o) == 0, "bench ops: a result check failed");
    n = check_lines("ops", "kiln-c");
    CHECK_MSG(n == 11, "ops: %d kiln-c rows measured, expected 11 (chain, softmax, layer_norm, mlp-joint cold and "
              "warm, the mlp, gpt and cnn steps cold and warm)", n);
    n = check_lines("ops", "kiln-tcc");
    CHECK_MSG(n == 11, "ops: %d kiln-tcc rows measured, expected 11", n);
    static const char *const steps[] = {"mlp-step/cold", "gpt-step/cold", "cnn-step/cold", "cnn-step/warm"};
    for (int k = 0; k < 4; k++) {
        char want[64];
        int seen = 0;
        snprintf(want, sizeof want, "\"case\":\"%s\"", steps[k]);
        for (int i = 0; i < nlines; i++) seen += strstr(lines[i], want) != NULL;
        CHECK_MSG(seen == 2, "ops: %d rows of %s, expected 2 (kiln-tcc, kiln-c)", seen, steps[k]);
    }
    n = check_lines("ops", "memcpy");
    CHECK_MSG(n == 3, "ops: %d memcpy rows, expected 3", n);
    n = check_lines("ops", "memcpy-1t");
    CHECK_MSG(n == 3, "ops: %d memcpy-1t rows (memcpy on one thread), expected 3", n);
    clear();
    TEST_END("bench");
}
