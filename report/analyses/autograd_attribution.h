// report/analyses/autograd_attribution.h — charges PyTorch blocks that were recorded without frames
// to the backward() call that allocated them.
//
// PyTorch's allocation history records no frames for blocks allocated on the autograd engine's
// threads (gradients, backward temporaries). The gpumemtrace_torch hook brackets each
// torch.autograd.backward call with scope_begin/scope_end events of api "torch.backward", whose
// stack is the caller's (the user's `loss.backward()` line). While one is open, a frameless
// PyTorch block is charged to that stack (Attribution::Backward); outside one, it is marked as
// allocated on a thread without Python frames (Attribution::NoFrames), never left blank. A frameless
// block a snapshot's history started with (an "initial" event) was allocated before recording started
// (Attribution::BeforeRecording).
//
// Single-threaded; memory: the open backward calls (bounded by kMaxDepth).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "report/analyses/site.h"
#include "report/reader/records.h"

namespace gpumemtrace::report {

inline constexpr std::string_view kBackwardScopeApi = "torch.backward";

class AutogradAttribution {
 public:
  // A scope event of api kBackwardScopeApi. Returns true when it closed the outermost open call.
  bool on_backward_scope(const Event& e);
  bool in_backward() const { return depth_ > 0; }
  // Where memory acquired by `e` is charged.
  SiteId site_for(const Event& e) const;

 private:
  static constexpr size_t kMaxDepth = 64;
  std::vector<StackId> open_;   // stacks of the open backward calls, innermost last
  size_t depth_ = 0;            // open calls, including those beyond kMaxDepth
};

}  // namespace gpumemtrace::report
