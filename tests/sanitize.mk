# tests/sanitize.mk — `make asan` and `make tsan`: everything the recorder's tests run (the library, the
# simulated CUDA runtime and driver, the test programs, the launcher, gpumem-report, the unit tests)
# rebuilt with a sanitizer in a folder of its own, $(BUILD)-asan or $(BUILD)-tsan, then the unit tests
# and the end-to-end suites run against that build. tests/run_tests.py --sanitizer preloads the
# sanitizer's runtime ahead of the recorder, sets its options (tests/sanitizers/*.supp) and fails the run
# on any report. (Except a leak check LeakSanitizer itself says it could not make — "Running thread N was
# not suspended", its tracer dying: printed as a note, not counted; run_tests.py, LSAN_VOID.) Not part of `make test`: .ci/run runs them (README, "Testing": the times).
#
# The sanitizer goes into CXX and CC themselves, so that every compile and link line has it, the test
# programs' own rules included.

ASAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
TSAN_FLAGS := -fsanitize=thread
# The tests/ folders whose suites run (empty: all of them, as make test; the GPU checks never). The
# Python programs of tests/python load instrumented libraries with ctypes, and ThreadSanitizer's
# runtime cannot be loaded once a program runs (its TLS is static): those suites preload it too
# (tests/python/python_testlib.py, set_preload).
ASAN_SUITES ?=
TSAN_SUITES ?=
# The fuzzers are built by clang with sanitizers of their own: not rebuilt here.
SANITIZED_BINS = $(LIBS) $(PROGRAMS) $(UNIT_TESTS) $(filter-out $(REPORT_FUZZ_BIN) $(REPORT_DIFF_FUZZ_BIN) $(SNAPSHOT_FUZZER),$(TEST_BINS))

## asan: the unit and end-to-end tests under AddressSanitizer + UndefinedBehaviorSanitizer ($(BUILD)-asan)
asan: deps-check
	+@$(MAKE) --no-print-directory BUILD=$(BUILD)-asan OPT=-O1 CXX="$(CXX) $(ASAN_FLAGS)" CC="$(CC) $(ASAN_FLAGS)" \
	  SANITIZER=asan SANITIZE_SUITES="$(ASAN_SUITES)" sanitized-test

## tsan: the unit and end-to-end tests under ThreadSanitizer ($(BUILD)-tsan)
tsan: deps-check
	+@$(MAKE) --no-print-directory BUILD=$(BUILD)-tsan OPT=-O1 CXX="$(CXX) $(TSAN_FLAGS)" CC="$(CC) $(TSAN_FLAGS)" \
	  SANITIZER=tsan SANITIZE_SUITES="$(TSAN_SUITES)" sanitized-test

# Run by the two targets above, in a make whose BUILD, CXX and CC are the sanitized ones.
sanitized-build: $(SANITIZED_BINS)
sanitized-test: sanitized-build
	@test -n "$(SANITIZER)" || { echo "make sanitized-test: use make asan or make tsan"; exit 2; }
	@CXX="$(CXX)" $(PYTHON) tests/run_tests.py --build $(BUILD) --sanitizer $(SANITIZER) \
	  $(if $(SANITIZE_SUITES),--suites "$(SANITIZE_SUITES)") $(UNIT_TESTS)

CLEAN_EXTRA += $(BUILD)-asan $(BUILD)-tsan
.PHONY: asan tsan sanitized-build sanitized-test
