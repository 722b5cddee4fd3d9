/*
 * lazylib.h — force-included (-include) into every object of the preload,
 * before any header: renames the libpcre2 and libyaml functions the policy
 * engine calls to the preload's own stand-ins (lazylib.c), which load the
 * library with dlopen the first time one of them is called.
 *
 * Why: the preload is mapped into every process of the agent, and every
 * shared library it depends on costs each of them the loader's time (about
 * 0.1 ms a library here).  Most processes never parse YAML (they take the
 * compiled image) and never match a command line (only processes that
 * exec do); so they never load either library.  The names are renamed
 * before pcre2.h and yaml.h declare them, so the declarations those headers
 * make are the stand-ins' prototypes, checked by the compiler.
 */
#ifndef SBX_PRELOAD_LAZYLIB_H
#define SBX_PRELOAD_LAZYLIB_H

#define pcre2_code_copy_8                   sbx_lz_pcre2_code_copy_8
#define pcre2_code_free_8                   sbx_lz_pcre2_code_free_8
#define pcre2_compile_8                     sbx_lz_pcre2_compile_8
#define pcre2_get_error_message_8           sbx_lz_pcre2_get_error_message_8
#define pcre2_jit_compile_8                 sbx_lz_pcre2_jit_compile_8
#define pcre2_jit_match_8                   sbx_lz_pcre2_jit_match_8
#define pcre2_match_8                       sbx_lz_pcre2_match_8
#define pcre2_match_data_create_8           sbx_lz_pcre2_match_data_create_8
#define pcre2_match_data_free_8             sbx_lz_pcre2_match_data_free_8
#define pcre2_serialize_decode_8            sbx_lz_pcre2_serialize_decode_8
#define pcre2_serialize_encode_8            sbx_lz_pcre2_serialize_encode_8
#define pcre2_serialize_free_8              sbx_lz_pcre2_serialize_free_8
#define pcre2_serialize_get_number_of_codes_8 sbx_lz_pcre2_serialize_get_number_of_codes_8

#define yaml_event_delete                   sbx_lz_yaml_event_delete
#define yaml_document_delete                sbx_lz_yaml_document_delete
#define yaml_document_get_node              sbx_lz_yaml_document_get_node
#define yaml_document_get_root_node         sbx_lz_yaml_document_get_root_node
#define yaml_parser_delete                  sbx_lz_yaml_parser_delete
#define yaml_parser_initialize              sbx_lz_yaml_parser_initialize
#define yaml_parser_load                    sbx_lz_yaml_parser_load
#define yaml_parser_parse                   sbx_lz_yaml_parser_parse
#define yaml_parser_set_input_string        sbx_lz_yaml_parser_set_input_string

#endif
