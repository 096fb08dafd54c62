/*
 * log.c — KILN_LOGS topics and the lines they print (see log.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "../port/port.h"

static const char *const names[LOG_NTOPICS] = {
    "graph", "decomp", "joint", "partition", "fusion", "loopir", "output_code",
    "guards", "recompiles", "graph_breaks", "perf",
};

const char *log_topic_name(LogTopic t) { return (unsigned)t < LOG_NTOPICS ? names[t] : "?"; }

int64_t log_parse(const char *spec, char *bad)
{
    int64_t mask = 0;
    const char *p = spec ? spec : "";
    while (*p) {
        size_t n = strcspn(p, ",");
        while (n && p[n - 1] == ' ') n--;
        int found = n == 0;
        if (n == 3 && strncmp(p, "all", 3) == 0) {
            mask = ((int64_t)1 << LOG_NTOPICS) - 1;
            found = 1;
        }
        for (int t = 0; t < LOG_NTOPICS && !found; t++)
            if (strlen(names[t]) == n && strncmp(p, names[t], n) == 0) {
                mask |= (int64_t)1 << t;
                found = 1;
            }
        if (!found) {
            snprintf(bad, 32, "%.*s", (int)(n < 31 ? n : 31), p);
            return -1;
        }
        p += strcspn(p, ",");
        while (*p == ',' || *p == ' ') p++;
    }
    return mask;
}

kn_status kn_set_logs(kn_ctx *ctx, const char *spec)
{
    if (!ctx) return KN_EINVAL;
    char bad[32];
    int64_t m = log_parse(spec, bad);
    if (m < 0) return kn_errs(ctx, KN_EINVAL, "kn_set_logs: unknown topic '%s' (known: graph, decomp, joint, "
                              "partition, fusion, loopir, output_code, guards, recompiles, graph_breaks, perf, all)", bad);
    ctx->logs = (uint32_t)m;
    return KN_OK;
}

/* KILN_LOGS, read when a context is made; an unknown topic is reported once on the sink */
void log_init(kn_ctx *ctx)
{
    const char *e = getenv("KILN_LOGS");
    if (!e || !*e) return;
    char bad[32];
    int64_t m = log_parse(e, bad);
    if (m < 0) {
        char line[96];
        snprintf(line, sizeof line, "kiln: KILN_LOGS names an unknown topic '%s'; ignored", bad);
        port_log(line);
        return;
    }
    ctx->logs = (uint32_t)m;
}

int log_on(const kn_ctx *ctx, LogTopic t) { return ctx && (ctx->logs >> t & 1); }

static void emit(kn_ctx *ctx, const char *s)
{
    if (ctx->log) ctx->log(ctx->log_user, s);
    else port_log(s);
}

void log_line(kn_ctx *ctx, LogTopic t, const char *fmt, ...)
{
    if (!log_on(ctx, t)) return;
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "[%s] ", names[t]);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    emit(ctx, buf);
}

void log_text(kn_ctx *ctx, LogTopic t, const char *text)
{
    if (!log_on(ctx, t) || !text) return;
    while (*text) {
        size_t n = strcspn(text, "\n");
        log_line(ctx, t, "%.*s", (int)n, text);
        text += n;
        if (*text) text++;
    }
}
