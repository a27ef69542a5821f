# tests/driver/module.mk — the fake CUDA driver and the driver-capture test programs.
# Included by the top-level Makefile. Tests: tests/driver/test_driver_*.py (make test).

SIM_LIBCUDA := $(BUILD)/sim/libcuda.so.1

## build/sim/libcuda.so.1: simulated CUDA driver (tests/sim/fake_libcuda.cpp) for GPU-less tests
$(SIM_LIBCUDA): tests/sim/fake_libcuda.cpp
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(ALL_CXXFLAGS) -fvisibility=hidden -shared -Wl,-soname,libcuda.so.1 $< -o $@

## build/sim/libfakecupti.so: simulated CUPTI callback API over the simulated driver (GPUMEMTRACE_CUPTI_PATH)
SIM_LIBCUPTI := $(BUILD)/sim/libfakecupti.so
$(SIM_LIBCUPTI): tests/sim/fake_libcupti.cpp $(SIM_LIBCUDA)
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(ALL_CXXFLAGS) -shared $< -o $@ -L$(BUILD)/sim -l:libcuda.so.1

# Test programs: -O0 and frame pointers so that their named steps appear in the stacks.
DRV_TEST_DIR := $(BUILD)/tests/driver
DRV_PROG_FLAGS = -std=c++17 $(WARN) -O0 -g -fno-omit-frame-pointer -fno-inline

$(DRV_TEST_DIR)/drv_direct: tests/driver/drv_prog.cpp $(SIM_LIBCUDA)
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(DRV_PROG_FLAGS) -DROUTE_DIRECT $< -o $@ -L$(BUILD)/sim -l:libcuda.so.1 \
	  -Wl,-rpath,$(abspath $(BUILD)/sim)

$(DRV_TEST_DIR)/drv_dlsym: tests/driver/drv_prog.cpp
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(DRV_PROG_FLAGS) -DROUTE_DLSYM $< -o $@ -ldl

$(DRV_TEST_DIR)/drv_procaddr: tests/driver/drv_prog.cpp
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(DRV_PROG_FLAGS) -DROUTE_PROCADDR $< -o $@ -ldl

# The real runtime from the toolkit. DT_RPATH (not RUNPATH) so that it wins over LD_LIBRARY_PATH,
# which the tests point at build/sim for the fake libcuda.so.1 (where the fake libcudart also lives).
$(DRV_TEST_DIR)/drv_cudart: tests/driver/drv_cudart.cpp
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(DRV_PROG_FLAGS) $< -o $@ -L$(CUDA_HOME)/lib64 -l:libcudart.so.13 \
	  -Wl,--disable-new-dtags -Wl,-rpath,$(CUDA_HOME)/lib64

# nvcc's default: the runtime linked statically; it still reaches the driver through dlsym.
$(DRV_TEST_DIR)/drv_cudart_static: tests/driver/drv_cudart.cpp
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(DRV_PROG_FLAGS) $< -o $@ $(CUDA_HOME)/lib64/libcudart_static.a -ldl -lpthread -lrt

# A miniature runtime that reaches the driver like the real one, for "one event per allocation".
$(DRV_TEST_DIR)/libdrvminirt.so: tests/driver/drv_minirt.cpp
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(ALL_CXXFLAGS) -shared $< -o $@ -ldl

$(DRV_TEST_DIR)/drv_layered: tests/driver/drv_layered.cpp $(DRV_TEST_DIR)/libdrvminirt.so
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(DRV_PROG_FLAGS) $< -o $@ -L$(DRV_TEST_DIR) -ldrvminirt -Wl,-rpath,$(abspath $(DRV_TEST_DIR))

DRV_TEST_PROGRAMS := $(SIM_LIBCUDA) $(SIM_LIBCUPTI) $(addprefix $(DRV_TEST_DIR)/,drv_direct drv_dlsym drv_procaddr drv_cudart \
                     drv_cudart_static libdrvminirt.so drv_layered)
TEST_BINS += $(DRV_TEST_PROGRAMS)

## driver-tests: build the fake driver and the driver test programs, run tests/driver/test_driver_*.py
driver-tests: $(BUILD)/libgpumemtrace.so $(DRV_TEST_PROGRAMS)
	GPUMEMTRACE_BUILD=$(abspath $(BUILD)) $(PYTHON) -m unittest discover -s tests/driver -p 'test_driver_*.py' -v
.PHONY: driver-tests
