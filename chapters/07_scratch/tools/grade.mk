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
EX            ?=

.PHONY: grade

# One exercise: $$id $$name $$level $$points $$file are set by the loop below.
# It builds the test (a compile or link error scores 0, with its first lines
# shown), runs it, and prints the score line padded with dots.
define GRADE_ONE
	label="$$id $$name ($$level) "; \
	dots=$$(printf '%*s' $$((36 - $${#label})) '' | tr ' ' .); \
	score=0; why=""; rm -f $(GRADE_DIR)/$$id.log; \
	if [ "$$lib_ok" != 1 ]; then \
		why="the chapter does not build: see $(GRADE_DIR)/lib.log"; \
	elif ! $(GRADE_CC) -I. -I$(TESTS_DIR) -I$(EXERCISES_DIR) $(EXERCISES_DIR)/$$file \
			$(GRADE_DIR)/harness.o $(OBJS) $(CHECK_LIBS) $(LDLIBS) -o $(GRADE_DIR)/$$id > $(GRADE_DIR)/$$id.log 2>&1; then \
		why="does not compile: see $(GRADE_DIR)/$$id.log"; \
	elif CK_DEFAULT_TIMEOUT=60 CK_VERBOSITY=normal ./$(GRADE_DIR)/$$id > $(GRADE_DIR)/$$id.log 2>&1; then \
		score=$$points; \
	else \
		why="fails: see $(GRADE_DIR)/$$id.log"; \
	fi; \
	printf '%s%s %3s/%s\n' "$$label" "$$dots" "$$score" "$$points"; \
	if [ -n "$$why" ]; then \
		echo "    $$why"; \
		grep -E '^[0-9]+%: Checks' $(GRADE_DIR)/$$id.log 2> /dev/null | sed 's/^/    /'; \
		grep -E ':[FE]:|error:|undefined reference' $(GRADE_DIR)/$$id.log 2> /dev/null | head -n 3 | \
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
		name=$$2; level=$$3; points=$$4; file=$$5; \
		$(GRADE_ONE); \
	done; \
	echo "Score: $$total/$$max"; \
	[ "$$total" = "$$max" ]
