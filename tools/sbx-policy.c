/*
 * sbx-policy — check a policy file, or explain one decision.
 *
 *   sbx-policy check [--expanded] [--workspace DIR] FILE...
 *   sbx-policy explain [--workspace DIR] FILE OP TARGET
 *   sbx-policy --help | --version
 *
 * check prints one summary line per good file; for a bad one it prints
 * every error as FILE:LINE:COL: message.  --expanded prints each good file
 * instead as the whole policy it amounts to (extends: followed, every key
 * written, each value's file in a comment): a policy file itself.  explain prints allow or deny,
 * the rule that decided, why, and which layers enforce it.
 * Exit: check 0 all good, 1 a file has errors; explain 0 allow, 1 deny;
 * 2 bad usage or a target that cannot be judged (both).
 */
#include <err.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bsd/string.h>

#include "isolate.h"
#include "ops.h"
#include "policy.h"
#include "version.h"

#define EXIT_USAGE 2    /* also: a target that cannot be judged */

static const char synopsis[] =
    "usage: sbx-policy check [--expanded] [--workspace DIR] FILE...\n"
    "       sbx-policy explain [--workspace DIR] FILE OP TARGET\n"
    "       sbx-policy --help | --version\n";

static void __attribute__((noreturn)) usage(void)
{
    fputs(synopsis, stderr);
    exit(EXIT_USAGE);
}

static void __attribute__((noreturn)) help(void)
{
    fputs(synopsis, stdout);
    fputs("\n"
        "check    print a one-line summary of each FILE, or every error as\n"
        "         FILE:LINE:COL: message; exit 0 if all are good, 1 if not\n"
        "  -e, --expanded       print each good FILE as the whole policy it\n"
        "                       amounts to (extends: followed, every key, each\n"
        "                       value's file and line in a comment); it loads\n"
        "                       to the same rules with the same workspace\n"
        "explain  decide one operation as the guard would and say why:\n"
        "         OP is open-read, open-write, exec, connect, bind, unlink,\n"
        "         rename, mkdir, rmdir, link, symlink, chmod, chown, truncate,\n"
        "         utimes or send.  TARGET is a path for file ops (relative to\n"
        "         the workspace, \"~/\" is home), a command line for exec,\n"
        "         host:port, ip:port, [v6]:port or unix:/path for connect,\n"
        "         send and bind.  Exit 0 allow, 1 deny.\n"
        "  -w, --workspace DIR  the workspace to judge against (default: the\n"
        "                       policy's workspace key, else the current directory)\n"
        "  -h, --help           this text\n"
        "  -V, --version        print the version\n"
        "Exit 2 on bad usage or a target that cannot be judged.\n", stdout);
    exit(0);
}

/* The options of a command: --help, --workspace where WORKSPACE is not
 * NULL, --expanded where EXPANDED is not NULL.  Returns the index of the
 * first operand.  '+': the operands are file names and command lines,
 * never options, from the first on. */
static int parse_options(int argc, char **argv, const char **workspace, bool *expanded)
{
    /* getopt's messages begin with ARGV[0]: the program's name, as err(3)'s
     * do, not the command's. */
    argv[0] = program_invocation_short_name;
    static const struct option longopts[] = {
        { "help", no_argument, NULL, 'h' },
        { "workspace", required_argument, NULL, 'w' },
        { NULL, 0, NULL, 0 },
    };
    static const struct option check_opts[] = {
        { "help", no_argument, NULL, 'h' },
        { "workspace", required_argument, NULL, 'w' },
        { "expanded", no_argument, NULL, 'e' },
        { NULL, 0, NULL, 0 },
    };
    static const struct option help_only[] = {
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, expanded ? "+hew:" : workspace ? "+hw:" : "+h",
                            expanded ? check_opts : workspace ? longopts : help_only,
                            NULL)) != -1) {
        switch (c) {
        case 'h': help();
        case 'w': if (workspace) *workspace = optarg; break;   /* only offered then */
        case 'e': if (expanded) *expanded = true; break;
        default: usage();
        }
    }
    return optind;
}

static int cmd_check(int argc, char **argv)
{
    int rc = 0;
    bool expanded = false;
    const char *workspace = NULL;
    int first = parse_options(argc, argv, &workspace, &expanded);
    if (first >= argc) {
        warnx("check: no FILE given");
        usage();
    }
    struct policy_options opt = { .workspace = workspace };
    for (int i = first; i < argc; i++) {
        struct policy_diag diag;
        struct policy *p = policy_load(argv[i], &opt, &diag);
        char line[1024];
        if (p == NULL) {
            for (unsigned k = 0; k < diag.count && k < POLICY_DIAG_MAX; k++)
                fprintf(stderr, "%s\n", diag.msg[k]);
            if (diag.count > POLICY_DIAG_MAX)
                fprintf(stderr, "%s: %u more errors\n", argv[i], diag.count - POLICY_DIAG_MAX);
            if (diag.count == 0)
                warn("%s", argv[i]);
            rc = 1;
            continue;
        }
        if (expanded) {
            if (policy_expand(p, stdout) < 0 || fflush(stdout) == EOF) {
                warn("%s: cannot write the expansion", argv[i]);
                rc = 1;
            }
            policy_free(p);
            continue;
        }
        if (policy_summary(p, line, sizeof(line)) < 0)
            strlcpy(line + sizeof(line) - 4, "...", 4);
        printf("%s: %s\n", argv[i], line);
        policy_free(p);
    }
    return rc;
}

/* argv[0] as exec would find it: with a slash as a path, else in $PATH
 * (path.h); either against the policy's workspace and home. */
static int find_program(const struct policy *p, const char *name, char *out, size_t outsz)
{
    char found[PATH_MAX], expanded[PATH_MAX];
    if (strchr(name, '/') == NULL) {
        if (policy_path_search(name, getenv("PATH"), NULL, found, sizeof(found)) < 0)
            return -1;
        name = found;
    }
    if (policy_path_expand(p, name, expanded, sizeof(expanded)) < 0)
        return -1;
    return policy_path_resolve("/", expanded, false, out, outsz);
}

/* Is PATH inside the root of any rule of list L?  Sets *ROOT to it. */
static bool under_root(const struct policy *p, enum policy_list l, const char *path,
                       char *root, size_t rootsz)
{
    const struct policy_rule *r;
    size_t n = policy_rules(p, l, &r);
    for (size_t i = 0; i < n; i++) {
        if (policy_glob_root(r[i].pattern, root, rootsz) < 0)
            continue;
        if (policy_path_under(path, root))
            return true;
    }
    return false;
}

/* Which layers enforce this verdict: the guard always; below it, what the
 * design says each kernel mechanism can express. */
static void print_layers(const struct policy *p, enum sbx_op op, const char *target,
                         const struct policy_verdict *v, bool denied)
{
    enum sbx_op_class cls = sbx_op_class(op);
    const struct policy_rule *r = v->rule;
    char root[PATH_MAX];

    switch (cls) {
    case SBX_CLASS_READ:
    case SBX_CLASS_WRITE: {
        enum policy_list allow = cls == SBX_CLASS_READ ? POLICY_READ_ALLOW : POLICY_WRITE_ALLOW;
        if (!denied) {
            if (policy_glob_root(r->pattern, root, sizeof(root)) < 0)
                strlcpy(root, "?", sizeof(root));
            printf("  layers: guard (exact); landlock: allows the rule's root %s (a superset)\n", root);
        } else if (r->list == POLICY_WRITE_DENY && strcmp(r->section, "files.read_only") == 0) {
            printf("  layers: guard (exact); landlock: no write right anywhere (exact)\n");
        } else if (r->list == POLICY_READ_DENY) {
            printf("  layers: guard (exact); kernel: mount over existing files at start "
                   "(exact for files present at start); landlock: no (deny inside an allowed tree)\n");
        } else if (r->list == POLICY_WRITE_DENY) {
            printf("  layers: guard (exact); landlock: no (deny inside an allowed tree)\n");
        } else if (under_root(p, allow, target, root, sizeof(root))) {
            printf("  layers: guard (exact); landlock: no (inside the allow root %s)\n", root);
        } else {
            printf("  layers: guard (exact); landlock: yes (outside every %s root)\n",
                   policy_list_name(allow));
        }
        break;
    }
    case SBX_CLASS_EXEC:
        if (r->list == POLICY_CMD_DENY || r->list == POLICY_CMD_ALLOW)
            printf("  layers: guard (exact); supervisor (exact: matches the argv of every execve, "
                   "static programs too)\n");
        else if (!denied || under_root(p, POLICY_EXEC_ALLOW, target, root, sizeof(root)))
            printf("  layers: guard (exact); supervisor (exact: every execve); landlock: execute "
                   "right on the allow roots (a superset)\n");
        else
            printf("  layers: guard (exact); supervisor (exact: every execve); landlock: yes "
                   "(outside every files.exec.allow root)\n");
        break;
    case SBX_CLASS_CONNECT:
    case SBX_CLASS_BIND:
        if (cls == SBX_CLASS_BIND)
            printf("  layers: guard (exact)%s\n", strncmp(target, "unix:", 5) == 0 ? "" :
                   "; landlock: TCP ports of the bind rules only (ABI 4+, a superset)");
        else {
            printf("  layers: native: %s\n", iso_net_layers(p, target, ISO_NATIVE));
            printf("          bwrap:  %s\n", iso_net_layers(p, target, ISO_BWRAP));
            printf("          gvisor: %s\n", iso_net_layers(p, target, ISO_GVISOR));
            printf("          none:   %s\n", iso_net_layers(p, target, ISO_NONE));
        }
        break;
    default:
        break;
    }
}

static int cmd_explain(int argc, char **argv)
{
    struct policy_options opt = { 0 };
    struct policy_diag diag;
    struct policy_verdict v;
    char target[PATH_MAX], rule[1024];
    enum sbx_decision d;
    struct policy *p = NULL;
    int op, rc = EXIT_USAGE;

    int first = parse_options(argc, argv, &opt.workspace, NULL);
    argc -= first;
    argv += first;
    if (argc != 3) {
        warnx("explain: %s", argc < 3 ? "give FILE, OP and TARGET" : "more than FILE, OP and TARGET");
        usage();
    }
    if ((op = sbx_op_parse(argv[1])) < 0 || sbx_op_class(op) == SBX_CLASS_LIFECYCLE) {
        warnx("%s: not an operation the policy decides (see --help)", argv[1]);
        goto out;
    }
    p = policy_load(argv[0], &opt, &diag);
    if (p == NULL) {
        for (unsigned k = 0; k < diag.count && k < POLICY_DIAG_MAX; k++)
            fprintf(stderr, "%s\n", diag.msg[k]);
        if (diag.count == 0)
            warn("%s", argv[0]);
        goto out;
    }
    switch (sbx_op_class(op)) {
    case SBX_CLASS_EXEC: {
        char store[8192], *words[256], prog[PATH_MAX];
        if (strlen(argv[2]) >= sizeof(store) ||
            policy_path_shell_words(argv[2], store, sizeof(store), words, 256) <= 0) {
            warnx("%s: not a command line", argv[2]);
            goto out;
        }
        if (find_program(p, words[0], prog, sizeof(prog)) < 0) {
            warn("%s", words[0]);
            goto out;
        }
        d = policy_decide_exec(p, prog, words, &v);
        snprintf(target, sizeof(target), "%s", prog);
        printf("%s exec %s (%s)\n", sbx_decision_name(v.audit ? SBX_DENY : d), argv[2], prog);
        break;
    }
    case SBX_CLASS_CONNECT:
    case SBX_CLASS_BIND: {
        const char *t = argv[2];
        char buf[PATH_MAX + 8];
        if (strncmp(t, "unix:", 5) == 0 && t[5] != '@' && t[5] != '\0') {
            char exp[PATH_MAX];
            if (policy_path_expand(p, t + 5, exp, sizeof(exp)) < 0 ||
                policy_path_resolve("/", exp, false, target, sizeof(target)) < 0) {
                warn("%s", t);
                goto out;
            }
            snprintf(buf, sizeof(buf), "unix:%s", target);
            t = buf;
        }
        if (policy_decide_net_text(p, op, t, &v) < 0) {
            warnx("%s: not a network target (write host:port, ip:port, [v6]:port or unix:/path)",
                  argv[2]);
            goto out;
        }
        d = v.decision;
        strlcpy(target, t, sizeof(target));
        printf("%s %s %s\n", sbx_decision_name(v.audit ? SBX_DENY : d), argv[1], target);
        break;
    }
    default: {
        char exp[PATH_MAX];
        bool nofollow = op == SBX_OP_UNLINK || op == SBX_OP_RMDIR || op == SBX_OP_RENAME ||
                        op == SBX_OP_LINK || op == SBX_OP_SYMLINK;
        if (policy_path_expand(p, argv[2], exp, sizeof(exp)) < 0 ||
            policy_path_resolve("/", exp, nofollow, target, sizeof(target)) < 0) {
            warn("%s", argv[2]);
            goto out;
        }
        d = policy_decide_path(p, op, target, &v);
        printf("%s %s %s\n", sbx_decision_name(v.audit ? SBX_DENY : d), argv[1], target);
        break;
    }
    }
    const struct policy_rule *r = v.rule;
    if (r->line > 0)
        snprintf(rule, sizeof(rule), "%s \"%s\" (%s:%u)", r->section, r->text, r->file, r->line);
    else
        snprintf(rule, sizeof(rule), "%s %s", r->section, r->text);
    printf("  rule:   %s\n", rule);
    if (r->reason != NULL && strcmp(r->reason, v.reason) != 0)
        printf("  reason: %s (%s)\n", v.reason, r->reason);
    else
        printf("  reason: %s\n", v.reason);
    if (v.audit)
        printf("  mode:   audit: the call is allowed and recorded as a would-be denial\n");
    print_layers(p, op, target, &v, v.audit || d == SBX_DENY);
    rc = d == SBX_DENY ? 1 : 0;
out:
    policy_free(p);
    return rc;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    argv[0] = program_invocation_short_name;     /* as in getopt's messages */
    while ((c = getopt_long(argc, argv, "+hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'h': help();
        case 'V': printf("sbx-policy %s\n", SBX_VERSION); return 0;
        default: usage();
        }
    }
    if (optind >= argc)
        usage();
    const char *cmd = argv[optind];
    /* Each command parses from its own name on: a fresh getopt. */
    argc -= optind;
    argv += optind;
    optind = 0;
    if (strcmp(cmd, "check") == 0)
        return cmd_check(argc, argv);
    if (strcmp(cmd, "explain") == 0)
        return cmd_explain(argc, argv);
    warnx("%s: unknown command", cmd);
    usage();
}
