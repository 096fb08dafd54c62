/*
 * log.h — KILN_LOGS: text dumps of the compiler's stages, as TORCH_LOGS
 * (log.c). KILN_LOGS is a comma list of topics, or "all"; it is read when a
 * context is made, and kn_set_logs overrides it.
 *
 *     if (log_on(ctx, LOG_FUSION))
 *         log_line(ctx, LOG_FUSION, "kernel %d: %s", k, what);   // "[fusion] kernel 3: ..."
 *
 * Lines go to the context's log sink (kn_set_log), else port_log (stderr).
 */
#ifndef KN_LOG_H
#define KN_LOG_H

#include "core.h"

typedef enum {
    LOG_GRAPH, LOG_DECOMP, LOG_JOINT, LOG_PARTITION, LOG_FUSION, LOG_LOOPIR, LOG_OUTPUT_CODE,
    LOG_GUARDS, LOG_RECOMPILES, LOG_GRAPH_BREAKS, LOG_PERF, LOG_NTOPICS
} LogTopic;

int log_on(const kn_ctx *ctx, LogTopic t);
const char *log_topic_name(LogTopic t);
void log_line(kn_ctx *ctx, LogTopic t, const char *fmt, ...) KN_PRINTF(3, 4);
void log_text(kn_ctx *ctx, LogTopic t, const char *text); /* one log line per text line */
/* the topics of spec ("graph,fusion", "all", "" for none) as a bit mask; -1 if a name is unknown,
 * with the unknown name in bad (at least 32 bytes) */
int64_t log_parse(const char *spec, char *bad);

#endif
