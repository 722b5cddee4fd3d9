/*
 * serve_metrics.h — the counters behind GET /metrics (Prometheus text
 * format 0.0.4): requests by status code, executions running and queued,
 * sandboxes ready, and a histogram of the execution requests' latency.
 * Thread-safe; nothing allocates but serve_metrics_text.
 */
#ifndef SBX_SERVE_METRICS_H
#define SBX_SERVE_METRICS_H

#include <stddef.h>

/* One answered request: its status and, for POST /execute, its latency
 * (seconds; negative: not an execution request). */
void serve_metrics_request(unsigned status, double seconds);
/* The number of executions running and waiting, as the gate sees them. */
void serve_metrics_gauges(long running, long queued);
/* The page (malloc'd), with READY sandboxes in the pool. */
char *serve_metrics_text(size_t ready);

#endif
