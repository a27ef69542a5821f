// report/analyses/passes.h — the passes of a training or inference loop that block allocations fall in
// (a forward pass, a backward pass, an optimizer step), so that growth (growth.h) can tell memory kept
// across iterations from memory one pass piles up.
//
// A block's phase is its role when allocated (roles.h): activations -> forward, backward temporaries
// (and the gradients they become) -> backward, optimizer state -> optimizer step; other roles
// (parameters, other) have none. A pass is a run of block allocations of one phase: it ends when the
// program allocates a block of another role (inputs copied to the device, a loss computed outside the
// model, sampling or torch.cat outside it, the backward's gradients, the optimizer's state) or when a
// backward() begins. So a loop over the identical layers of one model (the 28 blocks of a DiT) is one
// forward pass, while each step of a training loop (loss, backward(), the optimizer between two forward
// passes) or of an evaluation or decoding loop (inputs, sampling, torch.cat between two) starts a new
// one. Limit: a loop that allocates nothing outside the model between two forward passes is one pass.
//
// Passes are numbered from 1 over the whole process (devices share the program's control flow).
// Memory: O(1). Single-threaded.
#pragma once

#include <cstdint>

#include "report/analyses/report_model.h"

namespace gpumemtrace::report {

enum class Phase : uint8_t { None, Forward, Backward, Optimizer };

Phase phase_of(Role role);

class Passes {
 public:
  // Before a block allocation whose role is `role` is applied: the pass it falls in; 0 when its role
  // has no phase.
  uint64_t on_block(Role role);
  // A backward() call began: the pass before it (a forward pass) ended.
  void on_backward_begin() { ended_ = true; }

 private:
  uint64_t pass_ = 0;
  Phase last_ = Phase::None;
  bool ended_ = true;  // the next block starts a new pass whatever its phase
};

}  // namespace gpumemtrace::report
