/*
 * serve_metrics.c — the counters of GET /metrics (serve_metrics.h).
 */
#include "serve_metrics.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* Seconds; from a warm print(1) (a few ms) to the longest timeout (30 s). */
static const double bounds[] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                 1, 2.5, 5, 10, 30 };
#define NB (sizeof bounds / sizeof bounds[0])

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long by_status[600];
static unsigned long buckets[NB + 1], count;
static double sum;
static long running, queued;

void serve_metrics_request(unsigned status, double seconds)
{
    pthread_mutex_lock(&lock);
    if (status < 600)
        by_status[status]++;
    if (seconds >= 0) {
        size_t i = 0;
        while (i < NB && seconds > bounds[i])
            i++;
        buckets[i]++;
        count++;
        sum += seconds;
    }
    pthread_mutex_unlock(&lock);
}

void serve_metrics_gauges(long r, long q)
{
    pthread_mutex_lock(&lock);
    running = r;
    queued = q;
    pthread_mutex_unlock(&lock);
}

char *serve_metrics_text(size_t ready)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    unsigned long cum = 0;

    if (f == NULL)
        return NULL;
    pthread_mutex_lock(&lock);
    fprintf(f, "# HELP sbx_serve_requests_total HTTP requests answered, by status code.\n"
               "# TYPE sbx_serve_requests_total counter\n");
    for (unsigned s = 100; s < 600; s++)
        if (by_status[s])
            fprintf(f, "sbx_serve_requests_total{code=\"%u\"} %lu\n", s, by_status[s]);
    fprintf(f, "# HELP sbx_serve_executions_running Executions running now.\n"
               "# TYPE sbx_serve_executions_running gauge\n"
               "sbx_serve_executions_running %ld\n"
               "# HELP sbx_serve_executions_queued Executions waiting for a slot.\n"
               "# TYPE sbx_serve_executions_queued gauge\n"
               "sbx_serve_executions_queued %ld\n"
               "# HELP sbx_serve_sandboxes_ready Warm sandboxes waiting for a request.\n"
               "# TYPE sbx_serve_sandboxes_ready gauge\n"
               "sbx_serve_sandboxes_ready %zu\n", running, queued, ready);
    fprintf(f, "# HELP sbx_serve_execute_duration_seconds Latency of POST /execute.\n"
               "# TYPE sbx_serve_execute_duration_seconds histogram\n");
    for (size_t i = 0; i < NB; i++) {
        cum += buckets[i];
        fprintf(f, "sbx_serve_execute_duration_seconds_bucket{le=\"%g\"} %lu\n", bounds[i], cum);
    }
    cum += buckets[NB];
    fprintf(f, "sbx_serve_execute_duration_seconds_bucket{le=\"+Inf\"} %lu\n"
               "sbx_serve_execute_duration_seconds_sum %.6f\n"
               "sbx_serve_execute_duration_seconds_count %lu\n", cum, sum, count);
    pthread_mutex_unlock(&lock);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}
