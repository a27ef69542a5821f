// examples/train_loop.cpp — the demo workload: a small "training loop" written against the CUDA
// runtime API, with the two bugs gpumemtrace exists to find.
//   - weights and optimizer state, allocated once and freed at the end (fine);
//   - per-step activations, allocated in forward() and freed in backward() (fine);
//   - a planted leak: cache_embeddings() allocates a table nobody frees;
//   - a planted accumulation: record_loss() keeps every step's loss buffer alive, the C++ twin of
//     Python's `epoch_loss += loss` that keeps the autograd graph of each step alive.
// It runs on a real GPU, or on the simulated runtime in build/sim when there is none.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gpumemtrace.h"

namespace {

constexpr size_t MiB = 1024 * 1024;

void check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) {
    fprintf(stderr, "train_loop: %s failed: %s\n", what, cudaGetErrorString(rc));
    exit(1);
  }
}

struct Model {
  void* weights = nullptr;
  void* optimizer_state = nullptr;
};

Model load_model() {
  Model m;
  check(cudaMalloc(&m.weights, 64 * MiB), "cudaMalloc(weights)");
  check(cudaMalloc(&m.optimizer_state, 128 * MiB), "cudaMalloc(optimizer state)");
  return m;
}

void* cache_embeddings() {  // planted leak: never freed
  void* table = nullptr;
  check(cudaMalloc(&table, 24 * MiB), "cudaMalloc(embeddings)");
  return table;
}

std::vector<void*> forward(int step) {
  std::vector<void*> activations;
  for (int layer = 0; layer < 4; ++layer) {
    void* a = nullptr;
    check(cudaMalloc(&a, (16 + 4 * layer) * MiB), "cudaMalloc(activation)");
    activations.push_back(a);
  }
  return activations;
}

void* compute_loss() {
  void* loss = nullptr;
  check(cudaMalloc(&loss, 1 * MiB), "cudaMalloc(loss)");
  return loss;
}

std::vector<void*> g_loss_history;
void record_loss(void* loss) {  // planted accumulation: every step's loss stays alive
  g_loss_history.push_back(loss);
}

void backward(std::vector<void*>& activations) {
  for (void* a : activations) check(cudaFree(a), "cudaFree(activation)");
  activations.clear();
}

void release_model(Model& m) {
  check(cudaFree(m.weights), "cudaFree(weights)");
  check(cudaFree(m.optimizer_state), "cudaFree(optimizer state)");
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? atoi(argv[1]) : 50;
  Model model = load_model();
  cache_embeddings();
  for (int step = 1; step <= steps; ++step) {
    gpumemtrace_mark(("step " + std::to_string(step)).c_str());
    std::vector<void*> activations = forward(step);
    record_loss(compute_loss());
    backward(activations);
    if (step % 10 == 0) printf("train_loop: step %d/%d\n", step, steps);
  }
  release_model(model);
  printf("train_loop: done (%zu loss buffers still alive)\n", g_loss_history.size());
  return 0;
}
