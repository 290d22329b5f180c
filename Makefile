# minigml: an inference engine rebuilt one mechanism at a time.
#
#   make run             the full engine on the demo model, traced, with a rendered graph
#   make test            every chapter's tests, full's tests and the tools' tests
#   make tour            every chapter's demo, in reading order
#   make chapters        regenerate chapters/ from full/ (after editing full/)
#   make check-chapters  fail if chapters/ is not what full/ generates
#   make graph           the full engine's graph drawings (Graphviz)
#   make bench           speed of the full engine (see full/Makefile)
#   make quant-table     every quantization of the demo model: size, PPL, KL, speed (see full/Makefile)
#   make asan / tsan     the tests under AddressSanitizer+UBSan / ThreadSanitizer
#   make clean

CHAPTER_DIRS := $(sort $(wildcard chapters/[0-9][0-9]_*))
BUILD        := build
CC           ?= cc
TOOL_CFLAGS  := -std=c11 -O2 -g -Wall -Wextra -Werror

# Build in parallel on every core; the tests themselves still run one after another.
MAKEFLAGS    += -j$(shell nproc 2> /dev/null || echo 2)

.PHONY: run test tour chapters check-chapters graph bench quant-table asan tsan clean deps test-tools $(CHAPTER_DIRS)

run: deps
	$(MAKE) -C full run

# The chapters (portable scalar code), full/ built for this CPU (SIMD), and
# full/ again with every kernel scalar: both paths must pass the same tests.
test: deps test-tools
	@set -e; for d in $(CHAPTER_DIRS) full; do \
		echo "=================== $$d"; $(MAKE) --no-print-directory -C $$d test; \
	done
	@echo "=================== full, scalar kernels (SCALAR=1)"
	@$(MAKE) --no-print-directory -C full test-scalar

tour:
	@set -e; for d in $(CHAPTER_DIRS); do \
		echo "=================== $$d: make run"; $(MAKE) --no-print-directory -C $$d run; \
	done

# The chapter generator and its own tests.
$(BUILD)/chapgen: tools/chapgen.c
	@mkdir -p $(BUILD)
	$(CC) $(TOOL_CFLAGS) $< -o $@

chapters: $(BUILD)/chapgen
	./$(BUILD)/chapgen full chapters

check-chapters: $(BUILD)/chapgen
	./$(BUILD)/chapgen --check full chapters

$(BUILD)/test_chapgen: tests/tools/test_chapgen.c tests/harness.c tests/harness.h $(BUILD)/chapgen
	$(CC) $(TOOL_CFLAGS) $$(pkg-config --cflags check) -DMG_TEST_ROOT='"$(CURDIR)"' \
		-DCHAPGEN_BIN='"$(CURDIR)/$(BUILD)/chapgen"' -DCHAPGEN_FIXTURE='"$(CURDIR)/tests/tools/fixture"' \
		-Itests tests/tools/test_chapgen.c tests/harness.c $$(pkg-config --libs check) -lm -o $@

test-tools: deps $(BUILD)/test_chapgen
	@echo "=================== tools"
	./$(BUILD)/test_chapgen

graph: deps
	$(MAKE) -C full graph

bench:
	$(MAKE) -C full bench

# One step at a time (-j1): the speeds in the table are measured.
quant-table:
	$(MAKE) -C full -j1 quant-table

# full/ holds every test (chapters 01-09 and its own): the AddressSanitizer run
# covers them all; ThreadSanitizer runs the tests of chapters 01-08 against
# chapter 08's thread pool and full/'s thread tests.
asan: deps
	$(MAKE) --no-print-directory -C full asan
tsan: deps
	$(MAKE) --no-print-directory -C chapters/08_threads tsan

deps:
	@$(MAKE) --no-print-directory -f tools/engine.mk ROOT=$(CURDIR) CHAPTER=00 deps

clean:
	rm -rf $(BUILD)
	@for d in $(CHAPTER_DIRS) full; do $(MAKE) --no-print-directory -C $$d clean; done
