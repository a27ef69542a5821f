# tests/python/module.mk — Python stacks and the PyTorch startup hook; see the top-level
# Makefile, which -includes this file.
#
# $(BUILD)/tests/python/libpython_stack_probe.so: the frame reader (interpose/python/*.cpp) plus a
# test harness, loaded with ctypes by tests/python/test_python_stacks.py (no libgpumemtrace needed).

# The top-level $(BUILD)/%.o objects (the library's own, with its flags and `| deps-check`).
PYTHON_PROBE_OBJS := $(patsubst %.cpp,$(BUILD)/%.o,$(wildcard interpose/python/*.cpp) \
                       tests/python/probe/python_stack_probe.cpp)

$(BUILD)/tests/python/libpython_stack_probe.so: $(PYTHON_PROBE_OBJS)
	@mkdir -p $(@D)
	$(CXX) -shared -o $@ $^ -ldl -lpthread

# A non-Python program that loads libpython late (test_python_trace.py).
$(BUILD)/tests/python/late_python_host: tests/python/progs/late_python_host.c $(SIM_RUNTIME) | deps-check
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $< -L$(SIM_DIR) -lcudart -ldl -Wl,-rpath,'$$ORIGIN/../../sim'
TEST_BINS += $(BUILD)/tests/python/late_python_host

## python-probe: build the Python-frame test harness (build/tests/python/libpython_stack_probe.so)
python-probe: $(BUILD)/tests/python/libpython_stack_probe.so
.PHONY: python-probe

TEST_BINS += $(BUILD)/tests/python/libpython_stack_probe.so

## bench-python: ns per event for Python stack capture/resolution on every installed CPython
bench-python: $(BUILD)/tests/python/libpython_stack_probe.so
	@$(PYTHON) bench/python_stack_bench.py --build $(BUILD)
.PHONY: bench-python
BENCH_TARGETS += bench-python
