# engine.mk - how every chapter (and full/) builds, runs and tests itself.
#
# Included by chapters/NN_name/Makefile and full/Makefile, which set:
#   CHAPTER  the chapter number (01..09; full/ uses 99)
#   DEMO     the demo `make run` runs, e.g. 04_graph (demos/04_graph.c)
#   TRACE    the MG_TRACE categories `make run` turns on
#   ROOT     where tools/, tests/ and models/ are: the project root for full/;
#            for a chapter, the chapter itself, which holds copies of what it
#            needs (tools/handout.list), so it works alone wherever it is
# and may set:
#   BUILD        where to build (default ./build; `make clean` removes it)
#   ARCH_CFLAGS  target flags: full/ sets -march=native for its SIMD kernels;
#                chapters leave it empty and stay portable scalar code

CC      ?= cc
WERROR  ?= -Werror
OPT     ?= -O2
CFLAGS  ?= $(OPT) -g
# -ffp-contract=off: never fuse a*b+c into one rounding unless the code says
# fmaf; quantization and ggml-matching results depend on it.
ALL_CFLAGS = -std=c11 -Wall -Wextra $(WERROR) -ffp-contract=off -pthread $(CFLAGS) $(ARCH_CFLAGS) $(EXTRA_CFLAGS) $(NO_AUTO_VNNI) $(GCC12_AARCH64)
# GCC12_AARCH64: GCC 12 for aarch64 crashes (internal compiler error in
# vect_transform_reduction) vectorizing loops that reduce with fmin or fmax
# over values converted from the loop's int, which several tests have; its
# loop vectorizer stays off there. (Our NEON kernels, full/vec_neon.c, are
# written with intrinsics, so they do not depend on it.)
GCC12_AARCH64 ?= $(shell $(CC) -dumpmachine 2> /dev/null | grep -q '^aarch64' && $(CC) -dumpversion 2> /dev/null | grep -q '^12' && echo -fno-tree-loop-vectorize)
# NO_AUTO_VNNI, last so that no -march before it can undo it: GCC 12 turns
# integer dot-product loops such as sum of ((x & 15) - 8) * y into VNNI's
# vpdpbusd, which multiplies an unsigned byte by a signed one, and feeds it
# the narrowed (x & 15) - 8 as unsigned: -8 counts as 248 (tools/vnni_canary.c
# is the reproducer; -march=native on an AVX-VNNI or AVX512-VNNI CPU, or
# -march=alderlake, icelake-server, sapphirerapids). So on x86, whenever the
# flags name a -march or an -mavx option, the compiler is not allowed to pick
# VNNI on its own; full/vec_simd.c, whose VNNI is written in intrinsics, gets it
# back and has automatic vectorization off instead. (The chapters' portable
# builds name no -march: baseline x86-64 has no VNNI to pick.)
IS_X86       := $(shell $(CC) -dumpmachine 2> /dev/null | grep -qE '^(x86_64|i[3-6]86)' && echo 1)
NO_AUTO_VNNI ?= $(if $(IS_X86),$(if $(filter -march=% -mavx%,$(CFLAGS) $(ARCH_CFLAGS) $(EXTRA_CFLAGS)),-mno-avx512vnni -mno-avxvnni))
LDLIBS  = -lm -pthread

BUILD   ?= build
SRCS    := $(filter-out $(EXCLUDE_SRCS),$(wildcard *.c))
OBJS    := $(SRCS:%.c=$(BUILD)/%.o)
DEMOS   := $(patsubst demos/%.c,$(BUILD)/demo_%,$(wildcard demos/*.c))
LIB     := $(BUILD)/libmg.a

# The tests of this chapter and of every earlier one (tests/NN_name/, NN <= CHAPTER),
# plus EXTRA_TEST_DIRS (full/ adds tests/full).
chapter_of = $(firstword $(subst _, ,$(notdir $(1))))
TEST_DIRS := $(foreach d,$(sort $(wildcard $(ROOT)/tests/[0-9][0-9]_*)),\
                 $(if $(shell [ $(call chapter_of,$(d)) -le $(CHAPTER) ] && echo yes),$(d))) $(EXTRA_TEST_DIRS)
TEST_SRCS := $(foreach d,$(TEST_DIRS),$(wildcard $(d)/test_*.c))
TEST_BINS := $(foreach t,$(TEST_SRCS),$(BUILD)/tests/$(notdir $(patsubst %/,%,$(dir $(t))))_$(basename $(notdir $(t))))
CHECK_CFLAGS = $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   = $(shell pkg-config --libs check 2>/dev/null)

.PHONY: all lib demos run run-demo test graph clean deps tsan asan
.DEFAULT_GOAL := all

all: lib demos $(EXTRA_ALL)
lib: $(LIB)
demos: $(DEMOS)

$(BUILD)/%.o: %.c $(wildcard *.h) | $(BUILD)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(LIB): $(OBJS)
	ar rcs $@ $^

$(BUILD)/demo_%: demos/%.c $(LIB) $(wildcard *.h)
	$(CC) $(ALL_CFLAGS) -I. $< $(LIB) $(LDLIBS) -o $@

$(BUILD):
	@mkdir -p $(BUILD)/tests

# The traced demo of this chapter (full/ runs the engine instead: RUN_TARGET).
RUN_TARGET ?= run-demo
run: $(RUN_TARGET)
run-demo: $(BUILD)/demo_$(DEMO)
	MG_TRACE=$(TRACE) ./$(BUILD)/demo_$(DEMO) $(DEMO_ARGS)

# Tests: each test_*.c is one Check suite (see tests/harness.h), built against
# this chapter's library; then the README's demo excerpt is compared with the
# demo's real output (tools/readme_check.c), and so is the Chinese lesson's
# (README.zh.md, where there is one), which must also keep every section,
# snippet, excerpt and numbers line of README.md (readme_check --parity).
#
# ROOT is compiled into the tests (MG_TEST_ROOT, where they find the fixtures):
# $(BUILD)/root.txt changes when ROOT does, so a chapter copied elsewhere
# together with its build/ rebuilds them for its new place.
$(BUILD)/root.txt: root-changed | $(BUILD)
	@[ "$$(cat $@ 2> /dev/null)" = '$(ROOT)' ] || echo '$(ROOT)' > $@
.PHONY: root-changed
root-changed: ;

$(BUILD)/harness.o: $(ROOT)/tests/harness.c $(ROOT)/tests/harness.h $(BUILD)/root.txt | $(BUILD)
	$(CC) $(ALL_CFLAGS) $(CHECK_CFLAGS) -DMG_TEST_ROOT='"$(ROOT)"' -c $< -o $@

define TEST_RULE
$(BUILD)/tests/$(notdir $(patsubst %/,%,$(dir $(1))))_$(basename $(notdir $(1))): $(1) $(LIB) $(BUILD)/harness.o $(BUILD)/root.txt $(wildcard *.h) $(wildcard $(ROOT)/tests/*.h)
	$$(CC) $$(ALL_CFLAGS) $$(CHECK_CFLAGS) -DMG_TEST_ROOT='"$(ROOT)"' -I. -I$(ROOT)/tests $(1) \
		$(BUILD)/harness.o $(LIB) $$(CHECK_LIBS) $$(LDLIBS) -o $$@
endef
$(foreach t,$(TEST_SRCS),$(eval $(call TEST_RULE,$(t))))

$(BUILD)/readme_check: $(ROOT)/tools/readme_check.c | $(BUILD)
	$(CC) $(ALL_CFLAGS) $< -o $@

# SKIP_TESTS (test names, e.g. full_test_safety): built, not run, by this
# make test (full/'s scalar pass leaves out the tests no kernel decides).
SKIP_TESTS ?=
test: deps $(TEST_BINS) $(BUILD)/demo_$(DEMO) $(BUILD)/readme_check $(EXTRA_ALL)
	@failed=0; for t in $(filter-out $(addprefix $(BUILD)/tests/,$(SKIP_TESTS)),$(TEST_BINS)); do \
		echo "== $$t"; CK_DEFAULT_TIMEOUT=600 ./$$t || failed=1; \
	done; \
	if [ -f README.md ]; then \
		echo "== README.md excerpt vs ./$(BUILD)/demo_$(DEMO)"; \
		MG_TRACE=$(TRACE) ./$(BUILD)/demo_$(DEMO) $(DEMO_ARGS) > $(BUILD)/demo.out 2>&1 && \
		./$(BUILD)/readme_check README.md $(BUILD)/demo.out || failed=1; \
		if [ -f README.zh.md ]; then \
			echo "== README.zh.md: excerpt vs the same output, and in step with README.md"; \
			./$(BUILD)/readme_check README.zh.md $(BUILD)/demo.out || failed=1; \
			./$(BUILD)/readme_check --parity README.md README.zh.md || failed=1; \
		fi; \
	fi; \
	exit $$failed

# Graphviz drawings: the demo writes .dot files into build/dot, `dot` renders them.
graph: $(BUILD)/demo_$(DEMO)
	@mkdir -p $(BUILD)/dot
	MG_DOT=$(BUILD)/dot ./$(BUILD)/demo_$(DEMO) $(DEMO_ARGS) > /dev/null
	@if ! ls $(BUILD)/dot/*.dot > /dev/null 2>&1; then \
		echo "this chapter's demo draws no graph (chapters 04 and 09 do)"; \
	elif command -v dot > /dev/null; then \
		for f in $(BUILD)/dot/*.dot; do \
			dot -Tsvg $$f -o $${f%.dot}.svg && dot -Tpng $$f -o $${f%.dot}.png && echo "rendered $${f%.dot}.svg and .png"; \
		done; \
	else \
		echo "Graphviz 'dot' is not installed: the .dot files are in $(BUILD)/dot"; \
		echo "render them after: sudo apt-get install -y graphviz"; \
	fi

# ThreadSanitizer and AddressSanitizer builds of the tests, in their own folders.
tsan:
	$(MAKE) --no-print-directory BUILD=build-tsan OPT=-O1 EXTRA_CFLAGS="-fsanitize=thread" test
asan:
	$(MAKE) --no-print-directory BUILD=build-asan OPT=-O1 \
		EXTRA_CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" test

clean:
	rm -rf build build-tsan build-asan

# Check and pkg-config are needed for the tests, Graphviz for the drawings.
# As root on Debian/Ubuntu they are installed; otherwise we say what to run.
deps:
	@missing=""; \
	command -v pkg-config > /dev/null || missing="$$missing pkg-config"; \
	pkg-config --exists check 2> /dev/null || missing="$$missing check"; \
	command -v dot > /dev/null || missing="$$missing graphviz"; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get > /dev/null; then \
			echo "installing:$$missing"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq$$missing > /dev/null || exit 1; \
		else \
			echo "missing:$$missing"; echo "install with: sudo apt-get install -y$$missing"; \
			pkg-config --exists check 2> /dev/null || exit 1; \
		fi; \
	fi

# `make grade`: the chapter's graded exercises (exercises/NN_name/), see grade.mk.
include $(dir $(lastword $(MAKEFILE_LIST)))grade.mk
