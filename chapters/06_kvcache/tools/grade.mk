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
# and one Check suite per exercise (test_exN_*.c, linked with tests/harness.c
# like every regular test). An exercise adds API the untouched chapter does not
# have yet, so its test declares what it calls as weak symbols (see
# exercises/README.md): the test then compiles and links against the untouched
# chapter, finds the functions missing, and fails with a message instead of a
# link error. The library's objects are linked directly (not the archive), so
# that a weak reference finds a function wherever the student defined it.
#
# A title that starts with [tsan] marks a concurrency exercise: its test must
# also pass when it and the chapter are built with -fsanitize=thread, with no
# report from ThreadSanitizer (a check the sanitizer stops scores 0).
#
# Each check of a test (a tcase_add_test line) scores on its own: the points
# a comment at the end of that line gives (`// 6 points`), or an even share
# of the exercise's points that no check claims (grade_checks.awk). A check
# scores when it passes (in both runs, for [tsan]); a test that does not
# compile, or a chapter that does not build, scores 0 (the grader says why and
# goes on). Below an exercise without full marks, every check is listed with
# its points and, if it failed, its message. The scores also go to
# $(BUILD)/grade/results, one "id score points" line each, and every check to
# $(BUILD)/grade/checks, "id check score points ok|fail", for
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
GRADE_CHECKS  := $(dir $(lastword $(MAKEFILE_LIST)))grade_checks.awk
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
# lines shown) and runs it; a [tsan] exercise's test is built and run again
# under ThreadSanitizer (the chapter's objects in $(GRADE_TSAN_BUILD), as
# `make tsan` builds them). grade_checks.awk then scores each check (each
# tcase_add_test of the test: its points, and ok only if it passed in every
# run); the score line follows, padded with dots, and, below an exercise
# without full marks, every check with its points and, if it failed, its
# message.
define GRADE_ONE
	label="$$id $$name ($$level) "; \
	dots=$$(printf '%*s' $$((36 - $${#label})) '' | tr ' ' .); \
	score=0; why=""; note=""; logs=""; \
	rm -f $(GRADE_DIR)/$$id.log $(GRADE_DIR)/$$id-tsan.log $(GRADE_DIR)/$$id.checks; \
	if [ "$$lib_ok" != 1 ]; then \
		why="the chapter does not build: see $(GRADE_DIR)/lib.log"; \
	elif ! $(GRADE_CC) -I. -I$(TESTS_DIR) -I$(EXERCISES_DIR) $(EXERCISES_DIR)/$$file \
			$(GRADE_DIR)/harness.o $(OBJS) $(CHECK_LIBS) $(LDLIBS) -o $(GRADE_DIR)/$$id > $(GRADE_DIR)/$$id.log 2>&1; then \
		why="does not compile: see $(GRADE_DIR)/$$id.log"; \
		note=$$(grep -E 'error:|undefined reference' $(GRADE_DIR)/$$id.log | head -n 3 | sed -e 's|^[^ ]*/||' -e 's/^/    /'); \
	else \
		CK_DEFAULT_TIMEOUT=60 CK_VERBOSITY=verbose ./$(GRADE_DIR)/$$id > $(GRADE_DIR)/$$id.log 2>&1; \
		logs="$(GRADE_DIR)/$$id.log"; \
		if [ "$$tsan" = 1 ]; then \
			if $(MAKE) --no-print-directory BUILD=$(GRADE_TSAN_BUILD) OPT=-O1 EXTRA_CFLAGS="$(EXTRA_CFLAGS) -fsanitize=thread" \
					ID=$$id FILE=$$file grade-build-one > $(GRADE_DIR)/$$id-tsan.log 2>&1; then \
				TSAN_OPTIONS="halt_on_error=1 $$TSAN_OPTIONS" CK_DEFAULT_TIMEOUT=60 CK_VERBOSITY=verbose \
					./$(GRADE_TSAN_BUILD)/grade/$$id > $(GRADE_DIR)/$$id-tsan.log 2>&1; \
				logs="$$logs $(GRADE_DIR)/$$id-tsan.log"; \
				note=$$(grep -m 1 '^SUMMARY: ThreadSanitizer' $(GRADE_DIR)/$$id-tsan.log | sed 's|^SUMMARY: |    |; s| /[^ ]*/| |'); \
			else \
				why="does not build under ThreadSanitizer: see $(GRADE_DIR)/$$id-tsan.log"; logs=""; \
			fi; \
		fi; \
		if [ -n "$$logs" ]; then \
			if awk -v points=$$points -f $(GRADE_CHECKS) $(EXERCISES_DIR)/$$file $$logs > $(GRADE_DIR)/$$id.checks 2> $(GRADE_DIR)/$$id.why; then \
				score=$$(awk -F '\t' '$$1 == "total" { print $$2 }' $(GRADE_DIR)/$$id.checks); \
				why="see $$(echo $$logs | sed 's/ / and /')"; \
			else \
				why=$$(cat $(GRADE_DIR)/$$id.why); rm -f $(GRADE_DIR)/$$id.checks; \
			fi; \
			rm -f $(GRADE_DIR)/$$id.why; \
		fi; \
	fi; \
	printf '%s%s %3s/%s\n' "$$label" "$$dots" "$$score" "$$points"; \
	if [ "$$score" != "$$points" ]; then \
		echo "    $$why"; \
		if [ -f $(GRADE_DIR)/$$id.checks ]; then \
			awk -F '\t' '$$1 == "check" { \
				label = $$2 " "; dots = ""; for (i = length(label); i < 40; i++) dots = dots "."; \
				printf "    %s%s %3d/%-3d %s\n", label, dots, $$3, $$4, ($$5 == "ok" ? "ok" : $$6) }' $(GRADE_DIR)/$$id.checks; \
		fi; \
		if [ -n "$$note" ]; then echo "$$note"; fi; \
	fi; \
	echo "$$id $$score $$points" >> $(GRADE_DIR)/results; \
	if [ -f $(GRADE_DIR)/$$id.checks ]; then \
		awk -F '\t' -v id=$$id '$$1 == "check" { print id, $$2, $$3, $$4, $$5 }' $(GRADE_DIR)/$$id.checks >> $(GRADE_DIR)/checks; \
	fi; \
	total=$$((total + score)); max=$$((max + points))
endef

# build/tests too: engine.mk makes it only along with a missing build/.
grade: deps
	@mkdir -p $(GRADE_DIR) $(BUILD)/tests; rm -f $(GRADE_DIR)/results $(GRADE_DIR)/checks; \
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
