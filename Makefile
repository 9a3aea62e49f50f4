# husk — build, run, test, install.
#   make run      install what is missing, build, run the server (husk serve) on embedded defaults
#   make demo     build and run the one-shot demo (a Python script in a box)
#   make test     install what is missing, build (normal + ASan/UBSan), run every test
#   make bench    run the benchmarks (not part of the tests)
#   make fuzz     run every libFuzzer harness for FUZZ_SECONDS each (docs/fuzzing.md)
#   make chaos    a long chaos run: the daemon SIGKILLed under load, then every
#                 acknowledged item checked (docs/reliability.md); make faults first
#   make faults   the state plane's fault simulation at every fault point
#   make install  PREFIX=/usr/local DESTDIR=: the binaries, libhusk (.so and .a),
#                 its headers, husk.pc and the man pages
#   make deb      the Debian packages husk, libhusk0, libhusk-dev (debian/)

# ---- what husk is built with -------------------------------------------------
# Debian packages behind each pkg-config name: docs/dependencies.md.
# The core library's own dependencies (libhusk.so links them; husk.pc lists
# them for static linking):
LIB_PKGS := libseccomp jansson sqlite3 libcrypto libssl libarchive zlib libcurl libargon2 cjose
# The fronts add the HTTP server (API, S3) and the XML parser (S3 bodies).
PKGS := $(LIB_PKGS) libmicrohttpd expat yaml-0.1

CC ?= cc
CSTD := -std=c17
WARN := -Wall -Wextra -Wshadow -Wformat=2 -Wno-unused-parameter
CFLAGS ?= -O2 -g
# Hardening of every binary and of the library; FORTIFY needs optimisation
# and is left out of the sanitizer and fuzzing builds (they check more).
FORTIFY ?= -D_FORTIFY_SOURCE=3
HARDEN := -fstack-protector-strong $(FORTIFY)
HARDEN_LD := -Wl,-z,relro,-z,now
# Every object is position-independent (the same objects make libhusk.so
# and the PIE executables) and hides its symbols: only what
# include/husk/ marks HUSK_PUBLIC leaves the library.
PIC := -fPIC -fvisibility=hidden
CPPFLAGS += -Iinclude -Isrc -DHUSK_LIBEXECDIR='"$(LIBEXECDIR)"'
LIB_LIBS := $(shell pkg-config --libs $(LIB_PKGS) 2>/dev/null || echo -lseccomp -ljansson -lsqlite3 -lcrypto -lssl -larchive -lz -lcurl -largon2 -lcjose) -lpthread -lm
LDLIBS += $(shell pkg-config --libs $(PKGS) 2>/dev/null || echo -lseccomp -ljansson -lsqlite3 -lcrypto -lssl -larchive -lz -lcurl -largon2 -lcjose -lmicrohttpd -lexpat -lyaml) -lpthread -lm

# ---- where make install puts it -----------------------------------------------
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
# husk-serve, husk-mcp and the spawner `husk` runs boxes from
LIBEXECDIR ?= $(PREFIX)/lib/husk
INCLUDEDIR ?= $(PREFIX)/include
MANDIR ?= $(PREFIX)/share/man
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
DESTDIR ?=

VERSION := $(shell sed -n 's/^\#define HUSK_VERSION "\(.*\)"/\1/p' include/husk/base.h)
SOVERSION := $(shell sed -n 's/^\#define HUSK_VERSION_MAJOR //p' include/husk/base.h)

# ---- what is built from what --------------------------------------------------
BUILD ?= build
# The core library: isolation, boxes, templates, state, network and
# secrets, storage, users and OAuth.
LIB_SRC := $(sort $(wildcard src/util/*.c src/jail/*.c src/box/*.c src/template/*.c \
	src/state/*.c src/egress/*.c src/storage/*.c src/auth/*.c))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/seccomp_bpf.o $(BUILD)/gen/ctx_runners.o
# The fronts: `husk` (the command line; `husk serve` execs `husk-serve` and
# `husk mcp` execs `husk-mcp`, so that a one-shot run loads none of the
# server's libraries), the daemon with its HTTP, S3 and MCP fronts, and the
# MCP server on stdio (which forwards to a daemon with libcurl when asked).
CLI_SRC := src/cli/main.c src/cli/template.c src/cli/snapshot.c src/cli/user.c src/cli/api_client.c src/cli/cli_common.c
MCP_SRC := $(sort $(wildcard src/mcp/*.c))
# What the HTTP fronts (API, S3) share: their libmicrohttpd plumbing.
FRONT_SRC := $(sort $(wildcard src/front/*.c))
SERVE_SRC := $(sort $(wildcard src/api/*.c src/s3/*.c)) $(FRONT_SRC) src/cli/serve.c \
	src/cli/serve_main.c $(MCP_SRC)
MCP_CLI_SRC := src/cli/mcp_main.c src/cli/mcp_remote.c $(MCP_SRC)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
MCP_OBJ := $(MCP_SRC:%.c=$(BUILD)/%.o)
SERVE_OBJ := $(SERVE_SRC:%.c=$(BUILD)/%.o)
MCP_CLI_OBJ := $(MCP_CLI_SRC:%.c=$(BUILD)/%.o)
UNIT_SRC := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
PUBLIC_H := $(sort $(wildcard include/husk/*.h))
MAN := $(sort $(wildcard man/*.1))
# What the library's users get: the archive holds one object whose hidden
# symbols were made local, so nothing but the husk_ API can collide with a
# program's own names; the fronts and tests link the plain archive.
CORE_A := $(BUILD)/libhusk-core.a
LIB_A := $(BUILD)/libhusk.a
LIB_SO := $(BUILD)/libhusk.so.$(VERSION)

.PHONY: all lib deps deps-test run demo test test-unit check-clang bench chaos faults clean format \
	fuzz fuzz-build fuzz-smoke install uninstall deb FORCE

all: $(BUILD)/husk $(BUILD)/husk-serve $(BUILD)/husk-mcp lib
lib: $(LIB_A) $(LIB_SO)

deps:
	@scripts/deps.sh build

deps-test:
	@scripts/deps.sh test
	@tests/mcp/setup.sh

COMPILE = $(CC) $(CSTD) $(WARN) $(HARDEN) $(PIC) $(CFLAGS) $(CPPFLAGS)
$(BUILD)/%.o: %.c $(BUILD)/flags.stamp
	@mkdir -p $(dir $@)
	$(COMPILE) -MMD -MP -c $< -o $@

# Objects are rebuilt when the flags (the install paths among them) change.
$(BUILD)/flags.stamp: FORCE
	@mkdir -p $(BUILD)
	@echo '$(COMPILE)' | cmp -s - $@ || echo '$(COMPILE)' >$@

# The seccomp policy is compiled to BPF at build time (tools/gen-seccomp.c).
$(BUILD)/gen-seccomp: tools/gen-seccomp.c tools/seccomp-none.c $(BUILD)/src/jail/seccomp.o $(BUILD)/src/util/error.o
	$(COMPILE) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/gen/seccomp_bpf.c: $(BUILD)/gen-seccomp
	@mkdir -p $(dir $@)
	$(BUILD)/gen-seccomp $@.tmp && mv $@.tmp $@

$(BUILD)/gen/seccomp_bpf.o: $(BUILD)/gen/seccomp_bpf.c
	$(COMPILE) -c $< -o $@

# The code-context runners, built into the library (src/box/context.c).
CTX_RUNNERS := src/ctx/husk_ctx.py src/ctx/husk_ctx.js src/ctx/husk_ctx.sh
$(BUILD)/embed: tools/embed.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -o $@ $<

$(BUILD)/gen/ctx_runners.c: $(BUILD)/embed $(CTX_RUNNERS)
	@mkdir -p $(dir $@)
	$(BUILD)/embed $@.tmp ctx_runner_python src/ctx/husk_ctx.py \
		ctx_runner_javascript src/ctx/husk_ctx.js ctx_runner_bash src/ctx/husk_ctx.sh && mv $@.tmp $@

$(BUILD)/gen/ctx_runners.o: $(BUILD)/gen/ctx_runners.c
	$(COMPILE) -c $< -o $@

$(CORE_A): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(LIB_A): $(LIB_OBJ)
	@rm -f $@ $(BUILD)/libhusk-all.o
	ld -r -o $(BUILD)/libhusk-all.o $^
	objcopy --localize-hidden $(BUILD)/libhusk-all.o
	ar rcs $@ $(BUILD)/libhusk-all.o

$(LIB_SO): $(LIB_OBJ)
	$(CC) -shared $(CFLAGS) $(LDFLAGS) $(HARDEN_LD) -Wl,--no-undefined \
		-Wl,-soname,libhusk.so.$(SOVERSION) -o $@ $^ $(LIB_LIBS)
	ln -sf libhusk.so.$(VERSION) $(BUILD)/libhusk.so.$(SOVERSION)
	ln -sf libhusk.so.$(SOVERSION) $(BUILD)/libhusk.so

# --as-needed: each binary loads only the libraries it really uses.
EXE_LD = $(CC) $(CFLAGS) $(LDFLAGS) -pie $(HARDEN_LD) -Wl,--as-needed
$(BUILD)/husk: $(CLI_OBJ) $(CORE_A)
	$(EXE_LD) -o $@ $(CLI_OBJ) $(CORE_A) $(LDLIBS)

$(BUILD)/husk-serve: $(SERVE_OBJ) $(CORE_A)
	$(EXE_LD) -o $@ $(SERVE_OBJ) $(CORE_A) $(LDLIBS)

$(BUILD)/husk-mcp: $(MCP_CLI_OBJ) $(CORE_A)
	$(EXE_LD) -o $@ $(MCP_CLI_OBJ) $(CORE_A) $(LDLIBS)

# The MCP protocol core's unit test links the MCP objects too.
$(BUILD)/tests/test_mcp: tests/unit/test_mcp.c $(MCP_OBJ) $(CORE_A) tests/unit/unit.h
	@mkdir -p $(dir $@)
	$(COMPILE) -Itests/unit $< -o $@ $(MCP_OBJ) $(CORE_A) $(LDLIBS)

# So does the unit test of what the HTTP fronts share (src/front/).
FRONT_OBJ := $(FRONT_SRC:%.c=$(BUILD)/%.o)
$(BUILD)/tests/test_front: tests/unit/test_front.c $(FRONT_OBJ) $(CORE_A) tests/unit/unit.h
	@mkdir -p $(dir $@)
	$(COMPILE) -Itests/unit $< -o $@ $(FRONT_OBJ) $(CORE_A) $(LDLIBS)

# The unit test of the S3 front's limiter of refused link fetches links
# its object.
$(BUILD)/tests/test_s3_rate: tests/unit/test_s3_rate.c $(BUILD)/src/s3/s3_ratelimit.o $(CORE_A) tests/unit/unit.h
	@mkdir -p $(dir $@)
	$(COMPILE) -Itests/unit $< -o $@ $(BUILD)/src/s3/s3_ratelimit.o $(CORE_A) $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c $(CORE_A) tests/unit/unit.h
	@mkdir -p $(dir $@)
	$(COMPILE) -Itests/unit $< -o $@ $(CORE_A) $(LDLIBS)

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
# unit and end-to-end suites again under ASan+UBSan, a clang and a gcc
# -Werror build to keep both compilers warning-free, the fuzz harnesses
# (tests/run.sh runs each for a few seconds), and the library as a user
# gets it (installed, and packaged: tests/pkg/).
test: deps-test
	@$(MAKE) --no-print-directory all $(UNIT_BIN)
	@$(MAKE) --no-print-directory BUILD=build-asan FORTIFY= \
		CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
		LDFLAGS="-fsanitize=address,undefined" all $(UNIT_BIN:$(BUILD)/%=build-asan/%)
	@$(MAKE) --no-print-directory check-clang
	@$(MAKE) --no-print-directory fuzz-build
	@tests/run.sh

check-clang:
	@$(MAKE) --no-print-directory BUILD=build-clang CC=clang CFLAGS="-O2 -g -Werror" all
	@$(MAKE) --no-print-directory BUILD=build-gcc-werror CC=gcc CFLAGS="-O2 -g -Werror" all

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBEXECDIR) $(DESTDIR)$(LIBDIR) \
		$(DESTDIR)$(INCLUDEDIR)/husk $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(MANDIR)/man1
	install -m 0755 $(BUILD)/husk $(DESTDIR)$(BINDIR)/husk
	install -m 0755 $(BUILD)/husk-serve $(BUILD)/husk-mcp $(DESTDIR)$(LIBEXECDIR)/
	ln -sf $(BINDIR)/husk $(DESTDIR)$(LIBEXECDIR)/husk
	install -m 0644 $(LIB_A) $(DESTDIR)$(LIBDIR)/libhusk.a
	install -m 0755 $(LIB_SO) $(DESTDIR)$(LIBDIR)/
	ln -sf libhusk.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libhusk.so.$(SOVERSION)
	ln -sf libhusk.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libhusk.so
	install -m 0644 $(PUBLIC_H) $(DESTDIR)$(INCLUDEDIR)/husk/
	sed -e 's|@VERSION@|$(VERSION)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
		-e 's|@LIB_PKGS@|$(LIB_PKGS)|' husk.pc.in >$(DESTDIR)$(PKGCONFIGDIR)/husk.pc
	$(if $(MAN),install -m 0644 $(MAN) $(DESTDIR)$(MANDIR)/man1/)

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/husk $(DESTDIR)$(LIBDIR)/libhusk.a $(DESTDIR)$(LIBDIR)/libhusk.so* \
		$(DESTDIR)$(PKGCONFIGDIR)/husk.pc $(MAN:man/%=$(DESTDIR)$(MANDIR)/man1/%)
	rm -rf $(DESTDIR)$(LIBEXECDIR) $(DESTDIR)$(INCLUDEDIR)/husk

deb:
	@scripts/deps.sh deb
	dpkg-buildpackage -us -uc -b

# CHAOS_SEED=N repeats a run's operation mix and kill times.
CHAOS_DURATION ?= 300
CHAOS_KILLS ?= 24
chaos: all faults
	@python3 tests/chaos/chaos.py --husk $(BUILD)/husk --tap --duration $(CHAOS_DURATION) \
	  --kills $(CHAOS_KILLS) --clients 6 $(if $(CHAOS_SEED),--seed $(CHAOS_SEED))

# make test's run of tests/unit/test_faults.c tries every 10th allocation
# on a freshly opened database; this tries every one.
faults: $(BUILD)/tests/test_faults
	@HUSK_FAULTS_FULL=1 $(BUILD)/tests/test_faults

bench:
	@scripts/deps.sh bench
	@$(MAKE) --no-print-directory all
	@bench/run.sh && bench/serve.sh && bench/templates.sh && bench/rootmount.sh && bench/contexts.sh && bench/snapshots.sh \
		&& bench/previews.sh

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
FUZZ_SRC := $(LIB_SRC) $(filter-out src/cli/serve_main.c,$(SERVE_SRC)) tools/seccomp-none.c
FUZZ_OBJ := $(FUZZ_SRC:%.c=$(FUZZ_BUILD)/%.o) $(FUZZ_BUILD)/gen/ctx_runners.o
FUZZ_TARGETS := $(patsubst tests/fuzz/fuzz_%.c,%,$(sort $(wildcard tests/fuzz/fuzz_*.c)))
FUZZ_BIN := $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz/%)

$(FUZZ_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CSTD) $(WARN) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(CPPFLAGS) -MMD -MP -c $< -o $@

$(FUZZ_BUILD)/gen/ctx_runners.o: $(BUILD)/gen/ctx_runners.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CSTD) $(FUZZ_CFLAGS) -c $< -o $@

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
