/*
 * serve_exec.h — one execution: hands the code to a warm sandbox and
 * collects what it printed, its status, and why it ended.
 *
 * Output is read from both pipes as it comes (poll), each capped at
 * SERVE_OUTPUT_CAP bytes while reading: what lies beyond is read and
 * dropped, so the program never blocks on a full pipe and the service
 * never holds more than the cap per stream.  The timeout and a kill from
 * sbx-kill SIGKILL the sandbox's init, i.e. its whole pid namespace.
 *
 * Memory: a result is a plain struct (two fixed buffers, ~100 KiB): the
 * caller provides it, on the heap.  Errors: 0, or -1 with ERR (the sandbox
 * failed as a service: HTTP 500, never the user's result).
 */
#ifndef SBX_SERVE_EXEC_H
#define SBX_SERVE_EXEC_H

#include <stdbool.h>
#include <stddef.h>

#include "isolate.h"
#include "serve_spawn.h"
#include "serve_text.h"

/* SERVE.md: 51,200 bytes per stream, then this marker. */
#define SERVE_OUTPUT_CAP 51200
#define SERVE_TRUNC_MARK "\n[output truncated at 50 KB]"

struct serve_stream {
    char buf[SERVE_OUTPUT_CAP];
    size_t len;
    bool truncated;             /* more than the cap was written */
    bool eof;
};

struct serve_result {
    struct serve_stream out, err;
    int exit_code;              /* SERVE.md: N, or -N for signal N */
    bool timed_out;
    bool killed;                /* by sbx-kill */
    char killed_by[400];        /* "killed by USER: REASON" */
    double ms;                  /* from the code's hand-over to the end */
    double t_forked, t_status;  /* serve_now_s() when the code was handed
                                 * over and at the status (0: none), for
                                 * the trace */
};

/* Runs CODE (the request's JSON line for the runner, '\n'-terminated) in
 * BOX (ready), for at most TIMEOUT_S.  SUP is the request the sandbox was
 * started with, for the seccomp supervisor's decisions. */
int serve_exec_run(struct serve_box *box, const char *line, size_t len, double timeout_s,
                   const struct iso_request *sup, struct serve_result *res,
                   char *err, size_t errsz);

#endif
