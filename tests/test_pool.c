/*
 * test_pool.c — port_parallel_for: every index runs exactly once (n = 0, 1,
 * 7, 1000) with 1 and several threads, repeated calls reuse the pool, a
 * nested call runs inline, and port_set_threads / port_threads agree. On
 * wasm and bare metal the pool is one thread and everything runs inline.
 * No timing.
 */
#include <stdlib.h>

#include "../port/port.h"
#include "test.h"

typedef struct {
    int *hits; /* per index */
    int nested;
} Job;

static void count(void *arg, int i)
{
    Job *j = arg;
    j->hits[i]++; /* each index is run once, so no two threads write one element */
}

/* the inner call of a nested job: must run inline on this thread */
static void inner(void *arg, int i)
{
    (void)i;
    (*(int *)arg)++;
}

static void outer(void *arg, int i)
{
    Job *j = arg;
    int n = 0, used = port_parallel_for(5, inner, &n);
    j->hits[i] += n == 5 && used == 1 ? 1 : 100;
}

/* runs fn over n indices and checks that each was hit exactly once */
static void cover(int threads, int n, void (*fn)(void *, int), const char *what)
{
    Job j;
    int i, bad = 0, used;
    j.hits = calloc((size_t)n + 1, sizeof *j.hits);
    j.nested = 0;
    used = port_parallel_for(n, fn, &j);
    for (i = 0; i < n; i++) bad += j.hits[i] != 1;
    CHECK_MSG(bad == 0, "%s: threads %d, n %d: %d indices not run exactly once", what, threads, n, bad);
    CHECK_MSG(used >= 1 && used <= port_threads() && (n > 1 || used == 1), "%s: threads %d, n %d: %d took part",
              what, threads, n, used);
    free(j.hits);
}

int main(void)
{
    static const int sizes[] = {0, 1, 7, 1000};
    static const int threads[] = {1, 2, 3, 8};
    int posix = !strcmp(port_name(), "posix");
    size_t t, k;
    int rep;

    CHECK(port_threads() >= 1);
    for (t = 0; t < sizeof threads / sizeof *threads; t++) {
        port_set_threads(threads[t]);
        CHECK_MSG(port_threads() == (posix ? threads[t] : 1), "port_set_threads(%d): port_threads() %d", threads[t],
                  port_threads());
        for (rep = 0; rep < 3; rep++)
            for (k = 0; k < sizeof sizes / sizeof *sizes; k++) cover(threads[t], sizes[k], count, "count");
        cover(threads[t], 7, outer, "nested");
    }
    /* many small jobs back to back: a lost wake-up or a miscounted worker would hang or miss indices */
    port_set_threads(posix ? 2 : 1);
    for (rep = 0; rep < 2000; rep++) {
        int hits[3] = {0, 0, 0};
        Job j;
        j.hits = hits;
        port_parallel_for(3, count, &j);
        if (hits[0] != 1 || hits[1] != 1 || hits[2] != 1) break;
    }
    CHECK_MSG(rep == 2000, "repeated calls: wrong coverage at call %d", rep);
    port_set_threads(0);
    CHECK(port_threads() >= 1 && port_threads() <= PORT_MAX_THREADS);
    port_set_threads(10000);
    CHECK(port_threads() == (posix ? PORT_MAX_THREADS : 1));
    port_set_threads(0);
    TEST_END("pool");
}
