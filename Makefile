# minigml: an inference engine rebuilt one mechanism at a time.
#
#   make run             the full engine on the demo model, traced, with a rendered graph
#   make test            every chapter's tests, full's tests and the tools' tests
#   make tour            every chapter's demo, in reading order
#   make chapters        regenerate chapters/ from full/ (after editing full/)
#   make check-chapters  fail if chapters/ is not what full/ generates
#   make graph           the full engine's graph drawings (Graphviz)
#   make bench           speed of the full engine (see full/Makefile)
#   make asan / tsan     the tests under AddressSanitizer+UBSan / ThreadSanitizer
#   make fuzz            each libFuzzer harness (fuzz/) FUZZ_SECONDS seconds (default 20)
#   make valgrind        every chapter's demo and a short mg run / mg chat under valgrind
#   make clean

CHAPTER_DIRS := $(sort $(wildcard chapters/[0-9][0-9]_*))
BUILD        := build
CC           ?= cc
TOOL_CFLAGS  := -std=c11 -O2 -g -Wall -Wextra -Werror

# Build in parallel on every core; the tests themselves still run one after another.
MAKEFLAGS    += -j$(shell nproc 2> /dev/null || echo 2)

.PHONY: run test tour chapters check-chapters graph bench asan tsan clean deps test-tools fuzz fuzz-deps valgrind \
        test-fuzz-regressions $(CHAPTER_DIRS)

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
	@$(MAKE) --no-print-directory test-fuzz-regressions

# The inputs the fuzzers found bugs with (tests/fuzz-regressions/<harness>/)
# and the hand-made seeds, through a plain build of each harness (fuzz/replay.c).
test-fuzz-regressions:
	@echo "=================== fuzz regressions (tests/fuzz-regressions, fuzz/seeds)"
	@$(MAKE) --no-print-directory -C fuzz replay

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

# full/ holds every test (chapters 01-09 and its own): the AddressSanitizer run
# covers them all; ThreadSanitizer runs the tests of chapters 01-08 against
# chapter 08's thread pool and full/'s thread tests.
asan: deps
	$(MAKE) --no-print-directory -C full asan
tsan: deps
	$(MAKE) --no-print-directory -C chapters/08_threads tsan

deps:
	@$(MAKE) --no-print-directory -f tools/engine.mk ROOT=$(CURDIR) CHAPTER=00 deps

# libFuzzer needs clang and its runtime libraries (Debian: clang, libclang-rt-dev);
# as root they are installed, as with deps.
FUZZ_SECONDS ?= 20
fuzz: deps fuzz-deps
	@$(MAKE) --no-print-directory -C fuzz run FUZZ_SECONDS=$(FUZZ_SECONDS)

fuzz-deps:
	@if ! printf 'int LLVMFuzzerTestOneInput(const char *d, long n) { (void) d; return (int) n * 0; }\n' | \
		clang -x c - -fsanitize=fuzzer,address,undefined -o /dev/null > /dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get > /dev/null; then \
			echo "installing: clang libclang-rt-dev"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang libclang-rt-dev > /dev/null || exit 1; \
		else \
			echo "make fuzz needs clang with libFuzzer: sudo apt-get install -y clang libclang-rt-dev"; exit 1; \
		fi; \
	fi

# valgrind cannot decode AVX-512, so it runs portable code: every chapter's
# demo (chapters build without -march=native) and the scalar engine's mg
# (full/build-scalar, SCALAR=1) on the demo model, a short run and a two-turn
# chat. Any error or leak fails (--error-exitcode=1). Not in CI: it takes
# about a minute of CPU (56 s; 4 min 55 s of wall time on the shared 2-core machine).
VALGRIND := valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect
VG_MODEL := $(CURDIR)/models/fortune-toy-q8_0.gguf
valgrind: deps
	@command -v valgrind > /dev/null || { [ "$$(id -u)" = 0 ] && apt-get install -y -qq valgrind > /dev/null; } || \
		{ echo "make valgrind needs valgrind: sudo apt-get install -y valgrind"; exit 1; }
	@$(MAKE) --no-print-directory -C full SCALAR=1 build-scalar/mg
	@set -e; for d in $(CHAPTER_DIRS); do \
		n=$$(basename $$d); $(MAKE) --no-print-directory -C $$d build/demo_$$n > /dev/null; \
		args=""; [ $$n = 09_inference ] && args="$(VG_MODEL)"; \
		echo "valgrind: $$d/build/demo_$$n"; \
		(cd $$d && $(VALGRIND) ./build/demo_$$n $$args > /dev/null); \
	done
	@echo "valgrind: mg run"
	@$(VALGRIND) full/build-scalar/mg run -m $(VG_MODEL) -p "床前明月光" -n 8 --temp 0 -t 2 > /dev/null
	@echo "valgrind: mg chat"
	@printf 'hello\n/reset\nhi\n' | $(VALGRIND) full/build-scalar/mg chat -m $(VG_MODEL) -n 8 --temp 0 -t 2 -c 64 > /dev/null
	@echo "valgrind: no errors, no leaks"

clean:
	rm -rf $(BUILD)
	@$(MAKE) --no-print-directory -C fuzz clean
	@for d in $(CHAPTER_DIRS) full; do $(MAKE) --no-print-directory -C $$d clean; done
