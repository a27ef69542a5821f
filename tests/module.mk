# tests/module.mk — the simulated CUDA runtime, the test programs, and the unit tests.

# --- simulated CUDA runtime: build/sim/libcudart.so.13 (+ libcudart.so for linking) ---
SIM_DIR := $(BUILD)/sim
$(SIM_DIR)/libcudart.so.13: $(BUILD)/tests/sim/fake_cudart.o tests/sim/libcudart.map
	@mkdir -p $(@D)
	$(CXX) -shared -o $@ $(BUILD)/tests/sim/fake_cudart.o -Wl,-soname,libcudart.so.13 \
	  -Wl,--version-script=tests/sim/libcudart.map -lpthread
$(SIM_DIR)/libcudart.so: $(SIM_DIR)/libcudart.so.13
	ln -sf libcudart.so.13 $@
SIM_RUNTIME := $(SIM_DIR)/libcudart.so.13 $(SIM_DIR)/libcudart.so
TEST_BINS += $(SIM_RUNTIME)

# --- end-to-end test programs: tests/e2e/programs/*.cpp, linked against the simulated runtime ---
# -O0 -fno-omit-frame-pointer -fno-inline keep each planted function a real frame of its own.
E2E_PROGRAM_SRCS := $(wildcard tests/e2e/programs/*.cpp)
E2E_PROGRAMS := $(E2E_PROGRAM_SRCS:tests/e2e/programs/%.cpp=$(BUILD)/tests/programs/%)
$(BUILD)/tests/programs/%: tests/e2e/programs/%.cpp $(SIM_RUNTIME)
	@mkdir -p $(@D)
	$(CXX) -std=c++17 -O0 -g -fno-omit-frame-pointer -fno-inline -Iinclude -isystem $(CUDA_HOME)/include \
	  -rdynamic $< -o $@ -L$(SIM_DIR) -lcudart -lpthread -ldl -Wl,-rpath,'$$ORIGIN/../../sim'
TEST_BINS += $(E2E_PROGRAMS)

# NVTX v3 from the CUDA toolkit (header-only) in C programs (ranges; the memory extension), and a
# stand-in for another NVTX tool.
$(BUILD)/tests/programs/nvtx_phases: tests/e2e/programs/nvtx_phases.c $(SIM_RUNTIME)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -Wall -Wextra -O0 -g -isystem $(CUDA_HOME)/include $< -o $@ -L$(SIM_DIR) -lcudart \
	  -lpthread -ldl -Wl,-rpath,'$$ORIGIN/../../sim'
$(BUILD)/tests/programs/libnvtx_other_tool.so: tests/e2e/plugin/nvtx_other_tool.c
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -Wall -Wextra -fPIC -shared -isystem $(CUDA_HOME)/include $< -o $@
$(BUILD)/tests/programs/nvtx_heap: tests/e2e/programs/nvtx_heap.c $(SIM_RUNTIME)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -Wall -Wextra -O0 -g -isystem $(CUDA_HOME)/include $< -o $@ -L$(SIM_DIR) -lcudart \
	  -lpthread -ldl -Wl,-rpath,'$$ORIGIN/../../sim'
TEST_BINS += $(BUILD)/tests/programs/nvtx_phases $(BUILD)/tests/programs/nvtx_heap \
  $(BUILD)/tests/programs/libnvtx_other_tool.so

# The public header as strict C (tests/e2e/c_api/c_api_check.c).
$(BUILD)/tests/programs/c_api_check: tests/e2e/c_api/c_api_check.c include/gpumemtrace.h
	@mkdir -p $(@D)
	$(CC) -std=c11 -Wall -Wextra -Werror -pedantic -Iinclude $< -o $@ -ldl
TEST_BINS += $(BUILD)/tests/programs/c_api_check

# A library dlopen'ed by `scenarios dlopen` (module lines after dlopen).
$(BUILD)/tests/programs/libplugin_alloc.so: tests/e2e/plugin/plugin_alloc.cpp $(SIM_RUNTIME)
	@mkdir -p $(@D)
	$(CXX) -std=c++17 -O0 -g -fPIC -shared -isystem $(CUDA_HOME)/include $< -o $@ -L$(SIM_DIR) -lcudart
TEST_BINS += $(BUILD)/tests/programs/libplugin_alloc.so

# scenarios linked to the recorder itself, both found by absolute run paths: a copy made setgid still
# loads them (in secure-execution mode the loader ignores LD_PRELOAD paths, LD_LIBRARY_PATH and
# $ORIGIN). tests/e2e/test_secure_execution.py.
$(BUILD)/tests/programs/secure_scenarios: tests/e2e/programs/scenarios.cpp $(SIM_RUNTIME) $(BUILD)/libgpumemtrace.so
	@mkdir -p $(@D)
	$(CXX) -std=c++17 -O0 -g -fno-omit-frame-pointer -fno-inline -isystem $(CUDA_HOME)/include $< -o $@ \
	  -Wl,--no-as-needed -L$(BUILD) -lgpumemtrace -L$(SIM_DIR) -lcudart -lpthread -ldl \
	  -Wl,-rpath,$(abspath $(BUILD)):$(abspath $(SIM_DIR))
TEST_BINS += $(BUILD)/tests/programs/secure_scenarios

# A malloc that fails libdw's large blocks (tests/e2e/test_hostile_start.py: out of memory in the writer).
$(BUILD)/tests/programs/libdw_out_of_memory.so: tests/e2e/plugin/libdw_out_of_memory.c
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -Wall -Wextra -O2 -fPIC -shared $< -o $@
TEST_BINS += $(BUILD)/tests/programs/libdw_out_of_memory.so

$(BUILD)/tests/programs/libfake_cublas.so: tests/e2e/plugin/fake_cublas.cpp $(SIM_RUNTIME)
	@mkdir -p $(@D)
	$(CXX) -std=c++17 -O0 -g -fPIC -shared -isystem $(CUDA_HOME)/include $< -o $@ -L$(SIM_DIR) -lcudart
TEST_BINS += $(BUILD)/tests/programs/libfake_cublas.so

# --- GoogleTest unit tests of the recorder and writer ---
RECORDER_TEST_SRCS := $(wildcard tests/unit/recorder_*.cpp)
# The recorder and writer without any hook (a test binary must not interpose on itself); the backend
# query they use comes from a stand-in.
RECORDER_TEST_LIB_OBJS := $(filter-out $(BUILD)/interpose/hooks/% $(BUILD)/cupti/%,$(LIB_OBJS)) \
                          $(BUILD)/tests/unit/support/backend_interpose_only.o
# The unwinder's tests (recorder_unwind_test.cpp) walk through frames of two libraries, one built with
# frame pointers and one without, and through their own frames, which keep frame pointers.
UNWIND_TEST_LIBS := $(BUILD)/tests/unit/libgmt_fp_frames.so $(BUILD)/tests/unit/libgmt_nofp_frames.so
$(BUILD)/tests/unit/libgmt_fp_frames.so: tests/unit/support/fp_frames.cpp
	@mkdir -p $(@D)
	$(CXX) -std=c++17 -O2 -g -fno-omit-frame-pointer -fPIC -shared -Wl,-soname,$(@F) $< -o $@
$(BUILD)/tests/unit/libgmt_nofp_frames.so: tests/unit/support/nofp_frames.cpp
	@mkdir -p $(@D)
	$(CXX) -std=c++17 -O2 -g -fomit-frame-pointer -fPIC -shared -Wl,-soname,$(@F) $< -o $@
$(BUILD)/tests/unit/recorder_unwind_test.o: ALL_CXXFLAGS += -fno-omit-frame-pointer
$(BUILD)/tests/unit/recorder_tests: $(RECORDER_TEST_SRCS:%.cpp=$(BUILD)/%.o) $(RECORDER_TEST_LIB_OBJS) $(UNWIND_TEST_LIBS)
	@mkdir -p $(@D)
	$(CXX) -o $@ $(filter %.o,$^) $(UNWIND_TEST_LIBS) -Wl,-rpath,'$$ORIGIN' -lgtest -lgtest_main $(LIB_LDLIBS)
ifneq ($(RECORDER_TEST_SRCS),)
UNIT_TESTS += $(BUILD)/tests/unit/recorder_tests
endif

# --- GoogleTest unit tests of the shared helpers (util/, header-only) ---
UTIL_TEST_SRCS := $(wildcard tests/unit/util_*.cpp)
$(BUILD)/tests/unit/util_tests: $(UTIL_TEST_SRCS:%.cpp=$(BUILD)/%.o)
	@mkdir -p $(@D)
	$(CXX) -o $@ $^ -lgtest -lgtest_main -lpthread
ifneq ($(UTIL_TEST_SRCS),)
UNIT_TESTS += $(BUILD)/tests/unit/util_tests
endif

## gpu-test: the GPU checks (tests/gpu/run.sh: nvcc static cudart, PyTorch, CuPy); SKIP without a GPU
gpu-test: $(BUILD)/libgpumemtrace.so $(BUILD)/gpumem-report
	tests/gpu/run.sh
.PHONY: gpu-test

# --- optimized test programs: inlined frames (tests/e2e/inlined/, tests/e2e/test_inlined_frames.py) ---
# Built as users build them, with -g and the optimizer on (no -fno-inline): the chain in C at -O1,
# -O2 and -O3 and by clang, C++ templates and lambdas with a shared library of our own at -O2, and
# inlining across translation units with -flto.
INLINED_DIR := $(BUILD)/tests/programs/inlined
INLINED_LINK := -L$(SIM_DIR) -lcudart -Wl,-rpath,'$$ORIGIN/../../../sim'
$(INLINED_DIR)/chain_O%: tests/e2e/inlined/chain.c $(SIM_RUNTIME)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -Wall -Wextra -O$* -g -isystem $(CUDA_HOME)/include $< -o $@ $(INLINED_LINK)
$(INLINED_DIR)/libinlined_lib.so: tests/e2e/inlined/inlined_lib.cpp tests/e2e/inlined/inlined_lib.h $(SIM_RUNTIME)
	@mkdir -p $(@D)
	$(CXX) -std=c++17 -Wall -Wextra -O2 -g -fPIC -shared -I. -isystem $(CUDA_HOME)/include $< -o $@ $(INLINED_LINK)
$(INLINED_DIR)/templates: tests/e2e/inlined/templates.cpp tests/e2e/inlined/inlined_lib.h \
                          $(INLINED_DIR)/libinlined_lib.so $(SIM_RUNTIME)
	@mkdir -p $(@D)
	$(CXX) -std=c++17 -Wall -Wextra -O2 -g -I. -isystem $(CUDA_HOME)/include $< -o $@ \
	  -L$(INLINED_DIR) -linlined_lib -Wl,-rpath,'$$ORIGIN' $(INLINED_LINK)
$(INLINED_DIR)/lto: tests/e2e/inlined/lto_main.cpp tests/e2e/inlined/lto_part.cpp tests/e2e/inlined/lto_part.h \
                    $(SIM_RUNTIME)
	@mkdir -p $(@D)
	$(CXX) -std=c++17 -Wall -Wextra -O2 -g -flto -I. -isystem $(CUDA_HOME)/include \
	  tests/e2e/inlined/lto_main.cpp tests/e2e/inlined/lto_part.cpp -o $@ $(INLINED_LINK)
# The chain built by clang, which writes no .debug_aranges (trace/dwarf_symbols.h, UnitIndex).
CLANG ?= clang
$(INLINED_DIR)/chain_clang: tests/e2e/inlined/chain.c $(SIM_RUNTIME)
	@mkdir -p $(@D)
	$(CLANG) -std=gnu11 -Wall -Wextra -O2 -g -isystem $(CUDA_HOME)/include $< -o $@ $(INLINED_LINK)
TEST_BINS += $(INLINED_DIR)/chain_O1 $(INLINED_DIR)/chain_O2 $(INLINED_DIR)/chain_O3 $(INLINED_DIR)/templates \
  $(INLINED_DIR)/lto $(INLINED_DIR)/chain_clang
