/* chain.c — extends: a policy built on another (docs/policy.md,
 * "Composing policies").
 *
 * A policy may name its parent with `extends: NAME|PATH`.  The chain is
 * followed up to POLICY_EXTENDS_MAX files, a file met twice is a cycle
 * (refused, the chain in the message), and the compiled-in default lies
 * below every chain, as it always did below a lone policy: a key no file
 * writes comes from it.  Each file of the chain is read with the same
 * bounds as the policy itself (size, nesting) and its mistakes are
 * reported at its own file:line.
 *
 * Values: a scalar or mapping key is taken from the nearest file that
 * writes it.  A list is the nearest plain list, edited by every
 * `{add: [...], remove: [...]}` written below it (the edit of a file
 * applies to what its parent's chain gives); serve.allowed_imports and
 * serve.blocklist add up along the chain even when written as plain lists
 * (SERVE.md).  chain_gather turns one list key into the entries it ends up
 * with, each still pointing at the node, file and line it was written at.
 *
 * Where NAME is looked up (the first that exists): the directory the
 * caller gives (policy_options.policy_dir); else the source tree's
 * policies/ when the program runs from build.../bin (or .../tests), then
 * PREFIX/share/sbx/policies next to the program, then the PREFIX sbx was
 * built for; in each, NAME.yaml and then serve/NAME.yaml.  `default` is
 * the compiled-in default, wherever sbx runs. */
#include "internal.h"
#include "paths.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bsd/string.h>

#ifndef SBX_PREFIX
#define SBX_PREFIX "/usr/local"
#endif

/* ---- reading --------------------------------------------------------------- */

int load_read_file(const char *path, char **bufp, size_t *lenp)
{
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int saved;
    /* O_NONBLOCK: opening a FIFO would wait for a writer */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    struct stat st;

    if (fd < 0)
        return -1;
    /* a FIFO or a device would block or never end */
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        saved = fstat(fd, &st) < 0 ? errno : S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
        close(fd);
        errno = saved;
        return -1;
    }
    for (;;) {
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 8192;
            char *nb;
            if (ncap > POLICY_FILE_MAX + 1)
                ncap = POLICY_FILE_MAX + 1;
            if (ncap == cap)
                break;          /* one byte over: the parse says how big */
            nb = realloc(buf, ncap);
            if (nb == NULL)
                goto fail;
            buf = nb;
            cap = ncap;
        }
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            goto fail;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    *bufp = buf;
    *lenp = len;
    return 0;
fail:
    saved = errno;
    close(fd);
    free(buf);
    errno = saved;
    return -1;
}

/* ---- finding a parent ------------------------------------------------------ */

/* The directories a shipped NAME is looked for in, into DIRS (at most 3);
 * their count. */
static size_t shipped_dirs(const struct policy_options *opt, char dirs[][PATH_MAX])
{
    char self[PATH_MAX];
    size_t n = 0;

    if (opt != NULL && opt->policy_dir != NULL) {
        strlcpy(dirs[n++], opt->policy_dir, PATH_MAX);
        return n;
    }
    if (sbx_path_self_dir(self, sizeof(self)) == 0) {
        /* build/bin or build/tests in the source tree: its policies/ */
        const char *b = strrchr(self, '/');
        struct stat st;
        if (b != NULL && (strcmp(b, "/bin") == 0 || strcmp(b, "/tests") == 0) &&
            (size_t)snprintf(dirs[n], PATH_MAX, "%s/../../policies", self) < PATH_MAX &&
            stat(dirs[n], &st) == 0 && S_ISDIR(st.st_mode)) {
            char up[PATH_MAX];  /* the tree's build directory, build... */
            snprintf(up, sizeof(up), "%.*s", (int)(b - self), self);
            const char *bd = strrchr(up, '/');
            if (bd != NULL && strncmp(bd, "/build", 6) == 0)
                n++;
        }
        if ((size_t)snprintf(dirs[n], PATH_MAX, "%s/../share/sbx/policies", self) < PATH_MAX)
            n++;
    }
    strlcpy(dirs[n++], SBX_PREFIX "/share/sbx/policies", PATH_MAX);
    return n;
}

static bool regular(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* A shipped policy's name: letters, digits, '-', '_', '.', not starting
 * with a dot (no way out of the directory). */
static bool name_ok(const char *s)
{
    if (*s == '\0' || *s == '.' || strlen(s) > 64)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              (*s >= '0' && *s <= '9') || *s == '-' || *s == '_' || *s == '.'))
            return false;
    return true;
}

/* The shipped name closest to NAME in DIR (and DIR/serve), into OUT. */
static void suggest_shipped(const char *dir, const char *name, char *out, size_t outsz)
{
    size_t best = 99;
    for (int sub = 0; sub < 2; sub++) {
        char d[PATH_MAX];
        if ((size_t)snprintf(d, sizeof(d), "%s%s", dir, sub ? "/serve" : "") >= sizeof(d))
            continue;
        DIR *dp = opendir(d);
        if (dp == NULL)
            continue;
        struct dirent *e;
        unsigned seen = 0;
        while ((e = readdir(dp)) != NULL && seen++ < 256) {
            size_t l = strlen(e->d_name);
            if (l <= 5 || strcmp(e->d_name + l - 5, ".yaml") != 0 || l - 5 >= 64)
                continue;
            char base[64];
            snprintf(base, sizeof(base), "%.*s", (int)(l - 5), e->d_name);
            size_t dist = load_distance(name, base);
            if (dist < best && dist <= 3) {
                best = dist;
                strlcpy(out, base, outsz);
            }
        }
        closedir(dp);
    }
}

/* The first NAME.yaml, then serve/NAME.yaml, in the shipped directories:
 * 0 with PATH (resolved), or -1 with LOOKED the directories tried. */
static int find_shipped(const struct policy_options *opt, const char *name, char *path,
                        size_t pathsz, char *looked, size_t lookedsz)
{
    char dirs[3][PATH_MAX];
    size_t nd = shipped_dirs(opt, dirs);

    looked[0] = '\0';
    for (size_t i = 0; i < nd; i++) {
        for (int sub = 0; sub < 2; sub++) {
            int n = snprintf(path, pathsz, "%s%s/%s.yaml", dirs[i], sub ? "/serve" : "", name);
            if (n > 0 && (size_t)n < pathsz && regular(path)) {
                /* messages name it plainly: /usr/local/share/sbx/policies/x.yaml */
                char clean[PATH_MAX];
                if (realpath(path, clean) != NULL)
                    strlcpy(path, clean, pathsz);
                return 0;
            }
        }
        strlcat(looked, i ? ", " : "", lookedsz);
        strlcat(looked, dirs[i], lookedsz);
    }
    return -1;
}

int policy_shipped_path(const char *name, const struct policy_options *opt, char *out,
                        size_t outsz)
{
    char looked[1024];
    if (!name_ok(name) || strcmp(name, "default") == 0) {
        errno = EINVAL;
        return -1;
    }
    if (find_shipped(opt, name, out, outsz, looked, sizeof(looked)) < 0) {
        errno = ENOENT;
        return -1;
    }
    return 0;
}

/* Where `extends: TEXT` (written in a file whose directory is DIR) points:
 * PATH gets the file to read, DISPLAY the name for messages.  1 for the
 * compiled-in default, 0 for a file, -1 after reporting. */
static int locate(struct loader *ld, const struct policy_options *opt, const char *file,
                  yaml_node_t *node, const char *dir, char *path, size_t pathsz)
{
    const char *text = value_str(node);

    if (text == NULL || *text == '\0' || strlen(text) != node->data.scalar.length) {
        load_error(ld, file, &node->start_mark, "extends: expected the name of a shipped "
                   "policy or a path to a policy file, found %s",
                   text && *text ? "a NUL character" : value_type_name(node));
        return -1;
    }
    if (strcmp(text, "default") == 0)
        return 1;
    if (strchr(text, '/') != NULL || (strlen(text) > 5 &&
        (strcmp(text + strlen(text) - 5, ".yaml") == 0 ||
         strcmp(text + strlen(text) - 4, ".yml") == 0))) {
        const char *t = text;
        while (t[0] == '.' && t[1] == '/')     /* "./base.yaml": base.yaml */
            for (t += 2; *t == '/'; t++)
                ;
        int n = text[0] == '/' || strcmp(dir, ".") == 0
                ? snprintf(path, pathsz, "%s", t)
                : snprintf(path, pathsz, "%s/%s", dir, t);
        if (n < 0 || (size_t)n >= pathsz) {
            load_error(ld, file, &node->start_mark, "extends: path too long");
            return -1;
        }
        return 0;
    }
    if (!name_ok(text)) {
        load_error(ld, file, &node->start_mark, "extends: \"%s\" is not a shipped policy's "
                   "name (letters, digits, '-', '_'); write a path with a '/' for a file "
                   "(./%s)", text, text);
        return -1;
    }
    char looked[1024];
    if (find_shipped(opt, text, path, pathsz, looked, sizeof(looked)) == 0)
        return 0;
    char dirs[3][PATH_MAX];
    size_t nd = shipped_dirs(opt, dirs);
    char near[64] = "";
    for (size_t i = 0; i < nd && near[0] == '\0'; i++)
        suggest_shipped(dirs[i], text, near, sizeof(near));
    if (near[0] != '\0')
        load_error(ld, file, &node->start_mark, "extends: no shipped policy \"%s\" (did you "
                   "mean \"%s\"?)", text, near);
    else
        load_error(ld, file, &node->start_mark, "extends: no shipped policy \"%s\" (looked "
                   "in %s; write a path with a '/' for a file of yours)", text, looked);
    return -1;
}

/* "a.yaml -> b.yaml -> ..." for the files of C, then LAST. */
static void chain_text(const struct load_chain *c, const char *last, char *out, size_t outsz)
{
    out[0] = '\0';
    for (size_t i = 0; i < c->n; i++) {
        strlcat(out, c->src[i].file, outsz);
        strlcat(out, " -> ", outsz);
    }
    strlcat(out, last, outsz);
}

int chain_resolve(struct loader *ld, struct load_chain *c, const char *dir0,
                  const struct policy_options *opt)
{
    char dir[PATH_MAX], path[PATH_MAX], real[PATH_MAX], text[1024];

    strlcpy(dir, dir0, sizeof(dir));
    for (;;) {
        struct load_src *cur = &c->src[c->n - 1];
        yaml_node_t *ext = cur->slot[LF_EXTENDS];
        if (ext == NULL)
            return 0;
        int k = locate(ld, opt, cur->file, ext, dir, path, sizeof(path));
        if (k < 0)
            return -1;
        if (k == 1) {
            c->explicit_default = true;
            return 0;
        }
        const char *shown = path;
        if (realpath(path, real) == NULL) {
            load_error(ld, cur->file, &ext->start_mark, "extends: cannot read %s: %s", path,
                       strerror(errno));
            return -1;
        }
        for (size_t i = 0; i < c->n; i++)
            if (c->real[i] != NULL && strcmp(c->real[i], real) == 0) {
                chain_text(c, shown, text, sizeof(text));
                load_error(ld, cur->file, &ext->start_mark, "extends: a cycle: %s", text);
                return -1;
            }
        if (c->n > POLICY_EXTENDS_MAX) {
            chain_text(c, shown, text, sizeof(text));
            load_error(ld, cur->file, &ext->start_mark, "extends: more than %d levels (%s)",
                       POLICY_EXTENDS_MAX, text);
            return -1;
        }
        char *buf = NULL;
        size_t len = 0;
        if (load_read_file(path, &buf, &len) < 0) {
            load_error(ld, cur->file, &ext->start_mark, "extends: cannot read %s: %s", path,
                       strerror(errno));
            return -1;
        }
        struct load_src *next = &c->src[c->n];
        memset(next, 0, sizeof(*next));
        next->file = arena_strdup(&ld->p->arena, shown);
        c->real[c->n] = arena_strdup(&ld->p->arena, real);
        if (next->file == NULL || c->real[c->n] == NULL) {
            free(buf);
            load_error(ld, cur->file, &ext->start_mark, "out of memory");
            return -1;
        }
        /* the identity of the policy covers every file it is made of */
        if (len > 0) {
            char *nc = realloc(c->cat, c->cat_len + len);
            if (nc == NULL) {
                free(buf);
                load_error(ld, cur->file, &ext->start_mark, "out of memory");
                return -1;
            }
            memcpy(nc + c->cat_len, buf, len);
            c->cat = nc;
            c->cat_len += len;
        }
        c->n++;
        if (ld->nfiles < sizeof(ld->files) / sizeof(ld->files[0]))
            ld->files[ld->nfiles++] = next->file;
        int rc = load_parse(ld, next, buf ? buf : "", len);
        free(buf);
        if (rc < 0 || !next->have_doc)
            return -1;
        yaml_node_t *root = yaml_document_get_root_node(&next->doc);
        if (root == NULL || root->type != YAML_MAPPING_NODE)
            return -1;
        /* a parent is a policy of its own: it says which version it is */
        values_apply(ld, LF_VERSION, next->file, &next->doc, next->slot[LF_VERSION]);
        /* its own extends: is relative to its own directory */
        const char *slash = strrchr(path, '/');
        if (slash == NULL)
            strlcpy(dir, ".", sizeof(dir));
        else if (slash == path)
            strlcpy(dir, "/", sizeof(dir));
        else
            snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
    }
}

/* ---- lists along the chain ----------------------------------------------- */

static bool leaf_is_list(enum leaf_id id)
{
    switch (id) {
    case LF_READ_ALLOW: case LF_READ_DENY: case LF_WRITE_ALLOW: case LF_WRITE_DENY:
    case LF_EXEC_ALLOW: case LF_EXEC_DENY: case LF_CMD_DENY: case LF_CMD_ALLOW:
    case LF_CONNECT_ALLOW: case LF_CONNECT_DENY: case LF_BIND_ALLOW: case LF_BIND_DENY:
    case LF_ENV_PASS: case LF_SERVE_ALLOWED_IMPORTS: case LF_SERVE_PRE_IMPORTS:
    case LF_SERVE_BLOCKLIST:
        return true;
    default:
        return false;
    }
}

bool chain_leaf_is_list(enum leaf_id id)
{
    return leaf_is_list(id);
}

/* What a list holds, for "expected a list of ...". */
static const char *list_of(enum leaf_id id)
{
    switch (id) {
    case LF_CMD_DENY: case LF_CMD_ALLOW:
        return "commands ({match: PCRE2, reason: TEXT})";
    case LF_CONNECT_ALLOW: case LF_CONNECT_DENY: case LF_BIND_ALLOW: case LF_BIND_DENY:
        return "network rules (\"host:port\", ...)";
    case LF_ENV_PASS:
        return "variable names";
    case LF_SERVE_ALLOWED_IMPORTS: case LF_SERVE_PRE_IMPORTS:
        return "module names";
    case LF_SERVE_BLOCKLIST:
        return "MODULE.ATTRIBUTE names";
    default:
        return "globs";
    }
}

/* SERVE.md: allowed imports and blocklist entries add up along extends. */
static bool leaf_adds_up(enum leaf_id id)
{
    return id == LF_SERVE_ALLOWED_IMPORTS || id == LF_SERVE_BLOCKLIST;
}

/* The text that identifies an entry for remove: the scalar, or a command
 * entry's match.  NULL if it has none. */
static const char *entry_key(yaml_document_t *doc, yaml_node_t *n)
{
    if (n->type == YAML_SCALAR_NODE)
        return value_str(n);
    if (n->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top; pr++) {
        const char *k = value_str(yaml_document_get_node(doc, pr->key));
        if (k != NULL && strcmp(k, "match") == 0)
            return value_str(yaml_document_get_node(doc, pr->value));
    }
    return NULL;
}

bool chain_is_edit(yaml_document_t *doc, yaml_node_t *n)
{
    (void)doc;
    /* a list key's value that is a mapping can only be meant as an edit;
     * edit() says what is wrong with its keys */
    return n != NULL && n->type == YAML_MAPPING_NODE;
}

struct items {
    struct load_item *v;
    size_t n, cap;
};

static int push(struct items *it, const struct load_item *x)
{
    if (it->n == it->cap) {
        size_t ncap = it->cap ? it->cap * 2 : 32;
        struct load_item *nv = reallocarray(it->v, ncap, sizeof(*nv));
        if (nv == NULL)
            return -1;
        it->v = nv;
        it->cap = ncap;
    }
    it->v[it->n++] = *x;
    return 0;
}

/* Appends the entries of the list NODE of SRC; -1 on ENOMEM. */
static int push_all(struct items *it, struct load_src *src, yaml_node_t *node)
{
    for (yaml_node_item_t *i = node->data.sequence.items.start; i < node->data.sequence.items.top; i++) {
        struct load_item x = { .file = src->file, .doc = &src->doc, .list = node,
                               .node = yaml_document_get_node(&src->doc, *i) };
        if (push(it, &x) < 0)
            return -1;
    }
    return 0;
}

/* Applies SRC's {add, remove} NODE to IT.  0, -1 after reporting. */
static int edit(struct loader *ld, enum leaf_id id, struct items *it, struct load_src *src,
                yaml_node_t *node, const char *below)
{
    const char *what = leaf_path(id);
    yaml_node_t *add = NULL, *rem = NULL;
    int rc = 0;

    for (yaml_node_pair_t *pr = node->data.mapping.pairs.start; pr < node->data.mapping.pairs.top; pr++) {
        yaml_node_t *k = yaml_document_get_node(&src->doc, pr->key);
        yaml_node_t *v = yaml_document_get_node(&src->doc, pr->value);
        const char *key = value_str(k);
        yaml_node_t **slot = key == NULL ? NULL : strcmp(key, "add") == 0 ? &add :
                             strcmp(key, "remove") == 0 ? &rem : NULL;
        if (slot == NULL) {
            const char *near = key == NULL ? NULL : load_distance(key, "add") <= 1 ? "add" :
                               load_distance(key, "remove") <= 2 ? "remove" : NULL;
            if (near != NULL)
                load_error(ld, src->file, &k->start_mark, "%s: unknown key \"%s\" (did you "
                           "mean \"%s\"?)", what, key, near);
            else
                load_error(ld, src->file, &k->start_mark, "%s: expected a list, or add: and "
                           "remove: to edit the list this policy extends; found the key \"%s\"",
                           what, key ? key : "?");
            rc = -1;
            continue;
        }
        if (*slot != NULL) {
            load_error(ld, src->file, &k->start_mark, "duplicate key \"%s.%s\"", what, key);
            rc = -1;
            continue;
        }
        if (v->type != YAML_SEQUENCE_NODE) {
            load_error(ld, src->file, &v->start_mark, "%s: %s: expected a list, found %s",
                       what, key, value_type_name(v));
            rc = -1;
            continue;
        }
        *slot = v;
    }
    if (rc < 0)
        return -1;
    /* remove first: it names what the parent's chain gives */
    for (yaml_node_item_t *i = rem ? rem->data.sequence.items.start : NULL;
         rem && i < rem->data.sequence.items.top; i++) {
        yaml_node_t *r = yaml_document_get_node(&src->doc, *i);
        const char *key = entry_key(&src->doc, r);
        if (key == NULL) {
            load_error(ld, src->file, &r->start_mark, "%s: remove: expected an entry as "
                       "written in the list it extends, found %s", what, value_type_name(r));
            rc = -1;
            continue;
        }
        size_t w = 0;
        bool found = false;
        for (size_t j = 0; j < it->n; j++) {
            const char *k2 = entry_key(it->v[j].doc, it->v[j].node);
            if (k2 != NULL && strcmp(k2, key) == 0)
                found = true;
            else
                it->v[w++] = it->v[j];
        }
        it->n = w;
        if (!found) {
            load_error(ld, src->file, &r->start_mark, "%s: cannot remove \"%s\": it is not "
                       "in the list this policy extends (%s)", what, key, below);
            rc = -1;
        }
    }
    if (add != NULL && push_all(it, src, add) < 0) {
        load_error(ld, src->file, &add->start_mark, "out of memory");
        return -1;
    }
    return rc;
}

int chain_gather(struct loader *ld, enum leaf_id id, struct load_src *const *srcs, size_t n,
                 struct load_item **out, size_t *nout, yaml_node_t **at, const char **at_file)
{
    struct items it = { 0 };
    const char *what = leaf_path(id);
    const char *below = POLICY_DEFAULT_NAME;    /* the file whose chain we edit */

    *at = NULL;
    *at_file = srcs[n - 1]->file;
    for (size_t s = 0; s < n; s++) {
        struct load_src *src = srcs[s];
        yaml_node_t *node = src->slot[id];
        if (node == NULL)
            continue;
        *at = node;
        *at_file = src->file;
        if (node->type == YAML_SEQUENCE_NODE) {
            if (!leaf_adds_up(id))
                it.n = 0;
            if (push_all(&it, src, node) < 0) {
                load_error(ld, src->file, &node->start_mark, "out of memory");
                goto fail;
            }
        } else if (chain_is_edit(&src->doc, node)) {
            if (edit(ld, id, &it, src, node, below) < 0)
                goto fail;
        } else {
            value_want_list(ld, src->file, node, what, list_of(id));
            goto fail;
        }
        below = src->file;
    }
    *out = it.v;
    *nout = it.n;
    return 0;
fail:
    free(it.v);
    *out = NULL;
    *nout = 0;
    return -1;
}
