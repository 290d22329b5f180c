# minigml: an inference engine rebuilt one mechanism at a time.
#
#   make run             the full engine on the demo model, traced, with a rendered graph
#   make test            every chapter's tests, full's tests and the tools' tests
#   make tour            every chapter's demo, in reading order
#   make chapters        regenerate chapters/ from full/ (after editing full/);
#                        it keeps edited chapter files unless FORCE=1
#   make check-chapters  fail if chapters/ is not what full/ generates
#   make check-markers   no chapter marker or #if 0 inside a decode-path function body
#   make check-zh        the top and exercises/ README.zh.md keep in step with README.md
#   make check-run-excerpt the top READMEs' mg run excerpt is what the command prints
#   make handout CHAPTER=05   build/handout/05_galloc.tar.gz: the chapter alone
#   make exercise CHAPTER=05  work/05_galloc/: a student's copy to work in
#   make check-handout   chapters 01 and 09 unpacked alone must build, run, test, graph
#   make graph           the full engine's graph drawings (Graphviz)
#   make bench           speed of the full engine (see full/Makefile)
#   make quant-table     every quantization of the demo model: size, PPL, KL, speed (see full/Makefile)
#   make asan / tsan     the tests under AddressSanitizer+UBSan / ThreadSanitizer
#   make test-vulkan     full/ with the Vulkan backend (its packages installed as root), tested on Mesa's lavapipe
#   make check-solutions the exercises' reference solutions apply and earn full marks; the wrong ones score 0
#   make exercise-arch   build/exercise-arch/full: full/ without qwen2, to add it back (exercises/arch)
#   make check-solutions-arch  only that exercise's part of check-solutions
#   make fuzz            each libFuzzer harness (fuzz/) FUZZ_SECONDS seconds (default 20, FUZZ_SEED 1; 0 = random)
#   make valgrind        every chapter's demo and a short mg run / mg chat under valgrind
#   make clean

CHAPTER_DIRS := $(sort $(wildcard chapters/[0-9][0-9]_*))
BUILD        := build
CC           ?= cc
TOOL_CFLAGS  := -std=c11 -O2 -g -Wall -Wextra -Werror

# Build in parallel on every core; the tests themselves still run one after another.
MAKEFLAGS    += -j$(shell nproc 2> /dev/null || echo 2)

.PHONY: run test test-x86-levels test-aarch64 test-vulkan tour chapters check-chapters handout exercise check-handout check-numbers check-zh check-markers check-run-excerpt graph bench quant-table asan tsan clean deps test-tools check-solutions \
        fuzz fuzz-deps valgrind test-fuzz-regressions exercise-arch check-solutions-arch $(CHAPTER_DIRS)

run: deps
	$(MAKE) -C full run

# The chapters (portable scalar code), full/ built for this CPU (SIMD), and
# full/ again with every kernel scalar: both paths must pass the same tests
# (but two that no kernel decides, and the golden cases of GOLDEN2_QUICK:
# full/Makefile).
test: deps test-tools
	@set -e; for d in $(CHAPTER_DIRS) full; do \
		echo "=================== $$d"; $(MAKE) --no-print-directory -C $$d test; \
	done
	@echo "=================== full, scalar kernels (SCALAR=1)"
	@$(MAKE) --no-print-directory -C full test-scalar
	@echo "=================== numbers a README quotes from another chapter's demo"
	@sh tools/check_numbers.sh
	@echo "=================== the top README's mg run excerpt"
	@$(MAKE) --no-print-directory check-run-excerpt
	@$(MAKE) --no-print-directory test-fuzz-regressions

check-numbers:
	@sh tools/check_numbers.sh

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

# make chapters refuses (writing nothing) to overwrite or delete a chapter file
# edited since it wrote it, and lists them; FORCE=1 replaces them.
chapters: $(BUILD)/chapgen
	./$(BUILD)/chapgen $(if $(filter 1,$(FORCE)),--force) full chapters

check-chapters: $(BUILD)/chapgen
	./$(BUILD)/chapgen --check full chapters

# One chapter, alone (tools/handout.sh): make handout CHAPTER=05 archives the
# chapter folder into build/handout/05_galloc.tar.gz; make exercise CHAPTER=05
# copies it to work/05_galloc/, a working copy make chapters never touches;
# make check-handout unpacks chapters 01 and 09 (or CHAPTERS="..") alone in a
# temporary folder and runs make, make run, make test and make graph there.
handout: check-chapters
	@sh tools/handout.sh archive $(CHAPTER)
exercise:
	@sh tools/handout.sh exercise $(CHAPTER)
check-handout: check-chapters
	@sh tools/handout.sh check $(CHAPTERS)

$(BUILD)/test_chapgen: tests/tools/test_chapgen.c tests/harness.c tests/harness.h $(BUILD)/chapgen | deps
	$(CC) $(TOOL_CFLAGS) $$(pkg-config --cflags check) -DMG_TEST_ROOT='"$(CURDIR)"' \
		-DCHAPGEN_BIN='"$(CURDIR)/$(BUILD)/chapgen"' -DCHAPGEN_FIXTURE='"$(CURDIR)/tests/tools/fixture"' \
		-Itests tests/tools/test_chapgen.c tests/harness.c $$(pkg-config --libs check) -lm -o $@

$(BUILD)/readme_check: tools/readme_check.c
	@mkdir -p $(BUILD)
	$(CC) $(TOOL_CFLAGS) $< -o $@

$(BUILD)/test_readme_check: tests/tools/test_readme_check.c tests/harness.c tests/harness.h $(BUILD)/readme_check | deps
	$(CC) $(TOOL_CFLAGS) $$(pkg-config --cflags check) -DMG_TEST_ROOT='"$(CURDIR)"' \
		-DREADME_CHECK_BIN='"$(CURDIR)/$(BUILD)/readme_check"' \
		-Itests tests/tools/test_readme_check.c tests/harness.c $$(pkg-config --libs check) -lm -o $@

test-tools: deps $(BUILD)/test_chapgen $(BUILD)/test_readme_check check-zh check-markers
	@echo "=================== tools"
	./$(BUILD)/test_chapgen
	./$(BUILD)/test_readme_check
	sh tests/tools/markers/test_check_markers.sh
	sh tests/tools/bench_tables/test_bench_tables.sh
	tools/check_file_table.sh
	sh tools/check_reading_maps.sh

# No chapter marker or #if 0 inside a function body on the decode path: an
# earlier chapter's version of a function is a whole function of its own
# (tools/check_markers.sh).
DECODE_PATH_FILES := full/graph.c full/plan.c full/galloc.c full/kv_cache.c full/compute.c full/qwen3.c full/session.c
check-markers:
	@sh tools/check_markers.sh $(DECODE_PATH_FILES)

# The Chinese READMEs beside the top-level and exercises/ ones (the chapters'
# and full/'s are checked by their own make test): each must keep every
# section, snippet, excerpt and numbers line of its English twin. A README
# without a README.zh.md beside it is not checked.
ZH_TWINS := README.md exercises/README.md
check-zh: $(BUILD)/readme_check
	@failed=0; for en in $(ZH_TWINS); do \
		zh=$${en%.md}.zh.md; [ -f "$$zh" ] || continue; \
		./$(BUILD)/readme_check --parity "$$en" "$$zh" || failed=1; \
	done; exit $$failed

# The excerpt of mg run in README.md and README.zh.md (a demo-output block,
# the same in both: check-zh) against what the command the README shows
# prints, with -t 2: the work buffer has a cache line per thread, so a fixed
# thread count gives the same sizes on every machine. The command must be
# written in README.md as it is here (without the -t 2).
RUN_EXCERPT_CMD := full/build/mg run -m models/fortune-toy-q8_0.gguf -p "床前明月光" -n 48 --temp 0 --trace infer --dot full/build/dot
check-run-excerpt: $(BUILD)/readme_check
	@$(MAKE) --no-print-directory -C full build/mg
	@grep -qxF '    $(RUN_EXCERPT_CMD)' README.md || { echo "README.md no longer shows the command: $(RUN_EXCERPT_CMD)"; exit 1; }
	@mkdir -p full/build/dot
	@$(RUN_EXCERPT_CMD) -t 2 > $(BUILD)/run-excerpt.out 2>&1
	./$(BUILD)/readme_check README.md $(BUILD)/run-excerpt.out
	./$(BUILD)/readme_check README.zh.md $(BUILD)/run-excerpt.out

graph: deps
	$(MAKE) -C full graph

bench:
	$(MAKE) -C full bench

# The full engine built for other CPU levels (full/Makefile): x86-64-v3 (AVX2)
# and x86-64-v4 (AVX-512), with gcc and, where it is installed, clang.
test-x86-levels: deps
	$(MAKE) -C full test-x86-levels
	@if command -v clang > /dev/null; then $(MAKE) -C full test-x86-levels LEVEL_CC=clang; \
	else echo "test-x86-levels: clang is not installed: its builds skipped"; fi

# The full engine cross-built for aarch64 and run under qemu-user (full/Makefile).
test-aarch64: deps
	$(MAKE) -C full test-aarch64

# full/ with the Vulkan backend (make -C full VULKAN=1: installs libvulkan-dev,
# glslc and mesa-vulkan-drivers when run as root), its tests on whatever Vulkan
# driver there is: Mesa's lavapipe, on the CPU, in CI.
test-vulkan: deps
	$(MAKE) -C full VULKAN=1 test-vulkan

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

# Each chapter's exercises (exercises/): in a scratch copy, the untouched
# chapter scores 0, each solution patch applies and scores full marks, and the
# chapter's tests pass with all of them (exercises/check_solutions.sh). Then
# "add an architecture" (exercises/arch), in a handout of full/: 0 untouched,
# full marks with its solution, each wrong one its score (about a minute: it
# rebuilds in a copy of full/build only what the handout changes).
check-solutions: deps
	@MAKE="$(MAKE)" bash exercises/check_solutions.sh
	@MAKE="$(MAKE)" bash exercises/check_solutions_arch.sh
check-solutions-arch: deps
	@MAKE="$(MAKE)" bash exercises/check_solutions_arch.sh

# "Given llama, add an architecture" (exercises/README.md): a copy of full/
# without qwen2 (exercises/arch/make_handout.sh), built, to put qwen2 back
# in and grade there with make grade. It refuses to overwrite an earlier one.
ARCH_HANDOUT := $(BUILD)/exercise-arch/full
exercise-arch: deps
	@bash exercises/arch/make_handout.sh $(ARCH_HANDOUT)
	@echo "building it, and full/'s mg, which makes the test's models (log: $(ARCH_HANDOUT).build.log) ..."
	@{ $(MAKE) --no-print-directory -C $(ARCH_HANDOUT) lib build/mg && $(MAKE) --no-print-directory -C full build/mg; } \
		> $(ARCH_HANDOUT).build.log 2>&1 || { echo "the build failed: see $(ARCH_HANDOUT).build.log"; exit 1; }
	@echo "ready: cd $(ARCH_HANDOUT) && make grade"

deps:
	@$(MAKE) --no-print-directory -f tools/engine.mk ROOT=$(CURDIR) CHAPTER=00 deps

# libFuzzer needs clang and its runtime libraries (Debian: clang, libclang-rt-dev);
# as root they are installed, as with deps.
FUZZ_SECONDS ?= 20
FUZZ_SEED    ?= 1
fuzz: deps fuzz-deps
	@$(MAKE) --no-print-directory -C fuzz run FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_SEED=$(FUZZ_SEED)

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
