// report/analyses/passes.cpp — the passes block allocations fall in (rules in passes.h).
#include "report/analyses/passes.h"

namespace gpumemtrace::report {

Phase phase_of(Role role) {
  switch (role) {
    case Role::Activations: return Phase::Forward;
    case Role::BackwardTemporaries:
    case Role::Gradients: return Phase::Backward;
    case Role::OptimizerState: return Phase::Optimizer;
    default: return Phase::None;
  }
}

uint64_t Passes::on_block(Role role) {
  const Phase phase = phase_of(role);
  if (ended_ || phase != last_) ++pass_;  // another role's block ends the pass before it
  ended_ = false;
  last_ = phase;
  return phase == Phase::None ? 0 : pass_;
}

}  // namespace gpumemtrace::report
