# husk — build, run, test.
#   make run    install what is missing, build, run the server (husk serve) on embedded defaults
#   make demo   build and run the one-shot demo (a Python script in a box)
#   make test   install what is missing, build (normal + ASan/UBSan), run every test
#   make bench  run the benchmarks (not part of the tests)
#   make fuzz   run every libFuzzer harness for FUZZ_SECONDS each (docs/fuzzing.md)
#   make chaos  a long chaos run: the daemon SIGKILLed under load, then every
#               acknowledged item checked (docs/reliability.md)

CC ?= cc
PKGS := libseccomp jansson sqlite3 libcrypto libmicrohttpd libarchive expat zlib libcurl
CSTD := -std=c17
WARN := -Wall -Wextra -Wshadow -Wformat=2 -Wno-unused-parameter
CFLAGS ?= -O2 -g
CPPFLAGS += -Iinclude -Isrc
LDLIBS += $(shell pkg-config --libs $(PKGS) 2>/dev/null || echo -lseccomp -ljansson -lsqlite3 -lcrypto -lmicrohttpd -larchive -lexpat -lz -lcurl) -lpthread -lm

BUILD ?= build
LIB_SRC := $(sort $(wildcard src/util/*.c src/jail/*.c src/box/*.c src/state/*.c))
# issue 7: the network and secrets plane (src/egress).
LIB_SRC += $(sort $(wildcard src/egress/*.c))
PKGS += libssl
# Storage plane (issue 6): SigV4, the object store, links, the external-store client.
LIB_SRC += $(sort $(wildcard src/storage/*.c))
# Fronts on top of the core library: `husk` (the command line; `husk serve`
# execs `husk-serve`, so that one-shot runs do not load the server's
# libraries) and `husk-serve` (the HTTP API daemon).
CLI_SRC := src/cli/main.c
SERVE_SRC := $(sort $(wildcard src/api/*.c)) src/cli/serve.c src/cli/serve_main.c
# The S3 front (issue 6).
SERVE_SRC += $(sort $(wildcard src/s3/*.c))
SERVE_OBJ := $(SERVE_SRC:%.c=$(BUILD)/%.o)
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/seccomp_bpf.o
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
# ---- MCP server (branch mcp): the protocol core and its tools (src/mcp),
# linked into husk-serve (/mcp) and into husk-mcp (`husk mcp`, stdio; it
# forwards to a running husk serve with libcurl when given --server).
MCP_SRC := $(sort $(wildcard src/mcp/*.c))
MCP_OBJ := $(MCP_SRC:%.c=$(BUILD)/%.o)
MCP_CLI_SRC := src/cli/mcp_main.c src/cli/mcp_remote.c
MCP_CLI_OBJ := $(MCP_CLI_SRC:%.c=$(BUILD)/%.o)
CURL_LIBS := $(shell pkg-config --libs libcurl 2>/dev/null || echo -lcurl)
SERVE_OBJ += $(MCP_OBJ)
# ---- end MCP
UNIT_SRC := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

.PHONY: all deps deps-test run demo test test-unit test-e2e test-hostile test-asan check-clang bench chaos clean format \
	fuzz fuzz-build fuzz-smoke

all: $(BUILD)/husk $(BUILD)/husk-serve $(BUILD)/husk-mcp

deps:
	@scripts/deps.sh build

deps-test:
	@scripts/deps.sh test
	@tests/mcp/setup.sh

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(CFLAGS) $(CPPFLAGS) -MMD -MP -c $< -o $@

# The seccomp policy is compiled to BPF at build time (tools/gen-seccomp.c).
$(BUILD)/gen-seccomp: tools/gen-seccomp.c tools/seccomp-none.c $(BUILD)/src/jail/seccomp.o $(BUILD)/src/util/error.o
	$(CC) $(CSTD) $(WARN) $(CFLAGS) $(CPPFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/gen/seccomp_bpf.c: $(BUILD)/gen-seccomp
	@mkdir -p $(dir $@)
	$(BUILD)/gen-seccomp $@.tmp && mv $@.tmp $@

$(BUILD)/gen/seccomp_bpf.o: $(BUILD)/gen/seccomp_bpf.c
	$(CC) $(CSTD) $(WARN) $(CFLAGS) $(CPPFLAGS) -c $< -o $@

$(BUILD)/libhusk.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# --as-needed: each binary loads only the libraries it really uses.
$(BUILD)/husk: $(CLI_OBJ) $(BUILD)/libhusk.a
	$(CC) $(CFLAGS) $(LDFLAGS) -Wl,--as-needed -o $@ $(CLI_OBJ) $(BUILD)/libhusk.a $(LDLIBS)

$(BUILD)/husk-serve: $(SERVE_OBJ) $(BUILD)/libhusk.a
	$(CC) $(CFLAGS) $(LDFLAGS) -Wl,--as-needed -o $@ $(SERVE_OBJ) $(BUILD)/libhusk.a $(LDLIBS)

$(BUILD)/husk-mcp: $(MCP_CLI_OBJ) $(MCP_OBJ) $(BUILD)/libhusk.a
	$(CC) $(CFLAGS) $(LDFLAGS) -Wl,--as-needed -o $@ $(MCP_CLI_OBJ) $(MCP_OBJ) $(BUILD)/libhusk.a $(LDLIBS) $(CURL_LIBS)

# The MCP protocol core's unit test links the MCP objects too (branch mcp).
$(BUILD)/tests/test_mcp: tests/unit/test_mcp.c $(MCP_OBJ) $(BUILD)/libhusk.a tests/unit/unit.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(CFLAGS) $(CPPFLAGS) -Itests/unit $< -o $@ $(MCP_OBJ) $(BUILD)/libhusk.a $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libhusk.a tests/unit/unit.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(CFLAGS) $(CPPFLAGS) -Itests/unit $< -o $@ $(BUILD)/libhusk.a $(LDLIBS)

# The main job: the daemon on embedded defaults (127.0.0.1:7070, ./var/husk).
run: deps
	@$(MAKE) --no-print-directory all
	@scripts/demo.sh $(BUILD)/husk
	@echo
	@echo "Starting husk serve (Ctrl-C stops it; boxes keep running and are re-adopted on the next start)."
	@echo "Quick start: docs/api.md"
	@$(BUILD)/husk serve

# The one-shot demo: a small Python script in a fresh box.
demo: deps
	@$(MAKE) --no-print-directory all
	@scripts/demo.sh $(BUILD)/husk

# Every test: unit, end-to-end and hostile, on the normal build, then the
# unit and end-to-end suites again under ASan+UBSan, then a clang -Werror
# build to keep both compilers warning-free; the fuzz harnesses are built
# for tests/run.sh's smoke run of them.
test: deps-test
	@$(MAKE) --no-print-directory all $(UNIT_BIN)
	@$(MAKE) --no-print-directory BUILD=build-asan CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" LDFLAGS="-fsanitize=address,undefined" all $(UNIT_BIN:$(BUILD)/%=build-asan/%)
	@$(MAKE) --no-print-directory check-clang
	@$(MAKE) --no-print-directory fuzz-build
	@tests/run.sh

check-clang:
	@$(MAKE) --no-print-directory BUILD=build-clang CC=clang CFLAGS="-O2 -g -Werror" all
	@$(MAKE) --no-print-directory BUILD=build-gcc-werror CC=gcc CFLAGS="-O2 -g -Werror" all

# CHAOS_SEED=N repeats a run's operation mix and kill times.
CHAOS_DURATION ?= 300
CHAOS_KILLS ?= 24
chaos: all
	@python3 tests/chaos/chaos.py --husk $(BUILD)/husk --tap --duration $(CHAOS_DURATION) \
	  --kills $(CHAOS_KILLS) --clients 6 $(if $(CHAOS_SEED),--seed $(CHAOS_SEED))

bench:
	@scripts/deps.sh bench
	@$(MAKE) --no-print-directory all
	@bench/run.sh && bench/serve.sh

# libFuzzer harnesses (tests/fuzz/fuzz_<target>.c), built with clang under
# ASan+UBSan in their own tree: the library objects carry coverage
# instrumentation (fuzzer-no-link), each harness links libFuzzer's main.
# No harness installs a seccomp filter: the empty policy stands in for the
# generated one.
FUZZ_BUILD := build-fuzz
FUZZ_CC := clang
FUZZ_CFLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
	-fno-sanitize-recover=undefined
FUZZ_SECONDS ?= 60
FUZZ_SMOKE_SECONDS ?= 4
FUZZ_SRC := $(LIB_SRC) $(filter-out src/cli/serve_main.c,$(SERVE_SRC)) $(MCP_SRC) \
	tools/seccomp-none.c
FUZZ_OBJ := $(FUZZ_SRC:%.c=$(FUZZ_BUILD)/%.o)
FUZZ_TARGETS := $(patsubst tests/fuzz/fuzz_%.c,%,$(sort $(wildcard tests/fuzz/fuzz_*.c)))
FUZZ_BIN := $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz/%)

$(FUZZ_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CSTD) $(WARN) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(CPPFLAGS) -MMD -MP -c $< -o $@

$(FUZZ_BUILD)/libhusk-fuzz.a: $(FUZZ_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(FUZZ_BUILD)/fuzz/%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(FUZZ_BUILD)/libhusk-fuzz.a
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CSTD) $(WARN) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(CPPFLAGS) -Itests/fuzz -MMD -MP \
		$< -o $@ $(FUZZ_BUILD)/libhusk-fuzz.a $(LDLIBS)

fuzz-build: $(FUZZ_BIN)

# Each harness for FUZZ_SECONDS on its seed corpus (new inputs are kept in
# $(FUZZ_BUILD)/corpus, crashes in $(FUZZ_BUILD)/artifacts).
fuzz: fuzz-build
	@tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# The regression inputs, then a few seconds of each harness (tests/run.sh
# runs this too).
fuzz-smoke: fuzz-build
	@tests/fuzz/run.sh $(FUZZ_SMOKE_SECONDS) $(FUZZ_TARGETS)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf build build-asan build-clang build-gcc-werror $(FUZZ_BUILD)

-include $(shell find $(BUILD) $(FUZZ_BUILD) -name '*.d' 2>/dev/null)
