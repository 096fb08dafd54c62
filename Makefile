# kiln — one Makefile. `make` builds build/libkiln.a, build/libkiln-cli.a (the
# apps' code, src/cli/) and build/kiln;
# `make test` builds and runs every test and ends with "N passed, M failed".

CC      ?= cc
CSTD    := -std=c99
WARN    := -Wall -Wextra -Wpedantic
OPT     ?= -O2 -g
CFLAGS  += $(CSTD) $(WARN) $(OPT)
ifdef WERROR
CFLAGS  += -Werror
endif
LDLIBS  := -lm

B       := build
# One port (port/port.h) goes into each library: posix natively, wasm and
# baremetal in the cross builds; the amalgamation holds all three.
PORT_POSIX     := port/posix.c port/jit_tcc.c
PORT_WASM      := port/wasm.c
PORT_BAREMETAL := port/baremetal.c
LIBSRC  := $(wildcard src/*.c) $(wildcard targets/c/*.c) $(PORT_POSIX)
# The command-line apps (src/cli/) build a library of their own,
# build/libkiln-cli.a: what only they use (benchmarks, training, explain, the
# workloads, gradcheck, the op listing, the dataset reader), which build/kiln
# and the tests that need it link before libkiln.a. libkiln.a, the wasm32 and
# Cortex-M libraries and the amalgamation hold none of it.
# The dataset reader (IDX files, gzip through zlib) needs -lz: natively only,
# where build/kiln and test_io link it; the wasm32 CLI library leaves it out.
DATASRC := src/cli/data.c src/cli/gz.c
CLISRC  := $(filter-out src/cli/main.c $(DATASRC),$(wildcard src/cli/*.c))
CLIOBJ  := $(patsubst %.c,$(B)/obj/%.o,$(CLISRC) $(DATASRC))
LIBOBJ  := $(patsubst %.c,$(B)/obj/%.o,$(LIBSRC))
TESTS   := $(patsubst tests/%.c,$(B)/tests/%,$(wildcard tests/test_*.c))

# Backend tcc: libtcc (Debian: tcc libtcc-dev) where its header is, or
# KN_TCC=0 to leave it out (port/jit_tcc.c then says so at run time).
# libtcc.a (static, not PIC: executables only, never a .so) is folded into
# one object with jit_tcc.o and every symbol but jit_tcc_* made local: its
# ~290 global names (next, expr_const, ...) would otherwise collide with
# kiln's, and so a program linking build/libkiln.a needs no -ltcc. Backend c
# needs dlopen: -ldl (part of libc since glibc 2.34; harmless).
KN_TCC  ?= $(if $(wildcard /usr/include/libtcc.h),1,0)
OBJCOPY ?= objcopy
ifeq ($(KN_TCC),1)
CFLAGS  += -DKN_HAVE_TCC
LIBOBJ  := $(patsubst %/jit_tcc.o,%/jit_tcc_all.o,$(LIBOBJ))
endif
LDLIBS  += -ldl

all: $(B)/libkiln.a $(B)/libkiln-cli.a $(B)/kiln

# Named after the choice, so that flipping it (make deps installing libtcc)
# rebuilds what depends on it.
TCC_STAMP := $(B)/obj/tcc-$(KN_TCC).stamp
$(TCC_STAMP):
	@mkdir -p $(dir $@)
	@rm -f $(B)/obj/tcc-*.stamp
	@touch $@
$(B)/obj/port/jit_tcc.o $(B)/tests/test_jit: $(TCC_STAMP)

$(B)/obj/port/jit_tcc_all.o: $(B)/obj/port/jit_tcc.o
	$(CC) -r -nostdlib $< -ltcc -o $@.tmp
	$(OBJCOPY) $(addprefix --keep-global-symbol=jit_tcc_,new sym delete available) $@.tmp $@
	@rm -f $@.tmp

$(B)/obj/%.o: %.c src/*.h src/cli/*.h port/*.h targets/*/*.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(B)/libkiln.a: $(LIBOBJ)
	@rm -f $@
	ar rcs $@ $^

$(B)/libkiln-cli.a: $(CLIOBJ)
	@rm -f $@
	ar rcs $@ $^

$(B)/kiln: src/cli/main.c $(B)/libkiln-cli.a $(B)/libkiln.a
	$(CC) $(CFLAGS) $< $(B)/libkiln-cli.a $(B)/libkiln.a $(LDLIBS) -lz -o $@

$(B)/tests/%: tests/%.c tests/*.h tests/ref/*.h $(B)/libkiln-cli.a $(B)/libkiln.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Isrc $(TEST_DATA) $< $(B)/libkiln-cli.a $(B)/libkiln.a $(LDLIBS) $(TEST_LIBS) -o $@

# test_io reads datasets where the reader is linked (KN_TEST_DATA: natively);
# its cross builds test the rest.
$(B)/tests/test_io: TEST_DATA = -DKN_TEST_DATA
$(B)/tests/test_io: TEST_LIBS = -lz

# What the tests need (apt-get, as root; skips what is installed). Every
# target below that builds or runs installs its part first, then builds in a
# second make, which sees what was installed (KN_TCC is decided when a make
# reads this file): on a fresh machine it would otherwise build without
# TinyCC.
deps:
	@sh tests/deps.sh

# The main job: installs what it needs, builds, runs the README's first
# program, then trains on Fashion-MNIST with the whole step compiled.
demo: deps
	+@$(MAKE) --no-print-directory all $(B)/first
	$(B)/first
	$(B)/kiln train --model smallcnn --epochs 2 --backend c

$(B)/%: examples/%.c $(B)/libkiln.a
	$(CC) $(CFLAGS) -Isrc $< $(B)/libkiln.a $(LDLIBS) -o $@

# Native tests, then the wasm and Cortex-M builds; one summary line for all.
# The build is a second make, so that it sees what deps installed (libtcc).
test: deps
	+@$(MAKE) --no-print-directory all build-tests
	+@MAKE='$(MAKE)' sh tests/run.sh native $(B) wasm $(W) arm $(A)

build-tests: $(TESTS) $(B)/tests/fuzz_compiled

# The differential fuzzer (tests/fuzz_compiled.c) on random seeds for SECONDS (default 60), then a
# summary; FUZZ_FLAGS adds options (--with rand,cumsum  --backends tcc  --ops sum,cumsum ...).
# make test runs its fixed seeds, in tests/run.sh.
SECONDS ?= 60
fuzz: $(B)/tests/fuzz_compiled
	$(B)/tests/fuzz_compiled --seconds $(SECONDS) $(FUZZ_FLAGS)

clean:
	rm -rf $(B)

# ---- sanitizers: the library and tests with ASan + UBSan in their own tree ----
ASAN_OPT := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

# Every toolchain: the suite's test_amalgamation.sh builds for wasm and Cortex-M too.
asan:
	@sh tests/deps.sh native wasm arm
	+$(MAKE) B=$(B)/asan OPT='$(ASAN_OPT)' all build-tests
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 KN_BUILD_OPT='$(ASAN_OPT)' \
	    sh tests/run.sh native $(B)/asan

# ---- cross builds: wasm32-wasi (run under node) and Cortex-M4F (run under QEMU) ----
# `make wasm`, `make arm` and `make cross` build and run; a missing toolchain
# prints "SKIP ..." and counts as a failure unless KN_ALLOW_SKIP=1.
# wasm-build and arm-build only build (and fail like any build).
W        := $(B)/wasm
A        := $(B)/arm
XWARN    := $(CSTD) $(WARN) -O2 $(if $(WERROR),-Werror)
CROSSSRC := $(filter-out $(PORT_POSIX),$(LIBSRC))  # the native library less its port
CTESTS   := $(wildcard tests/test_*.c)

WASM_CC  ?= clang
WASM_AR  ?= llvm-ar
WASM_CFLAGS  := --target=wasm32-wasi $(XWARN)
# Stack first (an overflow traps instead of corrupting data), 8 MiB like a
# native thread; 256 MiB of memory up front so most tests never grow it.
WASM_LDFLAGS := -Wl,-z,stack-size=8388608 -Wl,--stack-first -Wl,--initial-memory=268435456
WASM_TESTS   := $(patsubst tests/%.c,$(W)/tests/%.wasm,$(CTESTS))

$(W)/obj/%.o: %.c src/*.h src/cli/*.h port/*.h targets/*/*.h
	@mkdir -p $(dir $@)
	$(WASM_CC) $(WASM_CFLAGS) -c $< -o $@

$(W)/libkiln.a: $(patsubst %.c,$(W)/obj/%.o,$(CROSSSRC) $(PORT_WASM))
	@rm -f $@
	$(WASM_AR) rcs $@ $^

$(W)/libkiln-cli.a: $(patsubst %.c,$(W)/obj/%.o,$(CLISRC))
	@rm -f $@
	$(WASM_AR) rcs $@ $^

$(W)/tests/%.wasm: tests/%.c tests/*.h tests/ref/*.h $(W)/libkiln-cli.a $(W)/libkiln.a
	@mkdir -p $(dir $@)
	$(WASM_CC) $(WASM_CFLAGS) $(WASM_LDFLAGS) -Isrc $< $(W)/libkiln-cli.a $(W)/libkiln.a -lm -o $@

wasm-build: $(W)/libkiln.a $(W)/libkiln-cli.a $(WASM_TESTS)

ARM_CC   ?= arm-none-eabi-gcc
ARM_AR   ?= arm-none-eabi-ar
ARM_ARCH := -mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16
ARM_CFLAGS  := $(ARM_ARCH) $(XWARN) -ffunction-sections -fdata-sections
ARM_LDFLAGS := $(ARM_ARCH) --specs=rdimon.specs -T tests/cross/cortex-m.ld -Wl,--gc-sections

$(A)/obj/%.o: %.c src/*.h src/cli/*.h port/*.h targets/*/*.h
	@mkdir -p $(dir $@)
	$(ARM_CC) $(ARM_CFLAGS) -c $< -o $@

$(A)/libkiln.a: $(patsubst %.c,$(A)/obj/%.o,$(CROSSSRC) $(PORT_BAREMETAL))
	@rm -f $@
	$(ARM_AR) rcs $@ $^

$(A)/arm_smoke.elf: tests/cross/arm_smoke.c tests/cross/startup.c tests/cross/cortex-m.ld tests/*.h $(A)/libkiln.a
	$(ARM_CC) $(ARM_CFLAGS) $(ARM_LDFLAGS) -Isrc tests/cross/arm_smoke.c tests/cross/startup.c \
	    $(A)/libkiln.a -lm -o $@

arm-build: $(A)/libkiln.a $(A)/arm_smoke.elf

wasm:
	@sh tests/deps.sh wasm
	+@MAKE='$(MAKE)' sh tests/run.sh wasm $(W)

arm:
	@sh tests/deps.sh arm
	+@MAKE='$(MAKE)' sh tests/run.sh arm $(A)

cross:
	@sh tests/deps.sh wasm arm
	+@MAKE='$(MAKE)' sh tests/run.sh wasm $(W) arm $(A)

# Mutation testing (tests/mutate.py): small plausible bugs, one at a time, in a
# copy of the tree; which test kills each, and the kill rate. It runs the
# whole native suite once unmutated first, and again for any survivor.
mutate:
	nice -n 10 /usr/bin/python3 tests/mutate.py

# ---- install, with GNU's directory variables: make install PREFIX=/opt/kiln DESTDIR=stage ----
# kiln.h, libkiln.a, the kiln CLI and kiln.pc, so that another build takes
# `pkg-config --cflags --libs kiln`. DESTDIR stages the files (a package's
# root); the installed kiln.pc names PREFIX alone. A sanitizer build's kiln.pc
# asks for its sanitizers at link time (make install B=build/asan OPT=...).
PREFIX       ?= /usr/local
prefix       ?= $(PREFIX)
exec_prefix  ?= $(prefix)
bindir       ?= $(exec_prefix)/bin
libdir       ?= $(exec_prefix)/lib
includedir   ?= $(prefix)/include
pkgconfigdir ?= $(libdir)/pkgconfig
INSTALL      ?= install
INSTALL_PROGRAM ?= $(INSTALL)
INSTALL_DATA ?= $(INSTALL) -m 644
KN_VERSION   := $(shell sed -n 's/^\#define KN_VERSION "\(.*\)"/\1/p' src/kiln.h)
# kiln.pc's directories relative to its prefix where they are (pkg-config --define-prefix)
pc_rel        = $(if $(filter $(2),$(1)),$${$(3)},$(patsubst $(2)/%,$${$(3)}/%,$(1)))

install: all
	$(INSTALL) -d $(DESTDIR)$(bindir) $(DESTDIR)$(libdir) $(DESTDIR)$(includedir) $(DESTDIR)$(pkgconfigdir)
	$(INSTALL_PROGRAM) $(B)/kiln $(DESTDIR)$(bindir)/kiln
	$(INSTALL_DATA) $(B)/libkiln.a $(DESTDIR)$(libdir)/libkiln.a
	$(INSTALL_DATA) src/kiln.h $(DESTDIR)$(includedir)/kiln.h
	printf '%s\n' 'prefix=$(prefix)' 'exec_prefix=$(call pc_rel,$(exec_prefix),$(prefix),prefix)' \
	    'libdir=$(call pc_rel,$(libdir),$(exec_prefix),exec_prefix)' \
	    'includedir=$(call pc_rel,$(includedir),$(prefix),prefix)' '' \
	    'Name: kiln' 'Description: a small torch.compile in C99' 'Version: $(KN_VERSION)' \
	    'Cflags: -I$${includedir}' \
	    'Libs: $(strip -L$${libdir} -lkiln $(filter -fsanitize=%,$(OPT)) $(LDLIBS) -lpthread)' \
	    >$(DESTDIR)$(pkgconfigdir)/kiln.pc
	chmod 644 $(DESTDIR)$(pkgconfigdir)/kiln.pc

uninstall:
	rm -f $(DESTDIR)$(bindir)/kiln $(DESTDIR)$(libdir)/libkiln.a $(DESTDIR)$(includedir)/kiln.h \
	    $(DESTDIR)$(pkgconfigdir)/kiln.pc

# ---- the amalgamation: the library as one C file, beside kiln.h ----
# $(B)/amalgamation/kiln.c builds with one compiler call for any target (its
# header comment says how); tools/amalgamate.py takes the files from here.
PYTHON   ?= python3
AMALGSRC := $(filter-out $(PORT_POSIX),$(LIBSRC))
AMALGAMATION := $(B)/amalgamation

amalgamation: $(AMALGAMATION)/kiln.c

$(AMALGAMATION)/kiln.c: tools/amalgamate.py Makefile $(AMALGSRC) $(PORT_POSIX) $(PORT_WASM) $(PORT_BAREMETAL) \
        src/*.h port/*.h targets/*/*.h
	$(PYTHON) tools/amalgamate.py --out $(AMALGAMATION) --header src/kiln.h --lib $(AMALGSRC) \
	    --port posix $(PORT_POSIX) --port wasm $(PORT_WASM) --port baremetal $(PORT_BAREMETAL)

# make -s print-VAR: a variable's value, for scripts (make -s print-AMALGSRC)
print-%:
	@echo $($*)

.PHONY: all test clean build-tests asan wasm wasm-build arm arm-build cross deps demo bench bench-rounds mutate fuzz \
    install uninstall amalgamation

# Benchmarks side by side with PyTorch (docs/BENCHMARKS.md): JSON lines, a markdown table and a chart in build/bench/.
# make bench QUICK=1: 5 timed steps per case instead of 30 (about 15 minutes on 2 cores)
BENCH_QUICK := $(if $(QUICK),--quick,)
bench:
	@sh tests/deps.sh bench
	+@$(MAKE) --no-print-directory all
	@mkdir -p $(B)/bench
	$(B)/kiln bench train --json $(BENCH_QUICK) > $(B)/bench/kiln-train.jsonl && cat $(B)/bench/kiln-train.jsonl
	$(B)/kiln bench infer --json $(BENCH_QUICK) > $(B)/bench/kiln-infer.jsonl && cat $(B)/bench/kiln-infer.jsonl
	/usr/bin/python3 tests/bench/torch_peer.py --threads 2 $(BENCH_QUICK) > $(B)/bench/torch.jsonl && cat $(B)/bench/torch.jsonl
	/usr/bin/python3 tests/bench/report.py --out $(B)/bench $(B)/bench/kiln-*.jsonl $(B)/bench/torch.jsonl

# kiln-c and torch timed in alternating rounds, seconds apart (a shared machine's speed drifts over minutes):
# build/bench/rounds.md. make bench-rounds ROUNDS=4
ROUNDS ?= 4
bench-rounds:
	@sh tests/deps.sh bench
	+@$(MAKE) --no-print-directory all
	/usr/bin/python3 tests/bench/rounds.py --rounds $(ROUNDS) --kiln $(B)/kiln --out $(B)/bench
