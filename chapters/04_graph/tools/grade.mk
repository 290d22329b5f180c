# grade.mk - `make grade`: the chapter's graded exercises, scored like the
# xv6 labs' grader. Included by engine.mk (after its variables are set).
#
#   make grade            build and run every exercise test, one score line each
#   make grade EX=ex2     only these exercises (a list: EX="ex1 ex3")
#
# The exercises of chapter NN_name live in $(EXERCISES_DIR): a list,
# exercises.list, with one line per exercise
#
#   ex1  sigmoid  easy  10  test_ex1_sigmoid.c  mg_sigmoid, a new unary op
#   (id  name     level points test file        title)
#
# A title that starts with [tsan] marks a concurrency exercise: its test must
# also pass when it and the chapter are built with -fsanitize=thread, with no
# report from ThreadSanitizer (a data race scores 0 like a failed check).
#
# and one Check suite per exercise (test_exN_*.c, linked with tests/harness.c
# like every regular test). An exercise adds API the untouched chapter does not
# have yet, so its test declares what it calls as weak symbols (see
# exercises/README.md): the test then compiles and links against the untouched
# chapter, finds the functions missing, and fails with a message instead of a
# link error. The library's objects are linked directly (not the archive), so
# that a weak reference finds a function wherever the student defined it.
#
# An exercise scores its points when its test binary builds and passes, 0
# otherwise (the grader says why and goes on). The scores also go to
# $(BUILD)/grade/results, one "id score points" line each, for
# `make check-solutions`. `make grade` fails unless every graded exercise
# scores full marks. A test case gets 60 s (CK_DEFAULT_TIMEOUT) unless it sets
# its own. `make test` never runs these tests.

# The chapter's exercises: exercises/NN_name, found by the chapter's number so
# that a student's renamed copy of the folder still finds them.
EXERCISES_DIR ?= $(firstword $(wildcard $(ROOT)/exercises/$(CHAPTER)_*) $(ROOT)/exercises/$(notdir $(CURDIR)))
TESTS_DIR     ?= $(ROOT)/tests
GRADE_DIR     := $(BUILD)/grade
GRADE_CC       = $(CC) $(ALL_CFLAGS) $(CHECK_CFLAGS) -DMG_TEST_ROOT='"$(ROOT)"'
GRADE_TSAN_BUILD ?= $(BUILD)-tsan
EX            ?=

.PHONY: grade grade-build-one

# One exercise's test binary, $(GRADE_DIR)/$(ID), from $(EXERCISES_DIR)/$(FILE)
# and the chapter's objects in $(BUILD): how the [tsan] run builds its test
# (with BUILD=$(GRADE_TSAN_BUILD) and -fsanitize=thread).
grade-build-one: lib
	@mkdir -p $(GRADE_DIR)
	$(GRADE_CC) -c $(TESTS_DIR)/harness.c -o $(GRADE_DIR)/harness.o
	$(GRADE_CC) -I. -I$(TESTS_DIR) -I$(EXERCISES_DIR) $(EXERCISES_DIR)/$(FILE) \
		$(GRADE_DIR)/harness.o $(OBJS) $(CHECK_LIBS) $(LDLIBS) -o $(GRADE_DIR)/$(ID)

# One exercise: $$id $$name $$level $$points $$file $$tsan are set by the loop
# below. It builds the test (a compile or link error scores 0, with its first
# lines shown), runs it, and, for a [tsan] exercise that passed, builds and
# runs it again under ThreadSanitizer (the chapter's objects in
# $(GRADE_TSAN_BUILD), as `make tsan` builds them; a report of the sanitizer
# fails it); then it prints the score line padded with dots.
define GRADE_ONE
	label="$$id $$name ($$level) "; \
	dots=$$(printf '%*s' $$((36 - $${#label})) '' | tr ' ' .); \
	score=0; why=""; log=$(GRADE_DIR)/$$id.log; rm -f $(GRADE_DIR)/$$id.log $(GRADE_DIR)/$$id-tsan.log; \
	if [ "$$lib_ok" != 1 ]; then \
		why="the chapter does not build: see $(GRADE_DIR)/lib.log"; \
	elif ! $(GRADE_CC) -I. -I$(TESTS_DIR) -I$(EXERCISES_DIR) $(EXERCISES_DIR)/$$file \
			$(GRADE_DIR)/harness.o $(OBJS) $(CHECK_LIBS) $(LDLIBS) -o $(GRADE_DIR)/$$id > $(GRADE_DIR)/$$id.log 2>&1; then \
		why="does not compile: see $(GRADE_DIR)/$$id.log"; \
	elif ! CK_DEFAULT_TIMEOUT=60 CK_VERBOSITY=normal ./$(GRADE_DIR)/$$id > $(GRADE_DIR)/$$id.log 2>&1; then \
		why="fails: see $(GRADE_DIR)/$$id.log"; \
	elif [ "$$tsan" != 1 ]; then \
		score=$$points; \
	elif ! $(MAKE) --no-print-directory BUILD=$(GRADE_TSAN_BUILD) OPT=-O1 EXTRA_CFLAGS="$(EXTRA_CFLAGS) -fsanitize=thread" \
			ID=$$id FILE=$$file grade-build-one > $(GRADE_DIR)/$$id-tsan.log 2>&1; then \
		why="does not build under ThreadSanitizer: see $(GRADE_DIR)/$$id-tsan.log"; \
	elif ! TSAN_OPTIONS="halt_on_error=1 $$TSAN_OPTIONS" CK_DEFAULT_TIMEOUT=60 CK_VERBOSITY=normal \
			./$(GRADE_TSAN_BUILD)/grade/$$id > $(GRADE_DIR)/$$id-tsan.log 2>&1; then \
		why="fails under ThreadSanitizer: see $(GRADE_DIR)/$$id-tsan.log"; \
		grep -q 'WARNING: ThreadSanitizer' $(GRADE_DIR)/$$id-tsan.log && \
			why="$$why"$$(printf '\n    %s' "$$(grep -m 1 '^SUMMARY: ThreadSanitizer' $(GRADE_DIR)/$$id-tsan.log | \
				sed 's|^SUMMARY: ||; s| /[^ ]*/| |')"); \
		log=$(GRADE_DIR)/$$id-tsan.log; \
	else \
		score=$$points; \
	fi; \
	printf '%s%s %3s/%s\n' "$$label" "$$dots" "$$score" "$$points"; \
	if [ -n "$$why" ]; then \
		echo "    $$why"; \
		grep -E '^[0-9]+%: Checks' $$log 2> /dev/null | sed 's/^/    /'; \
		grep -E ':[FE]:|error:|undefined reference' $$log 2> /dev/null | head -n 3 | \
			sed -e 's/^.*:[FE]:[^:]*:\([^:]*\):[0-9]*: /\1: /' -e 's|^[^ ]*/||' -e 's/^/    /'; \
	fi; \
	echo "$$id $$score $$points" >> $(GRADE_DIR)/results; \
	total=$$((total + score)); max=$$((max + points))
endef

# build/tests too: engine.mk makes it only along with a missing build/.
grade: deps
	@mkdir -p $(GRADE_DIR) $(BUILD)/tests; rm -f $(GRADE_DIR)/results; \
	if [ ! -f $(EXERCISES_DIR)/exercises.list ]; then \
		echo "no graded exercises for this chapter (no $(EXERCISES_DIR)/exercises.list)"; exit 0; \
	fi; \
	lib_ok=1; \
	$(MAKE) --no-print-directory lib > $(GRADE_DIR)/lib.log 2>&1 || lib_ok=0; \
	$(GRADE_CC) -c $(TESTS_DIR)/harness.c -o $(GRADE_DIR)/harness.o >> $(GRADE_DIR)/lib.log 2>&1 || lib_ok=0; \
	if [ "$$lib_ok" != 1 ]; then \
		echo "the chapter does not build, so every exercise scores 0; the first errors:"; \
		grep -E 'error' $(GRADE_DIR)/lib.log | head -n 5 | sed 's/^/    /'; \
	fi; \
	total=0; max=0; \
	for id in $$(awk '!/^#/ && NF { print $$1 }' $(EXERCISES_DIR)/exercises.list); do \
		if [ -n "$(EX)" ] && ! echo " $(EX) " | grep -q " $$id "; then continue; fi; \
		set -- $$(awk -v id=$$id '$$1 == id' $(EXERCISES_DIR)/exercises.list); \
		name=$$2; level=$$3; points=$$4; file=$$5; tsan=0; [ "$${6:-}" = "[tsan]" ] && tsan=1; \
		$(GRADE_ONE); \
	done; \
	echo "Score: $$total/$$max"; \
	[ "$$total" = "$$max" ]
