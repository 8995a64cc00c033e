# blockdraft - plain Makefile. `make`, `make test`, `make debug`, `make fuzz`.
#
# Layers (one folder each, see README): base tensor gguf tokenizer model
# decode (the engine core: libc/libm/pthreads only), then chat gallery
# server cli (these link jansson, libyaml, libcurl, libcrypto, libmicrohttpd).
# Files ending in _avx2.c / _avxvnni.c / _avx512.c / _amx.c are compiled with their ISA's flags;
# the kernel is chosen at run time from CPUID (src/tensor/kernels.c).

CC      ?= gcc
BUILD   ?= build
OPT     ?= -O2
CFLAGS  ?=
CFLAGS  += -std=c11 -g $(OPT) -Wall -Wextra -pthread -D_GNU_SOURCE -Iinclude -Isrc
LDLIBS  += -lm -pthread
APPLIBS  = -ljansson -lyaml -lcurl -lcrypto -lmicrohttpd

# Every function with external linkage has a prototype in a header: an
# error for the folders listed (so make test fails on a missing one).
PROTO_WARN      = -Werror=missing-prototypes -Werror=missing-declarations
PROTO_WARN_DIRS = base gguf tensor tokenizer model decode chat gallery server cli
proto_warn = $(if $(filter $(PROTO_WARN_DIRS),$(word 2,$(subst /, ,$(1)))),$(PROTO_WARN))

# Each level's flags, feature for feature what kernels.c checks before it
# installs that level's table (NEED_AVX2 / NEED_AVX512 / NEED_AMX there).
AVX2_FLAGS   = -mavx2 -mfma -mf16c
AVXVNNI_FLAGS = $(AVX2_FLAGS) -mavxvnni
AVX512_FLAGS = $(AVX2_FLAGS) -mavx512f -mavx512dq -mavx512bw -mavx512vl -mavx512vnni
AMX_FLAGS    = $(AVX512_FLAGS) -mavx512vbmi -mamx-tile -mamx-int8

CORE_DIRS = base tensor gguf tokenizer model decode
APP_DIRS  = chat gallery server cli
CORE_SRC  = $(foreach d,$(CORE_DIRS),$(wildcard src/$(d)/*.c))
# The x86 kernel files are built only for an x86-64 target; elsewhere the
# reference kernels are the only level (src/tensor/kernels.c).
TARGET   := $(shell $(CC) -dumpmachine)
ifeq ($(filter x86_64-%,$(TARGET)),)
CORE_SRC := $(filter-out %_avx2.c %_avxvnni.c %_avx512.c %_amx.c,$(CORE_SRC))
endif
APP_SRC   = $(filter-out src/cli/main.c,$(foreach d,$(APP_DIRS),$(wildcard src/$(d)/*.c)))
CORE_OBJ  = $(CORE_SRC:%.c=$(BUILD)/%.o)
APP_OBJ   = $(APP_SRC:%.c=$(BUILD)/%.o)
HDRS      = $(wildcard include/*.h src/*/*.h)

UNIT_SRC  = $(wildcard tests/unit/test_*.c)
# test_noalloc interposes malloc, which ASan owns: not part of sanitizer builds.
ifneq ($(SANITIZE),)
UNIT_SRC := $(filter-out tests/unit/test_noalloc.c,$(UNIT_SRC))
endif
UNIT_BIN  = $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
# Usage examples of the public API, linked against libbdcore.a alone.
EXAMPLE_BIN = $(patsubst examples/%.c,$(BUILD)/examples/%,$(wildcard examples/*.c))

.PHONY: all deps test debug debug-bin fuzz fuzz-text clean demo tests core-tests kbench ablayout oracle bench-compare readme-archs check-layers

all: $(BUILD)/blockdraft $(EXAMPLE_BIN)

$(BUILD)/libbdcore.a: $(CORE_OBJ)
	@mkdir -p $(@D)
	$(AR) rcs $@ $^

$(BUILD)/libbdapp.a: $(APP_OBJ)
	@mkdir -p $(@D)
	$(AR) rcs $@ $^ $(if $(APP_OBJ),,)

$(BUILD)/blockdraft: $(BUILD)/src/cli/main.o $(BUILD)/libbdapp.a $(BUILD)/libbdcore.a
	$(CC) $(CFLAGS) -o $@ $^ $(APPLIBS) $(LDLIBS)

$(BUILD)/%_avx2.o: %_avx2.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(call proto_warn,$<) $(AVX2_FLAGS) $(ISA_EXTRA) -c -o $@ $<

$(BUILD)/%_avxvnni.o: %_avxvnni.c %_avx2.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(call proto_warn,$<) $(AVXVNNI_FLAGS) $(ISA_EXTRA) -c -o $@ $<

$(BUILD)/%_avx512.o: %_avx512.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(call proto_warn,$<) $(AVX512_FLAGS) $(ISA_EXTRA) -c -o $@ $<

$(BUILD)/%_amx.o: %_amx.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(call proto_warn,$<) $(AMX_FLAGS) $(ISA_EXTRA) -c -o $@ $<

$(BUILD)/%.o: %.c $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(call proto_warn,$<) -c -o $@ $<

# gallery/index.yaml is compiled in (.incbin in builtin_index.c).
$(BUILD)/src/gallery/builtin_index.o: gallery/index.yaml

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libbdapp.a $(BUILD)/libbdcore.a $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libbdapp.a $(BUILD)/libbdcore.a -lcmocka $(APPLIBS) $(LDLIBS) $(TEST_LDFLAGS)

# Allocation failure injection: blockdraft's own calls to the allocator go
# through the test's wrappers (works under ASan too).
$(BUILD)/tests/test_allocfail: TEST_LDFLAGS = -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free \
    -Wl,--wrap=aligned_alloc,--wrap=posix_memalign,--wrap=strdup

$(BUILD)/examples/%: examples/%.c $(BUILD)/libbdcore.a include/blockdraft.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libbdcore.a $(LDLIBS)

# Helper programs of the end-to-end tests (not tests themselves).
TOOL_BIN  = $(BUILD)/tests/bd-gguf-edit $(BUILD)/tests/bd-grammar-check $(BUILD)/tests/bd-open-gate.so \
            $(BUILD)/tests/bd-kv-row
$(BUILD)/tests/bd-open-gate.so: tests/tools/open_gate.c
	@mkdir -p $(@D)
	$(CC) -std=c11 -O1 -Wall -Wextra -fPIC -shared -o $@ $< -ldl
$(BUILD)/tests/bd-gguf-edit: tests/tools/gguf_edit.c $(BUILD)/libbdcore.a $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libbdcore.a $(LDLIBS)
$(BUILD)/tests/bd-kv-row: tests/tools/kv_row.c $(BUILD)/libbdcore.a $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libbdcore.a $(LDLIBS)
$(BUILD)/tests/bd-grammar-check: tests/tools/grammar_check.c $(BUILD)/libbdapp.a $(BUILD)/libbdcore.a $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libbdapp.a $(BUILD)/libbdcore.a $(APPLIBS) $(LDLIBS)

tests: all $(UNIT_BIN) $(TOOL_BIN)

# The unit tests that need only the engine core, linked without the app
# libraries: what a cross build runs (tests/e2e/cross_aarch64.sh builds
# them with CC=aarch64-linux-gnu-gcc BUILD=build-aarch64 and runs them
# under qemu-user).
CORE_TESTS = test_gguf test_kernels test_quant test_tokenizer test_spec_adapt test_spec_sampling \
             test_synth test_dflash_load
core-tests: $(CORE_TESTS:%=$(BUILD)/core-tests/%)
$(BUILD)/core-tests/%: tests/unit/%.c $(BUILD)/libbdcore.a $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libbdcore.a $(LDFLAGS) -lcmocka $(LDLIBS)

# Installs missing Debian packages (and nothing when all are present).
deps:
	@tools/deps.sh

# The README's test command. Unit tests (cmocka) and end-to-end scripts;
# prints "N passed, N failed" last.
# The server load test runs against the ASan+UBSan binary (debug-bin).
test: deps
	@$(MAKE) --no-print-directory tests
	@$(MAKE) --no-print-directory debug-bin
	@tests/run.sh $(BUILD)

# Includes only downwards (base < tensor < gguf < tokenizer < model <
# decode < chat < gallery < server < cli), one include style, and a core
# library that exports only bd_* and needs only libc/libm/pthreads
# (tools/check-layers.sh). make test runs it as e2e_check_layers, which
# also shows it failing on planted violations.
check-layers: $(BUILD)/libbdcore.a
	@tools/check-layers.sh --lib $(BUILD)/libbdcore.a

# ASan + UBSan build of everything, in build-debug/ (run its tests with
# tests/run.sh build-debug); debug-bin builds only the binary and the
# allocation-failure test (make test runs both: server_load, allocfail_asan).
SAN_OPT = -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined -DBD_DEBUG
debug:
	@$(MAKE) --no-print-directory BUILD=build-debug SANITIZE=1 OPT="$(SAN_OPT)" tests
debug-bin:
	@$(MAKE) --no-print-directory BUILD=build-debug SANITIZE=1 OPT="$(SAN_OPT)" build-debug/blockdraft \
	    build-debug/tests/test_allocfail

# Quick-start demo: stories260K with its DFlash drafter.
STORIES = ../shared/fixtures/stories260K
demo: deps all
	$(BUILD)/blockdraft run -m $(STORIES)/stories260K.gguf -md $(STORIES)/stories260K-dflash.gguf \
	    -p "Once upon a time" -n 196 --temp 0 -c 512

# libFuzzer + ASan + UBSan on the GGUF reader, for FUZZ_SECONDS (not part of
# `make test`). Seeds: small valid files from tests/fuzz/make_seeds.c plus
# the first bytes (header, metadata, tensor table) of the real fixtures.
# Crashes are written to build-fuzz/crash-*.
FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_DIR      = build-fuzz
FUZZ_MAXLEN  ?= 65536
BD_SHARED    ?= ../shared
FUZZ_FLAGS    = -std=c11 -g -O1 -D_GNU_SOURCE -pthread -Iinclude -Isrc
# The engine core built with clang and libFuzzer's coverage, for the loaders.
FUZZ_SAN      = -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
# ... except the SIMD kernel files (ISA_EXTRA, appended to their flags): no
# loader reaches them, and clang with ASan + UBSan took 2.5-4 minutes each
# over their unrolled intrinsics (9.5 of the core's 10 minutes), against
# seconds without. make debug keeps them sanitized (gcc).
FUZZ_ISA_EXTRA = -fno-sanitize=address,undefined

fuzz: $(FUZZ_DIR)/fuzz_gguf $(FUZZ_DIR)/make_seeds
	@mkdir -p $(FUZZ_DIR)/corpus
	$(FUZZ_DIR)/make_seeds $(FUZZ_DIR)/corpus
	@for f in $(BD_SHARED)/fixtures/stories260K/stories260K.gguf \
	          $(BD_SHARED)/fixtures/stories260K/stories260K-dflash.gguf \
	          $(BD_SHARED)/fixtures/qwen3-tokenizer/qwen3-vocab.gguf; do \
	    [ -f "$$f" ] || continue; b=$$(basename "$$f" .gguf); \
	    for n in 64 600 4096 $(FUZZ_MAXLEN); do head -c $$n "$$f" > $(FUZZ_DIR)/corpus/$$b-$$n.gguf; done; \
	done
	$(FUZZ_DIR)/fuzz_gguf -max_total_time=$(FUZZ_SECONDS) -max_len=$(FUZZ_MAXLEN) -timeout=10 \
	    -rss_limit_mb=2048 -print_final_stats=1 -dict=tests/fuzz/gguf.dict \
	    -artifact_prefix=$(FUZZ_DIR)/ $(FUZZ_DIR)/corpus

FUZZ_CORE     = $(FUZZ_DIR)/core/libbdcore.a
ifneq ($(BUILD),$(FUZZ_DIR)/core)
.PHONY: $(FUZZ_CORE)
$(FUZZ_CORE):
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_DIR)/core CC=$(FUZZ_CC) OPT="-O1 $(FUZZ_SAN)" \
	    ISA_EXTRA="$(FUZZ_ISA_EXTRA)" $(FUZZ_CORE)
endif

$(FUZZ_DIR)/fuzz_gguf: tests/fuzz/fuzz_gguf.c $(FUZZ_CORE) $(HDRS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	    -o $@ tests/fuzz/fuzz_gguf.c $(FUZZ_CORE) -lm

# The same for the text formats of requests and model files (chat
# templates, GBNF grammars, JSON schemas, prompts through the fixtures'
# tokenizers: tests/fuzz/fuzz_text.c), with the chat sources they need
# compiled into the target.
FUZZ_TEXT_SRC = $(wildcard src/chat/jinja*.c) src/chat/json_schema.c
fuzz-text: $(FUZZ_DIR)/fuzz_text
	@mkdir -p $(FUZZ_DIR)/corpus-text
	@i=0; for f in $(BD_SHARED)/fixtures/templates/*.jinja; do \
	    [ -f "$$f" ] || continue; i=$$((i + 1)); \
	    printf '\000' > $(FUZZ_DIR)/corpus-text/seed-$$i; \
	    cat "$$f" >> $(FUZZ_DIR)/corpus-text/seed-$$i; \
	done; \
	printf '\001root ::= "{" ws pair ("," ws pair)* "}"\npair ::= [a-z]+ ":" ws (num | "true")\nnum ::= "-"? [0-9]{1,3}\nws ::= [ \\t]*\n' \
	    > $(FUZZ_DIR)/corpus-text/seed-gbnf
	printf '\002{"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"},"maxItems":3},"b":{"enum":["x",1,null]}},"required":["a"]}' \
	    > $(FUZZ_DIR)/corpus-text/seed-schema
	printf '\003Hello <|im_start|>user\n\xc3\xa9\xff\xe2\x82 world 12345   \t\n!' > $(FUZZ_DIR)/corpus-text/seed-prompt
	BD_FUZZ_SHARED=$(BD_SHARED) $(FUZZ_DIR)/fuzz_text -max_total_time=$(FUZZ_SECONDS) -max_len=$(FUZZ_MAXLEN) -timeout=10 \
	    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=$(FUZZ_DIR)/ $(FUZZ_DIR)/corpus-text

$(FUZZ_DIR)/fuzz_text: tests/fuzz/fuzz_text.c $(FUZZ_TEXT_SRC) $(FUZZ_CORE) $(HDRS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	    -o $@ tests/fuzz/fuzz_text.c $(FUZZ_TEXT_SRC) $(FUZZ_CORE) -ljansson -lm

$(FUZZ_DIR)/make_seeds: tests/fuzz/make_seeds.c $(BUILD)/libbdcore.a $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(FUZZ_FLAGS) -o $@ tests/fuzz/make_seeds.c $(BUILD)/libbdcore.a -lm

# blockdraft vs llama.cpp v0.5.0 (npm node-llama-cpp@3.22.1, prebuilt CPU
# libraries) on the same GGUF files and threads, once per ISA level the host
# has (llama.cpp held to the matching CPU variant): pp, tg, verify curve,
# DFlash end to end; prints side-by-side tables (tools/bench-compare.sh,
# BENCHMARKS.md). Not part of `make test`. Knobs: BENCH_ISAS, BENCH_THREADS,
# BENCH_REPS, BENCH_SHAPES, BENCH_BUSY, BENCH_KV, BENCH_MODEL_DIR, BENCH_PAIRS (see the script).
bench-compare: all
	BD_BUILD=$(BUILD) BD_SHARED=$(BD_SHARED) tools/bench-compare.sh

# Kernel microbenchmark (tools/kbench.c): every level's vec_dot_n on one
# matrix, alternating in one process. Not part of `make` or `make test`.
kbench: $(BUILD)/kbench
$(BUILD)/kbench: tools/kbench.c $(BUILD)/libbdcore.a $(HDRS)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libbdcore.a $(LDLIBS)

# In-process A/B of the weight layouts (tools/ablayout.c). Not part of `make` or `make test`.
ablayout: $(BUILD)/ablayout
$(BUILD)/ablayout: tools/ablayout.c $(BUILD)/libbdcore.a $(HDRS)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libbdcore.a $(LDLIBS)

# The README's model table, regenerated from the architecture table.
readme-archs: all
	tools/readme-archs.sh $(BUILD)/blockdraft

clean:
	rm -rf build build-debug build-fuzz build-aarch64
