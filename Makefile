# qkv: `make` builds build/qkv; `make test` runs every test; `make demo` shows it working;
# `make lint` checks the code's layout, `make format` mends it.
CC      ?= cc
PKGS    := openblas yaml-0.1 jansson sentencepiece libmicrohttpd
CXX     ?= c++
# -O3 measured faster than -O2 here (the element-wise loops vectorise); never -Ofast or
# -ffast-math, which break the NaN guards. CFLAGS may be overridden; QKV_CFLAGS may not.
# -fno-math-errno: no qkv code reads errno after a math call, and without it a loop
# calling sqrtf (Adam's update, layer norm) cannot vectorise; IEEE square roots are
# correctly rounded either way, so the results keep their bits. -fno-trapping-math: no qkv
# code reads the floating-point exception flags, and without it a loop whose body selects
# between floats (exp's range clamps, a ReLU) keeps its branches on AVX2 CPUs, as a
# comparison that may raise a flag cannot be done speculatively (AVX-512's masks can):
# exp was one scalar call per element on Zen 3 and Haswell. A select computes the same
# value either way, so the results keep their bits.
CFLAGS  ?= -O3 -march=native -g
CXXFLAGS ?= -O2 -g
QKV_CFLAGS := -std=c11 -Wall -Wextra -D_POSIX_C_SOURCE=200809L -MMD -MP -pthread -Isrc -fno-math-errno -fno-trapping-math
CPPFLAGS_PKG = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDLIBS_PKG   = $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lstdc++ -lm
BUILD   ?= build
# One short line a file (`  CC      src/main.c`, `  LD      build/qkv`); make V=1 shows
# each command in full instead, make -s neither. Errors and warnings show either way.
# A rule's command is $(call show,WHAT,FILE)command.
show = @printf '  %-7s %s\n' '$(1)' '$(2)';
ifeq ($(V),1)
show =
endif
ifneq ($(findstring s,$(firstword -$(MAKEFLAGS))),)
show =
endif
# MPI (data-parallel training over ranks, src/train/dist.c) is built in when mpicc is
# found, or with MPI=1; MPI=0 leaves it out. mpicc then compiles and links everything.
MPI     ?= $(if $(shell command -v mpicc 2>/dev/null),1,0)
ifeq ($(MPI),1)
CC      := mpicc
QKV_CFLAGS += -DQKV_MPI
endif

LIB_SRC := $(filter-out src/main.c,$(wildcard src/*.c src/*/*.c))
LIB_CXX := $(wildcard src/*/*.cc)
# The pages (the viewer, the report's frame) are files, each built
# in as a C string named for it: src/report/report.html is `const char report_html[]`.
# The viewer is a folder of parts (src/attention/viewer/: page.html names the others in
# order), joined into one page first (scripts/join_page.sh), built in as attnview_html.
# The ONNX folder's page joins the viewer's map panel in the same way (onnx_page_html).
PAGES   := $(filter-out src/onnx/onnx_page.html,$(wildcard src/*/*.html src/*/*.css src/*/*.js))
VIEWER  := $(wildcard src/attention/viewer/*)
LIB_OBJ := $(LIB_SRC:src/%.c=$(BUILD)/obj/%.o) $(LIB_CXX:src/%.cc=$(BUILD)/obj/%.o) $(PAGES:src/%=$(BUILD)/obj/gen/%.o) \
           $(BUILD)/obj/gen/attention/attnview.html.o $(BUILD)/obj/gen/onnx/onnx_page.html.o
TEST_SRC := $(wildcard tests/*.c)
TEST_OBJ := $(TEST_SRC:tests/%.c=$(BUILD)/obj/tests/%.o)
# One fuzz target per parser of user input (tests/fuzz/<target>.c, stored inputs in
# tests/fuzz/<target>/); each is also built as a plain replay program for make test.
FUZZ_TARGETS := config corpus checkpoint vocab metrics spm_model spm_proto attnmap api http_head
FUZZ_REPLAY  := $(FUZZ_TARGETS:%=$(BUILD)/fuzz-replay/%)

.PHONY: all deps test check unit demo clean install sanitize tsan parity bench bench-onnx race multi30k multi30k-data serve-load fuzz fuzz-targets format lint bundle

all: $(BUILD)/qkv $(BUILD)/qkv_test $(FUZZ_REPLAY) $(BUILD)/late_start.so $(BUILD)/slow_open.so $(BUILD)/no_link.so $(BUILD)/fail_rename.so

deps:
	@scripts/deps.sh

# Whether MPI is in: dist.o and the binaries are rebuilt when it changes.
$(BUILD)/mpi.stamp: FORCE
	@mkdir -p $(BUILD)
	@echo $(MPI) | cmp -s - $@ || echo $(MPI) > $@
$(BUILD)/obj/train/dist.o: $(BUILD)/mpi.stamp
# The C compiler and its flags: every C object is rebuilt when they change (a flag such
# as -fno-trapping-math changes the code of loops that did not change).
# (single-quoted for the shell, a ' in the flags written '\'')
CFLAGS_LINE = $(subst ','\'',$(CC) $(CFLAGS) $(QKV_CFLAGS))
$(BUILD)/cflags.stamp: FORCE
	@mkdir -p $(BUILD)
	@echo '$(CFLAGS_LINE)' | cmp -s - $@ || echo '$(CFLAGS_LINE)' > $@
.PHONY: FORCE

$(BUILD)/obj/%.o: src/%.c $(BUILD)/cflags.stamp
	@mkdir -p $(dir $@)
	$(call show,CC,$<)$(CC) $(CFLAGS) $(QKV_CFLAGS) $(CPPFLAGS_PKG) -c $< -o $@

# The one C++ file: SentencePiece's API behind a C one (src/data/spm.h).
$(BUILD)/obj/%.o: src/%.cc
	@mkdir -p $(dir $@)
	$(call show,CXX,$<)$(CXX) $(CXXFLAGS) -std=c++17 -Wall -Wextra -MMD -MP -Isrc $(CPPFLAGS_PKG) -c $< -o $@

# A page is kept as a plain file and compiled in as a C string ('?' written \? so that no
# "??=" or "??'" of JavaScript reads as a C trigraph).
page_to_c = awk -v name=$(subst .,_,$(notdir $(1))) 'BEGIN { print "/* generated from $(1): do not edit */"; print "const char " name "[] =" } \
	     { gsub(/\\/, "&&"); gsub(/"/, "\\\""); gsub(/\?/, "\\?"); print "\"" $$0 "\\n\"" } END { print ";" }' $(1) > $@
$(BUILD)/gen/%.c: src/% Makefile
	@mkdir -p $(dir $@)
	$(call show,GEN,$@)$(call page_to_c,$<)

# The viewer's parts joined into one page, then a C string like the others.
$(BUILD)/gen/attention/attnview.html: $(VIEWER) scripts/join_page.sh
	@mkdir -p $(dir $@)
	$(call show,JOIN,$@)scripts/join_page.sh src/attention/viewer/page.html > $@.tmp && mv $@.tmp $@
$(BUILD)/gen/attention/attnview.html.c: $(BUILD)/gen/attention/attnview.html Makefile
	$(call show,GEN,$@)$(call page_to_c,$<)

$(BUILD)/gen/onnx/onnx_page.html: src/onnx/onnx_page.html $(VIEWER) scripts/join_page.sh
	@mkdir -p $(dir $@)
	$(call show,JOIN,$@)scripts/join_page.sh src/onnx/onnx_page.html > $@.tmp && mv $@.tmp $@
$(BUILD)/gen/onnx/onnx_page.html.c: $(BUILD)/gen/onnx/onnx_page.html Makefile
	$(call show,GEN,$@)$(call page_to_c,$<)

.SECONDARY: $(PAGES:src/%=$(BUILD)/gen/%.c) $(BUILD)/gen/attention/attnview.html $(BUILD)/gen/attention/attnview.html.c \
            $(BUILD)/gen/onnx/onnx_page.html $(BUILD)/gen/onnx/onnx_page.html.c

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c $(BUILD)/cflags.stamp
	@mkdir -p $(dir $@)
	$(call show,CC,$<)$(CC) $(CFLAGS) $(QKV_CFLAGS) -c $< -o $@

$(BUILD)/obj/tests/%.o: tests/%.c $(BUILD)/cflags.stamp
	@mkdir -p $(dir $@)
	$(call show,CC,$<)$(CC) $(CFLAGS) $(QKV_CFLAGS) $(CPPFLAGS_PKG) -c $< -o $@

$(BUILD)/obj/fuzz/%.o: tests/fuzz/%.c $(BUILD)/cflags.stamp
	@mkdir -p $(dir $@)
	$(call show,CC,$<)$(CC) $(CFLAGS) $(QKV_CFLAGS) -Itests/fuzz $(CPPFLAGS_PKG) -c $< -o $@

$(BUILD)/fuzz-replay/%: $(BUILD)/obj/fuzz/%.o $(BUILD)/obj/fuzz/replay.o $(LIB_OBJ) $(BUILD)/mpi.stamp
	@mkdir -p $(dir $@)
	$(call show,LD,$@)$(CC) $(CFLAGS) $(QKV_CFLAGS) -o $@ $(filter %.o,$^) $(LDLIBS_PKG)

# kept: make would delete them as intermediate files and rebuild each time
.SECONDARY: $(FUZZ_TARGETS:%=$(BUILD)/obj/fuzz/%.o) $(BUILD)/obj/fuzz/replay.o

# The libFuzzer programs (built by make fuzz, with clang and without MPI, in build/fuzz).
fuzz-targets: $(FUZZ_TARGETS:%=$(BUILD)/fuzzer/%)
$(BUILD)/fuzzer/%: $(BUILD)/obj/fuzz/%.o $(LIB_OBJ) $(BUILD)/mpi.stamp
	@mkdir -p $(dir $@)
	$(call show,LD,$@)$(CXX) $(CFLAGS) -fsanitize=fuzzer,address,undefined -pthread -o $@ $(filter %.o,$^) $(LDLIBS_PKG)

# Test shims, preloaded by the tests: every new thread starts late (tests/threads.sh,
# tests/signals.sh); opening some files is slow (tests/serve.sh); hard links fail (tests/resume.sh);
# one rename fails (tests/onnx.sh).
$(BUILD)/%.so: tests/shim/%.c
	@mkdir -p $(dir $@)
	$(call show,CC,$<)cc -O2 -g -Wall -Wextra -shared -fPIC -o $@ $< -ldl

$(BUILD)/qkv: $(BUILD)/obj/main.o $(LIB_OBJ) $(BUILD)/mpi.stamp
	$(call show,LD,$@)$(CC) $(CFLAGS) $(QKV_CFLAGS) -o $@ $(filter %.o,$^) $(LDLIBS_PKG)

# The allocator is wrapped in the test binary so a test can count allocations per step.
$(BUILD)/qkv_test: $(TEST_OBJ) $(LIB_OBJ) $(BUILD)/mpi.stamp
	$(call show,LD,$@)$(CC) $(CFLAGS) $(QKV_CFLAGS) -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc -o $@ $(filter %.o,$^) $(LDLIBS_PKG)

# The unit tests (gradient checks, data, config) alone.
unit: $(BUILD)/qkv_test
	$(BUILD)/qkv_test

test:
	@scripts/deps.sh --with-browser --with-mpi --with-format --with-onnx
	@$(MAKE) --no-print-directory all
	@tests/run.sh

# The edit loop's tier: the unit tests and the suites that run in seconds (76 s here,
# nothing to build, on 2 cores); make test runs them all, the server, signals, threads and MPI too.
CHECK_SUITES := unit golden kernelsets decode-ways house format fuzz progress attention explain translate fetch report
check:
	@$(MAKE) --no-print-directory all
	@QKV_SUITES="$(CHECK_SUITES)" tests/run.sh

# Builds only what the demo runs (build/qkv), then runs it.
demo: deps
	@echo "== building $(BUILD)/qkv, if anything changed (make V=1 shows the compiler commands)"
	@$(MAKE) $(if $(filter 1,$(V)),,-s) --no-print-directory qkv
	@QKV=$(BUILD)/qkv scripts/demo.sh

# build/qkv alone, quietly when it is up to date (make demo builds through it).
.PHONY: qkv
qkv: $(BUILD)/qkv
	@:

# Multi30k task 1 (de, en) into data/multi30k, checked against scripts/multi30k.sha256:
# from QKV_MULTI30K=DIR, else ../shared/corpora/multi30k when it is there, else downloaded
# from QKV_MULTI30K_URL (default: the dataset's repository on GitHub). Every script that
# reads the corpus runs it first; a second run keeps what is already there and checked.
multi30k-data: deps
	@scripts/multi30k_data.sh

# The real-corpus recipe: German -> English on data/multi30k (make multi30k-data), scored on
# test_2016_flickr (38 minutes of training whatever the host, train.minutes; docs/multi30k.md;
# a recipe, not a test).
multi30k: deps multi30k-data
	@$(MAKE) --no-print-directory all
	@scripts/multi30k.sh

# Speed against PyTorch on the same batches, with the machine's sgemm ceiling (a benchmark,
# not a test: nothing here passes or fails on time).
bench: deps
	@$(MAKE) --no-print-directory all
	@scripts/bench.sh

# Greedy decoding by qkv and by onnxruntime-node running qkv's ONNX export of the same two
# models, on the same threads (a benchmark, not a test; docs/performance.md).
bench-onnx: deps
	@$(MAKE) --no-print-directory all
	@scripts/deps.sh --with-onnx
	@scripts/bench_onnx.sh

# qkv serve under 16 concurrent clients and under hostile ones, against a trained run
# (RUN, default runs/multi30k): throughput, latency, what each bad client gets.
serve-load: deps
	@$(MAKE) --no-print-directory all
	@scripts/serve_load.sh

# qkv and PyTorch trained for the same minutes (QKV_RACE_MINUTES, default 20 each) on the
# same Multi30k subword ids, both decoded greedily and scored: the BLEU each reaches.
race: deps multi30k-data
	@$(MAKE) --no-print-directory all
	@scripts/race.sh

# Loss and every gradient against PyTorch (installs python3-torch; not in `make test`).
parity: deps
	@$(MAKE) --no-print-directory all
	@scripts/parity.sh

# Same tests under AddressSanitizer and UBSan, in a build tree of their own; then the
# multithreaded ones under ThreadSanitizer (make tsan).
sanitize: deps
	@$(MAKE) --no-print-directory BUILD=build/asan CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer" all
	@QKV=build/asan/qkv QKV_TEST=build/asan/qkv_test QKV_SKIP_LEARN=1 QKV_TIMEOUT=900 tests/run.sh
	@$(MAKE) --no-print-directory tsan

# The multithreaded tests under ThreadSanitizer (gcc's, Debian's libtsan2), built without
# MPI (Open MPI is not instrumented); any report fails (tests/tsan.sh says why OpenBLAS
# runs with one thread there).
tsan:
	@scripts/deps.sh --with-tsan
	@$(MAKE) --no-print-directory BUILD=build/tsan MPI=0 CC=gcc CXX=g++ CFLAGS="-O1 -g -fsanitize=thread -fno-omit-frame-pointer" \
		CXXFLAGS="-O1 -g -fsanitize=thread -fno-omit-frame-pointer" build/tsan/qkv build/tsan/qkv_test build/tsan/late_start.so build/tsan/slow_open.so build/tsan/no_link.so
	@tests/tsan.sh

# Each fuzz target for FUZZ_SECONDS (one after another, one process each), under ASan and
# UBSan; new inputs go to build/fuzz/corpus/<target>, findings to build/fuzz/findings/.
# Needs Debian's clang (installed if missing).
FUZZ_SECONDS ?= 60
FUZZ_FLAGS := -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
fuzz:
	@scripts/deps.sh --with-fuzz
	@$(MAKE) --no-print-directory BUILD=build/fuzz MPI=0 CC=clang CXX=clang++ CFLAGS="$(FUZZ_FLAGS)" CXXFLAGS="$(FUZZ_FLAGS)" fuzz-targets
	@scripts/fuzz.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# qkv for a machine where nothing is installed: build/qkv-bundle.tar.gz, its launcher running
# the bundled loader on the bundled libraries (scripts/bundle.sh; BUNDLE_MARCH, default
# x86-64-v3).
bundle: deps
	@scripts/bundle.sh

PREFIX ?= /usr/local
install: $(BUILD)/qkv
	$(call show,INSTALL,$(DESTDIR)$(PREFIX)/bin/qkv)install -D -m 755 $(BUILD)/qkv $(DESTDIR)$(PREFIX)/bin/qkv

# The code's layout (.clang-format, Debian 12's clang-format 14): make format lays out every
# C and C++ source of src/ and tests/ in place; make lint checks it (tests/format.sh, which
# names the files make format would change).
CLANG_FORMAT ?= clang-format
# The same files as tests/format.sh checks.
FORMAT_SRC = $(shell find src \( -name '*.c' -o -name '*.h' -o -name '*.cc' \) | sort) \
	$(wildcard tests/*.c tests/*.h tests/fuzz/*.c tests/fuzz/*.h tests/shim/*.c tests/shim/*.h)
format:
	@scripts/deps.sh --with-format
	@command -v $(CLANG_FORMAT) >/dev/null || { echo "qkv: $(CLANG_FORMAT) is not installed: nothing formatted" >&2; exit 1; }
	$(call show,FORMAT,$(words $(FORMAT_SRC)) files of src/ and tests/)$(CLANG_FORMAT) --style=file -i $(FORMAT_SRC)
lint:
	@scripts/deps.sh --with-format
	@CLANG_FORMAT=$(CLANG_FORMAT) tests/format.sh

clean:
	rm -rf build

-include $(wildcard $(BUILD)/obj/*.d $(BUILD)/obj/*/*.d $(BUILD)/obj/*/*/*.d)
