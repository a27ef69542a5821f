# tests/gpu/module.mk — the prebuilt programs tests/gpu/run.sh runs on a GPU machine, which builds nothing
# (GPU_CHECK_PROGRAMS: `make gpu-bundle` copies them into dist/gpu/programs; docs/bundle contract).
#
# driver_static_cudart: CUDA's runtime linked statically (nvcc's default), so the recorder sees its calls
# only at the driver layer; linked against the driver stub here, the real libcuda.so.1 is loaded there.

NVCC ?= $(CUDA_HOME)/bin/nvcc
GPU_CHECK_PROGRAMS := $(BUILD)/tests/gpu/driver_static_cudart

$(BUILD)/tests/gpu/driver_static_cudart: tests/gpu/driver_static_cudart.cu
	@mkdir -p $(@D)
	$(NVCC) -g -o $@ $< -L$(CUDA_HOME)/lib64/stubs -lcuda

## gpu-programs: build the GPU check programs (nvcc; make gpu-bundle ships them to the GPU machine)
gpu-programs: $(GPU_CHECK_PROGRAMS)
.PHONY: gpu-programs
