/*
 * lazylib.c — the stand-ins lazylib.h renames the libpcre2 and libyaml
 * calls to: the first call of one loads its library and looks the
 * function up; later calls go straight through the cached pointer.
 *
 * The library is loaded by the absolute path the build found it at
 * (SBX_LIBPCRE2, SBX_LIBYAML: the Makefile asks pkg-config), never by
 * soname: a soname is searched on LD_LIBRARY_PATH, which the agent sets
 * for the processes it starts, and a libpcre2 of its own could answer "no
 * match" to every command rule.
 *
 * No lock: two threads racing here both get the same handle (dlopen counts
 * references) and the same addresses, and publish them with release
 * stores.  The preload makes sure this happens before fork in a process
 * that forks (init.c: fork_prepare), not in a child of a threaded parent.
 *
 * If a library cannot be loaded, each stand-in answers as the library does
 * when it runs out of memory: a YAML parse fails (the policy does not load,
 * every guarded call is denied), a pattern does not compile or match (a
 * command decision denies).  Never an allow.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <dlfcn.h>
#include <pcre2.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>

enum { LZ_PCRE2, LZ_YAML, LZ__COUNT };

#if !defined(SBX_LIBPCRE2) || !defined(SBX_LIBYAML)
#error "build with -DSBX_LIBPCRE2=/path/libpcre2-8.so.0 -DSBX_LIBYAML=/path/libyaml-0.so.2"
#endif
static const char *const lz_names[LZ__COUNT] = { SBX_LIBPCRE2, SBX_LIBYAML };
static _Atomic(void *) lz_handle[LZ__COUNT];

static void *lz_sym(int lib, _Atomic(void *) *slot, const char *name)
{
    void *f = atomic_load_explicit(slot, memory_order_acquire);
    if (f)
        return f;
    void *h = atomic_load_explicit(&lz_handle[lib], memory_order_acquire);
    if (!h) {
        h = dlopen(lz_names[lib], RTLD_NOW | RTLD_LOCAL);
        if (!h)
            return NULL;
        void *none = NULL;
        if (!atomic_compare_exchange_strong(&lz_handle[lib], &none, h)) {
            dlclose(h);     /* another thread was first: one reference is enough */
            h = none;
        }
    }
    f = dlsym(h, name);
    if (f)
        atomic_store_explicit(slot, f, memory_order_release);
    return f;
}

/* FN: the function pointer for NAME (the renamed stand-in's type, which is
 * the library function's type), or NULL. */
#define LZ_GET(lib, name, real)                                            \
    static _Atomic(void *) slot_;                                          \
    __typeof__(name) *fn;                                                  \
    void *v_ = lz_sym(lib, &slot_, real);                                  \
    memcpy(&fn, &v_, sizeof fn)

/* ---- libpcre2-8 ------------------------------------------------------------ */

pcre2_code *pcre2_code_copy_8(const pcre2_code *c)
{
    LZ_GET(LZ_PCRE2, pcre2_code_copy_8, "pcre2_code_copy_8");
    return fn ? fn(c) : NULL;
}

void pcre2_code_free_8(pcre2_code *c)
{
    if (!c)
        return;     /* nothing was made, so there is nothing to load */
    LZ_GET(LZ_PCRE2, pcre2_code_free_8, "pcre2_code_free_8");
    if (fn)
        fn(c);
}

pcre2_code *pcre2_compile_8(PCRE2_SPTR pat, PCRE2_SIZE len, uint32_t opts, int *errcode,
                            PCRE2_SIZE *erroff, pcre2_compile_context *cc)
{
    LZ_GET(LZ_PCRE2, pcre2_compile_8, "pcre2_compile_8");
    if (fn)
        return fn(pat, len, opts, errcode, erroff, cc);
    *errcode = PCRE2_ERROR_NOMEMORY;
    *erroff = 0;
    return NULL;
}

int pcre2_get_error_message_8(int code, PCRE2_UCHAR *buf, PCRE2_SIZE n)
{
    LZ_GET(LZ_PCRE2, pcre2_get_error_message_8, "pcre2_get_error_message_8");
    if (fn)
        return fn(code, buf, n);
    if (n > 0)
        snprintf((char *)buf, n, "%s", "libpcre2-8 cannot be loaded");
    return PCRE2_ERROR_BADDATA;
}

int pcre2_jit_compile_8(pcre2_code *c, uint32_t opts)
{
    LZ_GET(LZ_PCRE2, pcre2_jit_compile_8, "pcre2_jit_compile_8");
    return fn ? fn(c, opts) : PCRE2_ERROR_NOMEMORY;
}

int pcre2_jit_match_8(const pcre2_code *c, PCRE2_SPTR s, PCRE2_SIZE n, PCRE2_SIZE start,
                      uint32_t opts, pcre2_match_data *md, pcre2_match_context *mc)
{
    LZ_GET(LZ_PCRE2, pcre2_jit_match_8, "pcre2_jit_match_8");
    return fn ? fn(c, s, n, start, opts, md, mc) : PCRE2_ERROR_NOMEMORY;
}

int pcre2_match_8(const pcre2_code *c, PCRE2_SPTR s, PCRE2_SIZE n, PCRE2_SIZE start,
                  uint32_t opts, pcre2_match_data *md, pcre2_match_context *mc)
{
    LZ_GET(LZ_PCRE2, pcre2_match_8, "pcre2_match_8");
    return fn ? fn(c, s, n, start, opts, md, mc) : PCRE2_ERROR_NOMEMORY;
}

pcre2_match_data *pcre2_match_data_create_8(uint32_t n, pcre2_general_context *gc)
{
    LZ_GET(LZ_PCRE2, pcre2_match_data_create_8, "pcre2_match_data_create_8");
    return fn ? fn(n, gc) : NULL;
}

void pcre2_match_data_free_8(pcre2_match_data *md)
{
    if (!md)
        return;
    LZ_GET(LZ_PCRE2, pcre2_match_data_free_8, "pcre2_match_data_free_8");
    if (fn)
        fn(md);
}

int32_t pcre2_serialize_decode_8(pcre2_code **codes, int32_t n, const uint8_t *bytes,
                                 pcre2_general_context *gc)
{
    LZ_GET(LZ_PCRE2, pcre2_serialize_decode_8, "pcre2_serialize_decode_8");
    return fn ? fn(codes, n, bytes, gc) : PCRE2_ERROR_NOMEMORY;
}

int32_t pcre2_serialize_encode_8(const pcre2_code **codes, int32_t n, uint8_t **bytes,
                                 PCRE2_SIZE *size, pcre2_general_context *gc)
{
    LZ_GET(LZ_PCRE2, pcre2_serialize_encode_8, "pcre2_serialize_encode_8");
    return fn ? fn(codes, n, bytes, size, gc) : PCRE2_ERROR_NOMEMORY;
}

void pcre2_serialize_free_8(uint8_t *bytes)
{
    if (!bytes)
        return;
    LZ_GET(LZ_PCRE2, pcre2_serialize_free_8, "pcre2_serialize_free_8");
    if (fn)
        fn(bytes);
}

int32_t pcre2_serialize_get_number_of_codes_8(const uint8_t *bytes)
{
    LZ_GET(LZ_PCRE2, pcre2_serialize_get_number_of_codes_8,
           "pcre2_serialize_get_number_of_codes_8");
    return fn ? fn(bytes) : PCRE2_ERROR_NOMEMORY;
}

/* ---- libyaml ---------------------------------------------------------------- */

void yaml_document_delete(yaml_document_t *d)
{
    LZ_GET(LZ_YAML, yaml_document_delete, "yaml_document_delete");
    if (fn)
        fn(d);
}

yaml_node_t *yaml_document_get_node(yaml_document_t *d, int i)
{
    LZ_GET(LZ_YAML, yaml_document_get_node, "yaml_document_get_node");
    return fn ? fn(d, i) : NULL;
}

yaml_node_t *yaml_document_get_root_node(yaml_document_t *d)
{
    LZ_GET(LZ_YAML, yaml_document_get_root_node, "yaml_document_get_root_node");
    return fn ? fn(d) : NULL;
}

void yaml_parser_delete(yaml_parser_t *p)
{
    LZ_GET(LZ_YAML, yaml_parser_delete, "yaml_parser_delete");
    if (fn)
        fn(p);
}

int yaml_parser_initialize(yaml_parser_t *p)
{
    LZ_GET(LZ_YAML, yaml_parser_initialize, "yaml_parser_initialize");
    if (fn)
        return fn(p);
    memset(p, 0, sizeof *p);
    p->error = YAML_MEMORY_ERROR;
    return 0;
}

int yaml_parser_load(yaml_parser_t *p, yaml_document_t *d)
{
    LZ_GET(LZ_YAML, yaml_parser_load, "yaml_parser_load");
    if (fn)
        return fn(p, d);
    p->error = YAML_MEMORY_ERROR;
    return 0;
}

int yaml_parser_parse(yaml_parser_t *p, yaml_event_t *e)
{
    LZ_GET(LZ_YAML, yaml_parser_parse, "yaml_parser_parse");
    if (fn)
        return fn(p, e);
    p->error = YAML_MEMORY_ERROR;
    return 0;
}

void yaml_event_delete(yaml_event_t *e)
{
    LZ_GET(LZ_YAML, yaml_event_delete, "yaml_event_delete");
    if (fn)
        fn(e);
}

void yaml_parser_set_input_string(yaml_parser_t *p, const unsigned char *in, size_t n)
{
    LZ_GET(LZ_YAML, yaml_parser_set_input_string, "yaml_parser_set_input_string");
    if (fn)
        fn(p, in, n);
}
