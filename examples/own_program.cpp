// examples/own_program.cpp — a stand-in for your own CUDA program, for README.md's "Without a GPU".
// Three 512 MiB buffers, one after the other: on a 1 GiB device (GPUMEMTRACE_SIM_CAPACITY=1G) the
// third does not fit. Built by a host compiler against the shared CUDA runtime, it runs on a GPU and
// on the simulated runtime alike:
//   g++ -g examples/own_program.cpp -o own_program -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcudart
#include <cuda_runtime.h>

#include <cstdio>

int main() {
  void* buffers[3] = {};
  for (int i = 0; i < 3; ++i) {
    cudaError_t e = cudaMalloc(&buffers[i], size_t{512} << 20);
    std::printf("buffer %d: %s\n", i, cudaGetErrorString(e));
  }
  cudaFree(buffers[0]);  // buffers[1] is kept: a leak
  return 0;
}
