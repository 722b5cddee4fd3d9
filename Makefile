# sbx — a guard and audit layer for AI agents.
#
# make            build everything into $(BUILD)/ (bin/, lib/, tests/, bench/)
# make test       install missing Debian packages, build, run every test
# make demo       install missing Debian packages, build, run the example agent
# make bench      run the benchmarks (ratios against bare runs)
# make sanitize   build into build-san/ with ASan+UBSan and run the tests
# make lint       clang-tidy and cppcheck over the tree: zero findings
# make fuzz       build the libFuzzer harnesses (clang) into build-fuzz/ and
#                 run each for FUZZ_SECONDS (default 60)
# make layering   check that each part includes only what it may (README, Layout)
# make deps       install the Debian packages the build and the tests need
# make install    PREFIX=/usr/local DESTDIR= : binaries, preload, policies, man pages
#
# Sources are found by directory, so adding a file needs no Makefile edit:
#   common/*.c policy/*.c isolate/*.c     -> static libraries (all -fPIC);
#                                            common/compat.c only in the preload
#   auditd/*.c  (sbx-auditd.c is the main) -> libsbx-audit.a + bin/sbx-auditd
#   preload/*.c                            -> lib/libsbx-preload.so; its emitter
#                                             (emit.c) also libsbx-emit.a, for the
#                                             tests and benches that play an agent
#   tools/sbx-*.c (mains), other tools/*.c -> bin/sbx-*, libsbx-tools.a
#   tools/serve_*.c                        -> sbx-serve only (libmicrohttpd, jansson)
#   tests/unit/test_*.c                    -> tests/test_* (cmocka)
#   tests/progs/*.c                        -> tests/progs/* (helper programs)
#   tests/progs/static_*.c                 -> linked -static, no sbx libraries
#   tests/progs/agent_*.c                  -> plain programs run AS agents under
#                                             sbx-guard: no sbx libraries and no
#                                             sanitizer (the preload loads first)
#   bench/bench_*.c                        -> bench/bench_*

CC      ?= cc
BUILD   ?= build
PREFIX  ?= /usr/local
DESTDIR ?=
SAN     ?=

ifeq ($(SAN),1)
BUILD   := build-san
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif
# The fuzzing build: every library instrumented for libFuzzer's coverage and
# checked by ASan+UBSan; only the harnesses link libFuzzer's main.
ifeq ($(FUZZ),1)
BUILD   := build-fuzz
CC      := clang
SANFLAGS := -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif

# Hardening, on by default.  _FORTIFY_SOURCE=2 checks the sizes of memcpy,
# snprintf and the like where the compiler knows them; -U first because some
# compilers define it already (a redefinition is a warning, so an error).
# Not under the sanitizers (SAN=1, FUZZ=1): the checked __*_chk variants bypass ASan's
# interceptors, so ASan would see less.  Not in the preload: it defines open,
# openat, read... itself, which the fortified headers also define as inline
# wrappers, so which one a call inside the preload reached would depend on
# the inliner.
# Programs are linked with full RELRO (-z relro -z now): the GOT is read-only
# once the loader is done.
ifeq ($(SANFLAGS),)
FORTIFY := -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=2
else
FORTIFY :=
endif
HARDEN_CFLAGS  := -fstack-protector-strong
HARDEN_LDFLAGS := -Wl,-z,relro -Wl,-z,now

# pkg-config runs when a recipe needs it (recursive '='), so that `make test`
# on a fresh machine can install the packages first and then build.
PKGS     = yaml-0.1 libpcre2-8 sqlite3 libbsd libmd libseccomp
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CMOCKA_LIBS = $(shell pkg-config --libs cmocka 2>/dev/null)
# sbx-serve alone speaks HTTP (libmicrohttpd) and JSON (jansson).
SERVE_PKGS   = libmicrohttpd jansson
SERVE_CFLAGS = $(shell pkg-config --cflags $(SERVE_PKGS) 2>/dev/null)
SERVE_LIBS   = $(shell pkg-config --libs $(SERVE_PKGS) 2>/dev/null)
# The audit exporter (auditd/ocsf.c, auditd/export*.c) speaks RELP (librelp)
# and JSON (jansson): linked into sbx-audit and sbx-auditd only.
EXPORT_PKGS   = relp jansson
EXPORT_CFLAGS = $(shell pkg-config --cflags $(EXPORT_PKGS) 2>/dev/null)
EXPORT_LIBS   = $(shell pkg-config --libs $(EXPORT_PKGS) 2>/dev/null)

WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Wno-format-nonliteral
CFLAGS  ?= -O2 -g
ALL_CFLAGS = -std=c17 -D_GNU_SOURCE -fPIC -fvisibility=hidden $(WARN) $(CFLAGS) $(SANFLAGS) \
             $(HARDEN_CFLAGS) $(FORTIFY) \
             -I. -Icommon -Ipolicy -Iauditd -Iisolate -Ipreload -Itools $(PKG_CFLAGS) \
             -DSBX_PREFIX='"$(PREFIX)"'
ALL_LDFLAGS = $(LDFLAGS) $(SANFLAGS) $(HARDEN_LDFLAGS)
LIBS    = $(PKG_LIBS) -lpthread -ldl

src_of  = $(wildcard $(1)/*.c)
obj_of  = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

# common/compat.c stands in for libbsd and libmd inside the preload only:
# in libsbx-common.a it would take the place of the real libraries in every
# program linked with it.
COMPAT_SRC  := common/compat.c
COMMON_SRC  := $(filter-out $(COMPAT_SRC),$(call src_of,common))
POLICY_SRC  := $(call src_of,policy)
ISOLATE_SRC := $(call src_of,isolate)
AUDIT_SRC   := $(filter-out auditd/sbx-auditd.c,$(call src_of,auditd))
PRELOAD_SRC := $(call src_of,preload)
TOOLMAIN_SRC:= $(wildcard tools/sbx-*.c)
# sbx-serve's own modules (HTTP and JSON): linked into sbx-serve only.
SERVE_SRC   := $(wildcard tools/serve_*.c)
TOOLLIB_SRC := $(filter-out $(TOOLMAIN_SRC) $(SERVE_SRC),$(call src_of,tools))
UNIT_SRC    := $(wildcard tests/unit/test_*.c)
PROG_SRC    := $(filter-out tests/progs/static_% tests/progs/agent_% tests/progs/lib_%,$(wildcard tests/progs/*.c))
SPROG_SRC   := $(wildcard tests/progs/static_*.c tests/progs/agent_*.c)
BENCH_SRC   := $(wildcard bench/bench_*.c)
FUZZ_SRC    := $(wildcard tests/fuzz/fuzz_*.c)
BPROG_SRC   := $(filter-out bench/bench_%,$(wildcard bench/*.c))

GEN_DEFAULT := $(BUILD)/gen/default_policy.c

LIB_COMMON  := $(BUILD)/lib/libsbx-common.a
LIB_POLICY  := $(BUILD)/lib/libsbx-policy.a
LIB_ISOLATE := $(BUILD)/lib/libsbx-isolate.a
LIB_AUDIT   := $(BUILD)/lib/libsbx-audit.a
LIB_TOOLS   := $(BUILD)/lib/libsbx-tools.a
LIB_EMIT    := $(BUILD)/lib/libsbx-emit.a
PRELOAD_SO  := $(BUILD)/lib/libsbx-preload.so

# Link order: the user first, the used last.  No program of sbx links the
# emitter (only the preload emits); the tests and benches that play an
# agent process take it from libsbx-emit.a.
SBX_LIBS    := $(LIB_TOOLS) $(LIB_ISOLATE) $(LIB_AUDIT) $(LIB_POLICY) $(LIB_COMMON)
TEST_LIBS   := $(LIB_EMIT) $(SBX_LIBS)

TOOLS   := $(patsubst tools/%.c,$(BUILD)/bin/%,$(TOOLMAIN_SRC))
DAEMON  := $(if $(wildcard auditd/sbx-auditd.c),$(BUILD)/bin/sbx-auditd)
UNITS   := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
PROGS   := $(patsubst tests/progs/%.c,$(BUILD)/tests/progs/%,$(PROG_SRC) $(SPROG_SRC)) \
           $(BUILD)/tests/progs/libfake/libpcre2-8.so.0 $(BUILD)/tests/progs/libfake/libyaml-0.so.2
BENCHES := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC) $(BPROG_SRC))
FUZZERS := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRC))
FUZZ_SECONDS ?= 60

.PHONY: all deps test check demo bench sanitize fuzz fuzzers lint layering install clean components
# Objects made through chained pattern rules are not intermediate files to
# delete after the link: keeping them keeps rebuilds incremental.
.SECONDARY:
.DEFAULT_GOAL := all

all: $(TOOLS) $(DAEMON) $(PRELOAD_SO) $(UNITS) $(PROGS) $(BENCHES)

# Per-component targets, for working on one part at a time.
common: $(LIB_COMMON)
policy: $(LIB_POLICY)
audit: $(LIB_AUDIT) $(DAEMON)
isolate: $(LIB_ISOLATE)
preload: $(PRELOAD_SO)
tools: $(TOOLS)
units: $(UNITS)

deps:
	@sh scripts/deps.sh

# Each of test, demo, bench installs what is missing, then builds and runs in
# a fresh make, so that pkg-config sees the packages deps just installed.
# That make builds in parallel unless the user chose -j already.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
SUBJ = $(if $(findstring -j,$(MAKEFLAGS)),,-j$(JOBS))
test: deps
	@$(MAKE) $(SUBJ) --no-print-directory all
	@BUILD=$(BUILD) sh tests/run.sh

check: all
	@BUILD=$(BUILD) sh tests/run.sh

demo: deps
	@$(MAKE) $(SUBJ) --no-print-directory all
	@BUILD=$(BUILD) sh examples/demo.sh

bench: deps
	@$(MAKE) $(SUBJ) --no-print-directory all
	@BUILD=$(BUILD) sh bench/run.sh

# Also run by the tests (tests/integration/layering.sh).
layering:
	@sh scripts/layering.sh

sanitize: deps
	@$(MAKE) $(SUBJ) --no-print-directory SAN=1 all
	@BUILD=build-san SBX_SANITIZED=1 sh tests/run.sh

fuzz: deps
	@$(MAKE) $(SUBJ) --no-print-directory FUZZ=1 fuzzers
	@BUILD=build-fuzz FUZZ_SECONDS=$(FUZZ_SECONDS) sh tests/fuzz/run.sh

fuzzers: $(FUZZERS)

lint: deps
	@sh scripts/lint.sh

# ---- objects ---------------------------------------------------------------

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

# The shipped default policy is compiled in: missing keys of every policy
# take their values from it, so it must not depend on where sbx is installed.
$(GEN_DEFAULT): policies/default.yaml scripts/embed.sh
	@mkdir -p $(dir $@)
	sh scripts/embed.sh sbx_default_policy_yaml $< > $@

$(LIB_COMMON): $(call obj_of,$(COMMON_SRC))
$(LIB_POLICY): $(call obj_of,$(POLICY_SRC)) $(BUILD)/obj/gen/default_policy.o
$(LIB_ISOLATE): $(call obj_of,$(ISOLATE_SRC))
$(LIB_AUDIT): $(call obj_of,$(AUDIT_SRC))
$(LIB_TOOLS): $(call obj_of,$(TOOLLIB_SRC))
$(LIB_EMIT): $(call obj_of,preload/emit.c)

$(BUILD)/lib/%.a:
	@mkdir -p $(dir $@)
	@rm -f $@
	ar rcs $@ $^

# The preload carries the policy engine and the event emitter inside it and
# exports only its interposers (everything else is -fvisibility=hidden).  It
# never links SQLite.  It is built without sanitizers: it is loaded into
# programs that are not.
# lazylib.h renames the libpcre2/libyaml calls to stand-ins that dlopen the
# library at first use; common/compat.c has the libbsd/libmd functions: so the
# preload needs none of those four libraries at load time.
# They are loaded by absolute path (lazylib.c says why): where pkg-config
# says they are.
LIB_PCRE2 = $(shell pkg-config --variable=libdir libpcre2-8 2>/dev/null)/libpcre2-8.so.0
LIB_YAML  = $(shell pkg-config --variable=libdir yaml-0.1 2>/dev/null)/libyaml-0.so.2
PRELOAD_CFLAGS = $(filter-out $(SANFLAGS) $(FORTIFY),$(ALL_CFLAGS)) -U_FORTIFY_SOURCE -include preload/lazylib.h \
                 -DSBX_LIBPCRE2='"$(LIB_PCRE2)"' -DSBX_LIBYAML='"$(LIB_YAML)"'
$(BUILD)/preload-obj/%.o: %.c preload/lazylib.h Makefile
	@mkdir -p $(dir $@)
	$(CC) $(PRELOAD_CFLAGS) -MMD -MP -c $< -o $@

PRELOAD_OBJ = $(patsubst %.c,$(BUILD)/preload-obj/%.o,$(PRELOAD_SRC) $(POLICY_SRC) $(COMMON_SRC) \
                $(COMPAT_SRC)) \
              $(BUILD)/preload-obj/gen/default_policy.o
$(BUILD)/preload-obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	$(CC) $(PRELOAD_CFLAGS) -c $< -o $@

$(PRELOAD_SO): $(PRELOAD_OBJ)
	@mkdir -p $(dir $@)
	@for l in $(LIB_PCRE2) $(LIB_YAML); do [ -e "$$l" ] || \
	    { echo "the preload loads $$l at run time, and it is not there (make deps)" >&2; exit 1; }; done
	$(CC) -shared -Wl,-z,now -Wl,-z,relro -Wl,--no-undefined -o $@ $^ $(LDFLAGS) -lpthread -ldl

# ---- programs --------------------------------------------------------------

$(BUILD)/obj/auditd/ocsf.o $(BUILD)/obj/auditd/export%.o: ALL_CFLAGS += $(EXPORT_CFLAGS)
$(BUILD)/bin/sbx-auditd $(BUILD)/bin/sbx-audit $(BUILD)/tests/test_ocsf: LIBS += $(EXPORT_LIBS)

$(BUILD)/bin/sbx-auditd: $(BUILD)/obj/auditd/sbx-auditd.o $(SBX_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $< $(SBX_LIBS) $(LIBS)

$(BUILD)/bin/%: $(BUILD)/obj/tools/%.o $(SBX_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $< $(SBX_LIBS) $(LIBS)

SERVE_OBJ = $(call obj_of,$(SERVE_SRC))
$(BUILD)/obj/tools/serve_%.o $(BUILD)/obj/tools/sbx-serve.o: ALL_CFLAGS += $(SERVE_CFLAGS)
$(BUILD)/bin/sbx-serve: $(BUILD)/obj/tools/sbx-serve.o $(SERVE_OBJ) $(SBX_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $< $(SERVE_OBJ) $(SBX_LIBS) $(SERVE_LIBS) $(LIBS)

# Unit tests that include tests/unit/failalloc.h link with the allocator
# wrapped, so that they can make any allocation of sbx's code fail.
FAILALLOC_LDFLAGS = -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=reallocarray \
                    -Wl,--wrap=strdup,--wrap=asprintf,--wrap=__asprintf_chk
FAILALLOC_TESTS = $(patsubst tests/unit/%.c,$(BUILD)/tests/%,\
                    $(shell grep -l '^\#include "failalloc.h"' $(UNIT_SRC) 2>/dev/null))
$(FAILALLOC_TESTS): UNIT_LDFLAGS = $(FAILALLOC_LDFLAGS)
# test_isolate makes open_tree fail for one path (hide_and_restore's error path).
$(BUILD)/tests/test_isolate: UNIT_LDFLAGS = -Wl,--wrap=open_tree

$(BUILD)/tests/test_%: $(BUILD)/obj/tests/unit/test_%.o $(TEST_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) $(UNIT_LDFLAGS) -o $@ $< $(TEST_LIBS) $(LIBS) $(CMOCKA_LIBS)

$(BUILD)/tests/progs/static_%: tests/progs/static_%.c
	@mkdir -p $(dir $@)
	$(CC) -std=c17 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -static -o $@ $<

$(BUILD)/tests/progs/agent_%: tests/progs/agent_%.c
	@mkdir -p $(dir $@)
	$(CC) -std=c17 -D_GNU_SOURCE -O2 $(WARN) -pthread -o $@ $<

# A library with the sonames the preload loads, for the test that puts it on
# LD_LIBRARY_PATH (tests/integration/guard.sh).
$(BUILD)/tests/progs/libfake/%: tests/progs/lib_fake.c
	@mkdir -p $(dir $@)
	$(CC) -std=c17 -D_GNU_SOURCE -O2 $(WARN) -shared -fPIC -Wl,-soname,$* -o $@ $<

$(BUILD)/tests/progs/%: $(BUILD)/obj/tests/progs/%.o $(TEST_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $< $(TEST_LIBS) $(LIBS)

# bench/*.c that are not bench_*: stand-alone programs the macro benchmarks
# run bare and under the guard (no sbx libraries in them).  A static
# pattern rule: as a plain pattern rule it would also catch bench_*, whose
# object must first be built (make prefers the rule whose inputs exist).
$(patsubst bench/%.c,$(BUILD)/bench/%,$(BPROG_SRC)): $(BUILD)/bench/%: bench/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=c17 -D_GNU_SOURCE -O2 $(WARN) -o $@ $<

$(BUILD)/bench/bench_%: $(BUILD)/obj/bench/bench_%.o $(TEST_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $< $(TEST_LIBS) $(LIBS)

# test_serve_text tests sbx-serve's text module, which needs nothing else.
$(BUILD)/tests/test_serve_text: $(BUILD)/obj/tests/unit/test_serve_text.o $(BUILD)/obj/tools/serve_text.o $(TEST_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $< $(BUILD)/obj/tools/serve_text.o $(TEST_LIBS) $(LIBS) $(CMOCKA_LIBS)

# bench_serve talks HTTP with sbx-serve's own client (serve_client.c,
# which reports errors with serve_text.c's serve_errf).
$(BUILD)/obj/bench/bench_serve.o: ALL_CFLAGS += $(SERVE_CFLAGS)
$(BUILD)/bench/bench_serve: $(BUILD)/obj/bench/bench_serve.o $(BUILD)/obj/tools/serve_client.o \
                            $(BUILD)/obj/tools/serve_text.o $(TEST_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $< $(BUILD)/obj/tools/serve_client.o $(BUILD)/obj/tools/serve_text.o \
	    $(TEST_LIBS) $(SERVE_LIBS) $(LIBS)

# fuzz_serve_utf8 tries sbx-serve's text module alone.
$(BUILD)/fuzz/fuzz_serve_utf8: $(BUILD)/obj/tests/fuzz/fuzz_serve_utf8.o $(BUILD)/obj/tools/serve_text.o
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(LIBS)

$(BUILD)/fuzz/fuzz_%: $(BUILD)/obj/tests/fuzz/fuzz_%.o $(SBX_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -fsanitize=fuzzer -o $@ $< $(SBX_LIBS) $(LIBS)

# ---- install ---------------------------------------------------------------

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/sbx \
	    $(DESTDIR)$(PREFIX)/share/sbx/policies $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 0755 $(TOOLS) $(DAEMON) $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 $(PRELOAD_SO) $(DESTDIR)$(PREFIX)/lib/sbx/
	install -m 0644 policies/*.yaml $(DESTDIR)$(PREFIX)/share/sbx/policies/
	$(if $(wildcard tools/serve-runner.py),install -m 0644 tools/serve-runner.py $(DESTDIR)$(PREFIX)/share/sbx/)
	$(if $(wildcard policies/serve/*.yaml),install -d $(DESTDIR)$(PREFIX)/share/sbx/policies/serve && install -m 0644 $(wildcard policies/serve/*.yaml) $(DESTDIR)$(PREFIX)/share/sbx/policies/serve/)
	$(if $(wildcard docs/*.1),install -m 0644 $(wildcard docs/*.1) $(DESTDIR)$(PREFIX)/share/man/man1/)
	$(if $(wildcard docs/*.8),install -d $(DESTDIR)$(PREFIX)/share/man/man8 && install -m 0644 $(wildcard docs/*.8) $(DESTDIR)$(PREFIX)/share/man/man8/)

clean:
	rm -rf build build-san build-clang build-fuzz

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
