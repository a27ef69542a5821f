# bench/module.mk — benchmarks (make bench). Figures go to docs/performance.md.
$(BUILD)/bench/alloc_loop: bench/alloc_loop.cpp $(SIM_RUNTIME)
	@mkdir -p $(@D)
	$(CXX) -std=c++17 -O2 -g -fno-omit-frame-pointer -isystem $(CUDA_HOME)/include $< -o $@ -L$(SIM_DIR) -lcudart

# Frame pointers, as in alloc_loop: the frames the hot-path benchmarks unwind through are the program's.
$(BUILD)/bench/recorder_microbench.o: ALL_CXXFLAGS += -fno-omit-frame-pointer
$(BUILD)/bench/recorder_microbench: $(BUILD)/bench/recorder_microbench.o $(RECORDER_TEST_LIB_OBJS)
	@mkdir -p $(@D)
	$(CXX) -o $@ $^ -lbenchmark -lpthread $(LIB_LDLIBS)

## bench-recorder: recorder hot path, ring throughput, side by side with heaptrack
## (BENCH_RECORDER_ARGS: e.g. --reps 9, --library main=OTHER/libgpumemtrace.so, --variant NAME=VAR=VALUE)
bench-recorder: $(BUILD)/libgpumemtrace.so $(BUILD)/bench/alloc_loop $(BUILD)/bench/recorder_microbench
	$(PYTHON) bench/recorder_bench.py --build $(BUILD) $(BENCH_RECORDER_ARGS)
.PHONY: bench-recorder
BENCH_TARGETS += bench-recorder

## bench-symbolize: what GPUMEMTRACE_SYMBOLIZE=0 saves the traced program, what the offline pass costs gpumem-report
bench-symbolize: $(BUILD)/libgpumemtrace.so $(BUILD)/gpumem-report $(BUILD)/bench/alloc_loop $(BUILD)/examples/train_loop
	$(PYTHON) bench/symbolize_bench.py --build $(BUILD)
.PHONY: bench-symbolize
BENCH_TARGETS += bench-symbolize

## bench-dwarf-lookup: the cost of naming one frame from DWARF with its inlined levels (the writer's and the offline
## pass's lookup); BENCH_DWARF_ARGS: e.g. --report main=OTHER/gpumem-report --module FILE
bench-dwarf-lookup: $(BUILD)/gpumem-report
	$(PYTHON) bench/dwarf_lookup_bench.py --build $(BUILD) $(BENCH_DWARF_ARGS)
.PHONY: bench-dwarf-lookup
BENCH_TARGETS += bench-dwarf-lookup

## bench-report: gpumem-report events/s and peak RSS beside heaptrack_print on the same 2M-event loop
BENCH_REPORT_EVENTS ?= 2000000
bench-report: $(BUILD)/gpumem-report $(BUILD)/libgpumemtrace.so $(BUILD)/bench/alloc_loop
	$(PYTHON) bench/report_bench.py --build $(BUILD) --events $(BENCH_REPORT_EVENTS)
.PHONY: bench-report
BENCH_TARGETS += bench-report

## bench-trace-size: bytes per event (v2 zst and plain, v1, heaptrack's file; the demo; real PyTorch traces) and read speed
bench-trace-size: $(BUILD)/libgpumemtrace.so $(BUILD)/gpumem-report $(BUILD)/bench/alloc_loop $(BUILD)/examples/train_loop
	$(PYTHON) bench/trace_size_bench.py --build $(BUILD)
.PHONY: bench-trace-size
BENCH_TARGETS += bench-trace-size

## bench-torch-step: ms per training step on a GPU (1 ms MLP, GPT-2 small): plain, PyTorch's own history, driver, full
## (needs PyTorch with CUDA: PYTHON=/path/to/venv/bin/python; SKIP otherwise)
bench-torch-step: $(BUILD)/libgpumemtrace.so
	$(PYTHON) bench/torch_step_bench.py --build $(BUILD) $(BENCH_TORCH_STEP_ARGS)
.PHONY: bench-torch-step
BENCH_TARGETS += bench-torch-step

## bench-process: whole-process wall time of a 2-line torch script: plain, PyTorch's own history, driver, full
## (needs PyTorch with CUDA; SKIP otherwise)
bench-process: $(BUILD)/libgpumemtrace.so
	$(PYTHON) bench/process_bench.py --build $(BUILD) $(BENCH_PROCESS_ARGS)
.PHONY: bench-process
BENCH_TARGETS += bench-process

## bench-torch-drain: the PyTorch hook's side of a history drain per entry (CPU, synthetic snapshots), beside pickle
## (BENCH_TORCH_DRAIN_ARGS: e.g. --tools old=/tmp/old/tools/python --tools new=tools/python)
bench-torch-drain: $(BUILD)/libgpumemtrace.so
	$(PYTHON) bench/torch_drain_bench.py --build $(BUILD) $(BENCH_TORCH_DRAIN_ARGS)
.PHONY: bench-torch-drain
BENCH_TARGETS += bench-torch-drain

## bench-what-if: gpumem-report's allocator replays (--what-if): tensor events/s per setting, beside the plain report
BENCH_WHAT_IF_EVENTS ?= 2000000
$(BUILD)/bench/what_if_replay_bench: $(BUILD)/bench/what_if_replay_bench.o $(REPORT_LIB)
	@mkdir -p $(@D)
	$(CXX) -o $@ $^ $(REPORT_LDLIBS)
TEST_BINS += $(BUILD)/bench/what_if_replay_bench  # tests/report/test_report_what_if.py runs the bench briefly
bench-what-if: $(BUILD)/gpumem-report $(BUILD)/bench/what_if_replay_bench
	$(PYTHON) bench/what_if_bench.py --build $(BUILD) --events $(BENCH_WHAT_IF_EVENTS)
.PHONY: bench-what-if
BENCH_TARGETS += bench-what-if

## bench-batch: gpumem-report's batch what-if (--max-batch: the search, --at-batch) on 2M tensor events, beside the plain report
BENCH_BATCH_EVENTS ?= 2000000
bench-batch: $(BUILD)/gpumem-report
	$(PYTHON) bench/batch_bench.py --build $(BUILD) --events $(BENCH_BATCH_EVENTS)
.PHONY: bench-batch
BENCH_TARGETS += bench-batch

## bench-html: the HTML report of a 100M-event run: page size, bands kept, gpumem-report's time and memory, time to
## draw in headless Chromium, beside memory_viz's page for the same run (BENCH_HTML_ARGS: e.g. --events 10000000 --runs 3)
bench-html: $(BUILD)/gpumem-report
	$(PYTHON) bench/html_bench.py --build $(BUILD) $(BENCH_HTML_ARGS)
.PHONY: bench-html
BENCH_TARGETS += bench-html

## bench-python-startup: ms of CPU and wall a Python process's start-up takes: plain, preloaded, traced (the launcher's
## PYTHONPATH); BENCH_PYTHON_STARTUP_ARGS: e.g. --rounds 21 --tools old=/tmp/old/tools/python --tools new=tools/python
bench-python-startup: $(BUILD)/libgpumemtrace.so
	$(PYTHON) bench/python_startup_bench.py --build $(BUILD) $(BENCH_PYTHON_STARTUP_ARGS)
.PHONY: bench-python-startup
BENCH_TARGETS += bench-python-startup

## bench-pytest-gc: ns per garbage collection that the pytest plugin's gc callback adds (none, a no-op callback, the plugin's)
bench-pytest-gc: $(BUILD)/libgpumemtrace.so
	$(PYTHON) bench/pytest_gc_bench.py --build $(BUILD) $(BENCH_PYTEST_GC_ARGS)
.PHONY: bench-pytest-gc
BENCH_TARGETS += bench-pytest-gc

## bench-report-shapes: gpumem-report on recorded traces of the shapes users have (stand-in PyTorch run of 20M
## events, a C++ program with thousands of live allocations, the 100M-event page), beside heaptrack_print on the
## loop; the traces are recorded once into build/bench/shapes (BENCH_SHAPES_ARGS: e.g. --report main=OTHER/gpumem-report)
$(BUILD)/bench/shapes_program: bench/shapes_program.cpp include/gpumemtrace.h $(SIM_RUNTIME)
	@mkdir -p $(@D)
	$(CXX) -std=c++17 -O2 -g -fno-omit-frame-pointer -isystem $(CUDA_HOME)/include -Iinclude $< -o $@ -L$(SIM_DIR) -lcudart -ldl
bench-report-shapes: $(BUILD)/gpumem-report $(BUILD)/libgpumemtrace.so $(BUILD)/bench/alloc_loop $(BUILD)/bench/shapes_program
	$(PYTHON) bench/shapes_bench.py --build $(BUILD) $(BENCH_SHAPES_ARGS)
.PHONY: bench-report-shapes
BENCH_TARGETS += bench-report-shapes

## bench-merge: gpumem-report merge of 1000 ranks' per-process reports, beside -j reading their traces (docs/scale.md)
## (BENCH_MERGE_ARGS: e.g. --ranks 4000 --steps 50)
bench-merge: $(BUILD)/gpumem-report
	$(PYTHON) bench/merge_bench.py --build $(BUILD) $(BENCH_MERGE_ARGS)
.PHONY: bench-merge
BENCH_TARGETS += bench-merge
