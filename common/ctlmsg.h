/*
 * ctlmsg.h — the control protocol of sbx-auditd (control.sock): its wire
 * format and the message codec that both ends use.  The daemon (auditd/)
 * parses requests and builds replies with it; the client (ctl.h) the
 * other way round; the emitter (preload/emit.c) uses the socket address.
 *
 * Wire format.  control.sock is an AF_UNIX SOCK_SEQPACKET socket, so every
 * message arrives whole or not at all (a client that dies mid-send sends
 * nothing).  A message is at most SBX_CTL_MAX bytes of text: a verb line,
 * then "key=value" lines, each ended by '\n'.  Keys are [a-z0-9_]{1,31};
 * values escape '\\' as "\\\\" and newline as "\\n" and hold no NUL; a key
 * appears at most once; at most SBX_CTL_MAX_FIELDS fields.  The daemon
 * answers every request with "OK" (+ fields) or "ERR" + "msg=TEXT"; anything
 * malformed or oversized gets an ERR and the daemon keeps serving.  The
 * daemon also pushes "CMD" messages (kill orders) to a registered guard.
 *
 *   REGISTER name policy_name policy_sha256 policy_file workspace command
 *            layers guard_pid            -> OK run_id token
 *   EVENT op decision layer flags err target target2 rule reason [pid] -> OK
 *       (with noreply=1: no answer at all)
 *   EXIT status detail                   -> OK
 *   DONE req result detail               (guard, after a CMD; no reply)
 *   KILL name|all=1 soft reason          -> OK result | ERR msg
 *   SYNC                                 -> OK last_id   (all rings drained and committed)
 *   CMD kind=hard|soft by reason req     (daemon -> guard)
 *   KEEP run_id token                    -> OK   (sbx-guard's second connection;
 *                                                 the process that registered the run)
 *   RING pid uid since + SCM_RIGHTS {memfd[, pidfd]}
 *                                        (daemon -> KEEP connection: a copy of each
 *                                         ring of the agent, tools/guard_keep.h)
 *   ADOPT pid since + SCM_RIGHTS {memfd[, pidfd]}
 *                                        -> OK held=new|already | ERR msg
 *                                        (on KEEP, after a restart: hand a ring back)
 *
 * The daemon accepts connections only from its own uid or root
 * (SO_PEERCRED); a refusal is recorded as an event.
 *
 * Memory: nothing here allocates; a parsed message points into the buffer
 * it was parsed from.  Errors: 0 / -1; ERR buffers get a one-line message.
 */
#ifndef SBX_CTLMSG_H
#define SBX_CTLMSG_H

#include <stdbool.h>
#include <stddef.h>

#define SBX_CTL_MAX        65536   /* bytes per message */
#define SBX_CTL_MAX_FIELDS 24

/* ---- message codec (client and daemon) ----------------------------------- */

struct sbx_msg_field {
    const char *key;
    const char *val;        /* unescaped, NUL-terminated */
};

struct sbx_msg {
    const char *verb;
    unsigned nf;
    struct sbx_msg_field f[SBX_CTL_MAX_FIELDS];
};

/* Parses the N bytes at BUF in place (BUF needs N+1 bytes; it is unescaped
 * and NUL-terminated).  0, or -1 with ERR saying what is wrong. */
int sbx_msg_parse(char *buf, size_t n, struct sbx_msg *m, char *err, size_t errsz);
/* The value of KEY, or NULL. */
const char *sbx_msg_get(const struct sbx_msg *m, const char *key);
/* True if every key of M is in the NULL-terminated list KEYS; else false and
 * ERR names the first unknown key. */
bool sbx_msg_keys_ok(const struct sbx_msg *m, const char *const *keys, char *err, size_t errsz);

/* A message being built.  Overflow is sticky: sbx_msg_send then fails. */
struct sbx_msgbuf {
    size_t len;
    bool overflow;
    char buf[SBX_CTL_MAX];
};
void sbx_msg_start(struct sbx_msgbuf *b, const char *verb);
/* Adds KEY=VAL (escaped); a NULL VAL adds nothing. */
void sbx_msg_add(struct sbx_msgbuf *b, const char *key, const char *val);
void sbx_msg_addf(struct sbx_msgbuf *b, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Sends B as one message, waiting at most 10 s for room on the socket.
 * 0 / -1 (EMSGSIZE on overflow, ETIMEDOUT). */
int sbx_msg_send(int fd, const struct sbx_msgbuf *b);
/* The same for LEN bytes at BUF, a message built before (and kept). */
int sbx_msg_send_bytes(int fd, const char *buf, size_t len);

/* ---- socket addresses ---------------------------------------------------- */

struct sockaddr_un;
/* Fills SA for the socket file PATH.  A path longer than sun_path (108
 * bytes: deep test directories) is reached through its directory instead:
 * *DIRFD gets an O_PATH descriptor of the directory and SA names
 * "/proc/self/fd/N/NAME".  Close *DIRFD (when >= 0) after bind/connect.
 * 0, or -1 with errno. */
int sbx_unix_addr(const char *path, struct sockaddr_un *sa, int *dirfd);

#endif
