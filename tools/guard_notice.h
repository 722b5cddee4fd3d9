/*
 * guard_notice.h — what sbx-guard tells the person at the terminal about the
 * denials of the agent it runs (--notify MODE).
 *
 * The notices are read back from the audit trail, not sent by the agent:
 * sbx-guard opens the store read-only and reads the rows of its own run
 * (its agent name and run id, after the newest row at start).  So they
 * cover every process of the agent whatever it did to its descriptors or
 * environment (Python's subprocess closes inherited descriptors; a pipe to
 * sbx-guard would lose its children's denials), every layer (guard, the
 * supervisor's, the kernel's rows), cost the agent nothing, and the count at
 * exit is the record's, after a sync with sbx-auditd.  The price is a delay
 * of up to NOTICE_TICK_MS plus the daemon's batch (50 ms) before a line.
 *
 * Modes (docs/sbx-guard.1 argues the default):
 *   stderr   one line per denial on sbx-guard's own stderr, at most
 *            NOTICE_LINES_PER_SEC a second ("... and K more" for the rest),
 *            and a summary at exit;
 *   summary  the summary at exit only (the default when stderr is a
 *            terminal: a line written while a full-screen program owns the
 *            terminal would draw over its screen);
 *   none     nothing;
 *   agent    the preload writes one line on the stderr of the process that
 *            was denied (SBX_NOTIFY=1), in order with its own output; for
 *            scripted agents and logs, never for a full-screen program.
 * Nothing is printed for a run without denials.
 *
 * Memory: guard_notice_open allocates the state; guard_notice_close frees
 * it.  Errors: a store that cannot be read is said once on OUT; the agent
 * is never affected.
 */
#ifndef SBX_GUARD_NOTICE_H
#define SBX_GUARD_NOTICE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum guard_notify_mode {
    GUARD_NOTIFY_NONE,
    GUARD_NOTIFY_SUMMARY,
    GUARD_NOTIFY_STDERR,
    GUARD_NOTIFY_AGENT,
};

/* NAME ("stderr", "summary", "none", "agent") as a mode, or -1. */
int guard_notify_parse(const char *name);

/* The default for a sbx-guard whose stderr is FD: summary on a terminal,
 * stderr otherwise. */
enum guard_notify_mode guard_notify_default(int fd);

struct guard_notice;

struct guard_notice_run {
    const char *audit_db;       /* the store sbx-auditd writes */
    const char *agent, *run_id; /* this run's rows */
    const char *workspace;      /* targets inside it are shown relative */
    bool audit_mode;            /* the policy is in audit mode: count the
                                 * calls it would have denied */
};

/* For MODE stderr or summary: notes where the run's rows begin (the newest
 * row of the store now, so call it after the registration and before the
 * agent starts).  Copies what RUN points to.  Lines go to OUT.  NULL for
 * the other modes or when out of memory (then nothing is printed). */
struct guard_notice *guard_notice_open(enum guard_notify_mode mode,
                                       const struct guard_notice_run *run, FILE *out);

/* Milliseconds until guard_notice_tick wants to run, for poll(2); -1 when
 * never (N NULL, or mode summary). */
int guard_notice_timeout_ms(const struct guard_notice *n);

/* Reads the rows committed since the last tick and prints what the rate
 * allows.  Call when the timeout passed (early calls are cheap no-ops). */
void guard_notice_tick(struct guard_notice *n);

/* After the agent ended and sbx-auditd was synced (sbx_ctl_sync): reads
 * the last rows, prints the lines still due (stderr) and the summary. */
void guard_notice_finish(struct guard_notice *n);

void guard_notice_close(struct guard_notice *n);

#endif
