# tests/python/module.mk — Python stacks and the PyTorch startup hook (issue 5); see the top-level
# Makefile, which -includes this file.
#
# $(BUILD)/tests/python/libpython_stack_probe.so: the frame reader (interpose/python/*.cpp) plus a
# test harness, loaded with ctypes by tests/python/test_python_stacks.py (no libgpumemtrace needed).

PYTHON_STACK_SRCS := $(wildcard interpose/python/*.cpp)
PYTHON_PROBE_OBJS := $(patsubst %.cpp,$(BUILD)/tests/python/obj/%.o,$(PYTHON_STACK_SRCS) \
                       tests/python/probe/python_stack_probe.cpp)

$(BUILD)/tests/python/obj/%.o: %.cpp
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(ALL_CXXFLAGS) -c $< -o $@

$(BUILD)/tests/python/libpython_stack_probe.so: $(PYTHON_PROBE_OBJS)
	@mkdir -p $(@D)
	$(CXX) -shared -o $@ $^ -ldl -lpthread

## python-probe: build the Python-frame test harness (build/tests/python/libpython_stack_probe.so)
python-probe: $(BUILD)/tests/python/libpython_stack_probe.so
.PHONY: python-probe

TEST_BINS += $(BUILD)/tests/python/libpython_stack_probe.so

## bench-python: ns per event for Python stack capture/resolution on every installed CPython
bench-python: $(BUILD)/tests/python/libpython_stack_probe.so
	@$(PYTHON) bench/python_stack_bench.py --build $(BUILD)
.PHONY: bench-python
BENCH_TARGETS += bench-python
